"""DataVault: the long-lived data stack - a protected KMS key and the dataset/checkpoint bucket."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.audit_trail import TrailSettings, trail_arn
from gpu_cluster.components.datastore import DataStore, DataStoreArgs
from gpu_cluster.components.kms import create_cluster_key
from gpu_cluster.components.names import StackIdentity, key_alias, runtime_identity, trail_name
from gpu_cluster.components.naming import child_name


@dataclass
class DataVaultArgs:
    bucket_name: pulumi.Input[str]
    account_id: pulumi.Input[str]
    partition: pulumi.Input[str]
    region: str
    audit_trail: bool = False  # a CloudTrail trail of the data bucket and management events
    ebs_encryption_by_default: bool = False  # account guard: EC2.7
    snapshot_block_public_access: bool = False  # account guard: EC2.182
    identity: StackIdentity | None = None  # whose names (None: the running stack's)
    tags: dict[str, str] = field(default_factory=dict)


class DataVault(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: DataVaultArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:storage:DataVault", name, None, opts)
        ids = args.identity or runtime_identity(name, args.region)
        trail = None
        if args.audit_trail:
            settings_name = trail_name(ids)
            trail = TrailSettings(
                settings_name,
                pulumi.Output.all(args.partition, args.account_id).apply(
                    lambda v: trail_arn(v[0], args.region, v[1], settings_name)
                ),
            )
        self.key, self.alias = create_cluster_key(
            name,
            account_id=args.account_id,
            partition=args.partition,
            region=args.region,
            tags=args.tags,
            protect=True,
            parent=self,
            alias_name=key_alias(ids, "data"),
            trail_arn=trail.arn if trail else None,
        )
        self.store = DataStore(
            child_name(name, "data"),
            DataStoreArgs(
                bucket_name=args.bucket_name,
                kms_key_arn=self.key.arn,
                account_id=args.account_id,
                trail=trail,
                tags=args.tags,
            ),
            pulumi.ResourceOptions(parent=self),
        )
        create_account_guards(name, args, pulumi.ResourceOptions(parent=self))
        self.bucket_name = self.store.bucket.bucket
        self.bucket_arn = self.store.bucket.arn
        self.kms_key_arn = self.key.arn
        self.register_outputs(
            {
                "bucketName": self.bucket_name,
                "bucketArn": self.bucket_arn,
                "kmsKeyArn": self.kms_key_arn,
            }
        )


def create_account_guards(name: str, args: DataVaultArgs, opts: pulumi.ResourceOptions) -> None:
    """Region-wide settings of the account, each opt-in. Retained on delete: destroying the
    data stack leaves them on (deleting EncryptionByDefault would switch encryption off). The
    default key stays AWS's aws/ebs: making it this stack's key would make every other
    workload's volumes depend on its key policy."""
    keep = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
    if args.ebs_encryption_by_default:
        aws.ebs.EncryptionByDefault(
            child_name(name, "ebs-encryption-by-default"), enabled=True, opts=keep
        )
    if args.snapshot_block_public_access:
        aws.ebs.SnapshotBlockPublicAccess(
            child_name(name, "snapshot-block-public-access"), state="block-all-sharing", opts=keep
        )
