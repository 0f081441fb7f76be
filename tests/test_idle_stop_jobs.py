"""The idle stop counts a running job as activity, and missing data alerts instead of silently
never stopping (issue 25, 3): the alarm in the plan, the node's Activity metric on the harness
(the real AWS CLI against moto for the request itself)."""

from __future__ import annotations

import json

import boto3
from conftest import ROOT, TRAIN_LIKE, plan_config
from harness_units import (
    SELF,
    aws_calls,
    published_metrics,
)
from harness_units import nodes as nodes

from gpu_cluster.infra.stack_files import load_stack_config

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"


def test_a_clusters_idle_alarm_watches_activity_and_alerts_on_missing_data():
    plan = plan_config({**TRAIN_LIKE}, "train")
    assert plan.error is None, plan.error
    (alarm,) = plan.of_type(ALARM)
    inputs = alarm.inputs
    assert (inputs["namespace"], inputs["metricName"]) == ("gpu-cluster", "Activity")
    assert inputs["dimensions"] == {"Cluster": "train", "Stack": "train"}
    assert inputs["statistic"] == "Maximum" and inputs["comparisonOperator"] == "LessThanThreshold"
    # no node publishes for the whole hour: INSUFFICIENT_DATA, never a stop, always an alert
    assert inputs["treatMissingData"] == "missing"
    topic = plan.state(plan.named("train-cost-alerts"))["arn"]
    assert inputs["insufficientDataActions"] == [topic]
    assert "no job running" in inputs["alarmDescription"]


def test_a_stack_with_only_an_idle_stop_gets_a_topic_for_its_missing_data():
    """The experiment stack (spot, one node, no budget, no gang) had no alert topic: its idle
    stop could go blind without anyone hearing of it."""
    plan = plan_config(load_stack_config("experiment", ROOT), "experiment")
    assert plan.error is None, plan.error
    (topic,) = plan.of_type("aws:sns/topic:Topic")
    (alarm,) = plan.of_type(ALARM)
    assert alarm.inputs["insufficientDataActions"] == [plan.state(topic)["arn"]]
    key = json.loads(plan.named("experiment-security-key").inputs["policy"])
    assert "AllowAlertsToEncryptedTopic" in {s["Sid"] for s in key["Statement"]}


def activity(node) -> list[dict]:
    (call,) = aws_calls(node, "cloudwatch", "put-metric-data")
    assert argument_of(call, "--namespace") == "gpu-cluster"
    return published_metrics(call)


def argument_of(call: list[str], flag: str) -> str:
    return call[call.index(flag) + 1]


def test_the_node_publishes_its_busiest_gpu_per_instance_and_per_cluster(nodes):
    node = nodes.make()
    node.set_gpus(utilization={"0": 37, "3": 80, "5": 12})
    done = node.step("gpu-cluster-gpu-metrics", "--activity")
    assert done.returncode == 0, done.stderr
    assert activity(node) == [
        {
            "MetricName": "Activity",
            "Unit": "Percent",
            "Value": "80",
            "Dimensions": {"InstanceId": SELF},  # the dev box's alarm
        },
        {
            "MetricName": "Activity",
            "Unit": "Percent",
            "Value": "80",
            "Dimensions": {"Cluster": "train", "Stack": "train"},  # a group's alarm
        },
    ]
    assert not node.file("/run/gpu-cluster/step-gpu-metrics").exists()  # not the boot step


def test_a_running_job_at_zero_gpu_is_activity(nodes):
    """A job staging its data for an hour uses no GPU; the idle stop must not take its node."""
    node = nodes.make()
    node.set_gpus(utilization={str(i): 0 for i in range(8)})
    assert node.step("gpu-cluster-gpu-metrics", "--activity").returncode == 0
    assert {m["Value"] for m in activity(node)} == {"0"}  # idle: no job
    node.answer_aws([])
    node.harness.joinpath("aws-calls.jsonl").unlink()
    node.activate("gpu-cluster-job@pretrain.service")
    assert node.step("gpu-cluster-gpu-metrics", "--activity").returncode == 0
    assert {m["Value"] for m in activity(node)} == {"100"}


def test_no_readable_gpu_is_no_activity(nodes):
    node = nodes.make()
    node.set_gpus(driver_loaded=False)
    assert node.step("gpu-cluster-gpu-metrics", "--activity").returncode == 0
    assert {m["Value"] for m in activity(node)} == {"0"}


def test_the_metric_request_is_one_cloudwatch_takes(nodes, moto_server):
    """The real AWS CLI parses the request and moto's CloudWatch stores both data points."""
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_server)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    instance = ec2.run_instances(ImageId=image, InstanceType="p4d.24xlarge", MinCount=1, MaxCount=1)
    instance_id = instance["Instances"][0]["InstanceId"]
    node = nodes.make(endpoint=moto_server, instance_id=instance_id)
    node.set_gpus(utilization={"2": 64})
    done = node.step("gpu-cluster-gpu-metrics", "--activity")
    assert done.returncode == 0, done.stderr
    cloudwatch = boto3.client("cloudwatch", region_name="us-east-1", endpoint_url=moto_server)
    metrics = cloudwatch.list_metrics(Namespace="gpu-cluster", MetricName="Activity")["Metrics"]
    dimensions = sorted(
        sorted((d["Name"], d["Value"]) for d in metric["Dimensions"]) for metric in metrics
    )
    assert dimensions == [
        [("Cluster", "train"), ("Stack", "train")],
        [("InstanceId", instance_id)],
    ]
