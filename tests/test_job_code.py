"""A job's code, dependencies and container on a node of the boot harness (boot/gpu-cluster-
job-code.sh, in the boot bundle): the archive `gpuc run --workdir` uploaded is fetched, checked
against the spec's digest and unpacked as the job's working directory; the setup runs once per
job version in a virtualenv that sees the AMI's packages; an image is pulled and run with what
EFA and NCCL need. Each failure is the job's failure on that node, reported with its exit code
and last lines, and nothing starts torchrun."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from boot_harness import JOB_USER, P4D, BootNode
from conftest import stack_names
from test_boot_harness import ONE_NODE, TRAIN
from test_boot_harness import make_node as make_node  # the fixture
from test_jobs import booted
from wheels import wheel

from gpu_cluster.components.jobs import workdir_key
from gpu_cluster.components.names import jobs_log_group
from gpu_cluster.infra.workdir import PackedWorkdir, pack_workdir

TRAIN_IDS = stack_names()  # the program's and gpuc's names of stack train


BOOT = replace(TRAIN, jobs_log_group=jobs_log_group(TRAIN_IDS))
LISTING = "/gpu-cluster/train/jobs/pretrain\t/gpu-cluster/train/jobs/pretrain/nodes/i-0aaa"
# torchrun on the node: where it ran, in which environment, with what
TORCHRUN = (
    "#!/bin/bash\n"
    'echo "$PWD|${VIRTUAL_ENV:-}|$*" >> "$HARNESS/torchrun-runs"\n'
    'echo "step 1 loss 2.5"\n'
)


def code(folder: Path, files: dict[str, str]) -> PackedWorkdir:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return pack_workdir(folder)


def spec(packed: PackedWorkdir | None = None, **fields) -> str:
    body = {
        "name": "pretrain",
        "command": ["python", "train.py", "--epochs", "3"],
        "maxRestarts": 0,
        "env": {},
        "state": "active",
        "created": "2026-12-01T12:00:00Z",
        "nodes": 1,
        "run": "run1",
        "workdir": (
            {"key": workdir_key(packed.sha256), "sha256": packed.sha256, "bytes": packed.size}
            if packed
            else None
        ),
        **fields,
    }
    return json.dumps(body)


def node_with(make_node, job: str, packed: PackedWorkdir | None = None, hardware=P4D) -> BootNode:
    node = make_node(
        BOOT,
        hardware,
        aws=[
            ("get-parameters-by-path", LISTING),
            ("ssm get-parameter", job),
            ("put-parameter", ""),
            ("ecr get-login-password", "ecr-token"),
            *ONE_NODE,
        ],
    )
    if packed is not None:
        put_code(node, packed)
    torchrun = node.harness / "bin/torchrun"
    torchrun.write_text(TORCHRUN)
    torchrun.chmod(0o755)
    node.install_only()
    return node


def put_code(node: BootNode, packed: PackedWorkdir, archive: bytes | None = None) -> None:
    target = node.s3_object(BOOT.bucket, workdir_key(packed.sha256))
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(packed.archive if archive is None else archive)


def reports(node: BootNode) -> list[dict]:
    return [
        json.loads(call[call.index("--value") + 1])
        for call in node.aws_calls()
        if "put-parameter" in call
    ]


def runs(node: BootNode) -> list[list[str]]:
    path = node.harness / "torchrun-runs"
    return [line.split("|") for line in path.read_text().splitlines()] if path.exists() else []


def job_log(node: BootNode) -> str:
    path = node.file("/var/log/gpu-cluster/jobs/pretrain.log")
    return path.read_text() if path.exists() else ""


def fetches(node: BootNode) -> int:
    return sum(
        1
        for call in node.aws_calls()
        if call[:2] == ["s3", "cp"] and any("code/" in a for a in call)
    )


def restart(node: BootNode) -> None:
    """The job's unit again (a reboot, a torchrun failure): what the node keeps is reused."""
    node.systemctl("start", "gpu-cluster-job@pretrain.service")
    node.wait_unit("gpu-cluster-job@pretrain", "inactive", "failed")


