"""Purchase options: on-demand, spot, capacity reservation, capacity block — each option's
settings object, checked as AWS and ParallelCluster enforce them (offline part; a reservation's
own type, zone and size are checked against EC2 in infra/aws/reservations.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from gpu_cluster.components.catalog import Catalog, InstanceFacts
from gpu_cluster.components.nic_layout import nic_layout
from gpu_cluster.components.purchase import (
    CapacityBlock,
    CapacityReservation,
    OnDemand,
    Purchase,
    Spot,
)
from gpu_cluster.infra.facts import ReservationFacts
from gpu_cluster.infra.meant import in_utc
from gpu_cluster.infra.problems import NOT_SET, Problem
from gpu_cluster.infra.spec import CapacityReservationSpec, SpotSpec, StackSpec
from gpu_cluster.infra.suggest import suggest
from gpu_cluster.infra.validation.common import config_moment, key, rfc3339

# the states of a future-dated On-Demand Capacity Reservation before it starts (EC2 API
# CapacityReservationState; infra/data/future_reservations.json notes "states")
FUTURE_STATES = frozenset({"assessing", "scheduled", "delayed"})
RESERVATION_ID = re.compile(r"^cr-[0-9a-f]{17}\Z")
RESOURCE_GROUP_ARN = re.compile(
    r"^arn:aws[a-z-]*:resource-groups:[a-z0-9-]+:\d{12}:group/[A-Za-z0-9_.-]{1,300}\Z"
)
SETTINGS_KEY = {
    "spot": "spot",
    "capacity-reservation": "capacityReservation",
    "capacity-block": "capacityBlock",
}
USAGE_CLASS = {
    "on-demand": "on-demand",
    "spot": "spot",
    "capacity-reservation": "on-demand",  # a reservation holds on-demand capacity
    "capacity-block": "capacity-block",
}


def check_purchase(
    spec: StackSpec, facts: InstanceFacts, catalog: Catalog, efa: bool
) -> tuple[Purchase | None, list[Problem]]:
    """The node group's purchase option, or every problem with it."""
    option = spec.purchase_option
    problems = stray_settings(spec)
    if USAGE_CLASS[option] not in facts.usage_classes:
        offered = [o for o, usage in USAGE_CLASS.items() if usage in facts.usage_classes]
        problems.append(
            Problem(
                path=key("purchaseOption"),
                received=option,
                problem=f"{facts.instance_type} cannot be bought as {option}",
                allowed=", ".join(offered),
                fix="pulumi config set purchaseOption on-demand"
                + (
                    " (Capacity Blocks exist for p4d, p4de, p5, p5e, p5en and p6 types)"
                    if option == "capacity-block"
                    else ""
                ),
            )
        )
        return None, problems
    if option == "spot":
        spot, found = check_spot(spec.spot or SpotSpec(), spec, facts, catalog, efa)
        return (spot if not problems + found else None), problems + found
    if option == "capacity-reservation":
        reservation, found = check_reservation(spec.capacity_reservation)
        return (reservation if not problems + found else None), problems + found
    if option == "capacity-block":
        block_id = spec.capacity_block.id if spec.capacity_block else None
        found = check_reservation_id(block_id, "capacityBlock.id", "a Capacity Block")
        if block_id is None:
            found[0:1] = [
                Problem(
                    path=key("capacityBlock.id"),
                    received=NOT_SET,
                    problem="purchaseOption capacity-block needs the id of a purchased block",
                    allowed="cr- followed by 17 hex digits (the block's reservation id)",
                    fix="find or buy one with `gpuc capacity-block offerings --stack <stack> "
                    "--hours <h>`, then pulumi config set --path capacityBlock.id "
                    "<the block's cr- id>",
                )
            ]
        if problems or found:
            return None, problems + found
        assert block_id is not None
        return CapacityBlock(reservation_id=block_id), []
    return (OnDemand() if not problems else None), problems


