"""GPU interconnect and memory-error facts per instance type (components/data/gpu_topology.json)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

TOPOLOGY_PATH = Path(__file__).parent / "data" / "gpu_topology.json"


@cache
def topology() -> dict:
    return json.loads(TOPOLOGY_PATH.read_text())


def has_nvswitch(instance_type: str) -> bool:
    """The type's GPUs hang off NVSwitch (decided per type, never by family: p5.4xlarge has
    one H100 and no NVSwitch)."""
    return instance_type in topology()["nvswitch_pci_ids"]


def nvswitch_pci_id(instance_type: str) -> str:
    """``vendor:device`` of the type's NVSwitch on the PCI bus ("" where it is not listed there,
    as on HGX B200/B300, or where the type has no NVSwitch)."""
    return topology()["nvswitch_pci_ids"].get(instance_type, "")


def has_row_remapping(gpu_model: str) -> bool:
    """The GPU remaps rows on memory errors (A100, H100, ...) instead of retiring pages."""
    return gpu_model.upper() in {m.upper() for m in topology()["row_remapping_gpus"]}
