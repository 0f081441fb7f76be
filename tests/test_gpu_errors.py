"""The node's GPU and EFA errors on the boot harness (issue 31): each error class gives its
health state and its GpuErrors metric, in one PutMetricData call with NodeHealthy and
NodeDegraded by stack id; a healthy node publishes no GpuErrors; EFA counter files an older
card lacks count nothing; counters that rise between two checks degrade, a reset does not;
the Xid table the script uses is NVIDIA's catalog as components/data holds it."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest
from boot_harness import G4DN, BootNode
from harness_units import (
    SELF,
    TRAIN,
    aws_calls,
    health,
    mark_booted,
    published_metrics,
)
from harness_units import nodes as nodes

from gpu_cluster.components import node_errors
from gpu_cluster.components.node_errors import (
    EFA_ERROR_COUNTERS,
    GPU_ERROR_CLASSES,
    expand,
    health_constants,
    xid_class,
    xid_codes,
    xid_effect,
)
from gpu_cluster.components.user_data import BOOT_DIR

STACK_ID = "gpu-cluster/train/us-east-1"
EFA_DEVICES = ("rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27")  # as boot_fakes


def metric_calls(node: BootNode) -> list[list[str]]:
    return aws_calls(node, "cloudwatch", "put-metric-data")


def last_metrics(node: BootNode) -> dict[str, float]:
    """The last PutMetricData call: NodeHealthy, NodeDegraded and GpuErrors/<Class> values."""
    call = metric_calls(node)[-1]
    assert call[call.index("--namespace") + 1] == "gpu-cluster"
    values = {}
    for datum in published_metrics(call):
        dims = datum["Dimensions"]
        assert dims["StackId"] == STACK_ID and dims["InstanceId"] == SELF, dims
        name = datum["MetricName"]
        if name == "GpuErrors":
            assert set(dims) == {"StackId", "InstanceId", "Class"}
            assert dims["Class"] in GPU_ERROR_CLASSES and datum["Unit"] == "Count"
            name = f"GpuErrors/{dims['Class']}"
        else:
            assert set(dims) == {"StackId", "InstanceId"}
        values[name] = float(datum["Value"])
    return values


def gpu_errors(node: BootNode) -> dict[str, float]:
    return {
        name.split("/", 1)[1]: value
        for name, value in last_metrics(node).items()
        if name.startswith("GpuErrors/")
    }


def xid_line(xid: int, pci: str = "0000:20:1c") -> str:
    return f"NVRM: Xid (PCI:{pci}): {xid}, pid=3101, name=python, Ch 00000008\n"


def efa_counters(node: BootNode, values: dict[str, dict[str, int]]) -> None:
    """The EFA driver's port counters: {device: {counter: value}} under the node's /sys."""
    for device, counters in values.items():
        folder = node.file(f"/sys/class/infiniband/{device}/ports/1/hw_counters")
        folder.mkdir(parents=True, exist_ok=True)
        for name, value in counters.items():
            (folder / name).write_text(f"{value}\n")


def every_counter(value: int) -> dict[str, dict[str, int]]:
    """Every counter a newer card has (the error ones and traffic), on every device."""
    names = (*EFA_ERROR_COUNTERS, "rx_bytes", "tx_bytes", "retrans_pkts", "rx_pkts")
    return {device: dict.fromkeys(names, value) for device in EFA_DEVICES}


# --- a healthy node ---------------------------------------------------------------------


def test_a_healthy_node_publishes_health_by_stack_id_and_no_gpu_errors(nodes):
    node = nodes.make()
    efa_counters(node, every_counter(0))
    assert node.step("gpu-cluster-health").returncode == 0
    assert health(node) == "ok"
    (call,) = metric_calls(node)
    assert last_metrics(node) == {"NodeHealthy": 1.0, "NodeDegraded": 0.0}
    assert "--metric-name" not in call  # one call with every datum
    # the watch, every minute: nothing changed, so no new tag; the health metrics again, so a
    # node healthy for days keeps its line on the dashboard and an alarm on it has data
    efa_counters(node, every_counter(0))
    for minute in (2, 3):
        assert node.step("gpu-cluster-health", "--watch").returncode == 0
        assert len(metric_calls(node)) == minute
        assert last_metrics(node) == {"NodeHealthy": 1.0, "NodeDegraded": 0.0}
    assert len(aws_calls(node, "ec2", "create-tags")) == 1


# --- GPU error classes --------------------------------------------------------------------

CASES = {
    "corrected ECC over the limit": (
        {"ecc_volatile_corrected": {"2": 50_000_001}},
        "degraded:ecc-corrected:1-gpus",
        {"EccSingleBitVolatile": 50_000_001},
    ),
    "corrected ECC under the limit": (
        {"ecc_volatile_corrected": {"2": 7, "5": 5}},
        "ok",
        {"EccSingleBitVolatile": 12},
    ),
    "thermal slowdown": (
        {"clock_events": {"hw_thermal_slowdown": [1], "hw_slowdown": [1]}},
        "degraded:throttle-hw-slowdown:1-gpus,throttle-thermal:1-gpus",
        {"ThrottleHwSlowdown": 1, "ThrottleThermal": 1},
    ),
    "power brake": (
        {"clock_events": {"hw_power_brake_slowdown": [0, 5], "sw_power_cap": [3]}},
        "degraded:throttle-power-brake:2-gpus",
        {"ThrottlePowerBrake": 2},
    ),
    "PCIe link narrower than its maximum on a GPU in use": (
        {"pcie_width": {"3": 8}, "utilization": {"3": 93}},
        "degraded:pcie-link:1-gpus",
        {"PcieLinkDegraded": 1},
    ),
    "PCIe link narrowed on an idle GPU (nvidia-smi: it may be)": (
        {"pcie_width": {"3": 4}},
        "ok",
        {},
    ),
    "row remap failure": (
        {"remap_failure": [6]},
        "failed:row-remap-failure:1-gpus",
        {"RowRemapFailure": 1},
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_each_gpu_error_gives_its_state_and_its_metric(nodes, case):
    smi, status, errors = CASES[case]
    node = nodes.make()
    node.set_gpus(**smi)
    result = node.step("gpu-cluster-health")
    assert health(node) == status, result.stderr
    assert result.returncode == (1 if status.startswith("failed") else 0)
    assert gpu_errors(node) == errors
    metrics = last_metrics(node)
    assert metrics["NodeHealthy"] == (0 if status.startswith("failed") else 1)
    assert metrics["NodeDegraded"] == (1 if status.startswith("degraded") else 0)


def test_uncorrectable_ecc_on_a_gpu_without_row_remapping_fails_it_and_is_counted(nodes):
    node = nodes.make(
        replace(TRAIN, gpus_per_node=1, efa_interfaces=0, nvswitch=False, row_remapping=False),
        hardware=G4DN,
    )
    node.set_gpus(ecc_volatile_uncorrected={"0": 2})
    assert node.step("gpu-cluster-health").returncode == 1
    assert health(node) == "failed:ecc:1-gpus"
    assert gpu_errors(node) == {"EccDoubleBitVolatile": 2}


def test_a_pending_remap_while_running_is_counted_not_failed(nodes):
    node = nodes.make()
    mark_booted(node)
    node.set_gpus(remap_pending=[4])
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert health(node) == "ok"  # it waits for a reset, harming no work
    assert gpu_errors(node) == {"RowRemapPending": 1}
    assert last_metrics(node)["NodeHealthy"] == 1


# --- Xids ---------------------------------------------------------------------------------

XIDS = {
    # xid: (class, health): fatal fails; NVIDIA's RESTART_APP / IGNORE are counted only
    79: ("XidFatal", "failed:xid:79"),
    145: ("XidNvlink", "degraded:xid:145"),  # NVLINK_RLW_ERROR: WORKFLOW_NVLINK5_ERR
    137: ("XidNvlink", "ok"),  # NVLINK_PRIV_ERR: IGNORE
    168: ("XidMemory", "degraded:xid:168"),  # REDUCED_GPU_MEMORY_CAPACITY
    94: ("XidMemory", "ok"),  # a contained memory error: RESTART_APP
    13: ("XidOther", "ok"),  # a graphics engine exception: the application's
    154: ("XidOther", "degraded:xid:154"),  # GPU_RECOVERY_ACTION_CHANGED
    201: ("XidOther", "degraded:xid:201"),  # newer than the catalog: someone should look
}


@pytest.mark.parametrize("xid", XIDS)
def test_each_xid_class_gives_its_state_its_metric_and_one_log_line(nodes, xid):
    cls, status = XIDS[xid]
    node = nodes.make()
    mark_booted(node)
    node.kernel_log(xid_line(xid) + xid_line(xid, "0000:a0:1d"))
    first = node.step("gpu-cluster-health", "--watch")
    assert health(node) == status, first.stderr
    assert gpu_errors(node) == {cls: 2}
    lines = re.findall(r"gpu-cluster health: Xid .*", first.stderr)
    assert lines == [
        f"gpu-cluster health: Xid {xid} ({cls}) on 0000:20:1c",
        f"gpu-cluster health: Xid {xid} ({cls}) on 0000:a0:1d",
    ]
    # the next minute: the same kernel log, counted again, logged no more
    again = node.step("gpu-cluster-health", "--watch")
    assert "Xid" not in again.stderr
    assert gpu_errors(node) == {cls: 2}


def test_xid_63_stays_a_recorded_remap_counted_as_memory(nodes):
    node = nodes.make()
    mark_booted(node)
    node.kernel_log(xid_line(63))
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert health(node) == "ok" and gpu_errors(node) == {"XidMemory": 1}


# --- what a driver cannot answer ----------------------------------------------------------


def test_a_driver_before_r535_is_read_by_the_old_throttle_names(nodes):
    node = nodes.make()
    node.set_gpus(driver_version="525.147.05", clock_events={"hw_thermal_slowdown": [2]})
    result = node.step("gpu-cluster-health")
    assert health(node) == "degraded:throttle-thermal:1-gpus", result.stderr
    assert 'Field "clocks_event_reasons.hw_slowdown" is not a valid field' in result.stderr


def test_fields_no_driver_knows_skip_their_check_not_the_node(nodes):
    node = nodes.make()
    unknown = [f"{p}.hw_slowdown" for p in ("clocks_event_reasons", "clocks_throttle_reasons")]
    node.set_gpus(
        unknown_fields=[*unknown, "pcie.link.width.max"],
        clock_events={"hw_slowdown": [0]},
        pcie_width={"1": 8},
        utilization={"1": 50},
    )
    result = node.step("gpu-cluster-health")
    assert result.returncode == 0 and health(node) == "ok"
    assert "clock event reasons not readable: not checked" in result.stderr
    assert last_metrics(node) == {"NodeHealthy": 1, "NodeDegraded": 0}


# --- counters that rise: NVLink and EFA ---------------------------------------------------


def test_nvlink_errors_that_rise_between_checks_degrade(nodes):
    node = nodes.make()
    node.set_gpus(nvlink_errors={"2": {"5": {"Replay": 3, "CRC": 40}}})
    assert node.step("gpu-cluster-health").returncode == 0  # boot: the baseline
    assert health(node) == "ok" and gpu_errors(node) == {}
    node.set_gpus(nvlink_errors={"2": {"5": {"Replay": 7, "Recovery": 1, "CRC": 90}}})
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert health(node) == "degraded:nvlink-errors"
    assert gpu_errors(node) == {"NvlinkErrors": 5}  # 4 replays and a recovery; CRC retried
    # no more: ok again, and nothing counted
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert health(node) == "ok" and gpu_errors(node) == {}


def test_a_gpu_without_nvlink_lists_no_link_and_counts_nothing(nodes):
    node = nodes.make(
        replace(TRAIN, gpus_per_node=1, efa_interfaces=0, nvswitch=False, row_remapping=False),
        hardware=G4DN,
    )
    node.set_gpus(nvlink_errors={"0": {"0": {"Replay": 9}}})
    assert node.step("gpu-cluster-health").returncode == 0
    node.set_gpus(nvlink_errors={"0": {"0": {"Replay": 99}}})
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert health(node) == "ok" and len(metric_calls(node)) == 2 and gpu_errors(node) == {}


def test_efa_error_counters_that_rise_between_two_watches_degrade(nodes):
    node = nodes.make()
    mark_booted(node)
    efa_counters(node, every_counter(10))
    assert node.step("gpu-cluster-health", "--watch").returncode == 0  # first seen: baseline
    assert health(node) == "ok" and gpu_errors(node) == {}
    efa_counters(
        node,
        {
            "rdmap16s27": {"rx_drops": 13, "unresponsive_remote_events": 11, "rx_bytes": 99},
            "rdmap160s27": {"rdma_read_wr_err": 12, "retrans_pkts": 900},
        },
    )
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert health(node) == "degraded:efa-errors"
    assert gpu_errors(node) == {"EfaErrors": 3 + 1 + 2}  # traffic and retransmissions: no
    assert last_metrics(node)["NodeDegraded"] == 1


def test_missing_efa_counter_files_on_an_older_card_count_nothing(nodes):
    node = nodes.make()
    mark_booted(node)
    older = {device: {"rx_drops": 0, "rx_bytes": 5} for device in EFA_DEVICES}
    efa_counters(node, older)  # no RDMA, retransmission or remote-peer counters
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    older["rdmap32s27"]["rx_bytes"] = 7000
    efa_counters(node, older)
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert health(node) == "ok" and gpu_errors(node) == {}
    assert all("GpuErrors" not in " ".join(call) for call in metric_calls(node))


def test_counters_reset_by_a_reboot_or_a_driver_reload_are_a_new_baseline(nodes):
    node = nodes.make()
    efa_counters(node, every_counter(500))
    assert node.step("gpu-cluster-health").returncode == 0
    # the driver reloaded: every counter starts again, lower
    efa_counters(node, every_counter(2))
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert health(node) == "ok"
    # a reboot: the boot's check takes the baseline, even above the last boot's values
    efa_counters(node, every_counter(900))
    assert node.step("gpu-cluster-health").returncode == 0
    assert health(node) == "ok"
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert health(node) == "ok" and all("GpuErrors" not in " ".join(c) for c in metric_calls(node))


# --- the real AWS CLI and botocore's model ------------------------------------------------


def test_every_class_at_once_is_one_call_botocore_and_cloudwatch_accept(nodes, moto_server):
    import boto3
    from boot_harness import moto_instance

    instance = moto_instance(moto_server, {"aws:autoscaling:groupName": "train-nodes-group"})
    node = nodes.make(endpoint=moto_server, instance_id=instance)
    node.set_gpus(
        ecc_volatile_corrected={"1": 3},
        clock_events={"hw_slowdown": [0], "hw_thermal_slowdown": [0]},
        pcie_width={"2": 8},
        utilization={"2": 10},
    )
    node.kernel_log(xid_line(137) + xid_line(13) + xid_line(94))
    result = node.step("gpu-cluster-health")
    assert result.returncode == 0, result.stderr
    assert "could not publish" not in result.stderr
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1", endpoint_url=moto_server)
    listed = cloudwatch.list_metrics(Namespace="gpu-cluster")["Metrics"]
    classes = {
        d["Value"]
        for m in listed
        if m["MetricName"] == "GpuErrors"
        for d in m["Dimensions"]
        if d["Name"] == "Class"
    }
    assert classes == {
        "EccSingleBitVolatile",
        "ThrottleHwSlowdown",
        "ThrottleThermal",
        "PcieLinkDegraded",
        "XidNvlink",
        "XidOther",
        "XidMemory",
    }
    healthy = [m for m in listed if m["MetricName"] in ("NodeHealthy", "NodeDegraded")]
    assert len(healthy) == 2
    for m in healthy:
        assert {d["Name"]: d["Value"] for d in m["Dimensions"]} == {
            "StackId": STACK_ID,
            "InstanceId": instance,
        }


# --- the Xid table and its data -----------------------------------------------------------


def catalog() -> dict:
    return json.loads(node_errors.XID_CATALOG.read_text())


def test_the_xid_table_is_nvidias_catalog_classed_by_its_rules():
    data = catalog()
    assert xid_codes() == tuple(range(1, 173))
    assert "docs.nvidia.com/deploy/xid-errors" in data["source"]
    for code in xid_codes():
        mnemonic, action = data["xids"][str(code)]
        cls, effect = xid_class(code), xid_effect(code)
        if code in data["fatal"]:
            assert (cls, effect) == ("XidFatal", "failed")
            continue
        assert cls == (
            "XidNvlink"
            if "NVLINK" in mnemonic
            else "XidMemory"
            if code in data["memory"]
            else "XidOther"
        )
        assert (effect == "counted") == (action in ("RESTART_APP", "IGNORE") or code == 45)
    # the memory ones are NVIDIA's memory errors, not an application's page fault (31)
    memory = re.compile(r"ECC|DBE|SBE|DRAM|SRAM|MEMORY|CONTAINED")
    assert all(memory.search(data["xids"][str(c)][0]) for c in data["memory"])
    assert xid_class(31) == "XidOther" and xid_class(999) == "XidOther"
    assert xid_effect(999) == "degraded"


def test_the_fatal_set_is_the_one_the_check_had():
    """Issue 25's set, the EKS node monitoring agent's: moving it to data changed nothing."""
    before = " 46 48 54 62 64 74 79 95 109 110 119 120 136 140 142 143 151 155 156 158 "
    assert expand(health_constants()["XID_FATAL"]) == {int(x) for x in before.split()}
    assert 63 not in catalog()["fatal"]


def test_each_rendered_set_is_its_class_or_effect():
    constants, codes = health_constants(), xid_codes()
    assert expand(constants["XID_NVLINK"]) == {c for c in codes if xid_class(c) == "XidNvlink"}
    assert expand(constants["XID_MEMORY"]) == {c for c in codes if xid_class(c) == "XidMemory"}
    assert expand(constants["XID_COUNTED"]) == {c for c in codes if xid_effect(c) == "counted"}
    assert "96-108" in constants["XID_COUNTED"]  # runs of three or more as a range


def test_the_installed_script_holds_the_rendered_table_and_every_class(nodes):
    node = nodes.make()
    script = node.read("/usr/local/sbin/gpu-cluster-health")
    for name, value in health_constants().items():
        assert re.search(rf'^{name}="?{re.escape(value)}"?$', script, re.MULTILINE), name
    assert "{{" not in script
    source = (BOOT_DIR / "gpu-cluster-health.sh").read_text()
    counted = set(re.findall(r"^\s*count (\w+)", source, re.M))
    counted |= set(re.findall(r"class=(Xid\w+)", source))
    assert counted == set(GPU_ERROR_CLASSES)
    assert tuple(node_errors.GPU_ERROR_COUNTS) == GPU_ERROR_CLASSES


def test_the_fake_nvidia_smi_refuses_a_field_it_does_not_know(nodes):
    """As the real one: an error naming the field and a non-zero exit (the script must cope)."""
    import subprocess

    node = nodes.make()
    node.set_gpus(driver_version="525.147.05")
    smi = str(Path(node.bin) / "nvidia-smi")
    done = subprocess.run(
        [smi, "--query-gpu=clocks_event_reasons.hw_slowdown", "--format=csv"],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0
    assert 'Field "clocks_event_reasons.hw_slowdown" is not a valid field' in done.stdout
    old = subprocess.run(
        [smi, "--query-gpu=clocks_throttle_reasons.hw_slowdown", "--format=csv,noheader"],
        capture_output=True,
        text=True,
    )
    assert old.returncode == 0 and old.stdout.splitlines() == ["Not Active"] * 8
