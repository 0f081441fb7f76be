"""The Pulumi program: stack config -> spec -> components -> stack outputs."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from components.cluster import GpuCluster, GpuClusterArgs, StorageArgs
from components.data_vault import DataVault, DataVaultArgs
from components.naming import cluster_tags
from components.node_group import RootVolume
from components.quotas import on_demand_quota, vcpus_needed
from infra.config import load_from_pulumi
from infra.validation import ResolvedCluster, ResolvedData


def data_bucket_name(
    cluster: str, account_id: pulumi.Input[str], region: str
) -> pulumi.Output[str]:
    """Globally unique and predictable, so IAM policies can name it before it exists."""
    return pulumi.Output.concat("gpuc-", cluster, "-", account_id, "-", region)


def storage_args(spec: ResolvedCluster) -> StorageArgs:
    storage = spec.storage
    if storage.source == "existing":
        assert storage.bucket is not None
        return StorageArgs(
            bucket_name=storage.bucket, create=False, data_key_arn=storage.kms_key_arn
        )
    if storage.source == "stack":
        data = pulumi.StackReference(storage.stack)
        return StorageArgs(
            bucket_name=data.require_output("bucketName"),
            create=False,
            data_key_arn=data.require_output("kmsKeyArn"),
        )
    account = aws.get_caller_identity_output().account_id
    return StorageArgs(
        bucket_name=storage.bucket or data_bucket_name(spec.name, account, spec.region), create=True
    )


def deploy_cluster(spec: ResolvedCluster) -> GpuCluster:
    cluster = GpuCluster(
        spec.name,
        GpuClusterArgs(
            facts=spec.facts,
            node_count=spec.node_count,
            efa=spec.efa,
            region=spec.region,
            availability_zone=spec.availability_zone,
            layout=spec.layout,
            storage=storage_args(spec),
            ami_ssm_parameter=spec.ami.ssm_parameter,
            ami_id=spec.ami.id,
            root_volume=RootVolume(
                size_gib=spec.root_volume.size_gib,
                iops=spec.root_volume.iops,
                throughput_mibps=spec.root_volume.throughput,
            ),
            nat_gateway=spec.network.nat_gateway,
            public_ip=spec.network.public_ip,
            tags=cluster_tags(spec.name, spec.tags),
        ),
    )
    pulumi.export("instanceType", spec.facts.instance_type)
    pulumi.export("nodeCount", spec.node_count)
    pulumi.export("totalGpus", cluster.total_gpus)
    pulumi.export("efaInterfacesPerNode", cluster.efa_interfaces_per_node)
    pulumi.export("nodePrivateIps", cluster.private_ips)
    pulumi.export("instanceIds", cluster.nodes.instance_ids)
    pulumi.export("ssmSessionCommands", cluster.ssm_commands)
    pulumi.export("bucketName", cluster.bucket_name)
    if cluster.torchrun_commands is not None:
        pulumi.export("torchrunCommands", cluster.torchrun_commands)
    pulumi.export(
        "onDemandQuota",
        {
            "quota": on_demand_quota(spec.facts.instance_type),
            "vcpusNeeded": vcpus_needed(spec.facts.vcpus, spec.node_count),
        },
    )
    if spec.hourly_usd is not None:
        pulumi.export("estimatedUsdPerHour", round(spec.hourly_usd * spec.node_count, 2))
    return cluster


def deploy_data(spec: ResolvedData) -> DataVault:
    identity = aws.get_caller_identity_output()
    vault = DataVault(
        spec.name,
        DataVaultArgs(
            bucket_name=spec.bucket
            or data_bucket_name(spec.name, identity.account_id, spec.region),
            account_id=identity.account_id,
            partition=aws.get_partition_output().partition,
            region=spec.region,
            tags=cluster_tags(spec.name, spec.tags),
        ),
    )
    pulumi.export("bucketName", vault.bucket_name)
    pulumi.export("bucketArn", vault.bucket_arn)
    pulumi.export("kmsKeyArn", vault.kms_key_arn)
    return vault


def main() -> None:
    spec = load_from_pulumi()
    if isinstance(spec, ResolvedData):
        deploy_data(spec)
    else:
        deploy_cluster(spec)