def test_the_job_runs_in_its_code_fetched_once_and_checked(make_node, tmp_path):
    packed = code(tmp_path / "src", {"train.py": "print('hi')\n", "lib/util.py": "X = 1\n"})
    node = node_with(make_node, spec(packed), packed)
    booted(node)
    home = node.file(f"/home/{JOB_USER}/gpuc-jobs/pretrain")
    assert (home / "train.py").read_text() == "print('hi')\n"
    assert (home / "lib/util.py").read_text() == "X = 1\n"
    (cwd, venv, args) = runs(node)[0]
    assert cwd == str(home) and venv == ""  # no setup: the AMI's own environment
    assert args.endswith("train.py --epochs 3")
    assert [r["state"] for r in reports(node)] == ["running", "done"]
    # the same digest again: not fetched again
    restart(node)
    assert len(runs(node)) == 2 and fetches(node) == 1


def test_an_archive_that_is_not_the_specs_is_refused(make_node, tmp_path):
    packed = code(tmp_path / "src", {"train.py": "print('hi')\n"})
    node = node_with(make_node, spec(packed))
    tampered = code(tmp_path / "other", {"train.py": "import os; os.system('curl evil')\n"})
    put_code(node, packed, archive=tampered.archive)
    booted(node)
    (failed,) = [r for r in reports(node) if r["state"] == "failed"]
    assert f"not the job's {packed.sha256}: refused" in failed["detail"]
    assert tampered.sha256 in failed["detail"]
    assert runs(node) == [] and not node.file(f"/home/{JOB_USER}/gpuc-jobs/pretrain").exists()
    assert "refused" in job_log(node)


def test_a_missing_archive_fails_the_job_on_the_node_with_the_cli_error(make_node, tmp_path):
    packed = code(tmp_path / "src", {"train.py": "print('hi')\n"})
    node = node_with(make_node, spec(packed))  # never uploaded
    booted(node)
    (failed,) = [r for r in reports(node) if r["state"] == "failed"]
    assert failed["detail"].startswith("cannot fetch the job's code s3://bucket-1/code/")
    assert "(404)" in failed["detail"] and runs(node) == []


SETUP = (
    # what `pip install torch==...` leaves in the job's environment: its own torchrun (here the
    # harness's stand-in), and the AMI's packages (here the harness's: yaml) still importable
    'cp "$HARNESS/bin/torchrun" "$VIRTUAL_ENV/bin/torchrun" && echo "installed" && '
    "python -c 'import sys, yaml; print(sys.prefix)' && "
    "echo $(($(cat setup-count 2>/dev/null || echo 0) + 1)) > setup-count"
)


def test_the_setup_runs_once_per_job_version_in_a_virtualenv_that_sees_the_amis_packages(
    make_node, tmp_path
):
    packed = code(tmp_path / "src", {"train.py": "print('hi')\n", "requirements.txt": "x\n"})
    node = node_with(make_node, spec(packed, setup=SETUP), packed)
    booted(node)
    venv = node.file(f"/home/{JOB_USER}/gpuc-jobs/.venvs/pretrain")
    (_cwd, active, _) = runs(node)[0]
    assert active == str(venv) and (venv / "bin/python").exists()
    log = job_log(node)
    assert "[pretrain] setup: installed" in log
    assert f"[pretrain] setup: {venv}" in log  # sys.prefix: the job's own environment
    # the setup ran in the job's code, as the job user
    count = node.file(f"/home/{JOB_USER}/gpuc-jobs/pretrain/setup-count")
    assert count.read_text() == "1\n" and count.owner() == JOB_USER
    restart(node)
    assert count.read_text() == "1\n" and len(runs(node)) == 2  # the same version: not again


def test_a_failing_setup_fails_the_job_with_its_exit_code_and_last_lines(make_node, tmp_path):
    packed = code(tmp_path / "src", {"train.py": "print('hi')\n"})
    failing = "echo Collecting torchx; echo 'ERROR: No matching distribution found' >&2; exit 3"
    node = node_with(make_node, spec(packed, setup=failing), packed)
    booted(node)
    (failed,) = [r for r in reports(node) if r["state"] == "failed"]
    assert failed["detail"] == (
        "setup failed (exit 3): Collecting torchx\nERROR: No matching distribution found"
    )
    assert runs(node) == []
    assert "[pretrain] setup: ERROR: No matching distribution found" in job_log(node)
    # a failed setup is not marked done: the next version runs it again
    assert not (node.file(f"/home/{JOB_USER}/gpuc-jobs/.venvs/pretrain") / ".gpuc-setup").exists()


ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:v3"


def docker_state(node: BootNode, **state) -> None:
    node.harness.joinpath("docker.json").write_text(json.dumps(state))


