"""Audit-trail controls: log groups, the CloudTrail trail and its data events."""

from __future__ import annotations

from gpu_cluster.policy import aws_types as t
from gpu_cluster.policy.control import control
from gpu_cluster.policy.resources import Res, Stack, as_list, truthy

# CloudWatch.16's default minRetentionTime (Security Hub control parameters).
MINIMUM_LOG_RETENTION_DAYS = 365


@control(
    "CloudWatch.16",
    "cloudwatch-16-log-retention",
    "CloudWatch log groups should be retained for a specified time period (365 days)",
    "medium",
    f"set retentionInDays to at least {MINIMUM_LOG_RETENTION_DAYS}",
    t.LOG_GROUP,
)
def log_retention(r: Res, stack: Stack) -> list[str]:
    days = r.props.get("retentionInDays")
    if days in (None, 0):
        return []  # never expire: retained
    if days < MINIMUM_LOG_RETENTION_DAYS:
        return [f"retentionInDays is {days}"]
    return []


@control(
    "NIST.800-53.r5 SC-28",
    "log-groups-encrypted-with-cmk",
    "CloudWatch log groups are encrypted with a customer managed KMS key",
    "medium",
    "set kmsKeyId to the stack's key (its policy lets logs.<region>.amazonaws.com use it)",
    t.LOG_GROUP,
)
def log_encryption(r: Res, stack: Stack) -> list[str]:
    return [] if r.props.get("kmsKeyId") else ["no kmsKeyId: encrypted with a service key"]


@control(
    "CloudTrail.1",
    "cloudtrail-1-multi-region-management-events",
    "CloudTrail should be enabled and configured with at least one multi-Region trail that "
    "includes read and write management events",
    "high",
    "set isMultiRegionTrail true and keep management events (All) in the trail's selectors",
    t.TRAIL,
)
def trail_management_events(r: Res, stack: Stack) -> list[str]:
    problems = [] if truthy(r.props.get("isMultiRegionTrail")) else ["not multi-Region"]
    if not _management_events(r):
        problems.append("no read and write management events")
    return problems


def _selectors(r: Res) -> list[list[dict]]:
    return [
        [dict(f) for f in as_list(s.get("fieldSelectors"))]
        for s in as_list(r.props.get("advancedEventSelectors"))
    ]


def _field(selector: list[dict], name: str) -> list[str]:
    return [str(v) for f in selector if f.get("field") == name for v in as_list(f.get("equals"))]


def _management_events(r: Res) -> bool:
    if not r.props.get("advancedEventSelectors"):
        return True  # CloudTrail's default: all management events
    return any(
        _field(s, "eventCategory") == ["Management"] and not _field(s, "readOnly")
        for s in _selectors(r)
    )


@control(
    "CloudTrail.2",
    "cloudtrail-2-encrypted",
    "CloudTrail should have encryption at-rest enabled",
    "medium",
    "set kmsKeyId on the trail to the stack's key",
    t.TRAIL,
)
def trail_encrypted(r: Res, stack: Stack) -> list[str]:
    return [] if r.props.get("kmsKeyId") else ["no kmsKeyId"]


@control(
    "CloudTrail.4",
    "cloudtrail-4-log-file-validation",
    "CloudTrail log file validation should be enabled",
    "low",
    "set enableLogFileValidation true",
    t.TRAIL,
)
def trail_validation(r: Res, stack: Stack) -> list[str]:
    return [] if truthy(r.props.get("enableLogFileValidation")) else ["log file validation off"]


def _logs_s3_data(r: Res, read: bool) -> bool:
    """A selector records S3 object events of this kind (all, or just these)."""
    for selector in _selectors(r):
        if _field(selector, "eventCategory") != ["Data"]:
            continue
        if _field(selector, "resources.type") != ["AWS::S3::Object"]:
            continue
        read_only = _field(selector, "readOnly")
        if not read_only or read_only == [str(read).lower()]:
            return True
    return False


@control(
    "S3.22",
    "s3-22-object-write-events",
    "S3 general purpose buckets should log object-level write events",
    "medium",
    "add a data-event selector for AWS::S3::Object (write or all) on the data bucket",
    t.TRAIL,
)
def trail_writes(r: Res, stack: Stack) -> list[str]:
    return [] if _logs_s3_data(r, read=False) else ["no S3 object write data events"]


@control(
    "S3.23",
    "s3-23-object-read-events",
    "S3 general purpose buckets should log object-level read events",
    "medium",
    "add a data-event selector for AWS::S3::Object (read or all) on the data bucket",
    t.TRAIL,
)
def trail_reads(r: Res, stack: Stack) -> list[str]:
    return [] if _logs_s3_data(r, read=True) else ["no S3 object read data events"]


CONTROLS = (
    log_retention,
    log_encryption,
    trail_management_events,
    trail_encrypted,
    trail_validation,
    trail_writes,
    trail_reads,
)