def stray_settings(spec: StackSpec) -> list[Problem]:
    """Settings objects of another purchase option: AWS cannot combine them (spot cannot run in
    a reservation or a block), so a leftover object is a mistake, not something to ignore."""
    problems = []
    for option, name in SETTINGS_KEY.items():
        if getattr(spec, _field(name)) is None or option == spec.purchase_option:
            continue
        clash = (
            "spot instances cannot launch into a capacity reservation or block"
            if {option, spec.purchase_option} & {"spot"}
            and {option, spec.purchase_option} - {"spot", "on-demand"}
            else f"{name} settings only apply to purchaseOption {option}"
        )
        problems.append(
            Problem(
                path=key(name),
                received=getattr(spec, _field(name)).model_dump(by_alias=True, exclude_none=True),
                problem=f"{clash}; purchaseOption is {spec.purchase_option}",
                allowed=f"{name} only with purchaseOption {option}",
                fix=f"pulumi config rm {name}  (or: pulumi config set purchaseOption {option})",
            )
        )
    return problems


def _field(camel: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)


def check_spot(
    spot: SpotSpec, spec: StackSpec, facts: InstanceFacts, catalog: Catalog, efa: bool
) -> tuple[Spot, list[Problem]]:
    problems = []
    if spot.on_demand_base > spec.nodes:
        problems.append(
            Problem(
                path=key("spot.onDemandBase"),
                received=spot.on_demand_base,
                problem=f"more on-demand base nodes than nodes ({spec.nodes})",
                allowed=f"0 to {spec.nodes}",
                fix=f"pulumi config set --path spot.onDemandBase {min(1, spec.nodes)}",
            )
        )
    layout = nic_layout(facts, efa and facts.efa_supported)
    seen: set[str] = set()
    for index, name in enumerate(spot.fallback_types):
        path = key(f"spot.fallbackTypes[{index}]")
        other = catalog.get(name)
        reason = allowed = None
        if other is None:
            reason = "not an NVIDIA GPU instance type in the catalog"
            allowed = suggest(name, list(catalog.instance_types)) or "a catalog type"
        elif name == facts.instance_type or name in seen:
            reason = "listed twice (the primary type is always used first)"
            allowed = "each type once, other than instanceType"
        elif (other.gpu_model, other.gpu_count) != (facts.gpu_model, facts.gpu_count):
            reason = (
                f"has {other.gpu_count} x {other.gpu_model}; the group runs "
                f"{facts.gpu_count} x {facts.gpu_model}"
            )
            allowed = _same_gpu(facts, catalog) or "none"
        elif other.architecture != facts.architecture:
            reason = f"is {other.architecture}; the AMI is {facts.architecture}"
            allowed = _same_gpu(facts, catalog) or "none"
        elif nic_layout(other, efa and other.efa_supported) != layout:
            reason = "has another network-card / EFA layout than the launch template's"
            allowed = _same_gpu(facts, catalog) or "none"
        elif spec.availability_zone is not None and spec.availability_zone not in (
            catalog.zones_offering(spec.region, name)
        ):  # no zone (left out, or another problem): nothing to hold the type to
            reason = f"is not offered in {spec.availability_zone}"
            allowed = _same_gpu(facts, catalog, spec) or "none in this zone"
        seen.add(name)
        if reason:
            problems.append(
                Problem(
                    path=path,
                    received=name,
                    problem=f"fallback type {name} {reason}"
                    if other is not None
                    else f"fallback type: {reason}",
                    allowed=f"types with the same GPUs, architecture and EFA layout: {allowed}",
                    fix=f"pulumi config rm --path spot.fallbackTypes[{index}]",
                )
            )
    return (
        Spot(
            max_price=spot.max_price,
            on_demand_base=spot.on_demand_base,
            fallback_types=tuple(spot.fallback_types),
        ),
        problems,
    )


