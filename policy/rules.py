"""Security rules as pure functions: (resource type, engine-named inputs) -> violation messages.

Used by the CrossGuard pack in __main__.py (`pulumi preview --policy-pack policy`) and by the
tests on every stack's offline plan. Imports nothing from the project."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable
from typing import Any

Rule = Callable[[str, dict[str, Any]], list[str]]
WORLD = ("0.0.0.0/0", "::/0")


def imdsv2_required(type_: str, props: dict[str, Any]) -> list[str]:
    if type_ not in ("aws:ec2/launchTemplate:LaunchTemplate", "aws:ec2/instance:Instance"):
        return []
    if type_ == "aws:ec2/instance:Instance" and "launchTemplate" in props:
        return []  # the launch template carries the metadata options
    tokens = (props.get("metadataOptions") or {}).get("httpTokens")
    return [] if tokens == "required" else [f"IMDSv2 must be required (httpTokens={tokens!r})"]


def disks_encrypted_with_cmk(type_: str, props: dict[str, Any]) -> list[str]:
    if type_ != "aws:ec2/launchTemplate:LaunchTemplate":
        return []
    problems = []
    for mapping in props.get("blockDeviceMappings") or []:
        ebs = mapping.get("ebs") or {}
        if str(ebs.get("encrypted")).lower() != "true" or not ebs.get("kmsKeyId"):
            problems.append(f"{mapping.get('deviceName')}: EBS must be encrypted with a KMS key")
    return problems


def no_public_ips(type_: str, props: dict[str, Any]) -> list[str]:
    if type_ == "aws:ec2/subnet:Subnet" and props.get("mapPublicIpOnLaunch"):
        return ["subnets must not hand out public IPs on launch"]
    if type_ == "aws:ec2/launchTemplate:LaunchTemplate":
        nics = props.get("networkInterfaces") or []
        if any(str(n.get("associatePublicIpAddress")).lower() == "true" for n in nics):
            return ["nodes must not get public IPs (use SSM Session Manager)"]
    return []


def no_world_ingress(type_: str, props: dict[str, Any]) -> list[str]:
    if type_ == "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule":
        sources = {props.get("cidrIpv4"), props.get("cidrIpv6")}
    elif type_ == "aws:ec2/securityGroup:SecurityGroup":
        sources = {
            cidr
            for rule in props.get("ingress") or []
            for cidr in (rule.get("cidrBlocks") or []) + (rule.get("ipv6CidrBlocks") or [])
        }
    else:
        return []
    return ["no ingress from the whole internet"] if sources & set(WORLD) else []


def bucket_locked_down(type_: str, props: dict[str, Any]) -> list[str]:
    if type_ == "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock":
        flags = (
            "blockPublicAcls",
            "blockPublicPolicy",
            "ignorePublicAcls",
            "restrictPublicBuckets",
        )
        missing = [flag for flag in flags if props.get(flag) is not True]
        return [f"public access block must set {', '.join(missing)}"] if missing else []
    if (
        type_
        == "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    ):
        for rule in props.get("rules") or []:
            default = rule.get("applyServerSideEncryptionByDefault") or {}
            if default.get("sseAlgorithm") != "aws:kms" or not default.get("kmsMasterKeyId"):
                return ["buckets must default to SSE-KMS with a customer key"]
    if type_ == "aws:s3/bucketPolicy:BucketPolicy":
        policy = props.get("policy")
        document = json.loads(policy) if isinstance(policy, str) else policy or {}
        denies = [
            s.get("Condition", {})
            for s in document.get("Statement", [])
            if s.get("Effect") == "Deny"
        ]
        if {"Bool": {"aws:SecureTransport": "false"}} not in denies:
            return ["bucket policy must deny requests without TLS"]
    return []


def kms_rotation(type_: str, props: dict[str, Any]) -> list[str]:
    if type_ == "aws:kms/key:Key" and props.get("enableKeyRotation") is not True:
        return ["KMS keys must have rotation enabled"]
    return []


RULES: dict[str, tuple[str, Rule]] = {
    "imdsv2-required": ("EC2 metadata must require IMDSv2 tokens", imdsv2_required),
    "disks-encrypted-with-cmk": ("EBS volumes encrypted with a KMS key", disks_encrypted_with_cmk),
    "no-public-ips": ("nodes and subnets get no public IPs", no_public_ips),
    "no-world-ingress": ("no security group ingress from 0.0.0.0/0 or ::/0", no_world_ingress),
    "bucket-locked-down": ("buckets: public access blocked, SSE-KMS, TLS only", bucket_locked_down),
    "kms-rotation": ("KMS keys rotate yearly", kms_rotation),
}


# Explicit, documented exceptions: (rule, resource-name pattern) -> why.
SUPPRESSIONS: dict[tuple[str, str], str] = {
    ("bucket-locked-down", "*-access-logs-encryption"): (
        "an S3 server-access-log destination supports only SSE-S3 default encryption (AWS S3 "
        "docs, server access logging); the log bucket is private, TLS-only and versionless"
    ),
}


def suppressed(rule: str, resource_name: str) -> str | None:
    """Why a rule does not apply to this resource, or None."""
    return next(
        (
            why
            for (name, pattern), why in SUPPRESSIONS.items()
            if name == rule and fnmatch.fnmatchcase(resource_name, pattern)
        ),
        None,
    )


def violations(type_: str, props: dict[str, Any], resource_name: str = "") -> list[tuple[str, str]]:
    """Every (rule name, message) a resource violates, suppressions left out."""
    return [
        (name, message)
        for name, (_, rule) in RULES.items()
        for message in rule(type_, props)
        if not suppressed(name, resource_name)
    ]
