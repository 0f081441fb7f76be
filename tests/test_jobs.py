"""`gpuc run`, `gpuc jobs`, `gpuc cancel` against moto (and botocore's Stubber for the SSM
calls moto lacks), and the node side's job unit in the boot harness."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time

import boto3
import pytest
from botocore.stub import Stubber
from conftest import TRAIN_LIKE, plan_config, stack_names
from moto import mock_aws

from gpu_cluster.components.names import job_parameter, jobs_log_group, key_alias
from gpu_cluster.infra import cli
from gpu_cluster.infra.aws.job_command import start_failure
from gpu_cluster.infra.aws.jobs import (
    JobError,
    JobSpec,
    StartCheck,
    parse_env,
    run_job,
    slow_network_why,
    watch_start,
)

REGION = "us-east-1"
TRAIN_IDS = stack_names("train", REGION)  # the program's and gpuc's names of stack train


def tagged(stack: str) -> list[dict]:
    tags = [
        {"Key": "managed-by", "Value": "gpu-cluster"},
        {"Key": "gpu-cluster:stack", "Value": stack},
        {"Key": "gpu-cluster:name", "Value": stack},
    ]
    return [{"ResourceType": "instance", "Tags": tags}]


def nodes(stack: str, count: int) -> list[str]:
    ec2 = boto3.client("ec2", region_name=REGION)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    started = ec2.run_instances(
        ImageId=image,
        InstanceType="p4d.24xlarge",
        MinCount=count,
        MaxCount=count,
        TagSpecifications=tagged(stack),
    )
    return sorted(i["InstanceId"] for i in started["Instances"])


def cluster_key(cluster: str) -> None:
    kms = boto3.client("kms", region_name=REGION)
    key = kms.create_key()["KeyMetadata"]["KeyId"]
    kms.create_alias(AliasName=key_alias(stack_names(cluster)), TargetKeyId=key)


def capture_sends(monkeypatch) -> list[dict]:
    """What SendCommand was asked, as AWS receives it (moto's list_commands reports more
    instances than were named)."""
    from gpu_cluster.infra.aws import job_command

    sent: list[dict] = []

    def clients(region: str):
        ec2 = boto3.client("ec2", region_name=region)
        ssm = boto3.client("ssm", region_name=region)
        ssm.meta.events.register(
            "provide-client-params.ssm.SendCommand", lambda params, **_: sent.append(params)
        )
        return ec2, ssm

    monkeypatch.setattr(job_command, "_clients", clients)
    return sent


@mock_aws
def test_run_sends_the_job_to_every_running_node_of_the_stack_and_no_other(capsys, monkeypatch):
    ours, theirs = nodes("train", 4), nodes("inference", 2)
    cluster_key("train")
    sends = capture_sends(monkeypatch)
    argv = ["run", "--stack", "train", "--json", "--watch", "0", "--", "python", "train.py"]
    argv += ["--epochs", "3"]
    assert cli.main(argv) == 0, capsys.readouterr()
    started = json.loads(capsys.readouterr().out)
    assert started["job"] == "train" and started["nodes"] == ours
    assert not set(theirs) & set(started["nodes"])
    assert started["spec"]["command"] == ["python", "train.py", "--epochs", "3"]
    ssm = boto3.client("ssm", region_name=REGION)
    (sent,) = sends
    assert sorted(sent["InstanceIds"]) == ours and sent["DocumentName"] == "AWS-RunShellScript"
    assert sent["Parameters"]["commands"] == ["/usr/local/sbin/gpu-cluster-jobs start train"]
    stored = ssm.get_parameter(Name=job_parameter(TRAIN_IDS, "train"), WithDecryption=True)
    assert stored["Parameter"]["Type"] == "SecureString"
    assert json.loads(stored["Parameter"]["Value"])["state"] == "active"
    assert cli.main(["jobs", "--stack", "train", "--json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)
    assert job["name"] == "train" and job["state"] == "active" and job["nodes"] == {}
    # a node's report of this run shows up under the job; one of an earlier run does not
    run = json.loads(stored["Parameter"]["Value"])["run"]
    assert len(run) == 12
    for node, run_id in ((ours[0], run), (ours[1], "earlier-run")):
        ssm.put_parameter(
            Name=f"{job_parameter(TRAIN_IDS, 'train')}/nodes/{node}",
            Value=json.dumps(
                {"state": "running", "run": run_id, "updated": "2020-01-01T00:00:00Z"}
            ),
            Type="String",
        )
    assert cli.main(["jobs", "--stack", "train", "--json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)
    assert job["nodes"][ours[0]]["state"] == "running"


@mock_aws
def test_a_stack_with_no_running_node_starts_nothing_and_says_so(capsys):
    nodes("inference", 1)
    cluster_key("train")
    assert cli.main(["run", "--stack", "train", "--", "python", "train.py"]) == 4
    assert "has no running node" in capsys.readouterr().err
    ssm = boto3.client("ssm", region_name=REGION)
    assert ssm.get_parameters_by_path(Path="/gpu-cluster/train/jobs")["Parameters"] == []


def run_pretrain(script: str) -> int:
    """`gpuc run --name pretrain` of a script on train, without watching the start."""
    argv = ["run", "--stack", "train", "--name", "pretrain", "--watch", "0", "--", "python"]
    return cli.main([*argv, script])


@mock_aws
def test_a_job_name_already_running_is_refused(capsys):
    nodes("train", 2)
    cluster_key("train")
    assert run_pretrain("a.py") == 0
    capsys.readouterr()
    assert run_pretrain("b.py") == 3
    assert "already running" in capsys.readouterr().err
    assert cli.main(["cancel", "--stack", "train", "--job", "pretrain"]) == 0
    capsys.readouterr()
    # cancelled: the name is free again, and a node that boots later does not start it
    ssm = boto3.client("ssm", region_name=REGION)
    stored = ssm.get_parameter(Name=job_parameter(TRAIN_IDS, "pretrain"), WithDecryption=True)
    assert json.loads(stored["Parameter"]["Value"])["state"] == "cancelled"
    assert run_pretrain("b.py") == 0


@mock_aws
def test_bad_requests_are_messages(capsys):
    nodes("train", 1)
    assert cli.main(["run", "--stack", "train", "--name", "Bad Name", "--", "python", "a.py"]) == 2
    assert "a job name is" in capsys.readouterr().err
    assert cli.main(["run", "--stack", "train", "--"]) == 2
    assert "give the command after --" in capsys.readouterr().err
    assert cli.main(["cancel", "--stack", "train", "--job", "nope"]) == 3
    assert "has no job named 'nope'" in capsys.readouterr().err


def stubbed_run(monkeypatch, running: list[str], online: list[str]):
    """Offline clients for run_job: these nodes running, these online for SSM (moto has no
    DescribeInstanceInformation), no job of that name yet; the stub for more answers."""
    from gpu_cluster.infra.aws import jobs as job_module
    from gpu_cluster.infra.aws.status import Node

    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    ssm = boto3.client("ssm", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    nodes_ = [
        Node(i, "train", "train", "p4d.24xlarge", "on-demand", "running", "a", 1, 1.0)
        for i in running
    ]
    monkeypatch.setattr(job_module, "list_nodes", lambda *_: nodes_)
    stub = Stubber(ssm)
    stub.add_client_error("get_parameter", "ParameterNotFound")
    stub.add_response(
        "describe_instance_information",
        {"InstanceInformationList": [{"InstanceId": i, "PingStatus": "Online"} for i in online]},
    )
    stub.add_response("get_parameters_by_path", {"Parameters": []})  # the cluster's jobs
    return ec2, ssm, stub


def test_a_node_ssm_cannot_reach_means_nothing_is_started(monkeypatch):
    ec2, ssm, stub = stubbed_run(monkeypatch, ["i-01", "i-02"], online=["i-01"])
    with stub:
        with pytest.raises(JobError, match="i-02 of stack 'train' are not reachable by SSM"):
            run_job(ec2, ssm, REGION, "train", TRAIN_IDS, "alias/x", "pretrain", ["python", "a.py"])
        # no PutParameter, no SendCommand (the cluster's jobs, for a free port, not read)
        assert stub._queue and stub._queue[0]["operation_name"] == "GetParametersByPath"


def test_a_failed_send_leaves_no_job_behind(monkeypatch):
    from gpu_cluster.infra.errors import AwsError

    node = "i-0123456789abcdef0"  # an id SendCommand takes (its model's pattern)
    ec2, ssm, stub = stubbed_run(monkeypatch, [node], online=[node])
    stub.add_response("put_parameter", {"Version": 1})
    stub.add_client_error("send_command", "AccessDeniedException")
    stub.add_response("delete_parameter", {}, {"Name": job_parameter(TRAIN_IDS, "pretrain")})
    with stub:
        with pytest.raises(AwsError, match="ssm:SendCommand"):
            run_job(ec2, ssm, REGION, "train", TRAIN_IDS, "alias/x", "pretrain", ["python", "a.py"])
        stub.assert_no_pending_responses()


COMMAND_ID = "0b5b1e2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b"


def started_spec(created: str = "2026-12-01T12:00:00Z") -> JobSpec:
    return JobSpec("pretrain", ["python", "a.py"], created=created, nodes=2)


def report_parameter(node: str, state: str, updated: str, detail: str = "") -> dict:
    value = {"state": state, "detail": detail, "restarts": 0, "updated": updated}
    return {
        "Name": f"{job_parameter(TRAIN_IDS, 'pretrain')}/nodes/{node}",
        "Type": "String",
        "Value": json.dumps(value),
    }


def test_a_job_that_exits_at_once_on_every_node_is_reported_node_by_node():
    ssm = boto3.client("ssm", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ssm)
    # i-01 could not start it (its start command failed); i-02 ran it and it failed; a report
    # from an earlier run under the same name is not this run's
    stub.add_response(
        "list_command_invocations",
        {
            "CommandInvocations": [
                {
                    "InstanceId": "i-01",
                    "Status": "Failed",
                    "StatusDetails": "Failed",
                    "CommandPlugins": [
                        {
                            "Name": "aws:runShellScript",
                            "Output": "gpu-cluster-jobs: cannot read job pretrain",
                        }
                    ],
                },
                {"InstanceId": "i-02", "Status": "Success", "StatusDetails": "Success"},
            ]
        },
        {"CommandId": COMMAND_ID, "Details": True},
    )
    stub.add_response(
        "get_parameters_by_path",
        {
            "Parameters": [
                report_parameter("i-02", "failed", "2026-12-01T12:00:07Z", "exit 1"),
                report_parameter("i-03", "failed", "2026-11-30T09:00:00Z", "exit 1"),
            ]
        },
    )
    with stub:
        check = watch_start(ssm, TRAIN_IDS, started_spec(), COMMAND_ID, ["i-01", "i-02"], 30,
                            sleep=lambda _: None)  # fmt: skip
    assert check.not_started == {"i-01": "gpu-cluster-jobs: cannot read job pretrain"}
    assert check.failed == {"i-02": "exit 1"} and check.all_failed(2)
    message = start_failure("train", "pretrain", check)
    assert "i-01: could not start it: gpu-cluster-jobs: cannot read job pretrain" in message
    assert "i-02: exit 1" in message and "i-03" not in message
    assert "gpuc logs --stack train --job pretrain" in message


def test_a_job_still_running_at_the_end_of_the_watch_is_started():
    ssm = boto3.client("ssm", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ssm)
    clock = iter([0.0, 10.0, 31.0])
    for _ in range(2):
        stub.add_response("list_command_invocations", {"CommandInvocations": []})
        stub.add_response(
            "get_parameters_by_path",
            {"Parameters": [report_parameter("i-01", "running", "2026-12-01T12:00:03Z")]},
        )
    with stub:
        check = watch_start(ssm, TRAIN_IDS, started_spec(), COMMAND_ID, ["i-01", "i-02"], 30,
                            sleep=lambda _: None, clock=lambda: next(clock))  # fmt: skip
        stub.assert_no_pending_responses()  # polled until the deadline, not longer
    assert not check.all_failed(2) and check.reported == 1


@mock_aws
def test_gpuc_run_marks_a_job_that_failed_everywhere_failed_and_exits_non_zero(capsys, monkeypatch):
    from gpu_cluster.infra.aws import job_command

    ours = nodes("train", 2)
    cluster_key("train")
    capture_sends(monkeypatch)
    failed = StartCheck({}, {i: "exit 2" for i in ours}, 2)
    monkeypatch.setattr(job_command, "watch_start", lambda *_: failed)
    argv = ["run", "--stack", "train", "--env", "EPOCHS=3", "--", "python", "train.py"]
    assert cli.main(argv) == 3
    err = capsys.readouterr().err
    assert "did not keep running on any node" in err and "exit 2" in err
    stored = boto3.client("ssm", region_name=REGION).get_parameter(
        Name=job_parameter(TRAIN_IDS, "train"), WithDecryption=True
    )
    spec = json.loads(stored["Parameter"]["Value"])
    assert spec["state"] == "failed" and spec["env"] == {"EPOCHS": "3"}  # no node starts it


def test_a_bad_env_pair_is_a_usage_error(capsys):
    assert cli.main(["run", "--stack", "train", "--env", "1BAD=x", "--", "python", "a.py"]) == 2
    assert "--env '1BAD=x'" in capsys.readouterr().err
    assert parse_env(["A=b=c", "EMPTY="]) == {"A": "b=c", "EMPTY": ""}
    assert parse_env(["GPUC_ALLOW_SLOW_NETWORK=1"]) == {"GPUC_ALLOW_SLOW_NETWORK": "1"}
    # the job's shell reads these before torchrun: the node's own are refused, named
    for name in ("CLUSTER", "REGION", "PATH", "AWS_REGION", "GPUC_JOB", "TORCHELASTIC_RUN_ID"):
        with pytest.raises(JobError, match=f"--env {name}: the node sets {name} itself"):
            parse_env([f"{name}=x"])
    with pytest.raises(JobError, match="upper-case"):
        parse_env(["command=rm"])


def test_every_variable_a_training_node_sets_is_refused_to_env():
    from gpu_cluster.components.jobs import NODE_ENV_NAMES
    from gpu_cluster.components.user_data import render_user_data

    boot = replace(TRAIN, spot=True, lustre_target="fs@tcp:/x", secrets_path="/g/s", stack="s")
    script = render_user_data(boot)
    env = script.split("cluster.env\" <<'ENV'\n", 1)[1].split("\nENV\n", 1)[0]
    keys = {line.split("=", 1)[0] for line in env.splitlines()}
    assert keys and keys <= NODE_ENV_NAMES, keys - NODE_ENV_NAMES
    for key in keys:
        with pytest.raises(JobError):
            parse_env([f"{key}=x"])


# --- the node side (boot/gpu-cluster-jobs.sh in the boot harness) ------------------------

from dataclasses import replace  # noqa: E402

from boot_harness import eventually  # noqa: E402
from test_boot_harness import ONE_NODE, TRAIN  # noqa: E402
from test_boot_harness import make_node as make_node  # noqa: E402 (the fixture)


def job_spec(state: str = "active") -> str:
    return json.dumps(
        {
            "name": "pretrain",
            "command": ["python", "train.py", "--epochs", "3", "--note", "two words"],
            "maxRestarts": 5,
            "env": {},
            "state": state,
            "created": "2026-12-01T12:00:00Z",
            "nodes": 4,
        }
    )


def job_node(make_node, state: str = "active"):
    listing = "/gpu-cluster/train/jobs/pretrain\t/gpu-cluster/train/jobs/pretrain/nodes/i-0aaa"
    node = make_node(
        replace(TRAIN, jobs_log_group=jobs_log_group(TRAIN_IDS)),
        aws=[
            ("get-parameters-by-path", listing),
            ("ssm get-parameter", job_spec(state)),
            ("put-parameter", ""),
            *ONE_NODE,
        ],
    )
    torchrun = node.harness / "bin/torchrun"
    torchrun.write_text(
        '#!/bin/bash\nprintf "%s\\n" "$@" > "$HARNESS/torchrun-args"\necho "step 1 loss 2.5"\n'
    )
    torchrun.chmod(0o755)
    node.install_only()
    return node


def reports(node) -> list[str]:
    return [
        json.loads(call[call.index("--value") + 1])["state"]
        for call in node.aws_calls()
        if "put-parameter" in call
    ]


def booted(node, wait: bool = True) -> None:
    """The boot steps in order, on the node installed by job_node; then (``wait``) until the
    job's unit has stopped."""
    for step, *args in (
        ("gpu-cluster-health",),
        ("gpu-cluster-nodes",),
        ("gpu-cluster-jobs", "boot"),
    ):
        done = node.step(step, *args)
        assert done.returncode == 0, (step, done.stderr)
    if wait:
        node.wait_unit("gpu-cluster-job@pretrain", "inactive", "failed")


