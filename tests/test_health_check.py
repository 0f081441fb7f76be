"""The boot health check, run with stub fi_info / nvidia-smi / systemctl / aws; the all-reduce
benchmark's arithmetic; what the plan shows and grants for them."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess

import pytest
from conftest import TRAIN_LIKE, plan_config, write_stubs

from components.user_data import BOOT_DIR, boot_script, decoded_user_data

BASH = shutil.which("bash")


def efa_listing(devices: int, fabrics_per_device: int = 2) -> str:
    """fi_info -p efa output: newer libfabric lists several fabrics per device (domain)."""
    blocks = []
    for device in range(devices):
        for fabric in ("efa", "efa-direct")[:fabrics_per_device]:
            blocks.append(
                f"provider: efa\\n    fabric: {fabric}\\n    domain: rdmap{device}s0-rdm\\n"
                "    version: 2.0\\n    type: FI_EP_RDM\\n"
            )
    return "".join(blocks)


def run_health(tmp_path, *, efa=4, efa_found=4, gpus=8, ecc="0", fabric="active", nvswitch=True):
    etc, bin_dir = tmp_path / "etc", tmp_path / "bin"
    etc.mkdir()
    bin_dir.mkdir()
    (etc / "cluster.env").write_text(
        f"CLUSTER=train\nREGION=us-east-1\nGPUS_PER_NODE=8\nEFA_INTERFACES={efa}\n"
        f"NVSWITCH={'true' if nvswitch else 'false'}\n"
    )
    gpu_lines = "\\n".join(str(i) for i in range(gpus))
    ecc_lines = "\\n".join([ecc] + ["0"] * (gpus - 1))
    stubs = {
        "fi_info": f"printf '{efa_listing(efa_found)}'\n",
        "nvidia-smi": f'case "$*" in\n  *ecc*) printf "{ecc_lines}\\n";;\n'
        f'  *) printf "{gpu_lines}\\n";;\nesac\n',
        "systemctl": f'[ "{fabric}" = active ]\n',
        "curl": 'case "$*" in\n  *instance-id*) echo i-0abc;;\n  *) echo token;;\nesac\n',
        "aws": f'echo "$*" >> {tmp_path}/aws-calls\n',
    }
    write_stubs(bin_dir, stubs)
    script = tmp_path / "health.sh"
    script.write_text(boot_script("gpu-cluster-health.sh"))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUC_ETC": str(etc)}
    result = subprocess.run([BASH, str(script)], env=env, capture_output=True, text=True)
    calls = (tmp_path / "aws-calls").read_text().splitlines()
    return result, (etc / "health").read_text().strip(), calls


def test_a_healthy_p4d_node_reports_ok(tmp_path):
    result, status, calls = run_health(tmp_path)
    assert result.returncode == 0, result.stderr
    assert status == "ok"
    assert any("ec2 create-tags" in c and "Key=gpu-cluster:health,Value=ok" in c for c in calls)
    assert any("put-metric-data" in c and "--value 1" in c for c in calls)
    assert not any("set-instance-health" in c for c in calls)


@pytest.mark.parametrize(
    ("kwargs", "reason"),
    [
        ({"efa_found": 3}, "efa:3/4"),
        ({"gpus": 7}, "gpus:7/8"),
        ({"ecc": "2"}, "ecc:1-gpus"),
        ({"fabric": "inactive"}, "fabricmanager:inactive"),
    ],
)
def test_a_failed_check_marks_the_node_unhealthy_so_the_group_replaces_it(tmp_path, kwargs, reason):
    result, status, calls = run_health(tmp_path, **kwargs)
    assert result.returncode == 1
    assert status == f"failed:{reason}"
    assert any(f"Value=failed:{reason}" in c for c in calls)
    assert any("put-metric-data" in c and "--value 0" in c for c in calls)
    (mark,) = [c for c in calls if "set-instance-health" in c]
    assert "--instance-id i-0abc --health-status Unhealthy" in mark


def test_types_without_nvswitch_or_efa_skip_those_checks(tmp_path):
    result, status, _ = run_health(tmp_path, efa=0, efa_found=0, fabric="inactive", nvswitch=False)
    assert result.returncode == 0 and status == "ok"


def test_bus_bandwidth_is_nccl_tests_busbw():
    spec = importlib.util.spec_from_file_location("bench", BOOT_DIR / "allreduce_bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)  # torch is imported only inside main()
    # 1 GiB in 50 ms over 32 ranks: algbw 21.47 GB/s x 2 x 31/32
    assert bench.bus_bandwidth_gbytes(2**30, 0.05, 32) == pytest.approx(
        2**30 / 0.05 * 2 * 31 / 32 / 1e9
    )


def test_plan_shows_the_health_check_and_the_nccl_test(train_plan):
    out = train_plan.outputs
    assert out["expectedBusBandwidthGBps"] == 50  # 4 x 100 Gbps EFA / 8
    assert out["healthCheck"].startswith("instance tag gpu-cluster:health")
    assert "gpuc-torchrun /usr/local/lib/gpu-cluster/allreduce_bench.py" in out["ncclTestCommand"]
    access = json.loads(train_plan.named("train-security-node-access").inputs["policy"])
    statements = {s["Sid"]: s for s in access["Statement"]}
    assert statements["TagOwnHealth"]["Condition"]["StringEquals"] == {
        "aws:ResourceTag/gpu-cluster:name": "train"
    }
    assert statements["TagOwnHealth"]["Condition"]["ForAllValues:StringEquals"] == {
        "aws:TagKeys": ["gpu-cluster:health"]
    }
    assert statements["PublishHealthMetric"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": "gpu-cluster"}
    }
    assert statements["MarkOwnGroupInstancesUnhealthy"]["Condition"] == {
        "StringEquals": {"autoscaling:ResourceTag/gpu-cluster:name": "train"}
    }


def test_nvswitch_flag_follows_the_type():

    g5 = plan_config(
        {**TRAIN_LIKE, "gpu-cluster:instanceType": "g5.12xlarge", "gpu-cluster:nodes": "2"}, "g5"
    )
    (template,) = g5.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert "NVSWITCH=false" in decoded_user_data(template.inputs["userData"])
