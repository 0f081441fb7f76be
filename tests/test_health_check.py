"""The all-reduce benchmark's arithmetic; what the plan shows and grants for the health check
(the check itself runs on the boot harness: test_boot_harness.py)."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess

import pytest
from conftest import TRAIN_LIKE, plan_config

from gpu_cluster.components.user_data import BOOT_DIR, decoded_user_data

BASH = shutil.which("bash") or "/bin/bash"  # as tests/boot_harness.py


def test_bus_bandwidth_is_nccl_tests_busbw():
    spec = importlib.util.spec_from_file_location("bench", BOOT_DIR / "allreduce_bench.py")
    assert spec is not None and spec.loader is not None
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
    # by the stack id: a stack of another region or project may share the cluster name
    assert statements["TagOwnHealth"]["Condition"]["StringEquals"] == {
        "aws:ResourceTag/gpu-cluster:stack-id": "gpu-cluster/train/us-east-1"
    }
    assert statements["TagOwnHealth"]["Condition"]["ForAllValues:StringEquals"] == {
        "aws:TagKeys": ["gpu-cluster:health"]
    }
    assert statements["PublishHealthMetric"]["Condition"] == {
        "StringEquals": {"cloudwatch:namespace": "gpu-cluster"}
    }
    assert statements["MarkOwnGroupInstancesUnhealthy"]["Condition"] == {
        "StringEquals": {
            "autoscaling:ResourceTag/gpu-cluster:stack-id": "gpu-cluster/train/us-east-1"
        }
    }


def test_nvswitch_flag_follows_the_type():

    g5 = plan_config(
        {**TRAIN_LIKE, "gpu-cluster:instanceType": "g5.12xlarge", "gpu-cluster:nodes": "2"}, "g5"
    )
    (template,) = g5.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert "NVSWITCH=false" in decoded_user_data(template.inputs["userData"])


def test_the_nccl_test_command_brings_its_bench_and_runs_it(train_plan, tmp_path):
    """The bench is not in the user data: the command writes it first, byte for byte the
    script in components/boot (without its comments), then runs it through gpuc-torchrun."""
    import base64
    import gzip
    import shlex

    from gpu_cluster.components.user_data import boot_script, without_comments

    command = shlex.split(train_plan.outputs["ncclTestCommand"])
    parameters = json.loads(command[command.index("--parameters") + 1])
    setup, run = parameters["commands"]
    payload = setup.split("echo ", 1)[1].split(" ", 1)[0]
    bench = gzip.decompress(base64.b64decode(payload)).decode()
    assert bench == without_comments(boot_script("allreduce_bench.py"))
    assert "> /usr/local/lib/gpu-cluster/allreduce_bench.py" in setup
    assert run.endswith("gpuc-torchrun /usr/local/lib/gpu-cluster/allreduce_bench.py")
    script = tmp_path / "install.sh"
    script.write_text(setup.replace("/usr/local/lib/gpu-cluster", str(tmp_path / "lib")))
    subprocess.run([BASH, str(script)], check=True)
    assert (tmp_path / "lib/allreduce_bench.py").read_text() == bench
