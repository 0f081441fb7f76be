"""The customer-managed KMS key shared by the security and data components."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.naming import child_name
from gpu_cluster.components.policies import kms_key_policy

KEY_DELETION_WINDOW_DAYS = 30


def create_cluster_key(
    name: str,
    *,
    account_id: pulumi.Input[str],
    partition: pulumi.Input[str],
    region: str,
    tags: dict[str, str],
    protect: bool,
    parent: pulumi.Resource,
    autoscaling_role_arn: pulumi.Input[str] | None = None,
    alias_name: str,
    log_group_prefixes: tuple[str, ...] = (),
    trail_arn: pulumi.Input[str] | None = None,
    alert_publishers: bool = False,
) -> tuple[aws.kms.Key, aws.kms.Alias]:
    """A symmetric key with rotation, an explicit policy and an alias; never deleted by a
    teardown (retained), and protected when it encrypts data that must outlive compute."""
    policy = pulumi.Output.all(partition, account_id, autoscaling_role_arn, trail_arn).apply(
        lambda args: json.dumps(
            kms_key_policy(
                args[0], args[1], region, args[2], log_group_prefixes, args[3], alert_publishers
            )
        )
    )
    key = aws.kms.Key(
        child_name(name, "key"),
        description=f"gpu-cluster {name}: disks, buckets and logs",
        enable_key_rotation=True,
        deletion_window_in_days=KEY_DELETION_WINDOW_DAYS,
        policy=policy,
        tags=tags,
        opts=pulumi.ResourceOptions(parent=parent, protect=protect, retain_on_delete=True),
    )
    alias = aws.kms.Alias(
        child_name(name, "key-alias"),
        name=alias_name,
        target_key_id=key.key_id,
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return key, alias
