"""Stacks past what one AWS request takes: `gpuc run`, `gpuc cancel` and the reachability check
send their ids in batches of the service model's max (infra/aws/batches.py), keep every
batch's answer and report the batch that failed. tests/botocore_limits.py refuses a request
over the model's max, as AWS does (SendCommand InstanceIds: 50; DescribeInstanceInformation
filter values: 100)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import ANY, Stubber
from conftest import stack_names
from moto import mock_aws
from test_jobs import capture_sends, cluster_key, nodes

from gpu_cluster.components.names import job_parameter
from gpu_cluster.infra import cli
from gpu_cluster.infra.aws.batches import chunks
from gpu_cluster.infra.aws.jobs import JobSpec, cancel_job, run_job, unreachable, watch_start
from gpu_cluster.infra.errors import AwsError

REGION = "us-east-1"
TRAIN_IDS = stack_names("train", REGION)  # the program's and gpuc's names of stack train


def test_chunks_keeps_every_item_in_order_in_batches_of_at_most_the_size():
    assert list(chunks(list(range(7)), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(chunks([], 50)) == []
    assert list(chunks(list(range(50)), 50)) == [list(range(50))]
    with pytest.raises(ValueError):
        list(chunks([1], 0))


@pytest.mark.parametrize("count,batches", [(60, [50, 10]), (120, [50, 50, 20])])
@mock_aws
def test_run_and_cancel_reach_every_node_of_a_stack_past_fifty(capsys, monkeypatch, count, batches):
    ours = nodes("train", count)
    cluster_key("train")
    sends = capture_sends(monkeypatch)
    argv = ["run", "--stack", "train", "--json", "--watch", "0", "--", "python", "train.py"]
    assert cli.main(argv) == 0, capsys.readouterr()
    started = json.loads(capsys.readouterr().out)
    assert started["nodes"] == ours
    assert [len(sent["InstanceIds"]) for sent in sends] == batches
    assert sorted(i for sent in sends for i in sent["InstanceIds"]) == ours  # each node once
    assert len(set(started["commandIds"])) == len(batches)
    assert started["commandId"] == started["commandIds"][0]
    spec = json.loads(
        boto3.client("ssm", region_name=REGION).get_parameter(
            Name=job_parameter(TRAIN_IDS, "train"), WithDecryption=True
        )["Parameter"]["Value"]
    )
    assert spec["nodes"] == count
    sends.clear()
    assert cli.main(["cancel", "--stack", "train", "--job", "train", "--json"]) == 0
    cancelled = json.loads(capsys.readouterr().out)
    assert cancelled["nodes"] == ours
    assert [len(sent["InstanceIds"]) for sent in sends] == batches
    assert all(s["Parameters"]["commands"][0].endswith("stop train") for s in sends)
    assert sorted(i for sent in sends for i in sent["InstanceIds"]) == ours


def ids(count: int) -> list[str]:
    return [f"i-{n:017x}" for n in range(1, count + 1)]


def offline_client() -> tuple:
    ssm = boto3.client("ssm", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    return ssm, Stubber(ssm)


def information(online: list[str]) -> dict:
    return {"InstanceInformationList": [{"InstanceId": i, "PingStatus": "Online"} for i in online]}


def test_the_reachability_check_asks_about_a_hundred_nodes_at_a_time():
    nodes_ = ids(230)
    ssm, stub = offline_client()
    offline = {nodes_[7], nodes_[150], nodes_[229]}  # one in each batch
    for batch in chunks(nodes_, 100):
        stub.add_response(
            "describe_instance_information",
            information([i for i in batch if i not in offline]),
            {"Filters": [{"Key": "InstanceIds", "Values": batch}]},
        )
    with stub:
        assert unreachable(ssm, nodes_) == sorted(offline)
        stub.assert_no_pending_responses()


def stub_run(monkeypatch, count: int):
    """run_job's clients for ``count`` running, online nodes; the stub for the sends."""
    from gpu_cluster.infra.aws import jobs as job_module
    from gpu_cluster.infra.aws.status import Node

    nodes_ = ids(count)
    running = [
        Node(i, "train", "train", "p4d.24xlarge", "on-demand", "running", "a", 1, 1.0)
        for i in nodes_
    ]
    monkeypatch.setattr(job_module, "list_nodes", lambda *_: running)
    ssm, stub = offline_client()
    stub.add_client_error("get_parameter", "ParameterNotFound")
    for batch in chunks(nodes_, 100):
        stub.add_response("describe_instance_information", information(batch))
    stub.add_response("get_parameters_by_path", {"Parameters": []})
    stub.add_response("put_parameter", {"Version": 1})
    return ssm, stub, nodes_


