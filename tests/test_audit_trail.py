"""The optional audit trail and account guards of the data stack, and what they cost."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, plan_config

from gpu_cluster.infra.audit.command import plan_resources
from gpu_cluster.infra.cost.model import Usage, estimate_data
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation import ResolvedData
from gpu_cluster.policy.pack import audit

TRAIL = "aws:cloudtrail/trail:Trail"
OPT_IN = {
    "gpu-cluster:auditTrail": "true",
    "gpu-cluster:ebsEncryptionByDefault": "true",
    "gpu-cluster:snapshotBlockPublicAccess": "true",
}
TRAIL_ARN = "arn:aws:cloudtrail:us-east-1:123456789012:trail/gpu-cluster-data-audit"


@pytest.fixture(scope="module")
def guarded():
    plan = plan_config({**load_stack_config("data", ROOT), **OPT_IN}, stack="data")
    assert plan.error is None
    return plan


def test_off_by_default():
    plan = plan_config(load_stack_config("data", ROOT), stack="data")
    assert plan.of_type(TRAIL) == []
    assert not [r for r in plan.resources if r.type.startswith("aws:ebs/")]


def test_trail_records_the_bucket_and_management_events_encrypted_and_validated(guarded):
    (trail,) = guarded.of_type(TRAIL)
    inputs = trail.inputs
    assert inputs["name"] == "gpu-cluster-data-audit"
    assert inputs["enableLogFileValidation"] is True and inputs["isMultiRegionTrail"] is True
    key = guarded.state(guarded.named("data-key"))["arn"]
    assert inputs["kmsKeyId"] == key
    logs = guarded.named("data-data-access-logs")
    assert inputs["s3BucketName"] == guarded.state(logs)["id"]
    assert inputs["s3KeyPrefix"] == "cloudtrail"
    management, data = inputs["advancedEventSelectors"]
    assert management["fieldSelectors"] == [{"field": "eventCategory", "equals": ["Management"]}]
    fields = {f["field"]: f for f in data["fieldSelectors"]}
    assert fields["resources.type"]["equals"] == ["AWS::S3::Object"]
    bucket = guarded.named("data-data-bucket").inputs["bucket"]
    assert fields["resources.ARN"]["startsWiths"] == [f"arn:aws:s3:::{bucket}/"]
    assert "readOnly" not in fields  # reads and writes
    policy = guarded.named("data-data-access-logs-policy").urn
    assert policy in trail.dependencies  # CloudTrail checks the bucket policy on create


def test_bucket_and_key_policies_admit_only_this_trail(guarded):
    policy = json.loads(guarded.named("data-data-access-logs-policy").inputs["policy"])
    statements = {s.get("Sid"): s for s in policy["Statement"]}
    write = statements["AWSCloudTrailWrite"]
    assert write["Principal"] == {"Service": "cloudtrail.amazonaws.com"}
    assert write["Resource"].endswith("/cloudtrail/AWSLogs/123456789012/*")
    assert write["Condition"]["StringEquals"]["aws:SourceArn"] == TRAIL_ARN
    assert statements["AWSCloudTrailAclCheck"]["Action"] == "s3:GetBucketAcl"
    key = json.loads(guarded.named("data-key").inputs["policy"])
    encrypt = next(s for s in key["Statement"] if s["Sid"] == "AllowCloudTrailToEncryptLogs")
    assert encrypt["Action"] == "kms:GenerateDataKey*"
    assert encrypt["Condition"]["StringEquals"] == {"aws:SourceArn": TRAIL_ARN}
    lifecycle = guarded.named("data-data-access-logs-lifecycle").inputs["rules"]
    expiring = [r for r in lifecycle if "expiration" in r]
    assert {r["filter"]["prefix"] for r in expiring} == {"logs/", "cloudtrail/"}


def test_account_guards_are_retained_when_the_stack_goes(guarded):
    encryption = guarded.named("data-ebs-encryption-by-default")
    assert encryption.inputs == {"enabled": True} and encryption.retain_on_delete
    block = guarded.named("data-snapshot-block-public-access")
    assert block.inputs == {"state": "block-all-sharing"} and block.retain_on_delete
    assert not [r for r in guarded.resources if r.type == "aws:ebs/defaultKmsKey:DefaultKmsKey"]


def test_the_audit_shows_the_trail_and_guard_controls_passing(guarded):
    statuses = {f.control.id: f.status for f in audit(plan_resources(guarded))}
    for control in ("CloudTrail.1", "CloudTrail.2", "CloudTrail.4", "S3.22", "S3.23"):
        assert statuses[control] == "pass"
    assert statuses["EC2.7"] == "pass" and statuses["EC2.182"] == "pass"


@pytest.mark.parametrize("key", sorted(OPT_IN))
def test_a_cluster_stack_may_not_set_them(key):
    plan = plan_config({**load_stack_config("train", ROOT), key: "true"}, stack="train")
    assert plan.error is not None
    (problem,) = plan.error.problems
    assert problem.path == key and "only the data stack" in problem.problem


def test_cost_shows_the_trail_events():
    spec = ResolvedData("data", "data", "us-east-1", None, {}, audit_trail=True)
    lines = {line.item: line for line in estimate_data(spec).lines}
    trail = lines["CloudTrail audit trail (data bucket)"]
    usage = Usage(trail_events_millions=50)
    monthly = {line.item: line for line in estimate_data(spec, usage).lines}
    # $0.10 per 100,000 data events: 50M events -> $50 a 730-hour month
    hourly = monthly["CloudTrail audit trail (data bucket)"].usd_per_hour
    assert hourly is not None and trail.usd_per_hour is not None
    assert hourly * 730 == pytest.approx(50.0)
    assert trail.usd_per_hour * 730 == pytest.approx(10.0)  # the bundled 10M assumption
    without = ResolvedData("data", "data", "us-east-1", None, {})
    assert "CloudTrail audit trail (data bucket)" not in {
        i.item for i in estimate_data(without).lines
    }
