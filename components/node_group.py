"""GpuNodeGroup: placement group, launch template (EFA layout, IMDSv2, encrypted root) and nodes."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from components.catalog import InstanceFacts
from components.naming import child_name, node_name
from components.nic_layout import NicSlot, nic_layout
from components.user_data import NODE_COUNT_TAG, NODE_INDEX_TAG

IMDS_HOP_LIMIT = 2  # containers on the node reach IMDS; nothing further away does
CLUSTER_STRATEGY = "cluster"


@dataclass
class RootVolume:
    size_gib: int = 200
    iops: int = 3000
    throughput_mibps: int = 125


@dataclass
class GpuNodeGroupArgs:
    facts: InstanceFacts
    node_count: int
    efa: bool
    ami_id: pulumi.Input[str]
    root_device_name: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    instance_profile_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    user_data: pulumi.Input[str]
    availability_zone: str
    root_volume: RootVolume = field(default_factory=RootVolume)
    public_ip: bool = False
    tags: dict[str, str] = field(default_factory=dict)


def needs_placement_group(node_count: int, efa: bool) -> bool:
    """Multi-node or EFA traffic wants the lowest-latency, highest-throughput placement."""
    return node_count > 1 or efa


def network_interface_specs(
    slots: tuple[NicSlot, ...],
    subnet_id: pulumi.Input[str],
    security_group_id: pulumi.Input[str],
    public_ip: bool,
) -> list[dict]:
    """Launch-template network interfaces for a NIC layout."""
    specs = []
    for slot in slots:
        spec = {
            "network_card_index": slot.network_card_index,
            "device_index": slot.device_index,
            "subnet_id": subnet_id,
            "security_groups": [security_group_id],
            "delete_on_termination": "true",
        }
        if slot.interface_type != "interface":
            spec["interface_type"] = slot.interface_type
        if slot.network_card_index == 0 and slot.device_index == 0:
            spec["associate_public_ip_address"] = "true" if public_ip else "false"
        specs.append(spec)
    return specs


def nic_signature(slots: tuple[NicSlot, ...]) -> str:
    """A compact description of a NIC layout, e.g. ``0.0:interface,0.1:efa-only``."""
    return ",".join(f"{s.network_card_index}.{s.device_index}:{s.interface_type}" for s in slots)


class GpuNodeGroup(pulumi.ComponentResource):
    nodes: list[aws.ec2.Instance]
    placement_group: aws.ec2.PlacementGroup | None
    launch_template: aws.ec2.LaunchTemplate

    def __init__(
        self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:compute:GpuNodeGroup", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.nic_slots = nic_layout(args.facts, args.efa)
        self.placement_group = None
        placement = None
        if needs_placement_group(args.node_count, args.efa):
            self.placement_group = aws.ec2.PlacementGroup(
                child_name(name, "placement"),
                strategy=CLUSTER_STRATEGY,
                tags=args.tags,
                opts=child,
            )
            placement = {
                "group_name": self.placement_group.name,
                "availability_zone": args.availability_zone,
            }
        self.launch_template = aws.ec2.LaunchTemplate(
            child_name(name, "launch-template"),
            image_id=args.ami_id,
            instance_type=args.facts.instance_type,
            ebs_optimized="true",
            update_default_version=True,
            iam_instance_profile={"arn": args.instance_profile_arn},
            metadata_options={
                "http_endpoint": "enabled",
                "http_tokens": "required",
                "http_put_response_hop_limit": IMDS_HOP_LIMIT,
                "instance_metadata_tags": "enabled",
            },
            block_device_mappings=[
                {
                    "device_name": args.root_device_name,
                    "ebs": {
                        "volume_type": "gp3",
                        "volume_size": args.root_volume.size_gib,
                        "iops": args.root_volume.iops,
                        "throughput": args.root_volume.throughput_mibps,
                        "encrypted": "true",
                        "kms_key_id": args.kms_key_arn,
                        "delete_on_termination": "true",
                    },
                }
            ],
            network_interfaces=network_interface_specs(
                self.nic_slots, args.subnet_id, args.security_group_id, args.public_ip
            ),
            placement=placement,
            user_data=pulumi.Output.from_input(args.user_data).apply(
                lambda script: base64.b64encode(script.encode()).decode()
            ),
            tag_specifications=[
                {"resource_type": kind, "tags": args.tags}
                for kind in ("instance", "volume", "network-interface")
            ],
            tags=args.tags,
            opts=child,
        )
        # A changed template (a new Deep Learning AMI behind the SSM parameter, a new disk
        # size) applies to nodes launched from then on; it never replaces a running node.
        # What a node cannot change in place (type, subnet/AZ, placement group, NIC layout)
        # replaces it, through the replacement trigger.
        keep_running = pulumi.ResourceOptions(
            parent=self,
            ignore_changes=["launchTemplate"],
            replacement_trigger=pulumi.Output.all(
                args.facts.instance_type,
                args.subnet_id,
                self.placement_group.name if self.placement_group else "",
                nic_signature(self.nic_slots),
            ).apply(lambda parts: "/".join(str(part) for part in parts)),
        )
        self.nodes = [
            aws.ec2.Instance(
                child_name(name, node_name(index)),
                launch_template={
                    "id": self.launch_template.id,
                    "version": self.launch_template.latest_version.apply(str),
                },
                instance_type=args.facts.instance_type,  # as in the template; explicit per node
                tags={
                    **args.tags,
                    "Name": child_name(name, node_name(index)),
                    NODE_INDEX_TAG: str(index),
                    NODE_COUNT_TAG: str(args.node_count),  # a tag: resizing updates it in place
                },
                opts=keep_running,
            )
            for index in range(args.node_count)
        ]
        self.private_ips = pulumi.Output.all(*(node.private_ip for node in self.nodes))
        self.instance_ids = pulumi.Output.all(*(node.id for node in self.nodes))
        self.register_outputs(
            {
                "instanceIds": self.instance_ids,
                "privateIps": self.private_ips,
                "launchTemplateId": self.launch_template.id,
            }
        )
