"""DataVault: the long-lived data stack - a protected KMS key and the dataset/checkpoint bucket."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from components.datastore import DataStore, DataStoreArgs
from components.kms import create_cluster_key
from components.naming import child_name


@dataclass
class DataVaultArgs:
    bucket_name: pulumi.Input[str]
    account_id: pulumi.Input[str]
    partition: pulumi.Input[str]
    region: str
    tags: dict[str, str] = field(default_factory=dict)


class DataVault(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: DataVaultArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:storage:DataVault", name, None, opts)
        self.key, self.alias = create_cluster_key(
            name,
            account_id=args.account_id,
            partition=args.partition,
            region=args.region,
            tags=args.tags,
            protect=True,
            parent=self,
        )
        self.store = DataStore(
            child_name(name, "data"),
            DataStoreArgs(
                bucket_name=args.bucket_name,
                kms_key_arn=self.key.arn,
                account_id=args.account_id,
                tags=args.tags,
            ),
            pulumi.ResourceOptions(parent=self),
        )
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