def test_a_booting_healthy_node_starts_the_stacks_active_jobs(make_node):
    node = job_node(make_node)
    booted(node)
    assert node.read("/etc/gpu-cluster/health").startswith(("ok", "degraded"))
    args = (node.harness / "torchrun-args").read_text().splitlines()
    assert "--nnodes=1:4" in args and "--max-restarts=5" in args
    # torchrun starts the script with Python itself: `python` is not passed on
    assert args[-5:] == ["train.py", "--epochs", "3", "--note", "two words"]
    assert "python" not in args and "--no-python" not in args
    assert reports(node) == ["running", "done"]
    # the output, each line with the job's name, where the CloudWatch agent ships it from
    assert node.read("/var/log/gpu-cluster/jobs/pretrain.log") == "[pretrain] step 1 loss 2.5\n"
    spec = node.file("/etc/gpu-cluster/jobs/pretrain.json")
    assert oct(spec.stat().st_mode & 0o777) == "0o640"  # root and the job user only


def test_a_cancelled_job_is_not_started_at_boot(make_node):
    node = job_node(make_node, state="cancelled")
    booted(node)
    assert not (node.harness / "torchrun-args").exists()
    assert reports(node) == []


def test_no_job_starts_on_a_node_whose_health_check_failed(make_node):
    node = job_node(make_node)
    node.install_only()
    node.file("/etc/gpu-cluster/health").write_text("failed:gpu:count\n")
    node.file("/run/gpu-cluster").mkdir(parents=True, exist_ok=True)
    node.file("/run/gpu-cluster/health-checked").write_text("")
    node.file("/etc/gpu-cluster/torchrun.env").write_text("NNODES=4\n")
    done = node.step("gpu-cluster-jobs", "boot")
    assert done.returncode == 0 and "has not passed" in done.stderr
    assert not (node.harness / "torchrun-args").exists()