def _same_gpu(facts: InstanceFacts, catalog: Catalog, spec: StackSpec | None = None) -> str:
    return ", ".join(
        f.instance_type
        for f in catalog.types_for_gpu(facts.gpu_model, facts.gpu_count)
        if f.instance_type != facts.instance_type
        and f.architecture == facts.architecture
        and (
            spec is None
            or spec.availability_zone in catalog.zones_offering(spec.region, f.instance_type)
        )
    )


def check_reservation_id(value: str | None, field: str, what: str) -> list[Problem]:
    if value is None or RESERVATION_ID.match(value):
        return []
    return [
        Problem(
            path=key(field),
            received=value,
            problem=f"not the id of {what}",
            allowed="cr- followed by 17 hex digits, e.g. cr-0123456789abcdef0",
            fix=f"pulumi config set --path {field} cr-...",
        )
    ]


def check_reservation(
    settings: CapacityReservationSpec | None, now: datetime | None = None
) -> tuple[CapacityReservation, list[Problem]]:
    settings = settings or CapacityReservationSpec()
    chosen = [
        name
        for name, value in (
            ("id", settings.id),
            ("resourceGroupArn", settings.resource_group_arn),
            ("create", settings.create),
        )
        if value
    ]
    problems: list[Problem] = []
    if len(chosen) != 1:
        problems.append(
            Problem(
                path=key("capacityReservation"),
                received=settings.model_dump(by_alias=True, exclude_none=True) or NOT_SET,
                problem="a capacity reservation needs exactly one of id, resourceGroupArn "
                "or create: true" + (f" (got {', '.join(chosen)})" if chosen else ""),
                allowed="{id: cr-...} | {resourceGroupArn: arn:aws:resource-groups:...} | "
                "{create: true, endDate: ...}",
                fix=(
                    " && ".join(
                        f"pulumi config rm --path capacityReservation.{name}" for name in chosen[1:]
                    )
                    + f" (keeps {chosen[0]}; or keep another one instead)"
                    if chosen
                    else "pulumi config set --path capacityReservation.create true  "
                    "(or name a reservation: --path capacityReservation.id cr-...)"
                ),
            )
        )
    problems += check_reservation_id(
        settings.id, "capacityReservation.id", "a capacity reservation"
    )
    if settings.resource_group_arn and not RESOURCE_GROUP_ARN.match(settings.resource_group_arn):
        problems.append(
            Problem(
                path=key("capacityReservation.resourceGroupArn"),
                received=settings.resource_group_arn,
                problem="not a resource group ARN",
                allowed="arn:aws:resource-groups:<region>:<account>:group/<name>",
                fix="pulumi config set --path capacityReservation.resourceGroupArn "
                "<arn:aws:resource-groups:REGION:ACCOUNT:group/NAME of your group>",
            )
        )
    if settings.end_date is not None:
        problems += check_end_date(settings.end_date, settings.create, now)
    return (
        CapacityReservation(
            reservation_id=settings.id,
            resource_group_arn=settings.resource_group_arn,
            create=settings.create,
            end_date=(
                rfc3339(moment)
                if settings.end_date and (moment := config_moment(settings.end_date))
                else settings.end_date
            ),
        ),
        problems,
    )


def check_end_date(text: str, create: bool, now: datetime | None = None) -> list[Problem]:
    path = key("capacityReservation.endDate")
    if not create:
        return [
            Problem(
                path=path,
                received=text,
                problem="endDate only applies to a reservation this stack creates",
                allowed="unset, or create: true",
                fix="pulumi config rm --path capacityReservation.endDate",
            )
        ]
    end = config_moment(text)
    if end is None:
        return [
            Problem(
                path=path,
                received=text,
                problem="not a date and time with a time zone",
                allowed="RFC 3339 in UTC, e.g. 2027-01-31T00:00:00Z",
                fix="pulumi config set --path capacityReservation.endDate "
                + (in_utc(text) or "2027-01-31T00:00:00Z"),
            )
        ]
    if end <= (now or datetime.now(UTC)):
        return [
            Problem(
                path=path,
                received=text,
                problem="the end date has passed",
                allowed="a future date and time (UTC)",
                fix="pulumi config set --path capacityReservation.endDate "
                f"{rfc3339((now or datetime.now(UTC)) + timedelta(days=30))}, or "
                "remove it for a reservation that runs until the stack is destroyed",
            )
        ]
    return []


