"""ClusterLustre: an FSx for Lustre file system in the node subnet, encrypted with the cluster
key, three folders linked to the data bucket's prefixes (data repository associations), and
the security-group rules Lustre clients need (TCP 988 and 1018-1023, AWS's documented ports).

What goes back to S3 follows the node role: /datasets is import-only (a file written there
stays on Lustre; datasets are not a node's to change), /checkpoints and /outputs are exported.
FSx writes through its own service-linked role, so an export of /datasets would have let a
node overwrite datasets that its IAM role may only read. FSx requires the associations' file
system paths not to overlap (CreateDataRepositoryAssociation API reference), and each to have
a unique bucket prefix, hence three sibling folders instead of one for the whole bucket."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.naming import child_name
from gpu_cluster.components.policies import NODE_WRITE_PREFIXES

LUSTRE_PORTS = ((988, 988), (1018, 1023))
LUSTRE_VERSION = "2.15"
DATASETS_PREFIX = "datasets"
AUTO_IMPORT_EVENTS = ["NEW", "CHANGED", "DELETED"]
# Files written under /checkpoints and /outputs go back to the bucket, so destroying the file
# system loses nothing; deleting a file on Lustre never deletes it in S3.
AUTO_EXPORT_EVENTS = ["NEW", "CHANGED"]
# folder (= bucket prefix) -> exported back to the bucket
LINKED_FOLDERS = {DATASETS_PREFIX: False, **dict.fromkeys(NODE_WRITE_PREFIXES, True)}


@dataclass(frozen=True)
class LustreSize:
    storage_capacity_gib: int = 1200
    throughput_per_tib: int = 250  # MB/s per TiB


@dataclass
class ClusterLustreArgs:
    vpc_id: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    node_security_group_id: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    bucket_name: pulumi.Input[str]
    storage_capacity_gib: int = 1200
    throughput_per_tib: int = 250
    tags: dict[str, str] = field(default_factory=dict)


def repository_policies(exported: bool) -> aws.fsx.DataRepositoryAssociationS3ArgsDict:
    """Automatic import always; automatic export only for the folders nodes may write."""
    policies: aws.fsx.DataRepositoryAssociationS3ArgsDict = {
        "auto_import_policy": {"events": AUTO_IMPORT_EVENTS}
    }
    if exported:
        policies["auto_export_policy"] = {"events": AUTO_EXPORT_EVENTS}
    return policies


def mount_target(dns_name: str, mount_name: str) -> str:
    """What `mount -t lustre` takes: <dns name>@tcp:/<mount name>."""
    return f"{dns_name}@tcp:/{mount_name}"


class ClusterLustre(pulumi.ComponentResource):
    file_system: aws.fsx.LustreFileSystem

    def __init__(
        self, name: str, args: ClusterLustreArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:storage:ClusterLustre", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        group = aws.ec2.SecurityGroup(
            child_name(name, "sg"),
            vpc_id=args.vpc_id,
            description="gpu-cluster FSx for Lustre: Lustre traffic from the nodes and itself",
            tags=args.tags,
            opts=child,
        )
        self.rules: list[pulumi.Resource] = []
        for low, high in LUSTRE_PORTS:
            for source, role in ((args.node_security_group_id, "nodes"), (group.id, "self")):
                self.rules.append(
                    aws.vpc.SecurityGroupIngressRule(
                        child_name(name, f"{role}-in-{low}"),
                        security_group_id=group.id,
                        referenced_security_group_id=source,
                        ip_protocol="tcp",
                        from_port=low,
                        to_port=high,
                        description=f"Lustre {low}-{high} from the {role}",
                        opts=child,
                    )
                )
            for owner, target, role in (
                (args.node_security_group_id, group.id, "nodes-out"),
                (group.id, group.id, "self-out"),
            ):
                self.rules.append(
                    aws.vpc.SecurityGroupEgressRule(
                        child_name(name, f"{role}-{low}"),
                        security_group_id=owner,
                        referenced_security_group_id=target,
                        ip_protocol="tcp",
                        from_port=low,
                        to_port=high,
                        description=f"Lustre {low}-{high} to the file system",
                        opts=child,
                    )
                )
        self.file_system = aws.fsx.LustreFileSystem(
            child_name(name, "fs"),
            deployment_type="PERSISTENT_2",
            storage_type="SSD",
            storage_capacity=args.storage_capacity_gib,
            per_unit_storage_throughput=args.throughput_per_tib,
            subnet_ids=args.subnet_id,  # one subnet (pulumi-aws 7 takes a string)
            security_group_ids=[group.id],
            kms_key_id=args.kms_key_arn,
            file_system_type_version=LUSTRE_VERSION,
            data_compression_type="LZ4",
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=self.rules),
        )
        self.associations = [
            aws.fsx.DataRepositoryAssociation(
                child_name(name, folder),
                file_system_id=self.file_system.id,
                file_system_path=f"/{folder}",
                data_repository_path=pulumi.Output.concat("s3://", args.bucket_name, f"/{folder}/"),
                batch_import_meta_data_on_create=True,
                s3=repository_policies(exported),
                tags=args.tags,
                opts=child,
            )
            for folder, exported in LINKED_FOLDERS.items()
        ]
        self.mount_target = pulumi.Output.all(
            self.file_system.dns_name, self.file_system.mount_name
        ).apply(lambda parts: mount_target(parts[0], parts[1]))
        self.register_outputs({"mountTarget": self.mount_target})