def test_a_job_that_fails_is_reported_failed_with_its_exit_code(make_node):
    node = job_node(make_node)
    (node.harness / "bin/torchrun").write_text("#!/bin/bash\nexit 7\n")
    booted(node)
    assert reports(node) == ["running", "failed"]
    details = [
        json.loads(call[call.index("--value") + 1]).get("detail")
        for call in node.aws_calls()
        if "put-parameter" in call
    ]
    assert details[-1] == "exit 7"


# NCCL_DEBUG=INFO lines as NCCL and aws-ofi-nccl print them (NVIDIA/nccl src/init.cc "Using
# network %s", src/transport/net_socket.cc "NET/Socket : Using%s"; aws-ofi-nccl
# src/nccl_ofi_net.cpp "Selected provider is %s, fabric is %s (found %d nics)", prefixed
# "NET/OFI "), each after NCCL's "host:pid:tid [device] NCCL INFO " header.
NCCL_HEAD = "ip-10-42-0-17:4242:4301 [0] NCCL INFO "
EFA_LINES = [
    "NCCL version 2.27.5+cuda12.9",
    "NET/OFI Initializing aws-ofi-nccl 1.16.3",
    "NET/OFI Selected provider is efa, fabric is efa-direct (found {nics} nics)",
    "Using network Libfabric",
]
SOCKET_LINES = [
    "NCCL version 2.27.5+cuda12.9",
    "NET/Plugin: Could not find: libnccl-net.so",
    "NET/Socket : Using [0]enp71s0:10.42.0.17<0>",
    "Using network Socket",
]