USABLE_STATES = {"active", "scheduled", "payment-pending"}


def check_live_reservation(
    purchase: Purchase,
    facts: ReservationFacts,
    instance_type: str,
    availability_zone: str,
    node_count: int,
) -> list[Problem]:
    """A reservation or block must hold this group's type, in its zone, for all its nodes."""
    if isinstance(purchase, CapacityBlock):
        field, what = "capacityBlock.id", "Capacity Block"
    else:
        field, what = "capacityReservation.id", "capacity reservation"
    path, received = key(field), facts.reservation_id
    problems = []
    if isinstance(purchase, CapacityBlock) != (facts.reservation_type == "capacity-block"):
        kind = "a Capacity Block" if facts.reservation_type == "capacity-block" else "not a block"
        problems.append(
            Problem(
                path=path,
                received=received,
                problem=f"{received} is {kind}, but purchaseOption is {purchase.kind}",
                allowed="a Capacity Block id with capacity-block; an On-Demand Capacity "
                "Reservation id with capacity-reservation",
                fix="pulumi config set purchaseOption "
                + (
                    "capacity-block"
                    if facts.reservation_type == "capacity-block"
                    else "capacity-reservation"
                ),
            )
        )
    if facts.instance_type != instance_type:
        problems.append(
            Problem(
                path=path,
                received=received,
                problem=f"the {what} holds {facts.instance_type}, the group runs {instance_type}",
                allowed=f"a {what} for {instance_type}",
                fix=f"pulumi config set instanceType {facts.instance_type}",
            )
        )
    if facts.availability_zone != availability_zone:
        problems.append(
            Problem(
                path=path,
                received=received,
                problem=f"the {what} is in {facts.availability_zone}, the group in "
                f"{availability_zone}",
                allowed=f"a {what} in {availability_zone}",
                fix=f"pulumi config set availabilityZone {facts.availability_zone}",
            )
        )
    future = not isinstance(purchase, CapacityBlock) and facts.state in FUTURE_STATES
    if future:
        # a future-dated reservation holds 0 instances until its start (EC2 User Guide, future-
        # dated Capacity Reservations: assessing -> scheduled -> active at the start date)
        starts = f" on {facts.start_date:%Y-%m-%d %H:%M} UTC" if facts.start_date else ""
        problems.append(
            Problem(
                path=path,
                received=received,
                problem=f"the future-dated {what} is {facts.state}: it holds no instance until "
                f"it starts{starts}, and nodes cannot launch into it before",
                allowed="an active reservation",
                fix="run `pulumi up` once it is active (`aws ec2 describe-capacity-reservations "
                f"--capacity-reservation-ids {received}`), or use purchaseOption on-demand "
                "until then",
            )
        )
    elif node_count > facts.total_instances:
        problems.append(
            Problem(
                path=key("nodes"),
                received=node_count,
                problem=f"the {what} {received} holds {facts.total_instances} instances",
                allowed=f"at most {facts.total_instances} nodes",
                fix=f"pulumi config set nodes {facts.total_instances}",
            )
        )
    if facts.state not in USABLE_STATES and not future:
        problems.append(
            Problem(
                path=path,
                received=received,
                problem=f"the {what} is {facts.state}",
                allowed="an active or scheduled reservation",
                fix=f"use another {what}"
                + (" (`gpuc capacity-block offerings`)" if what == "Capacity Block" else ""),
            )
        )
    return problems