def docker_runs(node: BootNode) -> list[dict]:
    path = node.harness / "docker-runs.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_job_in_a_container_gets_the_gpus_every_efa_device_and_the_hosts_network(
    make_node, tmp_path
):
    packed = code(tmp_path / "src", {"train.py": "print('hi')\n"})
    node = node_with(make_node, spec(packed, image=ECR_IMAGE, env={"LR": "3e-4"}), packed)
    # the image has PyTorch (its torchrun: the harness's stand-in on the PATH)
    docker_state(node, registry={ECR_IMAGE: {"env": {"IMAGE_ONLY": "1"}}})
    booted(node)
    assert f"usermod -aG docker {JOB_USER}" in node.calls()
    (run,) = docker_runs(node)
    options, home = run["options"], str(node.file(f"/home/{JOB_USER}/gpuc-jobs/pretrain"))
    assert run["image"] == ECR_IMAGE and run["command"][0] == "/usr/local/bin/gpuc-torchrun"
    assert options["gpus"] == "all" and options["network"] == "host" and options["ipc"] == "host"
    assert "memlock=-1:-1" in options["ulimit"]
    assert options["device"] == [f"/dev/infiniband/uverbs{i}" for i in range(P4D.efa_devices)]
    assert f"{home}:{home}" in options["volume"] and options["workdir"] == home
    assert {"GPUC_RDZV_ENDPOINT", "GPUC_CHECKPOINT_URI", "NCCL_DEBUG", "LR"} <= set(options["env"])
    (cwd, _, args) = runs(node)[0]
    assert cwd == home and args.endswith("train.py --epochs 3")
    logins = json.loads(node.harness.joinpath("docker.json").read_text())["logins"]
    assert logins == ["123456789012.dkr.ecr.us-east-1.amazonaws.com"]
    assert [r["state"] for r in reports(node)] == ["running", "done"]


def test_an_image_that_cannot_be_pulled_fails_the_job_on_the_node(make_node, tmp_path):
    node = node_with(make_node, spec(image="nvcr.io/nvidia/pytorch:99.99-py3"))
    docker_state(node, registry={})
    booted(node)
    (failed,) = [r for r in reports(node) if r["state"] == "failed"]
    assert failed["detail"].startswith("image pull failed (exit 1): Error response from daemon:")
    assert "pull access denied for nvcr.io/nvidia/pytorch" in failed["detail"]
    assert docker_runs(node) == [] and runs(node) == []


def test_a_containers_setup_runs_once_and_the_job_runs_in_the_set_up_image(make_node, tmp_path):
    packed = code(tmp_path / "src", {"train.py": "print('hi')\n"})
    setup = "echo setting up"
    node = node_with(make_node, spec(packed, image=ECR_IMAGE, setup=setup), packed)
    docker_state(node, registry={ECR_IMAGE: {}})
    booted(node)
    setup_run, job_run = docker_runs(node)
    assert setup_run["image"] == ECR_IMAGE and setup_run["command"][:2] == ["bash", "-c"]
    assert job_run["image"].startswith("gpuc-job/pretrain:")
    assert "[pretrain] setup: setting up" in job_log(node)
    restart(node)
    assert len(docker_runs(node)) == 3  # the set-up image is kept: no second setup
    assert docker_runs(node)[2]["image"] == job_run["image"]


def test_an_image_whose_nccl_does_not_use_efa_stops_the_job(make_node, tmp_path):
    node = node_with(make_node, spec(image=ECR_IMAGE))
    docker_state(node, registry={ECR_IMAGE: {}})
    (node.harness / "bin/torchrun").write_text(
        "#!/bin/bash\necho 'node1:1:1 [0] NCCL INFO Using network Socket'\nsleep 30\n"
    )
    booted(node)
    (failed,) = [r for r in reports(node) if r["state"] == "failed"]
    assert failed["detail"] == "slow network: NCCL uses TCP sockets, not EFA"


@pytest.mark.parametrize("field", ["image", "setup"])
def test_the_job_user_is_refused_nothing_it_needs_and_given_nothing_more(make_node, field):
    """Without an image the job user is not put in the docker group (root-equivalent)."""
    node = node_with(make_node, spec(setup=SETUP) if field == "setup" else spec(image=ECR_IMAGE))
    docker_state(node, registry={ECR_IMAGE: {}})
    booted(node)
    assert (f"usermod -aG docker {JOB_USER}" in node.calls()) == (field == "image")