def nccl_torchrun(node, lines: list[str]) -> None:
    """A torchrun whose worker prints NCCL's init lines, then trains until stopped."""
    printed = "\n".join(f'echo "{NCCL_HEAD}{line}"' for line in lines)
    (node.harness / "bin/torchrun").write_text(
        "#!/bin/bash\n"
        'echo "NCCL_DEBUG=$NCCL_DEBUG" > "$HARNESS/nccl-debug"\n'
        f"{printed}\n"
        "trap 'echo stopped > \"$HARNESS/torchrun-stopped\"; exit 143' TERM\n"
        'for step in $(seq 1 12); do echo "step $step loss 2.5"; sleep 0.25; done\n'
    )


def job_detail(node) -> str:
    calls = [c for c in node.aws_calls() if "put-parameter" in c]
    return json.loads(calls[-1][calls[-1].index("--value") + 1]).get("detail", "")


@pytest.mark.parametrize(
    ("lines", "why"),
    [
        (SOCKET_LINES, "NCCL uses TCP sockets, not EFA"),
        ([line.format(nics=1) for line in EFA_LINES], "NCCL found 1 of 4 EFA NICs"),
        (
            [
                line.replace("efa, fabric is efa-direct", "tcp, fabric is 10.42.0.0/16").format(
                    nics=2
                )
                for line in EFA_LINES
            ],
            "libfabric provider tcp, not efa",
        ),
    ],
    ids=["sockets", "one-of-four-rails", "tcp-provider"],
)
def test_a_job_on_a_slow_network_is_stopped_and_says_which_and_why(make_node, lines, why):
    node = job_node(make_node)  # p4d: 4 EFA interfaces
    nccl_torchrun(node, lines)
    booted(node)
    assert (node.harness / "nccl-debug").read_text() == "NCCL_DEBUG=INFO\n"
    assert (node.harness / "torchrun-stopped").exists()  # stopped at NCCL's init, not trained
    log = node.read("/var/log/gpu-cluster/jobs/pretrain.log")
    assert "step 12" not in log
    assert "[pretrain] gpu-cluster: stopped: " in log and why in log
    assert "GPUC_ALLOW_SLOW_NETWORK=1" in log
    assert reports(node) == ["running", "failed"]
    assert job_detail(node).startswith("slow network: ") and why in job_detail(node)
    # gpuc jobs says the cause and the fix the node has no room for
    assert "GPUC_ALLOW_SLOW_NETWORK=1" in slow_network_why(job_detail(node))
    assert slow_network_why("exit 1") == ""


