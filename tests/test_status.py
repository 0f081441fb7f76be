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
