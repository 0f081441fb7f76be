"""Stop paying: what `pulumi destroy` does to each stack (infra/plan/destroy.py, the engine's
protect check and --exclude-protected), the command `gpuc plan` gives, and what `gpuc sweep`
leaves of a stack that owns its bucket."""

from __future__ import annotations

import boto3
import pytest
from conftest import TRAIN_LIKE, plan_config, plan_stack
from moto import mock_aws

from gpu_cluster.infra.plan.destroy import destroy, protected_excludes, stop_paying_command
from gpu_cluster.infra.plan.render import text_tree

OWN_BUCKET = {**TRAIN_LIKE, "gpu-cluster:storage": '{"source": "create"}'}
# What bills by the hour or the month when left: a destroy that keeps one has not stopped paying.
BILLING = {
    "aws:autoscaling/group:Group",
    "aws:ec2/instance:Instance",
    "aws:ec2/capacityReservation:CapacityReservation",
    "aws:ec2/natGateway:NatGateway",
    "aws:ec2/eip:Eip",
    "aws:ec2/vpcEndpoint:VpcEndpoint",
    "aws:fsx/lustreFileSystem:LustreFileSystem",
    "aws:lb/loadBalancer:LoadBalancer",
    "aws:cloudwatch/logGroup:LogGroup",
    "aws:cloudwatch/metricAlarm:MetricAlarm",
}


@pytest.fixture(scope="module")
def own_bucket():
    plan = plan_config(OWN_BUCKET, stack="train")
    assert plan.error is None, plan.error
    return plan


def test_a_plain_destroy_of_a_stack_owning_its_bucket_fails_in_its_preview(own_bucket):
    """step.go DeleteStep.Apply refuses a protected delete before its DryRun branch: the
    preview fails, and nothing is deleted - the GPU group included."""
    plain = destroy(own_bucket)
    assert not plain.runs
    assert {r.name for r in plain.refused} == {
        "train-data-bucket",
        "train-data-access-logs",
        "train-security-key",
    }


def test_destroy_exclude_protected_deletes_everything_that_bills_and_keeps_the_data(own_bucket):
    kept_apart = destroy(own_bucket, exclude_protected=True)
    assert kept_apart.runs
    deleted = {r.type for r in kept_apart.deleted}
    assert {"aws:autoscaling/group:Group", "aws:ec2/natGateway:NatGateway"} <= deleted
    assert not {r.type for r in kept_apart.kept} & BILLING
    # the protected resources and what they depend on (destroy.go, getProtectedExcludes)
    assert {r.name for r in kept_apart.kept} == {
        "train-data-bucket",
        "train-data-access-logs",
        "train-security-key",
        "train-security-autoscaling-role",  # named in the key's policy
    }
    group = next(r for r in own_bucket.resources if r.type == "aws:autoscaling/group:Group")
    assert group.urn not in protected_excludes(own_bucket)


@pytest.mark.parametrize("stack", ["dev", "experiment", "train"])
def test_every_training_stack_is_deleted_by_a_plain_destroy(stack):
    plan = plan_stack(stack)
    assert plan.error is None, plan.error
    assert destroy(plan).completes
    assert stop_paying_command(plan) == f"pulumi destroy -s {stack}"
    assert f"Stop paying: `pulumi destroy -s {stack}` deletes it all" in text_tree(plan)


def test_the_inference_stack_turns_its_deletion_protection_off_before_the_destroy():
    """DeleteLoadBalancer refuses a protected load balancer: a plain destroy would delete the
    nodes, then fail there with the load balancer still billing."""
    plan = plan_stack("inference")
    assert plan.error is None, plan.error
    plain = destroy(plan)
    assert plain.runs and not plain.completes
    assert [r.type for r in plain.refused_by_aws] == ["aws:lb/loadBalancer:LoadBalancer"]
    assert stop_paying_command(plan) == (
        "pulumi config set --path inference.deletionProtection false -s inference && "
        "pulumi up -s inference && pulumi destroy -s inference"
    )
    (line,) = [line for line in text_tree(plan).splitlines() if "pulumi destroy" in line]
    assert "deletion protection on" in line
    off = plan_config(
        {**plan.config, "gpu-cluster:inference": _without_protection(plan.config)}, "inference"
    )
    assert off.error is None, off.error
    assert destroy(off).completes and stop_paying_command(off) == "pulumi destroy -s inference"


