"""Launch-template inputs for GPU nodes: EFA NIC layout, IMDSv2, encrypted gp3 root, user data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi

from gpu_cluster.components.nic_layout import NicSlot
from gpu_cluster.components.user_data import user_data_payload

if TYPE_CHECKING:
    import pulumi_aws as aws

# IMDS answers the node itself (and host-network containers, the usual NCCL/EFA set-up); one
# more hop only when the user says containers run on a bridge network.
IMDS_HOP_LIMIT = {"host": 1, "bridge": 2}
# Marks a template whose nodes run bridge-network containers, so the security audit can show
# why its hop limit is 2 (policy/suppressions.py reads the same tag).
CONTAINER_NETWORK_TAG = "gpu-cluster:container-network"


@dataclass
class RootVolume:
    size_gib: int = 200
    iops: int = 3000
    throughput_mibps: int = 125


def network_interface_specs(
    slots: tuple[NicSlot, ...],
    subnet_id: pulumi.Input[str] | None,
    security_group_ids: list[pulumi.Input[str]],
    public_ip: bool,
) -> list[aws.ec2.LaunchTemplateNetworkInterfaceArgsDict]:
    """Launch-template network interfaces for a NIC layout. ``subnet_id`` None: an Auto Scaling
    group launches every interface into its own subnets (EKS documents that a template subnet
    makes group launches fail), so the group's template names none."""
    specs: list[aws.ec2.LaunchTemplateNetworkInterfaceArgsDict] = []
    for slot in slots:
        spec: aws.ec2.LaunchTemplateNetworkInterfaceArgsDict = {
            "network_card_index": slot.network_card_index,
            "device_index": slot.device_index,
            "security_groups": security_group_ids,
            "delete_on_termination": "true",
        }
        if subnet_id is not None:
            spec["subnet_id"] = subnet_id
        if slot.interface_type != "interface":
            spec["interface_type"] = slot.interface_type
        # EC2 refuses AssociatePublicIpAddress for launches with several interfaces (as
        # ParallelCluster does, it is omitted there: the node subnet assigns no public IPs).
        if slot.network_card_index == 0 and slot.device_index == 0 and len(slots) == 1:
            spec["associate_public_ip_address"] = "true" if public_ip else "false"
        specs.append(spec)
    return specs


def nic_signature(slots: tuple[NicSlot, ...]) -> str:
    """A compact description of a NIC layout, e.g. ``0.0:interface,0.1:efa-only``."""
    return ",".join(f"{s.network_card_index}.{s.device_index}:{s.interface_type}" for s in slots)


def metadata_options(
    container_network: str = "host",
) -> aws.ec2.LaunchTemplateMetadataOptionsArgsDict:
    return {
        "http_endpoint": "enabled",
        "http_tokens": "required",
        "http_put_response_hop_limit": IMDS_HOP_LIMIT[container_network],
        "instance_metadata_tags": "enabled",
    }


def template_tags(tags: dict[str, str], container_network: str) -> dict[str, str]:
    """The template's own tags: the stack's, plus the container-network choice if not host."""
    if container_network == "host":
        return tags
    return {**tags, CONTAINER_NETWORK_TAG: container_network}


def root_volume_size(wanted_gib: int, ami_minimum_gib: int) -> int:
    """Never smaller than the AMI's root snapshot (EC2 would refuse the launch)."""
    if ami_minimum_gib > wanted_gib:
        pulumi.log.warn(
            f"rootVolume.sizeGib {wanted_gib} is below the AMI's root snapshot "
            f"({ami_minimum_gib} GiB); using {ami_minimum_gib} GiB"
        )
    return max(wanted_gib, ami_minimum_gib)


def root_block_device(
    device_name: pulumi.Input[str],
    volume: RootVolume,
    kms_key_arn: pulumi.Input[str],
    ami_minimum_gib: pulumi.Input[int] = 0,
) -> aws.ec2.LaunchTemplateBlockDeviceMappingArgsDict:
    return {
        "device_name": device_name,
        "ebs": {
            "volume_type": "gp3",
            "volume_size": pulumi.Output.from_input(ami_minimum_gib).apply(
                lambda minimum: root_volume_size(volume.size_gib, minimum)
            ),
            "iops": volume.iops,
            "throughput": volume.throughput_mibps,
            "encrypted": "true",
            "kms_key_id": kms_key_arn,
            "delete_on_termination": "true",
        },
    }


def encoded_user_data(script: pulumi.Input[str]) -> pulumi.Output[str]:
    """The launch template's user data: gzip, then base64 (components/user_data.py)."""
    return pulumi.Output.from_input(script).apply(user_data_payload)


def tag_specifications(
    tags: dict[str, str],
) -> list[aws.ec2.LaunchTemplateTagSpecificationArgsDict]:
    """Tags for what a launch creates: the instance, its volumes and its interfaces."""
    return [
        {"resource_type": kind, "tags": tags}
        for kind in ("instance", "volume", "network-interface")
    ]
