"""DataStore: the S3 bucket for datasets and checkpoints, locked down and never deleted."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.audit_trail import TRAIL_PREFIX, TrailSettings, create_trail
from gpu_cluster.components.naming import child_name
from gpu_cluster.components.policies import (
    ACCESS_LOG_PREFIX,
    access_log_bucket_policy,
    tls_only_bucket_policy,
)

ABORT_INCOMPLETE_UPLOADS_DAYS = 7
LOG_RETENTION_DAYS = 365


@dataclass
class DataStoreArgs:
    bucket_name: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    account_id: pulumi.Input[str] | None = None  # set: server access logs to a log bucket
    trail: TrailSettings | None = None  # set: a CloudTrail trail logging into the log bucket
    tags: dict[str, str] = field(default_factory=dict)


class DataStore(pulumi.ComponentResource):
    bucket: aws.s3.Bucket

    def __init__(
        self, name: str, args: DataStoreArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:storage:DataStore", name, None, opts)
        # Every child is retained on delete: a teardown must not strip the bucket's settings.
        keep = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        self.bucket = aws.s3.Bucket(
            child_name(name, "bucket"),
            bucket=args.bucket_name,
            force_destroy=False,
            tags=args.tags,
            opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(protect=True)),
        )
        close_to_public(name, "", self.bucket, keep)
        aws.s3.BucketServerSideEncryptionConfiguration(
            child_name(name, "encryption"),
            bucket=self.bucket.id,
            rules=[
                {
                    "apply_server_side_encryption_by_default": {
                        "sse_algorithm": "aws:kms",
                        "kms_master_key_id": args.kms_key_arn,
                    },
                    "bucket_key_enabled": True,
                }
            ],
            opts=keep,
        )
        aws.s3.BucketVersioning(
            child_name(name, "versioning"),
            bucket=self.bucket.id,
            versioning_configuration={"status": "Enabled"},
            opts=keep,
        )
        aws.s3.BucketLifecycleConfiguration(
            child_name(name, "lifecycle"),
            bucket=self.bucket.id,
            rules=[
                {
                    "id": "abort-incomplete-multipart-uploads",
                    "status": "Enabled",
                    "filter": {"prefix": ""},
                    "abort_incomplete_multipart_upload": {
                        "days_after_initiation": ABORT_INCOMPLETE_UPLOADS_DAYS
                    },
                }
            ],
            opts=keep,
        )
        aws.s3.BucketPolicy(
            child_name(name, "tls-only"),
            bucket=self.bucket.id,
            policy=self.bucket.arn.apply(lambda arn: json.dumps(tls_only_bucket_policy(arn))),
            opts=keep,
        )
        self.log_bucket = None
        self.trail = None
        if args.account_id is not None:
            self.log_bucket = self._access_logs(name, args, keep)
        self.register_outputs({"bucketName": self.bucket.bucket, "bucketArn": self.bucket.arn})

    def _access_logs(
        self, name: str, args: DataStoreArgs, keep: pulumi.ResourceOptions
    ) -> aws.s3.Bucket:
        """Who read or wrote the data: S3 server access logs in a locked-down bucket of their
        own, encrypted with S3-managed keys (the only default encryption AWS allows for a
        server-access-log destination), kept LOG_RETENTION_DAYS."""
        logs = log_bucket(
            name,
            "access-logs",
            {"expire-access-logs": ACCESS_LOG_PREFIX, "expire-trail-logs": f"{TRAIL_PREFIX}/"},
            args.tags,
            keep,
            protect=True,
        )
        trail_arn = args.trail.arn if args.trail else None
        log_policy = aws.s3.BucketPolicy(
            child_name(name, "access-logs-policy"),
            bucket=logs.id,
            policy=pulumi.Output.all(logs.arn, self.bucket.arn, args.account_id, trail_arn).apply(
                lambda parts: json.dumps(
                    access_log_bucket_policy(*parts, trail_prefix=TRAIL_PREFIX)
                )
            ),
            opts=keep,
        )
        if args.trail:
            self.trail = create_trail(
                name,
                args.trail,
                self.bucket.arn,
                logs,
                args.kms_key_arn,
                args.tags,
                pulumi.ResourceOptions(parent=self, depends_on=[log_policy]),
            )
        aws.s3.BucketLogging(
            child_name(name, "access-logging"),
            bucket=self.bucket.id,
            target_bucket=logs.id,
            target_prefix=ACCESS_LOG_PREFIX,
            opts=keep,
        )
        return logs


def log_bucket(
    name: str,
    role: str,
    expiring_prefixes: dict[str, str],
    tags: dict[str, str],
    keep: pulumi.ResourceOptions,
    protect: bool = False,
) -> aws.s3.Bucket:
    """A locked-down bucket for logs AWS services deliver (S3 server access logs, load balancer
    access logs): private, owner-enforced, SSE-S3 (the only default encryption those deliveries
    support), versioned so a deleted or overwritten log stays recoverable for 30 days (S3.14),
    each prefix kept LOG_RETENTION_DAYS. Its bucket policy is the caller's."""
    bucket = aws.s3.Bucket(
        child_name(name, role),
        force_destroy=False,
        tags=tags,
        opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(protect=protect)),
    )
    close_to_public(name, f"{role}-", bucket, keep)
    aws.s3.BucketServerSideEncryptionConfiguration(
        child_name(name, f"{role}-encryption"),
        bucket=bucket.id,
        rules=[{"apply_server_side_encryption_by_default": {"sse_algorithm": "AES256"}}],
        opts=keep,
    )
    aws.s3.BucketVersioning(
        child_name(name, f"{role}-versioning"),
        bucket=bucket.id,
        versioning_configuration={"status": "Enabled"},
        opts=keep,
    )
    rules: list[aws.s3.BucketLifecycleConfigurationRuleArgsDict] = [
        {
            "id": rule,
            "status": "Enabled",
            "filter": {"prefix": prefix},
            "expiration": {"days": LOG_RETENTION_DAYS},
            "noncurrent_version_expiration": {"noncurrent_days": 30},
        }
        for rule, prefix in expiring_prefixes.items()
    ]
    rules.append(
        {  # parts of an upload that never completed bill until they are deleted
            "id": "abort-incomplete-uploads",
            "status": "Enabled",
            "filter": {},
            "abort_incomplete_multipart_upload": {"days_after_initiation": 7},
        }
    )
    aws.s3.BucketLifecycleConfiguration(
        child_name(name, f"{role}-lifecycle"),
        bucket=bucket.id,
        rules=rules,
        opts=keep,
    )
    return bucket


def close_to_public(
    name: str, prefix: str, bucket: aws.s3.Bucket, keep: pulumi.ResourceOptions
) -> None:
    """Block every kind of public access to `bucket` and disable its ACLs (owner owns all)."""
    aws.s3.BucketPublicAccessBlock(
        child_name(name, f"{prefix}public-access-block"),
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        opts=keep,
    )
    aws.s3.BucketOwnershipControls(
        child_name(name, f"{prefix}ownership"),
        bucket=bucket.id,
        rule={"object_ownership": "BucketOwnerEnforced"},
        opts=keep,
    )
