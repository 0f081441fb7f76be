"""`gpuc run`, `gpuc jobs`, `gpuc cancel` against moto (and botocore's Stubber for the SSM
calls moto lacks), and the node side's job unit in the boot harness."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from components.jobs import cluster_key_alias, job_parameter, jobs_log_group
from infra import cli
from infra.aws.jobs import JobError, run_job

REGION = "us-east-1"


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
    kms.create_alias(AliasName=cluster_key_alias(cluster), TargetKeyId=key)


def capture_sends(monkeypatch) -> list[dict]:
    """What SendCommand was asked, as AWS receives it (moto's list_commands reports more
    instances than were named)."""
    from infra.aws import job_command

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
    argv = ["run", "--stack", "train", "--json", "--", "python", "train.py", "--epochs", "3"]
    assert cli.main(argv) == 0, capsys.readouterr()
    started = json.loads(capsys.readouterr().out)
    assert started["job"] == "train" and started["nodes"] == ours
    assert not set(theirs) & set(started["nodes"])
    assert started["spec"]["command"] == ["python", "train.py", "--epochs", "3"]
    ssm = boto3.client("ssm", region_name=REGION)
    (sent,) = sends
    assert sorted(sent["InstanceIds"]) == ours and sent["DocumentName"] == "AWS-RunShellScript"
    assert sent["Parameters"]["commands"] == ["/usr/local/sbin/gpu-cluster-jobs start train"]
    stored = ssm.get_parameter(Name=job_parameter("train", "train"), WithDecryption=True)
    assert stored["Parameter"]["Type"] == "SecureString"
    assert json.loads(stored["Parameter"]["Value"])["state"] == "active"
    assert cli.main(["jobs", "--stack", "train", "--json"]) == 0
    (job,) = json.loads(capsys.readouterr().out)
    assert job["name"] == "train" and job["state"] == "active" and job["nodes"] == {}
    # a node's report shows up under the job
    ssm.put_parameter(
        Name=f"{job_parameter('train', 'train')}/nodes/{ours[0]}",
        Value=json.dumps({"state": "running", "updated": "2026-12-01T12:00:00Z"}),
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


@mock_aws
def test_a_job_name_already_running_is_refused(capsys):
    nodes("train", 2)
    cluster_key("train")
    assert cli.main(["run", "--stack", "train", "--name", "pretrain", "--", "python", "a.py"]) == 0
    capsys.readouterr()
    assert cli.main(["run", "--stack", "train", "--name", "pretrain", "--", "python", "b.py"]) == 3
    assert "already running" in capsys.readouterr().err
    assert cli.main(["cancel", "--stack", "train", "--job", "pretrain"]) == 0
    capsys.readouterr()
    # cancelled: the name is free again, and a node that boots later does not start it
    ssm = boto3.client("ssm", region_name=REGION)
    stored = ssm.get_parameter(Name=job_parameter("train", "pretrain"), WithDecryption=True)
    assert json.loads(stored["Parameter"]["Value"])["state"] == "cancelled"
    assert cli.main(["run", "--stack", "train", "--name", "pretrain", "--", "python", "b.py"]) == 0


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
    from infra.aws import jobs as job_module
    from infra.aws.status import Node

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
    return ec2, ssm, stub


def test_a_node_ssm_cannot_reach_means_nothing_is_started(monkeypatch):
    ec2, ssm, stub = stubbed_run(monkeypatch, ["i-01", "i-02"], online=["i-01"])
    with stub:
        with pytest.raises(JobError, match="i-02 of stack 'train' are not reachable by SSM"):
            run_job(ec2, ssm, REGION, "train", "train", "alias/x", "pretrain", ["python", "a.py"])
        stub.assert_no_pending_responses()  # no PutParameter, no SendCommand


def test_a_failed_send_leaves_no_job_behind(monkeypatch):
    from infra.errors import AwsError

    ec2, ssm, stub = stubbed_run(monkeypatch, ["i-01"], online=["i-01"])
    stub.add_response("put_parameter", {"Version": 1})
    stub.add_client_error("send_command", "AccessDeniedException")
    stub.add_response("delete_parameter", {}, {"Name": job_parameter("train", "pretrain")})
    with stub:
        with pytest.raises(AwsError, match="ssm:SendCommand"):
            run_job(ec2, ssm, REGION, "train", "train", "alias/x", "pretrain", ["python", "a.py"])
        stub.assert_no_pending_responses()


# --- the node side (boot/gpu-cluster-jobs.sh in the boot harness) ------------------------

from dataclasses import replace  # noqa: E402

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
        replace(TRAIN, jobs_log_group=jobs_log_group("train")),
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
    node.install_only()  # the job user of this machine (the AMI's is ubuntu)
    env_file = node.file("/etc/gpu-cluster/cluster.env")
    env_file.write_text(env_file.read_text().replace("JOB_USER=ubuntu", "JOB_USER=nobody"))
    return node


def reports(node) -> list[str]:
    return [
        json.loads(call[call.index("--value") + 1])["state"]
        for call in node.aws_calls()
        if "put-parameter" in call
    ]


def booted(node) -> None:
    """The boot steps in order, on the node installed by job_node."""
    for step, *args in (
        ("gpu-cluster-health",),
        ("gpu-cluster-nodes",),
        ("gpu-cluster-jobs", "boot"),
    ):
        done = node.step(step, *args)
        assert done.returncode == 0, (step, done.stderr)


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
    kms.create_alias(AliasName=cluster_key_alias("train"), TargetKeyId=key)

    def gpuc(*args: str):
        return gpuc_at(moto_server, *args)

    started = gpuc("run", "--stack", "train", "--json", "--", "python", "train.py", "--epochs", "3")
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
    group = jobs_log_group("train")
    now = int(time.time() * 1000)  # Logs refuses events older than 14 days
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
