"""`gpuc run -f job.yaml` (infra/aws/job_file.py): every bad value is a problem with its path, the
value received, what is allowed and a fix that works; flags win over the file; nothing is
uploaded or started from a bad file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import boto3
import pytest
import yaml
from conftest import stack_names
from moto import mock_aws
from test_jobs import capture_sends, cluster_key, nodes

from gpu_cluster.components.names import job_bucket_parameter
from gpu_cluster.infra import cli
from gpu_cluster.infra.aws.job_file import (
    SETUP_MAX_BYTES,
    JobFileError,
    default_job_name,
    load_job_file,
)
from gpu_cluster.infra.errors import Problem
from gpu_cluster.infra.outcome import INPUT, USAGE
from gpu_cluster.infra.pulumi_yaml import load

REGION = "us-east-1"
TRAIN_IDS = stack_names("train", REGION)  # the program's and gpuc's names of stack train
BUCKET = "train-bucket"


def job_file(folder: Path, text: str, name: str = "job.yaml") -> Path:
    (folder / "src").mkdir(exist_ok=True)
    (folder / "src" / "train.py").write_text("print('step 1')\n")
    path = folder / name
    path.write_text(text)
    return path


def problems_of(path: Path) -> list[Problem]:
    with pytest.raises(JobFileError) as caught:
        load_job_file(path)
    rendered = str(caught.value)
    for problem in caught.value.problems:  # each one is in the message, whole
        assert f"  - {problem.path}: {problem.problem}" in rendered
        assert f"      fix:      {problem.fix}" in rendered
    return caught.value.problems


def applied(path: Path, problem: Problem) -> dict:
    """The file's settings after doing what the fix says (its first alternative): `write `K:
    V`` sets K (in place of the key the problem is about, or of the one it names), `remove K`
    deletes K."""
    document = load(path.read_text())
    fix = re.split(r"; or |, or ", problem.fix, maxsplit=1)[0]
    key = problem.path.split(": ", 1)[1].split(".")[0]
    if written := re.search(r"write `([^`]+)`", fix):
        document.pop(key, None)
        if instead := re.search(r" in place of (\S+)", fix):
            document.pop(instead.group(1), None)
        document.update(load(written.group(1)))
    else:
        removed = re.match(r"remove (\S+)", fix)
        assert removed, problem.fix
        document.pop(removed.group(1))
    return document


# (the file, the problem's key, the value received, a piece of what is allowed)
BAD = [
    ("max_restarts: 5\n", "max_restarts", 5, "maxRestarts"),
    ("work_dir: src\n", "work_dir", "src", "workdir"),
    ("bogus: 1\n", "bogus", "1", "maxRestarts"),
    ("maxRestarts: 200\n", "maxRestarts", 200, "0-100"),
    ("maxRestarts: -1\n", "maxRestarts", -1, "0-100"),
    ("maxRestarts: three\n", "maxRestarts", "three", "whole number"),
    ("maxRestarts: true\n", "maxRestarts", True, "whole number"),
    ("maxRestarts: 2.5\n", "maxRestarts", 2.5, "whole number"),
    ("name: Pre_Train\n", "name", "Pre_Train", "lowercase letters"),
    ("name:\n", "name", "(not set)", "lowercase letters"),
    ("command: ''\n", "command", "", "a list of strings"),
    ("command: []\n", "command", [], "a list of strings"),
    ("command: python train.py --note 'two words\n", "command", None, "split like a shell"),
    ("command: [python, [a, b]]\n", "command", ["python", ["a", "b"]], "a list of strings"),
    ("command: {python: train.py}\n", "command", {"python": "train.py"}, "a list of strings"),
    ("workdir: scr\n", "workdir", "scr", "relative to the job file's folder"),
    ("workdir: src/train.py\n", "workdir", "src/train.py", "a folder"),
    ("setup: ''\n", "setup", "", f"at most {SETUP_MAX_BYTES} bytes"),
    (f"setup: {'x' * (SETUP_MAX_BYTES + 1)}\n", "setup", None, f"at most {SETUP_MAX_BYTES}"),
    ("image: ''\n", "image", "", "container image"),
    ("image: [a]\n", "image", ["a"], "container image"),
    ("image: NVCR.io/Nvidia/PyTorch:24.10-py3\n", "image", None, "container image"),
    ("image: 'python: 3.11'\n", "image", "python: 3.11", "container image"),
    ("env: {nccl_debug: INFO}\n", "env.nccl_debug", "nccl_debug", "upper-case"),
    ("env: {1BAD: x}\n", "env.1BAD", "1BAD", "not starting with a digit"),
    ("env: {AWS_REGION: x}\n", "env.AWS_REGION", "AWS_REGION", "not one the node sets"),
    ("env: {CLUSTER: x}\n", "env.CLUSTER", "CLUSTER", "not one the node sets"),
    ("env: {NCCL_DEBUG: [a, b]}\n", "env.NCCL_DEBUG", ["a", "b"], "a string"),
    ("env: [A=1, B=2]\n", "env", ["A=1", "B=2"], "a mapping of NAME: value"),
    ("env: WARN\n", "env", "WARN", "a mapping of NAME: value"),
]


@pytest.mark.parametrize(("text", "key", "received", "allowed"), BAD, ids=[b[1] for b in BAD])
def test_every_bad_value_is_named_with_its_value_what_is_allowed_and_a_fix_that_works(
    tmp_path, text, key, received, allowed
):
    path = job_file(tmp_path, text)
    (problem,) = problems_of(path)
    assert problem.path == f"{path}: {key}"
    if received is not None:
        assert problem.received == received
    assert allowed in problem.allowed
    assert "(line 1)" in problem.problem
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(yaml.safe_dump(applied(path, problem)))
    load_job_file(fixed)  # valid now


def test_a_fix_keeps_what_the_user_meant(tmp_path):
    fixes = {
        "max_restarts: 5\n": {"maxRestarts": 5},
        "work_dir: src\n": {"workdir": "src"},
        "name: Pre_Train\n": {"name": "pre-train"},
        "maxRestarts: 200\n": {"maxRestarts": 100},
        "env: {nccl_debug: INFO, LR: 3e-4}\n": {"env": {"NCCL_DEBUG": "INFO", "LR": "3e-4"}},
        "env: [A=1, B=2]\n": {"env": {"A": "1", "B": "2"}},
        "workdir: scr\n": {"workdir": "src"},
        "command: python train.py --note 'two words\n": {
            "command": ["python", "train.py", "--note", "two words"]
        },
    }
    for text, expected in fixes.items():
        path = job_file(tmp_path, text)
        (problem,) = problems_of(path)
        assert applied(path, problem) == expected, (text, problem.fix)


def test_every_problem_of_a_file_is_reported_at_once_in_file_order(tmp_path):
    path = job_file(
        tmp_path,
        "name: Bad Name\n"
        "max_restarts: 3\n"
        "env:\n"
        "  NCCL_DEBUG: WARN\n"
        "  path: /x\n"
        "setup: ''\n"
        "workdir: nowhere\n",
    )
    problems = problems_of(path)
    assert [p.path.split(": ", 1)[1] for p in problems] == [
        "name",
        "max_restarts",
        "env.path",
        "setup",
        "workdir",
    ]
    assert "(line 5)" in problems[2].problem
    with pytest.raises(JobFileError, match=r"has 5 problems; nothing was uploaded or started"):
        load_job_file(path)


def test_a_file_that_is_not_yaml_not_a_mapping_or_missing_is_a_problem_too(tmp_path):
    path = job_file(tmp_path, "name: train\ncommand: [python, train.py\nenv: {}\n")
    (problem,) = problems_of(path)
    assert re.search(r": line \d+, column \d+$", problem.path), problem.path
    assert problem.problem.startswith("not valid YAML")
    (problem,) = problems_of(job_file(tmp_path, "- python\n- train.py\n"))
    assert "a job file is a mapping of settings, not a list" in problem.problem
    (problem,) = problems_of(job_file(tmp_path, "name: a\nname: b\n"))
    assert "given twice (lines 1 and 2)" in problem.problem
    (problem,) = problems_of(job_file(tmp_path, "workdir: nowhere\n"))
    assert f"mkdir -p {tmp_path / 'nowhere'}" in problem.fix
    (problem,) = problems_of(tmp_path / "nope.yaml")
    assert problem.path == str(tmp_path / "nope.yaml")
    assert "does not exist" in problem.problem and "-f path/to/job.yaml" in problem.fix


def test_a_valid_file_reads_values_as_written(tmp_path, monkeypatch):
    path = job_file(
        tmp_path,
        "name: pretrain\n"
        "command: python train.py --lr 3e-4 --note 'two words'\n"
        "workdir: src\n"
        "setup:\n"
        "  - pip install -r requirements.txt\n"
        "  - python -c 'import torch'\n"
        "image: nvcr.io/nvidia/pytorch:24.10-py3\n"
        "env: {LR: 3e-4, FLAG: yes, OCTAL: 0755, EMPTY: , NCCL_DEBUG: WARN}\n"
        "maxRestarts: 7\n",
    )
    monkeypatch.chdir(tmp_path / "src")  # the workdir is the file's folder's, not the cwd's
    job = load_job_file(path)
    assert job.command == ["python", "train.py", "--lr", "3e-4", "--note", "two words"]
    assert job.workdir is not None
    assert job.workdir == tmp_path / "src" and job.workdir.is_dir()
    assert job.setup == "pip install -r requirements.txt\npython -c 'import torch'"
    assert job.env == {
        "LR": "3e-4",
        "FLAG": "yes",
        "OCTAL": "0755",
        "EMPTY": "",
        "NCCL_DEBUG": "WARN",
    }
    assert job.max_restarts == 7 and job.name == "pretrain"
    assert job.image == "nvcr.io/nvidia/pytorch:24.10-py3"
    numbers = job_file(tmp_path, "command: [python, train.py, --epochs, 3]\n")
    command = load_job_file(numbers).command
    assert command is not None and command[-1] == "3"
    assert load_job_file(job_file(tmp_path, "")).command is None  # an empty file: flags only
    assert default_job_name(["python", "-u", "my_train.py"]) == "my-train"


# --- through gpuc run, against moto ----------------------------------------------------


def cluster(monkeypatch) -> list[str]:
    """Two running train nodes, the cluster key, the stack's bucket (as `pulumi up` records it)
    and SendCommand captured."""
    ours = nodes("train", 2)
    cluster_key("train")
    capture_sends(monkeypatch)
    boto3.client("s3", region_name=REGION).create_bucket(Bucket=BUCKET)
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name=job_bucket_parameter(TRAIN_IDS), Value=BUCKET, Type="String"
    )
    return ours


def nothing_uploaded_or_started() -> None:
    objects = boto3.client("s3", region_name=REGION).list_objects_v2(Bucket=BUCKET)
    assert objects.get("KeyCount", 0) == 0, objects.get("Contents")
    jobs = boto3.client("ssm", region_name=REGION).get_parameters_by_path(
        Path="/gpu-cluster/train/jobs", Recursive=True
    )
    assert jobs["Parameters"] == []


def gpuc_run(*args: str) -> int:
    return cli.main(["run", "--stack", "train", "--watch", "0", *args])


@mock_aws
def test_flags_given_on_the_command_line_win_over_the_file(tmp_path, capsys, monkeypatch):
    cluster(monkeypatch)
    path = job_file(
        tmp_path,
        "name: from-file\n"
        "command: [python, train.py, --epochs, '1']\n"
        "env: {NCCL_DEBUG: INFO, LR: '1e-3'}\n"
        "maxRestarts: 7\n",
    )
    argv = ["-f", str(path), "--json", "--name", "from-flag", "--max-restarts", "2"]
    assert gpuc_run(*argv, "--env", "LR=3e-4", "--", "python", "other.py") == 0, capsys.readouterr()
    spec = json.loads(capsys.readouterr().out)["spec"]
    assert spec["name"] == "from-flag" and spec["maxRestarts"] == 2
    assert spec["command"] == ["python", "other.py"]
    assert spec["env"] == {"NCCL_DEBUG": "INFO", "LR": "3e-4"}  # variable by variable
    # without flags, the file's settings
    assert cli.main(["run", "--stack", "train", "--watch", "0", "-f", str(path), "--json"]) == 0
    spec = json.loads(capsys.readouterr().out)["spec"]
    assert spec["name"] == "from-file" and spec["maxRestarts"] == 7
    assert spec["command"] == ["python", "train.py", "--epochs", "1"]
    assert spec["env"] == {"NCCL_DEBUG": "INFO", "LR": "1e-3"}


@mock_aws
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_an_invalid_file_uploads_and_starts_nothing(tmp_path, capsys, monkeypatch, as_json):
    cluster(monkeypatch)
    path = job_file(
        tmp_path,
        "command: [python, train.py]\nworkdir: src\nenv: {NCCL_DEBUG: INFO, AWS_REGION: x}\n",
    )
    extra = ["--json"] if as_json else []
    assert gpuc_run("-f", str(path), *extra) == INPUT
    out, err = capsys.readouterr()
    if as_json:
        error = json.loads(out)["error"]
        assert error["code"] == INPUT
        (problem,) = error["problems"]
        assert problem["path"] == f"{path}: env.AWS_REGION" and problem["received"] == "AWS_REGION"
        assert "MY_AWS_REGION" in problem["fix"]
    else:
        assert f"{path}: env.AWS_REGION: the node sets AWS_REGION itself" in err
        assert "Traceback" not in err
    nothing_uploaded_or_started()


@mock_aws
@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--setup", ""], "--setup '': the setup command is empty"),
        (["--setup", "x" * (SETUP_MAX_BYTES + 1)], f"more than {SETUP_MAX_BYTES}"),
        (["--image", ""], "--image '': give an image"),
        (["--name", "Bad Name"], "--name 'Bad Name': a job name is"),
        (["--env", "lower=x"], "--env 'lower=x'"),
    ],
    ids=["empty-setup", "long-setup", "empty-image", "name", "env"],
)
def test_a_flag_mistake_is_a_usage_error_and_starts_nothing(
    tmp_path, capsys, monkeypatch, flags, says
):
    cluster(monkeypatch)
    path = job_file(tmp_path, "command: [python, train.py]\nworkdir: src\n")
    assert gpuc_run("-f", str(path), *flags) == USAGE
    assert says in capsys.readouterr().err
    nothing_uploaded_or_started()


@mock_aws
def test_a_job_file_without_a_command_and_none_after_the_dashes_is_a_usage_error(
    tmp_path, capsys, monkeypatch
):
    cluster(monkeypatch)
    path = job_file(tmp_path, "name: pretrain\n")
    assert gpuc_run("-f", str(path)) == USAGE
    assert f"give the command after --, e.g. -- python train.py, or command: in {path}" in (
        capsys.readouterr().err
    )
    nothing_uploaded_or_started()


@mock_aws
def test_a_spec_too_big_for_its_ssm_parameter_is_refused_before_anything(
    tmp_path, capsys, monkeypatch
):
    cluster(monkeypatch)
    job_file(tmp_path, "")
    monkeypatch.chdir(tmp_path)
    env = [f"--env=V{i}={'x' * 200}" for i in range(20)]
    assert gpuc_run("--workdir", "src", *env, "--", "python", "train.py") == USAGE
    assert "SSM keeps at most 4096" in capsys.readouterr().err
    nothing_uploaded_or_started()


ECR_IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:v3"


@mock_aws
@pytest.mark.parametrize(
    ("flags", "code", "says"),
    [
        (["--image", "Bad Image"], USAGE, "not a container image reference"),
        (["--image", ECR_IMAGE], INPUT, "train"),  # the stack names no ECR repository
        (["--workdir", "nowhere"], USAGE, "nowhere"),
    ],
    ids=["malformed-image", "unnamed-repository", "missing-workdir"],
)
def test_a_refused_image_or_workdir_uploads_and_starts_nothing(
    tmp_path, capsys, monkeypatch, flags, code, says
):
    cluster(monkeypatch)
    job_file(tmp_path, "")
    monkeypatch.chdir(tmp_path)
    assert gpuc_run("--workdir", "src", *flags, "--", "python", "train.py") == code
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err
    nothing_uploaded_or_started()


@mock_aws
def test_an_image_the_stack_refuses_names_the_job_file_it_came_from(tmp_path, capsys, monkeypatch):
    cluster(monkeypatch)
    path = job_file(tmp_path, f"command: [python, train.py]\nworkdir: src\nimage: {ECR_IMAGE}\n")
    assert gpuc_run("-f", str(path)) == INPUT
    assert capsys.readouterr().err.startswith(f"error: {path}: image: ")
    nothing_uploaded_or_started()


@mock_aws
def test_a_workdir_holding_credentials_uploads_and_starts_nothing(tmp_path, capsys, monkeypatch):
    cluster(monkeypatch)
    path = job_file(tmp_path, "command: [python, train.py]\nworkdir: src\n")
    (tmp_path / "src" / ".env").write_text("AWS_SECRET_ACCESS_KEY=x\n")
    assert gpuc_run("-f", str(path)) == INPUT
    assert ".env" in capsys.readouterr().err
    nothing_uploaded_or_started()


@mock_aws
def test_the_files_workdir_is_uploaded_once_and_the_spec_names_it(tmp_path, capsys, monkeypatch):
    from gpu_cluster.components.jobs import workdir_key
    from gpu_cluster.components.names import job_parameter

    cluster(monkeypatch)
    path = job_file(
        tmp_path,
        "name: pretrain\ncommand: [python, train.py]\nworkdir: src\n"
        "setup: [pip install -r requirements.txt, echo ready]\n",
    )
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")  # the workdir is the file's folder's src
    assert gpuc_run("-f", str(path)) == 0, capsys.readouterr()
    out, err = capsys.readouterr()
    found = re.search(r"code: 1 file, [0-9.]+ \w?B, sha256 ([0-9a-f]{12})…, uploaded", out)
    assert found, out
    assert "warning" not in err  # train.py is in the workdir
    s3 = boto3.client("s3", region_name=REGION)
    (stored,) = s3.list_objects_v2(Bucket=BUCKET)["Contents"]
    ssm = boto3.client("ssm", region_name=REGION)
    parameter = ssm.get_parameter(Name=job_parameter(TRAIN_IDS, "pretrain"), WithDecryption=True)
    spec = json.loads(parameter["Parameter"]["Value"])
    assert stored["Key"] == spec["workdir"]["key"] == workdir_key(spec["workdir"]["sha256"])
    assert spec["workdir"]["sha256"].startswith(found.group(1))
    assert spec["setup"] == "pip install -r requirements.txt\necho ready"
    # the same code again: not uploaded twice
    assert cli.main(["cancel", "--stack", "train", "--job", "pretrain"]) == 0
    capsys.readouterr()
    assert gpuc_run("-f", str(path), "--json") == 0
    code = json.loads(capsys.readouterr().out)["code"]
    assert code["uploaded"] is False and code["files"] == 1 and code["key"] == stored["Key"]
    assert len(s3.list_objects_v2(Bucket=BUCKET)["Contents"]) == 1


@mock_aws
def test_a_workdir_over_the_limit_uploads_and_starts_nothing(tmp_path, capsys, monkeypatch):
    cluster(monkeypatch)
    job_file(tmp_path, "")
    with open(tmp_path / "src" / "tokens.bin", "wb") as big:  # sparse: nothing is written
        big.truncate(200 * 2**20)
    monkeypatch.chdir(tmp_path)
    assert gpuc_run("--workdir", "src", "--", "python", "train.py") == INPUT
    err = capsys.readouterr().err
    assert "tokens.bin" in err and ".gpucignore" in err and "Traceback" not in err
    nothing_uploaded_or_started()


@mock_aws
def test_an_unknown_image_in_a_named_repository_uploads_and_starts_nothing(
    tmp_path, capsys, monkeypatch
):
    cluster(monkeypatch)
    boto3.client("ecr", region_name=REGION).create_repository(repositoryName="train")
    from gpu_cluster.infra.aws import job_command

    original = job_command.load_stack_config  # the train stack naming the repository

    def with_repository(stack, root=None):
        return {**original(stack, root), "gpu-cluster:jobs": '{"repositories": ["train"]}'}

    monkeypatch.setattr(job_command, "load_stack_config", with_repository)
    job_file(tmp_path, "")
    monkeypatch.chdir(tmp_path)
    assert gpuc_run("--workdir", "src", "--image", ECR_IMAGE, "--", "python", "train.py") == INPUT
    err = capsys.readouterr().err
    assert "unknown image" in err and "Traceback" not in err
    nothing_uploaded_or_started()