def _without_protection(config: dict[str, str]) -> str:
    import json

    inference = json.loads(config["gpu-cluster:inference"])
    return json.dumps({**inference, "deletionProtection": False})


def test_the_data_stack_refuses_destroy_as_it_should():
    plan = plan_stack("data")
    assert plan.error is None, plan.error
    assert not destroy(plan).runs  # datasets are deleted only by hand (docs/guides/teardown.md)


def test_gpuc_plan_gives_the_stop_paying_command_that_works(own_bucket):
    text = text_tree(own_bucket)
    (line,) = [line for line in text.splitlines() if "pulumi destroy" in line]
    assert "`pulumi destroy -s train --exclude-protected`" in line
    assert "train-data-bucket" in line and "fails in its preview" in line


REGION = "us-east-1"


@mock_aws
def test_sweep_leaves_the_key_of_a_stack_that_owns_its_bucket(monkeypatch, capsys):
    """After `pulumi destroy --exclude-protected` the key still encrypts the kept bucket (and
    is still in the stack's state): deleting it would make the data unreadable."""
    from test_sweep import build_controls

    from gpu_cluster.infra import cli
    from gpu_cluster.infra.aws.sweep_controls import AUTOSCALING_ROLE_PATH

    left = build_controls("solo")
    iam = boto3.client("iam", region_name=REGION)
    linked = "AWSServiceRoleForAutoScaling_solo-security-1a2b3c4"
    iam.create_role(
        RoleName=linked,
        Path=AUTOSCALING_ROLE_PATH,
        AssumeRolePolicyDocument="{}",
        Tags=[{"Key": "gpu-cluster:stack", "Value": "solo"}],
    )
    settings = {"aws:region": REGION, "gpu-cluster:storage": '{"source": "create"}'}
    monkeypatch.setattr(cli, "stack_settings", lambda stack: dict(settings))
    assert cli.main(["sweep", "--stack", "solo", "--delete", "--yes"]) == 0
    err = capsys.readouterr().err
    assert "pulumi destroy -s solo --exclude-protected" in err
    kms = boto3.client("kms", region_name=REGION)
    assert kms.describe_key(KeyId=left["key"])["KeyMetadata"]["KeyState"] == "Enabled"
    assert iam.get_role(RoleName=linked)["Role"]["RoleName"] == linked
    with pytest.raises(iam.exceptions.NoSuchEntityException):
        iam.get_role(RoleName=left["role"])  # the rest is swept as before


def test_an_inference_stack_asking_for_a_bucket_of_its_own_is_refused():
    """It would create none (the service reads the data stack's), and serve from nothing."""
    from conftest import ROOT

    from gpu_cluster.infra.plan.engine import run_plan
    from gpu_cluster.infra.stack_files import load_stack_config

    config = load_stack_config("inference", ROOT)
    plan = run_plan("inference", {**config, "gpu-cluster:storage": '{"source": "create"}'})
    assert plan.error is not None
    (problem,) = plan.error.problems
    assert problem.path == "gpu-cluster:storage.source" and problem.received == "create"
    assert problem.fix == "pulumi config set --path storage.source stack"
    assert [r.type for r in plan.resources] == ["pulumi:pulumi:Stack"]  # nothing created
    fixed = run_plan("inference", {**config, "gpu-cluster:storage": '{"source": "stack"}'})
    assert fixed.error is None, fixed.error
