"""ARNs follow the partition the account is in (aws, aws-us-gov, aws-cn), and small AWS hygiene:
log buckets abort incomplete uploads; grants name resources their actions take."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, plan_config, plan_stack
from test_cost_controls import WORKING_HOURS

import gpu_cluster.infra.plan.engine as engine
from gpu_cluster.infra.plan.mocks import PlanMocks
from gpu_cluster.infra.stack_files import load_stack_config


class GovCloudPartition(PlanMocks):
    """The mocks, answering getPartition as an AWS GovCloud account would."""

    def call(self, args):
        result, failures = super().call(args)
        if args.token == "aws:index/getPartition:getPartition":
            result = {**result, "partition": "aws-us-gov", "id": "aws-us-gov"}
        return result, failures


@pytest.fixture
def gov(monkeypatch):
    monkeypatch.setattr(engine, "PlanMocks", GovCloudPartition)


def test_the_idle_stop_and_schedules_use_the_accounts_partition(gov):
    config = {**load_stack_config("dev", ROOT), "gpu-cluster:schedule": WORKING_HOURS}
    plan = plan_config(config, "dev")
    assert plan.error is None, plan.error
    (idle,) = [
        a
        for a in plan.of_type("aws:cloudwatch/metricAlarm:MetricAlarm")
        if a.name.endswith("idle-stop")
    ]
    assert idle.inputs["alarmActions"][0] == "arn:aws-us-gov:automate:us-east-1:ec2:stop"
    targets = [s.inputs["target"]["arn"] for s in plan.of_type("aws:scheduler/schedule:Schedule")]
    assert targets and all(t.startswith("arn:aws-us-gov:scheduler:::aws-sdk:") for t in targets)


def test_the_load_balancer_log_writer_is_named_in_the_accounts_partition(gov):
    plan = plan_config(load_stack_config("inference", ROOT), "inference")
    assert plan.error is None, plan.error
    policy = json.loads(plan.named("inference-service-alb-logs-policy").inputs["policy"])
    (allow,) = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert allow["Principal"]["AWS"].startswith("arn:aws-us-gov:iam::")


@pytest.mark.parametrize("stack", ["data", "inference"])
def test_every_log_bucket_aborts_incomplete_multipart_uploads(stack):
    plan = plan_stack(stack)
    lifecycles = plan.of_type("aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    logs = [r for r in lifecycles if "log" in r.name]
    assert logs
    for lifecycle in logs:
        aborts = [r for r in lifecycle.inputs["rules"] if "abortIncompleteMultipartUpload" in r]
        assert aborts and aborts[0]["abortIncompleteMultipartUpload"]["daysAfterInitiation"] == 7


def test_the_flow_log_role_can_describe_log_groups_where_that_action_applies(train_plan):
    policy = json.loads(
        next(
            r for r in train_plan.of_type("aws:iam/rolePolicy:RolePolicy") if "flow" in r.name
        ).inputs["policy"]
    )
    scoped = [s for s in policy["Statement"] if s["Resource"] != "*"]
    assert all("logs:DescribeLogGroups" not in s["Action"] for s in scoped)
    (describe,) = [s for s in policy["Statement"] if s["Resource"] == "*"]
    assert describe["Action"] == "logs:DescribeLogGroups"
