"""`gpuc status` against moto: the project's running nodes by tag, their burn, and nodes that
no stack file owns."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from gpu_cluster.infra.aws.status import list_nodes, orphans
from gpu_cluster.infra.cli import main
from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly


def launch(ec2, kind: str, stack: str, managed: bool = True) -> str:
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    tags = [
        {"Key": "gpu-cluster:name", "Value": stack},
        {"Key": "gpu-cluster:stack", "Value": stack},
    ]
    if managed:
        tags.append({"Key": "managed-by", "Value": "gpu-cluster"})
    result = ec2.run_instances(
        ImageId=image,
        InstanceType=kind,
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": "us-east-1a"},
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    return result["Instances"][0]["InstanceId"]


@mock_aws
def test_status_lists_the_projects_nodes_with_their_burn():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    trained = [launch(ec2, "p4d.24xlarge", "train") for _ in range(2)]
    forgotten = launch(ec2, "g5.xlarge", "old-experiment")
    launch(ec2, "g5.xlarge", "someone-else", managed=False)  # not this project's
    later = datetime.now(UTC) + timedelta(hours=2)
    nodes = list_nodes(ec2, "us-east-1", now=later)
    assert {n.instance_id for n in nodes} == {*trained, forgotten}
    p4d = next(n for n in nodes if n.instance_type == "p4d.24xlarge")
    assert p4d.usd_per_hour == pytest.approx(on_demand_hourly("us-east-1", "p4d.24xlarge"))
    assert p4d.uptime_hours == pytest.approx(2, abs=0.1) and p4d.zone == "us-east-1a"
    assert [n.instance_id for n in orphans(nodes, ["train", "dev"])] == [forgotten]
    assert p4d.health == ""  # the node has not reported yet


@mock_aws
def test_status_shows_each_nodes_own_health_report(capsys):
    ec2 = boto3.client("ec2", region_name="us-east-1")
    node = launch(ec2, "p4d.24xlarge", "train")
    quiet = launch(ec2, "p4d.24xlarge", "train")
    report = "degraded:gpu-metrics:missing"
    ec2.create_tags(Resources=[node], Tags=[{"Key": "gpu-cluster:health", "Value": report}])
    health = {n.instance_id: n.health for n in list_nodes(ec2, "us-east-1")}
    assert health == {node: report, quiet: ""}
    assert main(["status", "--stack", "train"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert any(node in line and report in line for line in lines)
    assert any(quiet in line and "not reported" in line for line in lines)


@mock_aws
def test_gpuc_status_prints_and_marks_nodes_without_a_stack_file(capsys):
    ec2 = boto3.client("ec2", region_name="us-east-1")
    launch(ec2, "p4d.24xlarge", "train")
    launch(ec2, "g5.xlarge", "old-experiment")
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "train" in out and "p4d.24xlarge" in out
    assert "old-experiment" in out and "<- no stack file" in out
    assert "burning about $" in out
    assert main(["status", "--stack", "train", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["instanceType"] for r in rows] == ["p4d.24xlarge"]
    assert rows[0]["noStackFile"] is False


def test_status_with_the_endpoint_down_is_an_aws_error_not_an_empty_account():
    import os
    import socket
    import subprocess
    import sys

    from conftest import ROOT

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    done = subprocess.run(
        [sys.executable, "-m", "gpu_cluster.infra.cli", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 4, done.stderr
    assert "no gpu-cluster nodes run" not in done.stdout
    assert "does not answer" in done.stderr


# --- EC2 topology: where a stack's gang sits (DescribeInstanceTopology; moto lacks it, so
# botocore's Stubber answers, each request checked against the service model by conftest) ---

SETS = {
    "i-0aaa": ["nn-top", "nn-mid", "nn-x"],
    "i-0bbb": ["nn-top", "nn-mid", "nn-y"],
    "i-0ccc": ["nn-top", "nn-mid", "nn-x"],
}


def running(instance: str, kind: str = "p5.48xlarge", stack: str = "train"):
    from gpu_cluster.infra.aws.status import Node

    return Node(instance, stack, stack, kind, "on-demand", "running", "us-east-1a", 1.0, None)


def topology_answer(ids: list[str]) -> dict:
    return {
        "Instances": [
            {"InstanceId": i, "InstanceType": "p5.48xlarge", "NetworkNodes": SETS[i]} for i in ids
        ]
    }


def test_status_says_when_a_gang_spans_network_nodes_and_which_under_which():
    from botocore.stub import Stubber

    from gpu_cluster.infra.aws.status import gang_spans

    ec2 = boto3.client("ec2", region_name="us-east-1")
    nodes = [running(i) for i in SETS] + [running("i-0ddd", "g5.12xlarge", "dev")]
    with Stubber(ec2) as stub:
        # one request, the ids named (no MaxResults beside them); g5 is never asked about
        ids = sorted(SETS)
        stub.add_response("describe_instance_topology", topology_answer(ids), {"InstanceIds": ids})
        (line,) = gang_spans(ec2, nodes)
        stub.assert_no_pending_responses()
    assert line.startswith("train: the gang spans 2 network nodes at the layer closest")
    assert "nn-x (i-0aaa, i-0ccc), nn-y (i-0bbb)" in line and "under nn-mid" in line


def test_status_says_nothing_for_a_gang_under_one_network_node():
    from botocore.stub import Stubber

    from gpu_cluster.infra.aws.status import gang_spans

    ec2 = boto3.client("ec2", region_name="us-east-1")
    with Stubber(ec2) as stub:
        stub.add_response("describe_instance_topology", topology_answer(["i-0aaa", "i-0ccc"]))
        assert gang_spans(ec2, [running("i-0aaa"), running("i-0ccc")]) == []


def test_status_without_the_topology_permission_still_lists_and_says_why():
    from botocore.stub import Stubber

    from gpu_cluster.infra.aws.status import gang_spans

    ec2 = boto3.client("ec2", region_name="us-east-1")
    with Stubber(ec2) as stub:
        stub.add_client_error("describe_instance_topology", "UnauthorizedOperation", "denied")
        (line,) = gang_spans(ec2, [running("i-0aaa"), running("i-0bbb")])
    assert "network topology not read" in line and "ec2:DescribeInstanceTopology" in line


def test_status_asks_for_at_most_100_instances_a_request():
    from botocore.stub import Stubber

    from gpu_cluster.infra.aws.status import node_sets

    ec2 = boto3.client("ec2", region_name="us-east-1")
    ids = [f"i-{n:017x}" for n in range(150)]
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_instance_topology", {"Instances": []}, {"InstanceIds": ids[:100]}
        )
        stub.add_response(
            "describe_instance_topology", {"Instances": []}, {"InstanceIds": ids[100:]}
        )
        assert node_sets(ec2, [running(i) for i in ids]) == {}
        stub.assert_no_pending_responses()