def test_a_job_on_every_efa_interface_trains_on(make_node):
    node = job_node(make_node)
    nccl_torchrun(node, [line.format(nics=4) for line in EFA_LINES])
    booted(node)
    assert not (node.harness / "torchrun-stopped").exists()
    log = node.read("/var/log/gpu-cluster/jobs/pretrain.log")
    assert "[pretrain] step 12 loss 2.5" in log and "gpu-cluster:" not in log
    assert reports(node) == ["running", "done"]


def test_a_slow_network_the_user_accepts_only_warns(make_node):
    node = job_node(make_node)
    spec = json.loads(job_spec())
    spec["env"] = {"GPUC_ALLOW_SLOW_NETWORK": "1"}
    node.answer_aws(
        [
            ("get-parameters-by-path", "/gpu-cluster/train/jobs/pretrain"),
            ("ssm get-parameter", json.dumps(spec)),
            ("put-parameter", ""),
            *ONE_NODE,
        ]
    )
    nccl_torchrun(node, SOCKET_LINES)
    booted(node)
    log = node.read("/var/log/gpu-cluster/jobs/pretrain.log")
    assert "gpu-cluster: warning: slow network: NCCL uses TCP sockets, not EFA" in log
    assert "[pretrain] step 12 loss 2.5" in log and reports(node) == ["running", "done"]


def test_a_node_without_efa_is_not_checked(make_node):
    node = job_node(make_node)
    env_file = node.file("/etc/gpu-cluster/cluster.env")
    env_file.write_text(env_file.read_text().replace("EFA_INTERFACES=4", "EFA_INTERFACES=0"))
    nccl_torchrun(node, SOCKET_LINES)  # one g5 per node: sockets are all there is
    booted(node)
    assert reports(node) == ["running", "done"]


