"""GpuNodeGroup: placement group, launch template and the nodes, bought the way the stack says.

One mechanism for every purchase option: an Auto Scaling group (min = max = desired = nodes)
in the node subnet and placement group. It launches from the launch template version the
program passes, so a node launched later always gets the current template; it never replaces a
running node because the template changed (no instance refresh unless the user starts one);
and it replaces an interrupted or failed node by itself, without `pulumi up`.

One on-demand node is a plain instance instead (a dev box: its root disk survives a stop).

Engine semantics relied on: the engine copies the old value of an ignored property into the
new inputs, replacements included (pkg/resource/deploy/step_generator.go, processIgnoreChanges),
so only the dev box's launch-template version, always "$Default", is ignored. What a running
node cannot change (its type, subnet, placement group, NIC layout, how it was bought) is in a
``replacement_trigger``; such replacements are delete-before-replace: the old nodes are gone
before new ones launch, so the quota and the placement group's capacity are never needed twice
for the nodes. A created reservation needs capacity and quota for every node when it is created,
so it must not be created while the old nodes still run outside it: a reservation that comes or
goes replaces the placement group delete-first (placement_trigger), the group is replaced with
its placement group, and the engine deletes a delete-first resource's replaced dependents before
it (step_generator.go, calculateDependentReplacements) - so one `pulumi up` drains the old
nodes, replaces the placement group, creates the reservation in it, then the group targeting it.
Replacing a created reservation drains the group first too (GROUP_REPLACE_ON_CHANGES).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.catalog import InstanceFacts
from gpu_cluster.components.launch_template import (
    RootVolume,
    encoded_user_data,
    metadata_options,
    network_interface_specs,
    nic_signature,
    root_block_device,
    tag_specifications,
    template_tags,
)
from gpu_cluster.components.names import StackIdentity, role_in, runtime_identity
from gpu_cluster.components.naming import child_name, node_name
from gpu_cluster.components.nic_layout import nic_layout
from gpu_cluster.components.node_events import record_node_events
from gpu_cluster.components.purchase import (
    CapacityReservation,
    OnDemand,
    Purchase,
    Spot,
    TemplateVersion,
    group_reservation_target,
    is_single_instance,
    mixed_instances_policy,
    placement_trigger,
    purchase_signature,
    template_market_options,
    template_reservation,
    uses_placement_group,
)

__all__ = ["GpuNodeGroup", "GpuNodeGroupArgs", "RootVolume"]

CLUSTER_STRATEGY = "cluster"
# Terminate first, then launch: never more nodes than asked for (vCPU quota, placement-group
# and reservation capacity), and all of them may be replaced together on request.
MAINTENANCE_POLICY: aws.autoscaling.GroupInstanceMaintenancePolicyArgsDict = {
    "min_healthy_percentage": 0,
    "max_healthy_percentage": 100,
}
DEFAULT_VERSION = "$Default"
DEV_BOX_IGNORED = "launchTemplate.version"
HEALTH_CHECK_GRACE_SECONDS = 900  # GPU nodes boot, build RAID0 and wait for peers


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
    availability_zone: pulumi.Input[str]
    purchase: Purchase = field(default_factory=OnDemand)
    ami_min_root_gib: pulumi.Input[int] = 0  # the AMI's root snapshot size
    autoscaling_role_arn: pulumi.Input[str] | None = None  # the group's service-linked role
    # What boot needs in place first: security-group rules, routes, endpoints, role policies.
    boot_dependencies: list[pulumi.Resource] = field(default_factory=list)
    identity: StackIdentity | None = None  # whose names (None: the running stack's)
    root_volume: RootVolume = field(default_factory=RootVolume)
    public_ip: bool = False
    container_network: str = "host"  # "bridge": containers need a second IMDS hop
    scale_to_zero: bool = False  # the idle stop may set the group to 0 nodes
    # the FSx for Lustre file system the nodes mount ("" for none): nodes go with it
    file_system_id: pulumi.Input[str] = ""
    # the user's own groups on every interface too (an existing network's network.securityGroupIds)
    extra_security_group_ids: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)


# terraform-provider-aws gives a group 10 minutes to update and to delete (draining it: every
# instance terminated first); a large GPU group can take longer, and a timeout in the middle of
# a replacement leaves the old group, placement group and subnet behind.
GROUP_TIMEOUTS = pulumi.CustomTimeouts(create="30m", update="45m", delete="45m")
# Both update in place for the provider, but the engine only deletes a dependent first when it
# would be replaced (step_generator.go, calculateDependentReplacements, which reads
# replaceOnChanges and not the replacementTrigger). So the group replaces with its subnet (a
# delete-first subnet replacement then drains the nodes before DeleteSubnet) and with its
# created reservation (a delete-first reservation replacement drains them before the old
# reservation is cancelled and the new one is created: capacity and quota are never needed
# for both), and with its placement group (a delete-first replacement of it, when a reservation
# the stack creates comes or goes, drains the nodes before the reservation is created or
# cancelled, and before DeletePlacementGroup, which refuses a group with instances in it).
# A new launch template (one that replaces the old: template_trigger) replaces the group too.
GROUP_REPLACE_ON_CHANGES = [
    "vpcZoneIdentifiers",
    "placementGroup",
    "capacityReservationSpecification",
    "launchTemplate.id",
    "mixedInstancesPolicy.launchTemplate.launchTemplateSpecification.launchTemplateId",
]


def events_names(name: str, args: GpuNodeGroupArgs) -> dict[str, Any]:
    """Whose node-events names these are: the cluster's, as its ``nodes`` (a group used on its
    own in a program: the running stack's, named after the group)."""
    zone = args.availability_zone  # a zone is its region and a letter
    region = zone[:-1] if isinstance(zone, str) else ""
    identity = args.identity or runtime_identity(name, region)
    return {"identity": identity, "role": role_in(identity, name)}


