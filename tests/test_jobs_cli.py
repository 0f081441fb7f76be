"""The jobs commands (`gpuc run`, `gpuc jobs`, `gpuc logs`, `gpuc cancel`) agree with each
other: the same refusal of a stack without a stack file, of the data and inference stacks, of a
job that does not exist; --json on each, camelCase keys, errors as outcome.report's document."""

from __future__ import annotations

import json
import re

import boto3
import pytest
from conftest import stack_names
from moto import mock_aws
from test_jobs import capture_sends, cluster_key, nodes

from gpu_cluster.components.names import job_parameter
from gpu_cluster.infra import cli
from gpu_cluster.infra.aws.jobs import JobSpec
from gpu_cluster.infra.outcome import INPUT

REGION = "us-east-1"
TRAIN_IDS = stack_names("train", REGION)  # the program's and gpuc's names of stack train
# each jobs command, with what it needs besides --stack
COMMANDS = {
    "run": ["--watch", "0", "--", "python", "train.py"],
    "jobs": [],
    "logs": ["--job", "pretrain"],
    "cancel": ["--job", "pretrain"],
}
JOB_COMMANDS = {  # the ones that name a job
    "jobs": ["--job"],
    "logs": ["--job"],
    "cancel": ["--job"],
}
CAMEL = re.compile(r"^[a-z][a-zA-Z0-9]*$")


def gpuc(capsys, command: str, stack: str, *extra: str) -> tuple[int, str, str]:
    args = COMMANDS[command]
    options = [a for a in args if a not in ("--", "python", "train.py")]
    trailer = args[len(options) :]
    code = cli.main([command, "--stack", stack, *options, *extra, *trailer])
    out, err = capsys.readouterr()
    return code, out, err


def message(out: str, err: str) -> str:
    """The error's message, from stderr (text) or the JSON document on stdout (--json)."""
    if out.strip().startswith("{"):
        return json.loads(out)["error"]["message"]
    assert err.startswith("error: "), err
    return err.removeprefix("error: ").strip()


def stored_job(name: str = "pretrain", cluster: str = "train") -> JobSpec:
    spec = JobSpec(name, ["python", "train.py"], created="2026-12-01T12:00:00Z", run="r" * 12)
    boto3.client("ssm", region_name=REGION).put_parameter(
        Name=job_parameter(stack_names(cluster), name), Value=spec.to_json(), Type="String"
    )
    return spec


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_misspelt_stack_gets_the_same_did_you_mean_from_every_jobs_command(capsys, as_json):
    extra = ["--json"] if as_json else []
    seen = {}
    for command in COMMANDS:
        code, out, err = gpuc(capsys, command, "trian", *extra)
        assert code == INPUT, (command, out, err)
        seen[command] = message(out, err)
    (text,) = set(seen.values())  # one message, word for word
    assert "no stack 'trian'" in text and "did you mean 'train'?" in text
    assert "stacks: data, dev, experiment, inference, train" in text


@pytest.mark.parametrize(
    ("stack", "says"),
    [
        ("data", "is the data stack"),
        ("inference", "has role 'inference': its nodes serve a model"),
    ],
)
def test_a_stack_that_runs_no_jobs_is_refused_with_one_message_by_every_command(
    capsys, stack, says
):
    seen = {}
    for command in COMMANDS:
        code, out, err = gpuc(capsys, command, stack)
        assert code == INPUT, (command, err)
        seen[command] = message(out, err)
    (text,) = set(seen.values())
    assert says in text
    assert "jobs run on the training stacks: dev, experiment, train" in text


@mock_aws
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_a_job_that_does_not_exist_gets_one_message_from_jobs_logs_and_cancel(capsys, as_json):
    stored_job("pretrain")
    stored_job("eval")
    extra = ["--json"] if as_json else []
    seen = {}
    for command in JOB_COMMANDS:
        code = cli.main([command, "--stack", "train", "--job", "pretrian", *extra])
        out, err = capsys.readouterr()
        assert code == INPUT, (command, out, err)
        seen[command] = message(out, err)
        if as_json:
            (problem,) = json.loads(out)["error"]["problems"]
            assert problem["path"] == "--job" and problem["received"] == "pretrian"
            assert problem["allowed"] == "eval, pretrain"
    (text,) = set(seen.values())
    assert "stack 'train' has no job named 'pretrian'" in text
    assert "did you mean 'pretrain'?" in text and "its jobs: eval, pretrain" in text
    # nothing was cancelled on the way
    ssm = boto3.client("ssm", region_name=REGION)
    spec = ssm.get_parameter(Name=job_parameter(TRAIN_IDS, "pretrain"))["Parameter"]["Value"]
    assert json.loads(spec)["state"] == "active"