def test_a_node_that_cannot_list_the_jobs_fails_the_step_so_systemd_retries(make_node):
    node = job_node(make_node)
    node.answer_aws([("put-parameter", ""), *ONE_NODE], down=["get-parameters-by-path"])
    for step in ("gpu-cluster-health", "gpu-cluster-nodes"):
        assert node.step(step).returncode == 0
    assert node.step("gpu-cluster-jobs", "boot").returncode == 1
    unit = node.read("/etc/systemd/system/gpu-cluster-jobs.service")
    assert "Restart=on-failure" in unit and "RestartSec=120" in unit


def test_run_and_jobs_end_to_end_against_a_moto_server(moto_server):
    """`gpuc` as a subprocess, its clients pointed at the server by AWS_ENDPOINT_URL."""
    from conftest import gpuc_at

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_server)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ours = ec2.run_instances(
        ImageId=image, InstanceType="p4d.24xlarge", MinCount=2, MaxCount=2,
        TagSpecifications=tagged("train"),
    )["Instances"]  # fmt: skip
    ec2.run_instances(
        ImageId=image, InstanceType="g4dn.xlarge", MinCount=1, MaxCount=1,
        TagSpecifications=tagged("inference"),
    )  # fmt: skip
    kms = boto3.client("kms", region_name=REGION, endpoint_url=moto_server)
    key = kms.create_key()["KeyMetadata"]["KeyId"]
    kms.create_alias(AliasName=key_alias(TRAIN_IDS), TargetKeyId=key)

    def gpuc(*args: str):
        return gpuc_at(moto_server, *args)

    # the start is watched (a second): the emulator cannot list the command's invocations
    started = gpuc(
        "run", "--stack", "train", "--json", "--watch", "1", "--", "python", "train.py",
        "--epochs", "3",
    )  # fmt: skip
    assert started.returncode == 0, started.stderr
    assert sorted(json.loads(started.stdout)["nodes"]) == sorted(i["InstanceId"] for i in ours)
    listed = gpuc("jobs", "--stack", "train", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [job["name"] for job in json.loads(listed.stdout)] == ["train"]
    nothing = gpuc("run", "--stack", "dev", "--", "python", "train.py")
    assert nothing.returncode == 4 and "has no running node" in nothing.stderr


def test_the_cloudwatch_agent_ships_the_jobs_output_a_stream_per_node(make_node):
    node = job_node(make_node)
    assert node.step("gpu-cluster-gpu-metrics").returncode == 0
    config = json.loads(node.read("/opt/aws/amazon-cloudwatch-agent/etc/gpu-cluster.json"))
    (shipped,) = config["logs"]["logs_collected"]["files"]["collect_list"]
    assert shipped == {
        "file_path": "/var/log/gpu-cluster/jobs/*.log",
        "log_group_name": "/gpu-cluster/train-jobs",
        "log_stream_name": "{instance_id}",
    }


@mock_aws
def test_logs_interleave_every_nodes_output_of_one_job_by_time(capsys):
    import time

    logs = boto3.client("logs", region_name=REGION)
    group = jobs_log_group(TRAIN_IDS)
    now = int(time.time() * 1000)  # Logs refuses events older than 14 days
    boto3.client("ssm", region_name=REGION).put_parameter(  # the job exists (gpuc run)
        Name=job_parameter(TRAIN_IDS, "pretrain"), Value=started_spec().to_json(), Type="String"
    )
    logs.create_log_group(logGroupName=group)
    for node, events in {
        "i-0aaa": [
            (1000, "[pretrain] step 1"),
            (3000, "[other] unrelated"),
            (5000, "[pretrain] step 3"),
        ],
        "i-0bbb": [(2000, "[pretrain] step 2"), (4000, "[pretrain-b] not this job")],
    }.items():
        logs.create_log_stream(logGroupName=group, logStreamName=node)
        logs.put_log_events(
            logGroupName=group,
            logStreamName=node,
            logEvents=[{"timestamp": now + t, "message": m} for t, m in events],
        )
    assert cli.main(["logs", "--stack", "train", "--job", "pretrain"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "i-0aaa  step 1",
        "i-0bbb  step 2",
        "i-0aaa  step 3",
    ]
    assert cli.main(["logs", "--stack", "train", "--job", "pretrain", "--node", "i-0bbb"]) == 0
    assert capsys.readouterr().out.splitlines() == ["i-0bbb  step 2"]


WORKER = r"""
import os, signal, sys, time


out = sys.argv[1]
def got(*_):  # written whole, then named: the test never reads a half-written file
    open(out + "/usr1.tmp", "w").write("usr1")
    os.rename(out + "/usr1.tmp", out + "/usr1")
signal.signal(signal.SIGUSR1, got)
open(out + "/ready", "w").write(str(os.getpid()))
time.sleep(30)
"""


def test_the_schedules_checkpoint_command_reaches_the_training_workers(make_node, tmp_path):
    """Before the maximum lifetime (or a Capacity Block's end) stops the nodes, the stack's
    schedule sends this exact command: the notice lands in GPUC_CHECKPOINT_FILE and each
    worker that handles SIGUSR1 gets it."""
    plan = plan_config({**TRAIN_LIKE, "gpu-cluster:expiresAt": "2031-01-02T18:00:00Z"}, "train")
    (schedule,) = [s for s in plan.of_type("aws:scheduler/schedule:Schedule") if
                   s.name.endswith("expiry-checkpoint")]  # fmt: skip
    (command,) = json.loads(schedule.inputs["target"]["input"])["Parameters"]["commands"]
    program, *arguments = shlex.split(command)
    node = job_node(make_node)
    worker = subprocess.Popen(
        [sys.executable, "-c", WORKER, str(tmp_path)],
        env={**os.environ, "TORCHELASTIC_RUN_ID": "train"},
    )
    try:
        for _ in range(100):
            if (tmp_path / "ready").exists():
                break
            time.sleep(0.05)
        done = node.step(program.rsplit("/", 1)[1], *arguments)
        assert done.returncode == 0, done.stderr
        notice = json.loads(node.read("/run/gpu-cluster/checkpoint-now"))
        assert notice == {"action": "stop", "time": "2031-01-02T18:00:00Z", "reason": "expiresAt"}
        for _ in range(100):
            if (tmp_path / "usr1").exists():
                break
            time.sleep(0.05)
        assert (tmp_path / "usr1").read_text() == "usr1"
        assert worker.poll() is None  # handled, not killed
    finally:
        worker.kill()
        worker.wait()


def test_each_node_reports_how_often_torchrun_restarted_the_workers(make_node):
    node = job_node(make_node)
    # torchrun's agent restarting the workers twice within a second (torch elastic
    # agent/server/api.py, at LOGLEVEL=INFO), then finishing: fast restarts count too
    restart = "[default] Worker group FAILED. {left}/5 attempts left; will restart worker group"
    (node.harness / "bin/torchrun").write_text(
        "#!/bin/bash\n"
        'echo "LOGLEVEL=$LOGLEVEL" > "$HARNESS/loglevel"\n'
        f"echo 'I1201 12:00:01 torch/distributed/elastic/agent/server/api.py:944] "
        f"{restart.format(left=5)}' >&2\n"
        f"echo 'I1201 12:00:01 torch/distributed/elastic/agent/server/api.py:944] "
        f"{restart.format(left=4)}' >&2\n"
    )
    booted(node)
    reports = [
        json.loads(call[call.index("--value") + 1])
        for call in node.aws_calls()
        if "put-parameter" in call
    ]
    assert (node.harness / "loglevel").read_text() == "LOGLEVEL=INFO\n"
    assert [r["state"] for r in reports] == ["running", "done"]
    assert [r["restarts"] for r in reports] == [0, 2]


def test_the_node_drops_env_names_it_sets_itself(make_node):
    """A spec written around gpuc (by hand, an older gpuc): the node's own variables stay."""
    node = job_node(make_node)
    spec = json.loads(job_spec())
    spec["env"] = {"CLUSTER": "other", "command": "rm -rf /", "AWS_REGION": "x", "LR": "3e-4"}
    node.answer_aws(
        [
            ("get-parameters-by-path", "/gpu-cluster/train/jobs/pretrain"),
            ("ssm get-parameter", json.dumps(spec)),
            ("put-parameter", ""),
            *ONE_NODE,
        ]
    )
    (node.harness / "bin/torchrun").write_text(
        '#!/bin/bash\necho "$CLUSTER ${AWS_REGION:-unset} $LR" > "$HARNESS/seen"\n'
        'printf "%s\\n" "$@" > "$HARNESS/torchrun-args"\n'
    )
    booted(node)
    # CLUSTER is not the job's (cluster.env is not exported) and stays the node's own
    assert (node.harness / "seen").read_text() == " unset 3e-4\n"
    assert (node.harness / "torchrun-args").read_text().splitlines()[-5:] == [
        "train.py", "--epochs", "3", "--note", "two words",
    ]  # fmt: skip


def test_older_aws_ofi_nccl_lines_are_read_too(make_node):
    """aws-ofi-nccl before 1.14 printed "Selected Provider is efa (found N nics)"."""
    node = job_node(make_node)
    nccl_torchrun(
        node, ["NET/OFI Selected Provider is efa (found 2 nics)", "Using network AWS Libfabric"]
    )
    booted(node)
    assert "NCCL found 2 of 4 EFA NICs" in job_detail(node)


def test_stopping_the_unit_stops_torchrun_and_reports_stopped(make_node):
    """systemctl stop (a spot shutdown, the expiry, gpuc cancel): SIGTERM to gpu-cluster-jobs
    alone (KillMode=mixed), which reports at once, stops torchrun, keeps the output's last
    lines, and leaves the unit stopped, not failed."""
    node = job_node(make_node)
    unit = node.read("/etc/systemd/system/gpu-cluster-job@.service")
    assert "KillMode=mixed" in unit and "KillSignal=SIGTERM" in unit
    (node.harness / "bin/torchrun").write_text(
        "#!/bin/bash\n"
        "stop() { echo 'saving on SIGTERM'; /bin/sleep 1\n"  # a checkpoint takes its time
        '  echo stopped > "$HARNESS/torchrun-stopped"; exit 143; }\n'
        "trap stop TERM\n"
        'echo started > "$HARNESS/torchrun-started"\n'
        "while true; do sleep 0.1; done\n"
    )
    booted(node, wait=False)
    eventually(lambda: (node.harness / "torchrun-started").exists(), node.journal)
    assert node.step("gpu-cluster-jobs", "stop", "pretrain").returncode == 0
    assert node.unit_state("gpu-cluster-job@pretrain") == "inactive"  # not "failed"
    assert (node.harness / "torchrun-stopped").exists()
    assert reports(node)[-2:] == ["stopped", "cancelled"]
    assert "[pretrain] saving on SIGTERM" in node.read("/var/log/gpu-cluster/jobs/pretrain.log")


def test_no_job_starts_without_a_node_list_and_systemd_tries_again(make_node):
    """The first boot's wait for the gang ended without a node list (a partial gang stopped,
    EC2 down): the step fails, so its unit runs again in two minutes, and nothing started."""
    node = job_node(make_node)
    node.file("/etc/gpu-cluster/health").write_text("ok\n")
    node.file("/run/gpu-cluster").mkdir(parents=True, exist_ok=True)
    node.file("/run/gpu-cluster/health-checked").write_text("")
    done = node.step("gpu-cluster-jobs", "boot")
    assert done.returncode == 1 and "no node list" in done.stderr
    assert not (node.harness / "torchrun-args").exists() and reports(node) == []


@mock_aws
def test_gpuc_run_names_the_nodes_a_job_failed_on_while_the_others_run(capsys, monkeypatch):
    from gpu_cluster.infra.aws import job_command

    ours = nodes("train", 2)
    cluster_key("train")
    capture_sends(monkeypatch)
    partial = StartCheck({}, {ours[0]: "exit 1"}, 2)
    monkeypatch.setattr(job_command, "watch_start", lambda *_: partial)
    assert cli.main(["run", "--stack", "train", "--", "python", "train.py"]) == 0
    out, err = capsys.readouterr()
    assert "started on 2 node(s)" in out
    assert f"failed at once on some nodes:\n  {ours[0]}: exit 1" in err
    assert "marked failed" not in err
    stored = boto3.client("ssm", region_name=REGION).get_parameter(
        Name=job_parameter(TRAIN_IDS, "train"), WithDecryption=True
    )
    assert json.loads(stored["Parameter"]["Value"])["state"] == "active"  # elastic: it runs on


def test_a_watch_that_is_not_a_number_of_seconds_is_a_usage_error(capsys):
    for value in ("soon", "-1", "7200"):
        argv = ["run", "--stack", "train", "--watch", value, "--", "python", "a.py"]
        assert cli.main(argv) == 2, value
        assert "--watch must be" in capsys.readouterr().err


def test_a_process_left_holding_the_output_does_not_keep_the_job_running(make_node):
    """torchrun is done, but something it started still holds the job's output open: the job
    is reported done (the filter gets 10 s), and the leftover is stopped with the run."""
    node = job_node(make_node)
    (node.harness / "bin/torchrun").write_text(
        "#!/bin/bash\n(exec -a leftover-of-pretrain /bin/sleep 600) &\necho 'step 1 loss 2.5'\n"
    )
    booted(node)
    assert reports(node) == ["running", "done"]
    time.sleep(0.5)
    leftovers = subprocess.run(["pgrep", "-f", "leftover-of-pretrain"], capture_output=True)
    assert leftovers.stdout == b""


def test_python_options_reach_torchrun_as_it_takes_them(make_node):
    """`python -u` is what torchrun runs anyway; `-m` is its own option; others need the
    command as given."""
    node = job_node(make_node)
    for command, expected in (
        (["python", "-u", "train.py", "--epochs", "3"], ["train.py", "--epochs", "3"]),
        (["python3", "-m", "trainer.main"], ["-m", "trainer.main"]),
        (["python", "-O", "train.py"], ["--no-python", "python3", "-O", "train.py"]),
    ):
        spec = {**json.loads(job_spec()), "command": command}
        node.answer_aws(
            [
                ("get-parameters-by-path", "/gpu-cluster/train/jobs/pretrain"),
                ("ssm get-parameter", json.dumps(spec)),
                ("put-parameter", ""),
                *ONE_NODE,
            ]
        )
        node.file("/var/lib/gpu-cluster/jobs/pretrain.final").unlink(missing_ok=True)
        booted(node)
        args = (node.harness / "torchrun-args").read_text().splitlines()
        assert [a.rsplit("/", 1)[-1] if a.endswith("python3") else a for a in args][
            -len(expected) :
        ] == expected, args


def test_gpuc_run_does_not_start_a_job_on_a_node_whose_health_failed(make_node):
    node = job_node(make_node)
    node.file("/etc/gpu-cluster/health").write_text("failed:gpus:7/8\n")
    done = node.step("gpu-cluster-jobs", "start", "pretrain")
    assert done.returncode == 1 and "failed its health check" in done.stderr
    assert not (node.harness / "torchrun-args").exists()
