"""The audit trail (optional, data stack): a CloudTrail trail with the account's management
events and every object-level read and write of the data bucket, encrypted with the data key,
log-file validation on, delivered under cloudtrail/ in the locked-down access-log bucket.

Key and bucket policies follow AWS's CloudTrail documentation ("Configure AWS KMS key policies
for CloudTrail", "Amazon S3 bucket policy for CloudTrail"), scoped with aws:SourceArn to this
trail, whose ARN is known before it exists."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.naming import child_name

TRAIL_PREFIX = "cloudtrail"


@dataclass(frozen=True)
class TrailSettings:
    name: str
    arn: pulumi.Input[str]


def trail_arn(partition: str, region: str, account_id: str, name: str) -> str:
    return f"arn:{partition}:cloudtrail:{region}:{account_id}:trail/{name}"


def event_selectors(bucket_arn: str) -> list[aws.cloudtrail.TrailAdvancedEventSelectorArgsDict]:
    """Management events (read and write), and S3 object events of the data bucket only."""
    return [
        {
            "name": "Management events",
            "field_selectors": [{"field": "eventCategory", "equals": ["Management"]}],
        },
        {
            "name": "Data bucket object reads and writes",
            "field_selectors": [
                {"field": "eventCategory", "equals": ["Data"]},
                {"field": "resources.type", "equals": ["AWS::S3::Object"]},
                {"field": "resources.ARN", "starts_withs": [f"{bucket_arn}/"]},
            ],
        },
    ]


def create_trail(
    name: str,
    settings: TrailSettings,
    bucket_arn: pulumi.Input[str],
    log_bucket: aws.s3.Bucket,
    kms_key_arn: pulumi.Input[str],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> aws.cloudtrail.Trail:
    """The trail; `opts` must depend on the log bucket's policy (CloudTrail checks it)."""
    return aws.cloudtrail.Trail(
        child_name(name, "audit-trail"),
        name=settings.name,
        s3_bucket_name=log_bucket.id,
        s3_key_prefix=TRAIL_PREFIX,
        kms_key_id=kms_key_arn,
        enable_log_file_validation=True,
        is_multi_region_trail=True,
        include_global_service_events=True,
        advanced_event_selectors=pulumi.Output.from_input(bucket_arn).apply(event_selectors),
        tags=tags,
        opts=opts,
    )