def template_trigger(single: bool, parts: list) -> str:
    """The launch template's replacementTrigger: what every node launched from it shares and a
    running node cannot change - the file system it mounts (its user data names it; a running
    node never gets a new version), and for the dev box also its architecture (the AMI is per
    architecture), placement group and NIC layout, which a stop and start cannot change. A new
    template means new nodes: the dev box's launchTemplate.id is ForceNew (ec2_instance.go) and
    the group replaces on it (GROUP_REPLACE_ON_CHANGES). The group's own trigger keeps the rest
    (type, subnet, NIC layout, purchase); the dev box has none: its type changes in place.

    A template registered before this trigger existed has none in its state, and the engine
    never replaces for a trigger that was null (step_generator.go shouldTriggerReplace), so an
    upgrade replaces nothing; "" (no file system) is a value, so adding or removing FSx does."""
    return "/".join(str(part) for part in parts) if single else str(parts[-1])


class GpuNodeGroup(pulumi.ComponentResource):
    placement_group: aws.ec2.PlacementGroup | None
    reservation: aws.ec2.CapacityReservation | None
    launch_template: aws.ec2.LaunchTemplate
    group: aws.autoscaling.Group | None
    instance: aws.ec2.Instance | None

    def __init__(
        self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:compute:GpuNodeGroup", name, None, opts)
        self.nic_slots = nic_layout(args.facts, args.efa)
        self.placement_group = None
        self.reservation = None
        self.group = None
        self.instance = None
        single = is_single_instance(args.purchase, args.node_count)
        if uses_placement_group(args.purchase, args.node_count, args.efa):
            # A new placement group for a reservation this stack creates, delete-first: the
            # engine deletes the group's nodes before it (GROUP_REPLACE_ON_CHANGES), so the
            # reservation, created after it, never needs capacity and quota for both.
            self.placement_group = aws.ec2.PlacementGroup(
                child_name(name, "placement"),
                strategy=CLUSTER_STRATEGY,
                tags=args.tags,
                opts=pulumi.ResourceOptions(
                    parent=self,
                    delete_before_replace=True,
                    replacement_trigger=placement_trigger(args.purchase),
                ),
            )
        if isinstance(args.purchase, CapacityReservation) and args.purchase.create:
            self.reservation = self._reservation(name, args)
        self.launch_template = aws.ec2.LaunchTemplate(
            child_name(name, "launch-template"),
            image_id=args.ami_id,
            instance_type=args.facts.instance_type,
            ebs_optimized="true",
            update_default_version=True,
            iam_instance_profile={"arn": args.instance_profile_arn},
            metadata_options=metadata_options(args.container_network),
            monitoring={"enabled": True},  # 1-minute CloudWatch metrics for GPU nodes
            block_device_mappings=[
                root_block_device(
                    args.root_device_name,
                    args.root_volume,
                    args.kms_key_arn,
                    args.ami_min_root_gib,
                )
            ],
            network_interfaces=network_interface_specs(
                self.nic_slots,
                args.subnet_id if single else None,
                [args.security_group_id, *args.extra_security_group_ids],
                args.public_ip,
            ),
            placement=(
                {
                    "group_name": self.placement_group.name,
                    "availability_zone": args.availability_zone,
                }
                if self.placement_group
                else {"availability_zone": args.availability_zone}
            ),
            instance_market_options=template_market_options(args.purchase),
            capacity_reservation_specification=template_reservation(args.purchase),
            user_data=encoded_user_data(args.user_data),
            tag_specifications=tag_specifications(args.tags),
            tags=template_tags(args.tags, args.container_network),
            opts=pulumi.ResourceOptions(
                parent=self,
                replacement_trigger=pulumi.Output.all(
                    args.facts.architecture,
                    self.placement_group.name if self.placement_group else "",
                    nic_signature(self.nic_slots),
                    args.file_system_id,
                ).apply(lambda parts: template_trigger(single, parts)),
            ),
        )
        # The group names the exact version: a new version updates the group in place (no
        # instance refresh is configured), so only nodes launched afterwards use it, and
        # `pulumi preview` shows the change; AWS asks for a pinned version with Capacity Blocks.
        template: TemplateVersion = {
            "id": self.launch_template.id,
            "version": self.launch_template.latest_version.apply(str),
        }
        replace_when = pulumi.ResourceOptions(
            parent=self,
            depends_on=args.boot_dependencies,
            delete_before_replace=True,
            replacement_trigger=pulumi.Output.all(
                args.facts.instance_type,
                args.subnet_id,
                self.placement_group.name if self.placement_group else "",
                nic_signature(self.nic_slots),
                purchase_signature(args.purchase),
            ).apply(lambda parts: "/".join(str(part) for part in parts)),
        )
        if single:
            # No replacementTrigger: the type changes in place (stop, modify, start: the root
            # disk stays); a new zone replaces the box through availabilityZone, and what a
            # stop and start cannot change through a new template (template_trigger).
            box = pulumi.ResourceOptions(
                parent=self, depends_on=args.boot_dependencies, delete_before_replace=True
            )
            self.instance = self._single_instance(name, args, template, box)
            self.instance_ids = pulumi.Output.all(self.instance.id)
            self.private_ips = pulumi.Output.all(self.instance.private_ip)
            self.group_name: pulumi.Output[str] | None = None
        else:
            self.group = self._group(name, args, template, replace_when)
            self.group_name = self.group.name
            self.events_log = record_node_events(
                name,
                self.group.name,
                spot=isinstance(args.purchase, Spot),
                kms_key_arn=args.kms_key_arn,
                tags=args.tags,
                parent=self,
                **events_names(name, args),
            )
        outputs = {"launchTemplateId": self.launch_template.id}
        if self.group is not None:
            outputs["groupName"] = self.group.name
        else:
            outputs |= {"instanceIds": self.instance_ids, "privateIps": self.private_ips}
        self.register_outputs(outputs)

    def _reservation(self, name: str, args: GpuNodeGroupArgs) -> aws.ec2.CapacityReservation:
        """A targeted On-Demand Capacity Reservation inside the placement group (as AWS
        recommends for cluster placement groups). It bills at the on-demand rate from creation
        until it ends or the stack is destroyed, whether nodes use it or not."""
        purchase = args.purchase
        assert isinstance(purchase, CapacityReservation)
        return aws.ec2.CapacityReservation(
            child_name(name, "reservation"),
            instance_type=args.facts.instance_type,
            instance_platform="Linux/UNIX",
            availability_zone=args.availability_zone,
            instance_count=args.node_count,
            instance_match_criteria="targeted",
            ebs_optimized=True,
            placement_group_arn=self.placement_group.arn if self.placement_group else None,
            end_date_type="limited" if purchase.end_date else "unlimited",
            end_date=purchase.end_date,
            tags=args.tags,
            # AWS cannot move a reservation into or out of a placement group: a new group, a new
            # one; and a cluster placement group with an active reservation cannot be deleted
            # (EC2 User Guide, "Capacity Reservations in cluster placement groups"), so the
            # engine cancels it first: a dependent it replaces (replaceOnChanges, as the group;
            # the provider updates placement_group_arn in place: ec2_capacity_reservation.go)
            opts=pulumi.ResourceOptions(
                parent=self,
                delete_before_replace=True,
                replacement_trigger=self.placement_group.name if self.placement_group else "",
                replace_on_changes=["placementGroupArn"],
            ),
        )

    def _group(
        self,
        name: str,
        args: GpuNodeGroupArgs,
        template: TemplateVersion,
        opts: pulumi.ResourceOptions,
    ) -> aws.autoscaling.Group:
        purchase = args.purchase
        tags = {**args.tags, "Name": child_name(name, "node")}
        spot = isinstance(purchase, Spot)
        return aws.autoscaling.Group(
            child_name(name, "group"),
            min_size=0 if args.scale_to_zero else args.node_count,
            max_size=args.node_count,
            desired_capacity=args.node_count,
            vpc_zone_identifiers=[args.subnet_id],
            placement_group=self.placement_group.name if self.placement_group else None,
            launch_template=(
                None if spot else {"id": template["id"], "version": template["version"]}
            ),
            mixed_instances_policy=(
                mixed_instances_policy(
                    purchase, args.facts.instance_type, template, args.node_count
                )
                if isinstance(purchase, Spot)
                else None
            ),
            capacity_rebalance=spot,
            capacity_reservation_specification=group_reservation_target(
                purchase, self.reservation.id if self.reservation else None
            ),
            service_linked_role_arn=args.autoscaling_role_arn,
            instance_maintenance_policy=MAINTENANCE_POLICY,
            health_check_type="EC2",
            health_check_grace_period=HEALTH_CHECK_GRACE_SECONDS,
            # Never wait for capacity (terraform-provider-aws resourceGroupCreate/Update wait up
            # to wait_for_capacity_timeout, 10m by default, and fail the step on any failed
            # scaling activity: InsufficientInstanceCapacity, a spot shortfall, a vCPU limit).
            # A failed step makes the engine skip everything after it - the idle stop,
            # schedules, expiry and node-event rules - while the group keeps launching GPUs.
            # "0" skips the wait: `pulumi up` ends with every cost control in place, and the
            # group keeps trying; a Capacity Block may start later anyway.
            wait_for_capacity_timeout="0",
            tags=[
                {"key": key, "value": value, "propagate_at_launch": True}
                for key, value in sorted(tags.items())
            ],
            opts=pulumi.ResourceOptions.merge(
                opts,
                pulumi.ResourceOptions(
                    custom_timeouts=GROUP_TIMEOUTS, replace_on_changes=GROUP_REPLACE_ON_CHANGES
                ),
            ),
        )

    def _single_instance(
        self,
        name: str,
        args: GpuNodeGroupArgs,
        template: TemplateVersion,
        opts: pulumi.ResourceOptions,
    ) -> aws.ec2.Instance:
        # "$Default" keeps a running box through template changes, and a replacement launches
        # the template's current default version. Once the default has moved past the box's
        # version, the provider's Read stores the box's numeric version in its place
        # (flattenInstanceLaunchTemplate reads the aws:ec2launchtemplate:version tag), after
        # `pulumi refresh` and after every in-place update (resourceInstanceUpdate ends with a
        # Read); its CustomizeDiff then forces a new instance. With the version ignored the
        # bridge drops it from the provider's diff (pulumi-terraform-bridge tfbridge/provider.go
        # Diff -> computeIgnoreChanges; sdk-v2 TransformInstanceDiff -> processIgnoreChanges),
        # so the planned state keeps the stored value and no later `up` replaces the box for
        # it; the engine copies the old input, "$Default" again, into a replacement.
        return aws.ec2.Instance(
            child_name(name, node_name(0)),
            launch_template={"id": template["id"], "version": DEFAULT_VERSION},
            instance_type=args.facts.instance_type,  # as in the template; explicit per node
            # The same zone as the template's, taken through the subnet: availabilityZone is
            # ForceNew, so a delete-first subnet replacement deletes the box first.
            availability_zone=pulumi.Output.from_input(args.subnet_id).apply(
                lambda _: args.availability_zone
            ),
            tags={**args.tags, "Name": child_name(name, node_name(0))},
            opts=pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(ignore_changes=[DEV_BOX_IGNORED])
            ),
        )