@mock_aws
def test_a_stack_without_jobs_says_so_for_a_missing_job(capsys):
    assert cli.main(["logs", "--stack", "train", "--job", "x"]) == INPUT
    assert "has no job named 'x': it has no jobs" in capsys.readouterr().err


def camel_keys(document: dict, where: str) -> None:
    bad = [key for key in document if not CAMEL.match(key)]
    assert not bad, (where, bad)


@mock_aws
def test_every_jobs_command_that_prints_a_result_has_json_in_camel_case(capsys, monkeypatch):
    ours = nodes("train", 2)
    cluster_key("train")
    capture_sends(monkeypatch)
    argv = ["run", "--stack", "train", "--json", "--watch", "0", "--name", "pretrain"]
    assert cli.main([*argv, "--max-restarts", "2", "--", "python", "train.py"]) == 0
    started = json.loads(capsys.readouterr().out)
    camel_keys(started, "run")
    camel_keys(started["spec"], "run.spec")
    assert started["spec"]["maxRestarts"] == 2 and sorted(started["nodes"]) == ours

    assert cli.main(["jobs", "--stack", "train", "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    camel_keys(listed, "jobs")
    assert listed["name"] == "pretrain" and listed["nodesAtStart"] == 2

    assert cli.main(["jobs", "--stack", "train", "--job", "pretrain", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one == listed  # one object, not a list

    logs = boto3.client("logs", region_name=REGION)
    logs.create_log_group(logGroupName="/gpu-cluster/train-jobs")
    logs.create_log_stream(logGroupName="/gpu-cluster/train-jobs", logStreamName=ours[0])
    import time

    now = int(time.time() * 1000)
    logs.put_log_events(
        logGroupName="/gpu-cluster/train-jobs",
        logStreamName=ours[0],
        logEvents=[{"timestamp": now, "message": "[pretrain] step 1"}],
    )
    assert cli.main(["logs", "--stack", "train", "--job", "pretrain", "--json"]) == 0
    (line,) = [json.loads(text) for text in capsys.readouterr().out.splitlines()]
    camel_keys(line, "logs")
    assert line == {"timestamp": now, "node": ours[0], "text": "step 1"}

    assert cli.main(["cancel", "--stack", "train", "--job", "pretrain", "--json"]) == 0
    cancelled = json.loads(capsys.readouterr().out)
    camel_keys(cancelled, "cancel")
    assert cancelled == {"job": "pretrain", "stack": "train", "state": "cancelled", "nodes": ours}


@mock_aws
def test_a_node_s_setup_or_pull_failure_is_shown_under_its_node_and_unchanged_in_json(capsys):
    ours = nodes("train", 2)
    spec = stored_job("pretrain")
    detail = (
        "setup failed (exit 1): ERROR: Could not find a version that satisfies torch==9.9\n"
        "ERROR: No matching distribution found for torch==9.9"
    )
    ssm = boto3.client("ssm", region_name=REGION)
    for node, report in (
        (ours[0], {"state": "failed", "detail": detail}),
        (ours[1], {"state": "failed", "detail": "image pull failed (exit 1): manifest unknown"}),
    ):
        ssm.put_parameter(
            Name=f"{job_parameter(TRAIN_IDS, 'pretrain')}/nodes/{node}",
            Value=json.dumps({**report, "run": spec.run, "updated": "2026-12-01T12:01:00Z"}),
            Type="String",
        )
    assert cli.main(["jobs", "--stack", "train"]) == 0
    out = capsys.readouterr().out.splitlines()
    first = next(i for i, line in enumerate(out) if ours[0] in line)
    assert "failed (setup failed (exit 1): ERROR: Could not find a version" in out[first]
    assert out[first + 1] == "        ERROR: No matching distribution found for torch==9.9"
    assert any(ours[1] in line and "image pull failed (exit 1)" in line for line in out)
    assert cli.main(["jobs", "--stack", "train", "--json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)
    assert job["nodes"][ours[0]]["detail"] == detail


def test_jobs_help_says_a_flag_wins_over_the_job_file(capsys):
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "a flag given on the command line wins over the file's setting" in text
    for flag in ("--workdir", "--setup", "--image", "--file"):
        assert flag in text
