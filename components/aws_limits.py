"""Limits AWS enforces on what the program sends, each with the document it comes from.

Written once here (the lowest room, so components can refuse early and the plan engine's mocks
can refuse what AWS would refuse, for every stack and every test)."""

from __future__ import annotations

import base64
import binascii
import gzip
from dataclasses import dataclass

# EC2 User Guide, "Run commands when you launch an EC2 instance with user data input"
# (Work with instance user data): "User data is limited to 16 KB, in raw form, before it is
# base64-encoded." CreateLaunchTemplate/RunInstances refuse more (InvalidUserData.Malformed /
# InvalidParameterValue "User data is limited to 16384 bytes").
USER_DATA_MAX_BYTES = 16384
# What this project allows itself, so a later step added to the boot still fits.
USER_DATA_BUDGET_BYTES = 12 * 1024
GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True, slots=True)
class Limit:
    """One AWS limit on one input of one resource type."""

    resource_type: str
    input_name: str
    maximum: int
    unit: str
    source: str


LIMITS: tuple[Limit, ...] = (
    Limit(
        "aws:ec2/launchTemplate:LaunchTemplate",
        "userData",
        USER_DATA_MAX_BYTES,
        "bytes of user data before base64",
        "EC2 User Guide, 'Work with instance user data': 16 KB in raw form",
    ),
    Limit(
        "aws:ec2/instance:Instance",
        "userDataBase64",
        USER_DATA_MAX_BYTES,
        "bytes of user data before base64",
        "EC2 User Guide, 'Work with instance user data': 16 KB in raw form",
    ),
    Limit(
        "aws:ec2/instance:Instance",
        "userData",
        USER_DATA_MAX_BYTES,
        "bytes of user data",
        "EC2 User Guide, 'Work with instance user data': 16 KB in raw form",
    ),
    Limit(
        "aws:ec2/launchTemplate:LaunchTemplate",
        "name",
        128,
        "characters",
        "EC2 API Reference, CreateLaunchTemplate: LaunchTemplateName 3-128 characters",
    ),
    Limit(
        "aws:iam/role:Role",
        "name",
        64,
        "characters",
        "IAM User Guide, 'IAM and AWS STS quotas': role name 64 characters",
    ),
    Limit(
        "aws:s3/bucket:Bucket",
        "bucket",
        63,
        "characters",
        "S3 User Guide, 'General purpose bucket naming rules': 3-63 characters",
    ),
    Limit(
        "aws:lb/loadBalancer:LoadBalancer",
        "name",
        32,
        "characters",
        "ELB API Reference, CreateLoadBalancer: Name at most 32 characters",
    ),
    Limit(
        "aws:lb/targetGroup:TargetGroup",
        "name",
        32,
        "characters",
        "ELB API Reference, CreateTargetGroup: Name at most 32 characters",
    ),
)
# EC2 User Guide, 'Tag restrictions': 50 tags per resource, keys 128 and values 256 characters.
MAX_TAGS, MAX_TAG_KEY, MAX_TAG_VALUE = 50, 128, 256
TAG_SOURCE = "EC2 User Guide, 'Tag your Amazon EC2 resources': tag restrictions"


def raw_user_data(value: str, base64_encoded: bool) -> bytes:
    """The bytes EC2 counts: the decoded payload (gzip stays compressed: cloud-init inflates it)."""
    if not base64_encoded:
        return value.encode()
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value.encode()


def user_data_text(encoded: str) -> str:
    """The script a node runs, from a template's base64 user data (gzip or not)."""
    raw = raw_user_data(encoded, base64_encoded=True)
    if raw.startswith(GZIP_MAGIC):
        raw = gzip.decompress(raw)
    return raw.decode()


def measured(limit: Limit, value: object) -> int:
    """The size AWS would measure for ``value`` under ``limit``."""
    if limit.input_name.startswith("userData"):
        encoded = limit.input_name == "userDataBase64" or limit.resource_type.endswith(
            "LaunchTemplate"
        )
        return len(raw_user_data(str(value), base64_encoded=encoded))
    return len(str(value))


@dataclass(frozen=True, slots=True)
class Violation:
    """An input over its limit: what AWS would measure, and the limit."""

    input_name: str
    size: int
    maximum: int
    unit: str
    source: str

    def message(self) -> str:
        return (
            f"{self.input_name} is {self.size:,} {self.unit}; AWS allows at most "
            f"{self.maximum:,} ({self.source})"
        )


def violations(resource_type: str, inputs: dict) -> list[Violation]:
    """Every limit ``inputs`` break."""
    found = []
    for limit in LIMITS:
        value = inputs.get(limit.input_name)
        if limit.resource_type != resource_type or not isinstance(value, str) or not value:
            continue
        size = measured(limit, value)
        if size > limit.maximum:
            found.append(Violation(limit.input_name, size, limit.maximum, limit.unit, limit.source))
    tags = inputs.get("tags")
    if isinstance(tags, dict):
        if len(tags) > MAX_TAGS:
            found.append(Violation("tags", len(tags), MAX_TAGS, "tags", TAG_SOURCE))
        for key, value in tags.items():
            if len(str(key)) > MAX_TAG_KEY:
                found.append(
                    Violation(f"tags key {key!r}", len(key), MAX_TAG_KEY, "chars", TAG_SOURCE)
                )
            if isinstance(value, str) and len(value) > MAX_TAG_VALUE:
                found.append(
                    Violation(f"tags.{key}", len(value), MAX_TAG_VALUE, "chars", TAG_SOURCE)
                )
    return found
