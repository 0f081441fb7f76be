"""The health check on the boot harness (issue 25, 2 and 5c): Xid 63 is a recorded remap, not
a failure; the watch lets running jobs checkpoint before the group replaces the node; a full
root disk is reported; a T4's lifetime ECC count is no reason to replace it."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import replace

from boot_harness import G4DN
from harness_units import (
    SELF,
    TRAIN,
    argument,
    aws_calls,
    df_stub,
    health,
    mark_booted,
)
from harness_units import nodes as nodes

XID_63 = (
    "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, "
    "reset gpu to activate.\n"
)
XID_48 = "NVRM: Xid (PCI:0000:20:1c): 48, pid=3101, An uncorrectable double bit error\n"
TOPIC = "arn:aws:sns:us-east-1:123456789012:train-cost-alerts-1a2b3c4"


def reboots(node) -> list[list[str]]:
    return [entry for entry in node.systemd()["log"] if "reboot" in entry]


def unhealthy(node) -> list[list[str]]:
    return aws_calls(node, "autoscaling", "set-instance-health")


def slept(node) -> list[str]:
    """Every `sleep` the node's scripts asked for, in node seconds (the harness's sleep)."""
    log = node.harness / "sleeps"
    return log.read_text().split() if log.exists() else []


# --- Xid 63 -------------------------------------------------------------------------------


def test_xid_63_while_running_is_no_failure(nodes):
    node = nodes.make()
    mark_booted(node)
    node.kernel_log(XID_63)
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert health(node) == "ok" and not unhealthy(node) and not reboots(node)


def test_xid_63_at_boot_reboots_once_to_apply_the_remap(nodes):
    node = nodes.make()
    node.kernel_log(XID_63)
    assert node.step("gpu-cluster-health").returncode == 0
    assert reboots(node) == [["--no-block", "reboot"]]
    assert health(node) == "rebooting:row-remap-pending" and not unhealthy(node)
    # the next boot: a new kernel log, the remap applied (nothing pending)
    node.kernel_log("")
    assert node.step("gpu-cluster-health").returncode == 0
    assert health(node) == "ok" and reboots(node) == [["--no-block", "reboot"]]
    assert not node.file("/var/lib/gpu-cluster/remap-reboot").exists()


def test_xid_63_whose_remap_stays_pending_after_the_reboot_fails(nodes):
    node = nodes.make()
    node.kernel_log(XID_63)
    node.set_gpus(remap_pending=[4])
    assert node.step("gpu-cluster-health").returncode == 0  # rebooting
    node.kernel_log("")
    assert node.step("gpu-cluster-health").returncode == 1
    assert health(node) == "failed:row-remap-pending:1-gpus"
    assert len(reboots(node)) == 1 and unhealthy(node)


def test_xid_64_a_remap_that_failed_is_still_fatal(nodes):
    node = nodes.make()
    mark_booted(node)
    node.kernel_log("NVRM: Xid (PCI:0000:10:1c): 64, pid='N/A', Row Remapper: Failed to remap\n")
    assert node.step("gpu-cluster-health", "--watch").returncode == 1
    assert health(node) == "failed:xid:64" and unhealthy(node)


# --- checkpoint before replacement --------------------------------------------------------


def test_the_watch_lets_running_jobs_checkpoint_before_the_node_is_replaced(nodes):
    node = nodes.make()
    mark_booted(node)
    node.activate("gpu-cluster-job@pretrain.service")
    node.kernel_log(XID_48)
    env = {"GPUC_CHECKPOINT_GRACE": "3", "HARNESS_TIME_SCALE": "1"}  # 3 s of real time
    result: dict = {}
    watch = threading.Thread(
        target=lambda: result.update(done=node.step("gpu-cluster-health", "--watch", env=env))
    )
    watch.start()
    notice_file = node.file("/run/gpu-cluster/checkpoint-now")
    for _ in range(400):
        if notice_file.exists():
            break
        time.sleep(0.025)
    notice = json.loads(notice_file.read_text())
    assert notice["action"] == "replace" and notice["reason"] == "xid:48"
    assert notice["time"].endswith("Z")
    assert not unhealthy(node)  # the jobs have their grace first
    watch.join(timeout=60)
    assert result["done"].returncode == 1, result["done"].stderr
    assert "3" in slept(node)  # the jobs' grace, then the replacement
    (call,) = unhealthy(node)
    assert argument(call, "--instance-id") == SELF
    assert argument(call, "--health-status") == "Unhealthy"


def test_no_running_job_no_wait(nodes):
    node = nodes.make()
    mark_booted(node)
    node.kernel_log(XID_48)
    env = {"GPUC_CHECKPOINT_GRACE": "30"}
    done = node.step("gpu-cluster-health", "--watch", env=env)
    assert done.returncode == 1 and "30" not in slept(node)
    assert not node.file("/run/gpu-cluster/checkpoint-now").exists() and unhealthy(node)


def test_the_boot_check_never_waits_for_jobs(nodes):
    """At boot no job of this boot runs yet (the jobs start after the check)."""
    node = nodes.make()
    node.activate("gpu-cluster-job@pretrain.service")
    node.set_gpus(lost=[2])
    env = {"GPUC_CHECKPOINT_GRACE": "30"}
    done = node.step("gpu-cluster-health", env=env)
    assert done.returncode == 1 and unhealthy(node) and "30" not in slept(node)
    assert not node.file("/run/gpu-cluster/checkpoint-now").exists()


# --- the root disk ------------------------------------------------------------------------


def test_a_full_root_disk_is_degraded_and_alerted_not_replaced(nodes):
    node = nodes.make(
        aws=[
            ("alerts-topic", TOPIC),
            ("Tags[?Key==", "train-nodes-group"),
        ]
    )
    df_stub(node, available_kib=900 * 1024)  # 900 MiB left
    assert node.step("gpu-cluster-health").returncode == 0
    assert health(node) == "degraded:disk-full"
    (publish,) = aws_calls(node, "sns", "publish")
    assert argument(publish, "--topic-arn") == TOPIC
    assert "root disk full" in argument(publish, "--subject") and SELF in argument(
        publish, "--message"
    )
    assert not unhealthy(node)  # a new node would not free this one's disk


def test_a_root_disk_with_room_is_ok(nodes):
    node = nodes.make()
    df_stub(node, available_kib=40 * 2**20)
    assert node.step("gpu-cluster-health").returncode == 0
    assert health(node) == "ok" and not aws_calls(node, "sns", "publish")


# --- ECC on GPUs without row remapping ----------------------------------------------------


def single_t4(nodes):
    node = nodes.make(
        replace(TRAIN, gpus_per_node=1, efa_interfaces=0, nvswitch=False, row_remapping=False),
        hardware=G4DN,
    )
    return node


def test_a_t4s_lifetime_ecc_count_is_no_failure(nodes):
    """Aggregate counts persist for the board's lifetime; the pages were retired long ago."""
    node = single_t4(nodes)
    node.set_gpus(ecc_aggregate_uncorrected={"0": 2}, ecc_volatile_uncorrected={"0": 0})
    assert node.step("gpu-cluster-health").returncode == 0
    assert health(node) == "ok"


def test_a_t4s_uncorrectable_errors_since_the_driver_loaded_fail_it(nodes):
    node = single_t4(nodes)
    node.set_gpus(ecc_aggregate_uncorrected={"0": 2}, ecc_volatile_uncorrected={"0": 1})
    assert node.step("gpu-cluster-health").returncode == 1
    assert health(node) == "failed:ecc:1-gpus"
