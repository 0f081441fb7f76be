"""The GPU and EFA error classes a node's health check counts and publishes (GpuErrors), the
Xid table it classifies kernel-log Xids with, and their rendering into the health script
(boot/gpu-cluster-health.sh: ``{{NAME}}`` placeholders, filled by boot_files.CONSTANTS)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Literal

# The `Class` dimension of the gpu-cluster/GpuErrors metric, published per node only when
# non-zero, with what its value counts. Gauges (what this check sees) and increases (since the
# previous check) differ: a dashboard shows the first with Maximum, the second with Sum.
GPU_ERROR_COUNTS: dict[str, str] = {
    "EccSingleBitVolatile": "corrected ECC errors since the driver loaded, all GPUs (gauge)",
    "EccDoubleBitVolatile": "uncorrected ECC errors since the driver loaded, all GPUs (gauge)",
    "RowRemapPending": "GPUs with a row remap waiting for a GPU reset (gauge)",
    "RowRemapFailure": "GPUs whose row remapping failed (gauge)",
    "XidFatal": "fatal Xids in this boot's kernel log (gauge)",
    "XidNvlink": "non-fatal NVLink Xids in this boot's kernel log (gauge)",
    "XidMemory": "non-fatal memory Xids in this boot's kernel log (gauge)",
    "XidOther": "other Xids in this boot's kernel log (gauge)",
    "ThrottleHwSlowdown": "GPUs with HW Slowdown active (gauge)",
    "ThrottleThermal": "GPUs with HW Thermal Slowdown active (gauge)",
    "ThrottlePowerBrake": "GPUs with HW Power Brake Slowdown active (gauge)",
    "PcieLinkDegraded": "GPUs in use whose PCIe link is narrower than its maximum (gauge)",
    "NvlinkErrors": "NVLink replay and recovery errors since the previous check (increase)",
    "EfaErrors": "EFA error hw_counters since the previous check, summed (increase)",
}
GPU_ERROR_CLASSES: tuple[str, ...] = tuple(GPU_ERROR_COUNTS)
GPU_ERROR_INCREASES: tuple[str, ...] = tuple(
    name for name, what in GPU_ERROR_COUNTS.items() if what.endswith("(increase)")
)

# The EFA kernel driver's port counters (/sys/class/infiniband/<device>/ports/<n>/hw_counters)
# that count errors: rx_drops and the RDMA work-request errors since the first EFA driver;
# the retransmission and remote-peer events only where the device reports network stats
# (amzn-drivers/linux efa_verbs.c, "EFA_ADMIN_GET_STATS_TYPE_NETWORK": newer Nitro cards). A
# counter file that does not exist counts nothing.
EFA_ERROR_COUNTERS: tuple[str, ...] = (
    "rx_drops",
    "rdma_read_wr_err",
    "rdma_write_wr_err",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
)

# Corrected (single-bit) ECC errors one GPU may show since the driver loaded before the node is
# degraded: the default of Meta's GPU cluster monitoring health checks (facebookresearch/gcm,
# health_checks README, check-nvidia-smi --ecc_corrected_volatile_threshold=50000000). Below
# it corrected errors are the ECC working; a rising rate the driver reports itself (Xid 92).
ECC_CORRECTED_LIMIT = 50_000_000

XID_CATALOG = Path(__file__).parent / "data" / "xid_catalog.json"
Effect = Literal["failed", "degraded", "counted"]


@cache
def _catalog() -> dict:
    return json.loads(XID_CATALOG.read_text())


def xid_codes() -> tuple[int, ...]:
    """Every Xid NVIDIA's catalog lists."""
    return tuple(int(code) for code in _catalog()["xids"])


def xid_class(code: int) -> str:
    """The GpuErrors class of Xid ``code`` (one unknown to the catalog: XidOther)."""
    data = _catalog()
    if code in data["fatal"]:
        return "XidFatal"
    mnemonic = data["xids"].get(str(code), ["", ""])[0]
    if "NVLINK" in mnemonic:
        return "XidNvlink"
    return "XidMemory" if code in data["memory"] else "XidOther"


def xid_effect(code: int) -> Effect:
    """What Xid ``code`` does to the node's health: a fatal one fails it; one that NVIDIA says
    the application restarts for, or ignores, is only counted; any other degrades it (an Xid
    newer than the catalog included: someone should look)."""
    data = _catalog()
    if code in data["fatal"]:
        return "failed"
    action = data["xids"].get(str(code), ["", ""])[1]
    if action in data["counted_actions"] or code in data["counted_also"]:
        return "counted"
    return "degraded"


def _words(codes: list[int]) -> str:
    """Codes as the script reads them: words, three or more in a row as one range "a-b"
    (room in the user data)."""
    runs: list[list[int]] = []
    for code in sorted(codes):
        if runs and code == runs[-1][-1] + 1:
            runs[-1].append(code)
        else:
            runs.append([code])
    return " ".join(
        f"{run[0]}-{run[-1]}" if len(run) > 2 else " ".join(map(str, run)) for run in runs
    )


def expand(words: str) -> set[int]:
    """The codes in a rendered set (the inverse of the rendering)."""
    codes: set[int] = set()
    for word in words.split():
        first, _, last = word.partition("-")
        codes.update(range(int(first), int(last or first) + 1))
    return codes


def health_constants() -> dict[str, str]:
    """The health script's placeholders: the Xid sets by class and effect, the EFA error
    counters, the ECC limit and the class names, rendered from the data above."""
    codes = xid_codes()
    return {
        "XID_FATAL": _words([c for c in codes if xid_effect(c) == "failed"]),
        "XID_NVLINK": _words([c for c in codes if xid_class(c) == "XidNvlink"]),
        "XID_MEMORY": _words([c for c in codes if xid_class(c) == "XidMemory"]),
        "XID_COUNTED": _words([c for c in codes if xid_effect(c) == "counted"]),
        "EFA_ERROR_COUNTERS": " ".join(EFA_ERROR_COUNTERS),
        "ECC_CORRECTED_LIMIT": str(ECC_CORRECTED_LIMIT),
        "GPU_ERROR_CLASSES": " ".join(GPU_ERROR_CLASSES),
    }
