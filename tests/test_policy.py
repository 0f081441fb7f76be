"""The CrossGuard rules hold on every stack's plan, and each rule catches what it should."""

from __future__ import annotations

import json

import pytest
from conftest import STACKS, plan_stack

from policy.rules import violations


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_passes_the_policy_pack(stack):
    plan = plan_stack(stack)
    assert plan.error is None
    found = [(r.name, v) for r in plan.resources for v in violations(r.type, r.inputs, r.name)]
    assert found == []


def test_the_access_log_bucket_is_the_only_documented_exception():
    from policy.rules import SUPPRESSIONS, suppressed

    plan = plan_stack("data")
    encryption = plan.named("data-data-access-logs-encryption")
    unsuppressed = violations(encryption.type, encryption.inputs)
    assert [rule for rule, _ in unsuppressed] == ["bucket-locked-down"]  # SSE-S3, not KMS
    assert violations(encryption.type, encryption.inputs, encryption.name) == []
    assert suppressed("bucket-locked-down", "data-data-encryption") is None  # the data bucket
    assert len(SUPPRESSIONS) == 1 and all(SUPPRESSIONS.values())


LT = "aws:ec2/launchTemplate:LaunchTemplate"


@pytest.mark.parametrize(
    ("type_", "props", "rule"),
    [
        (LT, {"metadataOptions": {"httpTokens": "optional"}}, "imdsv2-required"),
        (
            LT,
            {
                "metadataOptions": {"httpTokens": "required"},
                "blockDeviceMappings": [{"deviceName": "/dev/sda1", "ebs": {"encrypted": "false"}}],
            },
            "disks-encrypted-with-cmk",
        ),
        (
            LT,
            {
                "metadataOptions": {"httpTokens": "required"},
                "networkInterfaces": [{"associatePublicIpAddress": "true"}],
            },
            "no-public-ips",
        ),
        ("aws:ec2/subnet:Subnet", {"mapPublicIpOnLaunch": True}, "no-public-ips"),
        (
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            {"cidrIpv4": "0.0.0.0/0", "ipProtocol": "tcp", "fromPort": 22},
            "no-world-ingress",
        ),
        (
            "aws:ec2/securityGroup:SecurityGroup",
            {"ingress": [{"cidrBlocks": ["0.0.0.0/0"], "protocol": "tcp"}]},
            "no-world-ingress",
        ),
        (
            "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
            {"blockPublicAcls": True, "blockPublicPolicy": False},
            "bucket-locked-down",
        ),
        (
            "aws:s3/bucketPolicy:BucketPolicy",
            {"policy": json.dumps({"Statement": [{"Effect": "Allow", "Action": "s3:*"}]})},
            "bucket-locked-down",
        ),
        ("aws:kms/key:Key", {"enableKeyRotation": False}, "kms-rotation"),
    ],
)
def test_rule_catches_violation(type_, props, rule):
    assert rule in {name for name, _ in violations(type_, props)}
