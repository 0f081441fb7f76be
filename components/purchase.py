"""How a node group buys its GPU time, and the Auto Scaling / launch-template settings for each
purchase option (pure functions: plain dicts in the pulumi-aws input shapes).

AWS semantics relied on (EC2 and EC2 Auto Scaling user guides):
- spot through an Auto Scaling group's mixed instances policy: the launch template must not
  request spot itself; allocation ``price-capacity-optimized``; an interrupted spot instance is
  terminated and replaced by the group (stop/hibernate is not allowed for spot instances in a
  cluster placement group, and Auto Scaling only ever terminates them);
- On-Demand Capacity Reservations are targeted by the group's capacity reservation
  specification (by id or by resource group), preference ``capacity-reservations-only``;
- a Capacity Block is targeted from the launch template (market type ``capacity-block`` plus
  the reservation id); blocks are already placed together, so no placement group is used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, TypedDict

import pulumi

if TYPE_CHECKING:
    import pulumi_aws as aws

SPOT_ALLOCATION = "price-capacity-optimized"
RESERVATION_PREFERENCE = "capacity-reservations-only"
CAPACITY_BLOCK_MARKET = "capacity-block"


@dataclass(frozen=True)
class OnDemand:
    kind: str = field(default="on-demand", init=False)


@dataclass(frozen=True)
class Spot:
    max_price: float | None = None
    on_demand_base: int = 0
    fallback_types: tuple[str, ...] = ()
    kind: str = field(default="spot", init=False)


@dataclass(frozen=True)
class CapacityReservation:
    """Target an existing reservation (``reservation_id`` or ``resource_group_arn``), or create
    one (``create``) sized to the group, inside its placement group."""

    reservation_id: str | None = None
    resource_group_arn: str | None = None
    create: bool = False
    end_date: str | None = None
    kind: str = field(default="capacity-reservation", init=False)


# EC2 User Guide, "Capacity Blocks for ML": a block's instances are terminated when it ends, and
# Auto Scaling users should scale in at least 30 minutes before the end time.
BLOCK_END_MARGIN = timedelta(minutes=30)


@dataclass(frozen=True)
class CapacityBlock:
    reservation_id: str
    kind: str = field(default="capacity-block", init=False)


Purchase = OnDemand | Spot | CapacityReservation | CapacityBlock


class TemplateVersion(TypedDict):
    """A launch template and the exact version of it a group launches."""

    id: pulumi.Input[str]
    version: pulumi.Input[str]


def uses_placement_group(purchase: Purchase, node_count: int, efa: bool) -> bool:
    """Multi-node or EFA traffic wants a cluster placement group, except in a Capacity Block,
    which AWS has already placed together (a placement group cannot be combined with it)."""
    if isinstance(purchase, CapacityBlock):
        return False
    return node_count > 1 or efa


def is_single_instance(purchase: Purchase, node_count: int) -> bool:
    """One on-demand node is a plain instance (a dev box: its root disk survives a stop, and an
    idle stop can stop it); anything else is an Auto Scaling group that heals itself."""
    return node_count == 1 and isinstance(purchase, OnDemand)


def placement_trigger(purchase: Purchase) -> str:
    """The placement group's replacementTrigger: a reservation this stack creates is made in a
    placement group of its own, so a switch to or from one replaces the group delete-first and,
    with it, the nodes first (CreateCapacityReservation needs capacity and On-Demand quota for
    every instance it reserves, whether or not instances run outside it)."""
    created = isinstance(purchase, CapacityReservation) and purchase.create
    return "created-reservation" if created else "no-created-reservation"


def purchase_signature(purchase: Purchase) -> str:
    """How running nodes were bought: a node bought another way (or in another reservation or
    block) has to be replaced to be bought the new way. Spot price, base and fallback types are
    not in it: they apply to launches from then on, in place."""
    if isinstance(purchase, CapacityReservation):
        target = purchase.reservation_id or purchase.resource_group_arn or "created"
        return f"{purchase.kind}:{target}"
    if isinstance(purchase, CapacityBlock):
        return f"{purchase.kind}:{purchase.reservation_id}"
    return purchase.kind


def instance_types(primary: str, purchase: Purchase) -> list[str]:
    """Every type the group may launch, primary first."""
    fallback = purchase.fallback_types if isinstance(purchase, Spot) else ()
    return [primary, *(t for t in fallback if t != primary)]


def mixed_instances_policy(
    purchase: Spot, primary: str, template: TemplateVersion, node_count: int
) -> aws.autoscaling.GroupMixedInstancesPolicyArgsDict:
    """Spot above an optional on-demand base, across the primary and fallback types."""
    distribution: aws.autoscaling.GroupMixedInstancesPolicyInstancesDistributionArgsDict = {
        "on_demand_base_capacity": min(purchase.on_demand_base, node_count),
        "on_demand_percentage_above_base_capacity": 0,
        "on_demand_allocation_strategy": "prioritized",
        "spot_allocation_strategy": SPOT_ALLOCATION,
    }
    if purchase.max_price is not None:
        distribution["spot_max_price"] = f"{purchase.max_price:g}"
    return {
        "instances_distribution": distribution,
        "launch_template": {
            "launch_template_specification": {
                "launch_template_id": template["id"],
                "version": template["version"],
            },
            "overrides": [{"instance_type": t} for t in instance_types(primary, purchase)],
        },
    }


def group_reservation_target(
    purchase: Purchase, created_reservation_id: pulumi.Input[str] | None = None
) -> aws.autoscaling.GroupCapacityReservationSpecificationArgsDict | None:
    """The Auto Scaling group's capacity reservation specification (reservations only)."""
    if not isinstance(purchase, CapacityReservation):
        return None
    target: aws.autoscaling.GroupCapacityReservationSpecificationCapacityReservationTargetArgsDict
    if purchase.resource_group_arn:
        target = {"capacity_reservation_resource_group_arns": [purchase.resource_group_arn]}
    else:
        reservation = created_reservation_id or purchase.reservation_id
        assert reservation is not None  # validation: an id, a resource group or `create`
        target = {"capacity_reservation_ids": [reservation]}
    return {
        "capacity_reservation_preference": RESERVATION_PREFERENCE,
        "capacity_reservation_target": target,
    }


def template_market_options(
    purchase: Purchase,
) -> aws.ec2.LaunchTemplateInstanceMarketOptionsArgsDict | None:
    """Launch-template market options: only a Capacity Block sets them (spot is requested by
    the group's mixed instances policy, which refuses templates that request spot)."""
    if isinstance(purchase, CapacityBlock):
        return {"market_type": CAPACITY_BLOCK_MARKET}
    return None


def template_reservation(
    purchase: Purchase,
) -> aws.ec2.LaunchTemplateCapacityReservationSpecificationArgsDict | None:
    """Launch-template capacity reservation target: the Capacity Block's reservation id."""
    if isinstance(purchase, CapacityBlock):
        return {"capacity_reservation_target": {"capacity_reservation_id": purchase.reservation_id}}
    return None
