"""S3 controls, checked per bucket through the configuration resources that refer to it."""

from __future__ import annotations

from gpu_cluster.policy import aws_types as t
from gpu_cluster.policy.control import control
from gpu_cluster.policy.resources import Res, Stack, as_list, statements

MINIMUM_TLS = 1.2
PUBLIC_ACCESS_FLAGS = (
    "blockPublicAcls",
    "blockPublicPolicy",
    "ignorePublicAcls",
    "restrictPublicBuckets",
)


def _configs(bucket: Res, stack: Stack, types: tuple[str, ...] | str) -> list[Res]:
    kinds = (types,) if isinstance(types, str) else types
    return [c for kind in kinds for c in stack.referring(bucket, kind, "bucket")]


def _bucket_control(id_, name, title, severity, fix):
    return control(id_, name, title, severity, fix, t.BUCKETS, uses_stack=True)


@_bucket_control(
    "S3.8",
    "s3-8-block-public-access",
    "S3 general purpose buckets should block public access",
    "high",
    "add an aws.s3.BucketPublicAccessBlock with all four settings true",
)
def public_access_blocked(r: Res, stack: Stack) -> list[str]:
    blocks = _configs(r, stack, t.PUBLIC_ACCESS_BLOCK)
    if not blocks:
        return ["no public access block"]
    missing = {
        flag for b in blocks for flag in PUBLIC_ACCESS_FLAGS if b.props.get(flag) is not True
    }
    return [f"public access block leaves {', '.join(sorted(missing))} off"] if missing else []


def _denies(bucket: Res, stack: Stack) -> list[dict]:
    return [
        dict(s.get("Condition") or {})
        for policy in _configs(bucket, stack, t.BUCKET_POLICY)
        for s in statements(policy.props.get("policy"))
        if s.get("Effect") == "Deny"
    ]


@_bucket_control(
    "S3.5",
    "s3-5-require-tls",
    "S3 general purpose buckets should require requests to use SSL (TLS 1.2 or later)",
    "medium",
    "deny aws:SecureTransport=false and s3:TlsVersion < 1.2 in the bucket policy",
)
def tls_required(r: Res, stack: Stack) -> list[str]:
    denies = _denies(r, stack)
    problems = []
    if not any(str((c.get("Bool") or {}).get("aws:SecureTransport")) == "false" for c in denies):
        problems.append("the bucket policy does not deny requests without TLS")
    versions = [
        float(str((c.get("NumericLessThan") or {}).get("s3:TlsVersion")))
        for c in denies
        if (c.get("NumericLessThan") or {}).get("s3:TlsVersion") is not None
    ]
    if not any(v >= MINIMUM_TLS for v in versions):
        problems.append(f"the bucket policy does not deny TLS versions below {MINIMUM_TLS}")
    return problems


@_bucket_control(
    "S3.12",
    "s3-12-no-acls",
    "ACLs should not be used to manage user access to S3 general purpose buckets",
    "medium",
    "add aws.s3.BucketOwnershipControls with objectOwnership BucketOwnerEnforced",
)
def acls_disabled(r: Res, stack: Stack) -> list[str]:
    owners = [
        (c.props.get("rule") or {}).get("objectOwnership") for c in _configs(r, stack, t.OWNERSHIP)
    ]
    return [] if "BucketOwnerEnforced" in owners else [f"object ownership is {owners or None}"]


@_bucket_control(
    "S3.17",
    "s3-17-sse-kms",
    "S3 general purpose buckets should be encrypted at rest with AWS KMS keys",
    "medium",
    "default encryption sseAlgorithm aws:kms with kmsMasterKeyId set to the stack's key",
)
def sse_kms(r: Res, stack: Stack) -> list[str]:
    defaults = [
        dict(rule.get("applyServerSideEncryptionByDefault") or {})
        for config in _configs(r, stack, t.ENCRYPTION)
        for rule in as_list(config.props.get("rules"))
    ]
    if any(d.get("sseAlgorithm") == "aws:kms" and d.get("kmsMasterKeyId") for d in defaults):
        return []
    algorithms = sorted({str(d.get("sseAlgorithm")) for d in defaults}) or ["none"]
    return [f"default encryption is {', '.join(algorithms)}, not SSE-KMS with a customer key"]


@_bucket_control(
    "S3.14",
    "s3-14-versioning",
    "S3 general purpose buckets should have versioning enabled",
    "low",
    "add aws.s3.BucketVersioning with status Enabled",
)
def versioning(r: Res, stack: Stack) -> list[str]:
    states = [
        (c.props.get("versioningConfiguration") or {}).get("status")
        for c in _configs(r, stack, t.VERSIONING)
    ]
    return [] if "Enabled" in states else [f"versioning is {states or None}"]


@_bucket_control(
    "S3.9",
    "s3-9-server-access-logging",
    "S3 general purpose buckets should have server access logging enabled",
    "medium",
    "add aws.s3.BucketLogging sending the bucket's access logs to the stack's log bucket",
)
def access_logging(r: Res, stack: Stack) -> list[str]:
    logging = [c for c in _configs(r, stack, t.LOGGING) if c.props.get("targetBucket")]
    return [] if logging else ["no server access logging"]


@_bucket_control(
    "S3.13",
    "s3-13-lifecycle",
    "S3 general purpose buckets should have Lifecycle configurations",
    "low",
    "add aws.s3.BucketLifecycleConfiguration (expire noncurrent versions, abort stale uploads)",
)
def lifecycle(r: Res, stack: Stack) -> list[str]:
    rules = [
        rule
        for config in _configs(r, stack, t.LIFECYCLE)
        for rule in as_list(config.props.get("rules"))
        if rule.get("status") == "Enabled"
    ]
    return [] if rules else ["no enabled lifecycle rule"]


CONTROLS = (
    public_access_blocked,
    tls_required,
    acls_disabled,
    sse_kms,
    versioning,
    access_logging,
    lifecycle,
)