def test_a_container_left_from_a_killed_unit_does_not_block_the_next_run(make_node):
    node = node_with(make_node, spec(image=ECR_IMAGE))
    # the earlier run's container, still there (its unit was SIGKILLed after TimeoutStopSec)
    docker_state(node, registry={ECR_IMAGE: {}}, containers={"gpuc-job-pretrain": 999999})
    booted(node)
    assert [r["state"] for r in reports(node)] == ["running", "done"]
    assert "docker rm -f gpuc-job-pretrain" in node.calls()
    (run,) = docker_runs(node)
    # the job user has a name in an image without a passwd entry for it (getpass.getuser)
    assert {f"USER={JOB_USER}", f"LOGNAME={JOB_USER}", "HOME=/tmp"} <= set(run["options"]["env"])


def test_a_moved_image_tag_sets_the_job_up_again(make_node):
    latest = "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:latest"
    node = node_with(make_node, spec(image=latest, setup="echo setting up"))
    docker_state(node, registry={latest: {"id": "sha256:" + "1" * 64}})
    booted(node)
    first = docker_runs(node)[-1]["image"]
    # a new push under the same tag: the next pull gets another image
    state = json.loads(node.harness.joinpath("docker.json").read_text())
    state["registry"][latest]["id"] = "sha256:" + "2" * 64
    node.harness.joinpath("docker.json").write_text(json.dumps(state))
    restart(node)
    setups = [r for r in docker_runs(node) if r["command"][:2] == ["bash", "-c"]]
    assert len(setups) == 2 and docker_runs(node)[-1]["image"] != first


def test_a_long_non_ascii_failure_still_fits_the_nodes_report(make_node, tmp_path):
    packed = code(tmp_path / "src", {"train.py": "print('hi')\n"})
    failing = "for i in 1 2 3 4 5; do printf 'ошибка %.0s' $(seq 40); echo; done; exit 1"
    node = node_with(make_node, spec(packed, setup=failing), packed)
    booted(node)
    calls = [call for call in node.aws_calls() if "put-parameter" in call]
    values = [call[call.index("--value") + 1] for call in calls]
    (failed,) = [json.loads(v) for v in values if json.loads(v)["state"] == "failed"]
    assert failed["detail"].startswith("setup failed (exit 1): ошибка")
    assert all(len(v.encode()) <= 3500 for v in values)  # SSM's standard tier: 4 KB a value


# The AMI's Python environment (/opt/pytorch) on a Python without ensurepip (Debian's without
# python3-venv): `-m venv` fails as it does there, `--without-pip` works
NO_ENSUREPIP = f"""#!/bin/bash
if [ "$1 $2" = "-m venv" ] && [[ " $* " != *" --without-pip "* ]]; then
  echo "The virtual environment was not created successfully because ensurepip is not" >&2
  echo "available.  On Debian/Ubuntu systems, you need to install the python3-venv package" >&2
  exit 1
fi
exec {sys.executable} "$@"
"""


def test_a_python_without_ensurepip_still_gets_the_job_its_environment(make_node, tmp_path):
    packed_dir = tmp_path / "src"
    packed_dir.mkdir()
    (packed_dir / "tinylib-1.0-py3-none-any.whl").write_bytes(wheel("tinylib", "1.0"))
    packed = code(packed_dir, {"train.py": "print('hi')\n"})
    setup = (
        "pip install --no-index ./tinylib-1.0-py3-none-any.whl && "
        "python -c 'import tinylib, yaml; print(\"imported\", tinylib.VERSION)' && "
        'cp "$HARNESS/bin/torchrun" "$VIRTUAL_ENV/bin/torchrun"'
    )
    node = node_with(make_node, spec(packed, setup=setup), packed)
    base = node.file("/opt/pytorch/bin/python3")
    base.parent.mkdir(parents=True)
    base.write_text(NO_ENSUREPIP)
    base.chmod(0o755)
    booted(node)
    assert "[pretrain] setup: imported 1.0" in job_log(node), job_log(node)
    venv = node.file(f"/home/{JOB_USER}/gpuc-jobs/.venvs/pretrain")
    installed = list(venv.glob("lib/python3*/site-packages/tinylib/__init__.py"))
    assert installed, "pip installed into the job's own environment"
    assert [r["state"] for r in reports(node)] == ["running", "done"]