def sent_to(batch: list[str], verb: str = "start") -> dict:
    return {
        "InstanceIds": batch,
        "DocumentName": "AWS-RunShellScript",
        "Comment": ANY,
        "Parameters": {
            "commands": [f"/usr/local/sbin/gpu-cluster-jobs {verb} pretrain"],
            **({"executionTimeout": ANY} if verb == "start" else {}),
        },
        **({"TimeoutSeconds": ANY} if verb == "start" else {}),
    }


def command(command_id: str) -> dict:
    return {"Command": {"CommandId": command_id}}


def test_a_batch_that_cannot_be_sent_undoes_the_batches_before_it(monkeypatch):
    """Nothing half-started: the job's spec is deleted (no node starts it later) and the
    nodes already told are told to stop; the error says how far it got."""
    ssm, stub, nodes_ = stub_run(monkeypatch, 60)
    first, second = chunks(nodes_, 50)
    stub.add_response("send_command", command("c" * 36), sent_to(first))
    stub.add_client_error("send_command", "ThrottlingException", expected_params=sent_to(second))
    stub.add_response("delete_parameter", {}, {"Name": job_parameter(TRAIN_IDS, "pretrain")})
    stub.add_response("send_command", command("d" * 36), sent_to(first, "stop"))
    with stub:
        with pytest.raises(AwsError, match="ssm:SendCommand") as raised:
            run_job(None, ssm, REGION, "train", TRAIN_IDS, "alias/x", "pretrain", ["python", "a"])
        stub.assert_no_pending_responses()
    message = str(raised.value)
    assert "ThrottlingException" in message and raised.value.code == "ThrottlingException"
    assert "reached 50 of 60 node(s)" in message and "told to stop it" in message


def test_a_run_past_a_hundred_nodes_keeps_the_command_of_every_batch(monkeypatch):
    ssm, stub, nodes_ = stub_run(monkeypatch, 120)
    batches = list(chunks(nodes_, 50))
    for n, batch in enumerate(batches):
        stub.add_response("send_command", command(f"{n}" * 36), sent_to(batch))
    with stub:
        spec, told, command_ids = run_job(
            None, ssm, REGION, "train", TRAIN_IDS, "alias/x", "pretrain", ["python", "a"]
        )
        stub.assert_no_pending_responses()
    assert told == nodes_ and spec.nodes == 120
    assert command_ids == ["0" * 36, "1" * 36, "2" * 36]


def test_cancel_tells_every_batch_and_names_the_nodes_a_failed_batch_did_not_reach(monkeypatch):
    from gpu_cluster.infra.aws import jobs as job_module
    from gpu_cluster.infra.aws.status import Node

    nodes_ = ids(120)
    running = [
        Node(i, "train", "train", "p4d.24xlarge", "on-demand", "running", "a", 1, 1.0)
        for i in nodes_
    ]
    monkeypatch.setattr(job_module, "list_nodes", lambda *_: running)
    ssm, stub = offline_client()
    spec = JobSpec("pretrain", ["python", "a"], created="2026-12-01T12:00:00Z", nodes=120)
    stub.add_response("get_parameter", {"Parameter": {"Value": spec.to_json()}})
    stub.add_response("put_parameter", {"Version": 2})
    first, second, third = chunks(nodes_, 50)
    stub.add_response("send_command", command("a" * 36), sent_to(first, "stop"))
    stub.add_client_error(
        "send_command", "InternalServerError", expected_params=sent_to(second, "stop")
    )
    stub.add_response("send_command", command("b" * 36), sent_to(third, "stop"))  # still sent
    with stub:
        with pytest.raises(AwsError, match="InternalServerError") as raised:
            cancel_job(None, ssm, REGION, "train", TRAIN_IDS, "alias/x", "pretrain")
        stub.assert_no_pending_responses()
    message = str(raised.value)
    assert "the stop did not reach 50 of 120 node(s)" in message
    assert second[0] in message and first[0] not in message and third[0] not in message
    assert "gpuc cancel --stack train --job pretrain" in message  # the way to try again


def test_the_start_watch_reads_the_invocations_of_every_batchs_command():
    ssm, stub = offline_client()
    nodes_ = ids(60)
    for command_id, failed in (("a" * 36, nodes_[3]), ("b" * 36, nodes_[55])):
        stub.add_response(
            "list_command_invocations",
            {
                "CommandInvocations": [
                    {"InstanceId": failed, "Status": "Failed", "StatusDetails": "Undeliverable"}
                ]
            },
            {"CommandId": command_id, "Details": True},
        )
    stub.add_response("get_parameters_by_path", {"Parameters": []})
    spec = JobSpec("pretrain", ["python", "a"], created="2026-12-01T12:00:00Z", nodes=60)
    with stub:
        check = watch_start(ssm, TRAIN_IDS, spec, ["a" * 36, "b" * 36], nodes_, 0,
                            sleep=lambda _: None, clock=lambda: 0.0)  # fmt: skip
    assert check.not_started == {nodes_[3]: "Undeliverable", nodes_[55]: "Undeliverable"}
