"""Future-dated On-Demand Capacity Reservations: capacity for the stack's type in its zone from a
start date 5 to 120 days ahead, kept for a committed number of days.

Why a gpuc command (boto3) and not the Pulumi program: pulumi-aws 7.51.1's
`aws.ec2.CapacityReservation` has no start date or commitment input
(`CapacityReservationArgs`: availability_zone, instance_count, instance_platform, instance_type,
ebs_optimized, end_date, end_date_type, ephemeral_storage, instance_match_criteria, outpost_arn,
placement_group_arn, region, tags, tenancy), because the Terraform resource it bridges has none
either: hashicorp/terraform-provider-aws internal/service/ec2/ec2_capacity_reservation.go builds
CreateCapacityReservationInput without StartDate/CommitmentDuration/DeliveryPreference, and its
Create waits for the reservation to be `active` (WaitCapacityReservationActive), which a
future-dated one is not until its start date (`assessing` for up to ~5 days, then `scheduled`).
So `gpuc` creates it with CreateCapacityReservation, tagged with the stack's identity, and the
stack targets it through its existing `capacityReservation.id` once it is active.

AWS's rules (infra/data/future_reservations.json holds them with their sources: the EC2 User
Guide's Capacity Reservation concepts, create and limitations pages, and the
CreateCapacityReservation API doc in botocore's ec2 service model):
- StartDate 5 to 120 days ahead; CommitmentDuration in seconds, at least 14 days;
- C, G, I, M, R, T, U, X series only (P4d/P5/P6 are not: Capacity Blocks sell those ahead);
- at least 32 vCPUs in all; InstanceMatchCriteria `targeted`; DeliveryPreference
  `incremental` (the only value the API takes); no placement group (PlacementGroupArn is "Not
  supported for future-dated Capacity Reservations");
- billed at the On-Demand rate from the start date, used or not; cancelling while `scheduled`
  or within the commitment takes a cancellation quote and a charge.
Every rule is checked here, before any call (`future_reservation_problem`)."""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import botocore

from gpu_cluster.components.catalog import Catalog, load_catalog
from gpu_cluster.components.naming import child_name, cluster_tags
from gpu_cluster.infra.aws import call
from gpu_cluster.infra.prices.gpu_prices import price_table
from gpu_cluster.infra.prices.node_price import node_hourly
from gpu_cluster.infra.validation.resolve import ResolvedCluster, stack_identity

RULES_PATH = Path(__file__).resolve().parent.parent / "data" / "future_reservations.json"
PLATFORM = "Linux/UNIX"  # the nodes' AMIs (Deep Learning AMIs on Ubuntu / Amazon Linux)
SECONDS_PER_DAY = 86_400
FUTURE_PARAMETERS = ("StartDate", "CommitmentDuration", "DeliveryPreference")
# CreateCapacityReservation's EndDate: "you can't specify an end date and time that is within the
# commitment duration" (botocore's ec2 model); EC2 ends a limited one within the hour after it
END_PAST_COMMITMENT = timedelta(hours=1)


@cache
def rules() -> dict[str, Any]:
    """AWS's limits for future-dated reservations, with their sources."""
    return json.loads(RULES_PATH.read_text())


def series(instance_type: str) -> str:
    """The instance type's series as AWS's list names it: its first letter (g6e -> G)."""
    return instance_type[:1].lower()


def parse_start(start: date | datetime | str) -> datetime | None:
    """The start as an aware UTC datetime (a date: its midnight UTC; a naive datetime: UTC);
    None when the text is not a date."""
    if isinstance(start, str):
        try:
            start = datetime.fromisoformat(start.strip().replace("Z", "+00:00"))
        except ValueError:
            return None
    if not isinstance(start, datetime):
        return datetime.combine(start, time(), tzinfo=UTC)
    return start.astimezone(UTC) if start.tzinfo else start.replace(tzinfo=UTC)


def _days_ahead_problem(start: datetime, today: date | datetime) -> str | None:
    low, high = rules()["min_days_ahead"], rules()["max_days_ahead"]
    if isinstance(today, datetime):  # the moment of the call: judged to the second
        now = today.astimezone(UTC) if today.tzinfo else today.replace(tzinfo=UTC)
        ahead = start - now
        if timedelta(days=low) <= ahead <= timedelta(days=high):
            return None
        days, past = ahead.days, ahead.total_seconds() < 0
        # the first whole date that is far enough from now: a date means its midnight UTC
        soonest = now + timedelta(days=low)
        first = datetime.combine(soonest.date(), time(), UTC)
        first += timedelta(days=1) if first < soonest else timedelta()
    else:  # a calendar day: judged in whole days
        days = (start.date() - today).days
        if low <= days <= high:
            return None
        past, first = days < 0, datetime.combine(today + timedelta(days=low), time(), UTC)
    last = first + timedelta(days=high - low)
    what = f"--start {start:%Y-%m-%d %H:%M} UTC is " + (
        "in the past" if past else f"{days} days ahead"
    )
    if days < low:
        fix = (
            f"--start {first:%Y-%m-%d} or later; sooner, only an immediate reservation "
            "(capacityReservation.create)"
        )
    else:
        fix = (
            f"request it on or after {start - timedelta(days=high):%Y-%m-%d}, or --start "
            f"{last:%Y-%m-%d} at the latest"
        )
    return (
        f"{what}: AWS takes a future-dated Capacity Reservation {low} to {high} days in "
        f"advance, a start from {first:%Y-%m-%d} to {last:%Y-%m-%d} (UTC), and recommends "
        f"{rules()['recommended_days_ahead']} days or more. Fix: {fix}"
    )


def future_reservation_problem(
    start: date | datetime | str,
    today: date | datetime,
    instance_type: str | None = None,
    instance_count: int | None = None,
    commitment_days: int | None = None,
    catalog: Catalog | None = None,
) -> str | None:
    """None when AWS would take this future-dated reservation, else every reason, one per line
    (what, the value, what is allowed, the fix). ``today``: a date judges the start in calendar
    days; a datetime (the moment of the call) to the second. Pure: no AWS call."""
    found: list[str] = []
    parsed = parse_start(start)
    if parsed is None:
        found.append(f"--start must be a date such as 2027-01-15 (UTC), got {start!r}")
    else:
        problem = _days_ahead_problem(parsed, today)
        if problem:
            found.append(problem)
    if instance_type is not None:
        found += _type_problems(instance_type, instance_count, catalog)
    if commitment_days is not None:
        found += _commitment_problems(commitment_days)
    return "\n".join(found) or None


def _type_problems(
    instance_type: str, instance_count: int | None, catalog: Catalog | None
) -> list[str]:
    allowed = rules()["series"]
    names = ", ".join(s.upper() for s in allowed)
    if series(instance_type) not in allowed:
        return [
            f"{instance_type} is in the {series(instance_type).upper()} series: AWS takes "
            f"future-dated Capacity Reservations for the {names} series only. Fix: a Capacity "
            "Block reserves P-series GPUs ahead (`gpuc capacity-block offerings`), or an "
            "immediate reservation (capacityReservation.create)"
        ]
    if instance_count is None:
        return []
    low, high = rules()["min_instance_count"], rules()["max_instance_count"]
    if not low <= instance_count <= high:
        return [f"{instance_count} instances: AWS reserves {low} to {high} per reservation"]
    facts = (catalog or load_catalog()).get(instance_type)
    need = rules()["min_total_vcpus"]
    if facts is None or facts.vcpus * instance_count >= need:
        return []
    least = math.ceil(need / facts.vcpus)
    return [
        f"{instance_count} x {instance_type} is {facts.vcpus * instance_count} vCPUs: a "
        f"future-dated Capacity Reservation needs at least {need} vCPUs in all. Fix: reserve "
        f"{least} or more ({least} x {facts.vcpus} vCPUs), or a larger type"
    ]


def _commitment_problems(commitment_days: int) -> list[str]:
    low = rules()["min_commitment_days"]
    high = rules()["max_commitment_seconds"] // SECONDS_PER_DAY
    if low <= commitment_days <= high:
        return []
    return [
        f"a commitment of {commitment_days} days: AWS commits a future-dated Capacity "
        f"Reservation for {low} to {high} days (CommitmentDuration). Fix: "
        f"--commitment-days {low if commitment_days < low else high}"
    ]


@dataclass(frozen=True)
class FutureReservationPlan:
    """What `create_future_reservation` sends, and what it costs."""

    stack: str
    region: str
    instance_type: str
    instance_count: int
    availability_zone: str
    start: datetime
    end: datetime  # start + commitment + an hour: it ends itself once the commitment is over
    commitment_days: int
    request: dict[str, Any]  # CreateCapacityReservation's parameters, as sent
    usd_per_hour: float | None  # instance count x the On-Demand rate
    total_usd: float | None  # ... x its hours (billed from the start to the end, used or not)
    price_source: str

    @property
    def reservation_hours(self) -> int:
        """From the start to the end: the commitment's days and the hour past it."""
        return round((self.end - self.start).total_seconds() / 3600)


def plan_future_reservation(
    spec: ResolvedCluster,
    start: date | datetime | str,
    commitment_days: int,
    today: date | datetime | None = None,
    instance_count: int | None = None,
    catalog: Catalog | None = None,
) -> FutureReservationPlan:
    """The reservation for the stack's type and node count (or ``instance_count``) in its zone
    from ``start`` for ``commitment_days``; ValueError (the message) when AWS would refuse it.
    It ends an hour after the commitment (EndDateType limited): one kept on costs the On-Demand
    rate until cancelled."""
    count = spec.node_count if instance_count is None else instance_count
    kind = spec.facts.instance_type
    moment = today if today is not None else datetime.now(UTC)
    problem = future_reservation_problem(start, moment, kind, count, commitment_days, catalog)
    begins = parse_start(start)
    if problem or begins is None:
        raise ValueError(problem)
    # EC2 refuses an end within the commitment: an hour past it, so the boundary is never met
    ends = begins + timedelta(days=commitment_days) + END_PAST_COMMITMENT
    identity = stack_identity(spec)
    tags = cluster_tags(identity, spec.tags) | {"Name": child_name(spec.name, "future-reservation")}
    request: dict[str, Any] = {
        "InstanceType": kind,
        "InstancePlatform": PLATFORM,
        "AvailabilityZone": spec.availability_zone,
        "Tenancy": "default",
        "InstanceCount": count,
        "InstanceMatchCriteria": rules()["instance_match_criteria"],
        "StartDate": begins,
        "CommitmentDuration": commitment_days * SECONDS_PER_DAY,
        "DeliveryPreference": rules()["delivery_preference"],
        "EndDateType": "limited",
        "EndDate": ends,
        "TagSpecifications": [
            {
                "ResourceType": "capacity-reservation",
                "Tags": [{"Key": k, "Value": v} for k, v in sorted(tags.items())],
            }
        ],
        # the same request sent twice (a retried command) is one reservation, not two
        # commitments: EC2 idempotency (Run_Instance_Idempotency), a token of at most 64 chars
        "ClientToken": hashlib.sha256(
            f"{identity.stack_id}|{kind}|{spec.availability_zone}|{count}|{begins.isoformat()}|"
            f"{commitment_days}".encode()
        ).hexdigest()[:64],
    }
    hourly = node_hourly(spec.region, kind, spot=False, zone=None)
    per_hour = None if hourly is None else hourly * count
    hours = (ends - begins).total_seconds() / 3600
    total = None if per_hour is None else per_hour * hours
    table = price_table()
    return FutureReservationPlan(
        stack=spec.stack,
        region=spec.region,
        instance_type=kind,
        instance_count=count,
        availability_zone=spec.availability_zone,
        start=begins,
        end=ends,
        commitment_days=commitment_days,
        request=request,
        usd_per_hour=per_hour,
        total_usd=total,
        price_source=f"On-Demand rate, {table.label}",
    )


def create_future_reservation(
    plan: FutureReservationPlan, ec2: Any, now: datetime | None = None
) -> str:
    """Create the planned reservation; its id (cr-...). The start is checked again against the
    moment of the call (a plan made days ago may have gone stale): ValueError before any call
    when AWS would refuse it."""
    request = plan.request
    problem = future_reservation_problem(
        request["StartDate"],
        now or datetime.now(UTC),
        request["InstanceType"],
        request["InstanceCount"],
        request["CommitmentDuration"] // SECONDS_PER_DAY,
    )
    if problem:
        raise ValueError(problem)
    missing = future_parameters_missing(ec2)
    if missing:  # botocore older than the feature: its own validation would refuse the call
        raise ValueError(
            f"this botocore ({botocore.__version__}) does not know CreateCapacityReservation's "
            f"{', '.join(missing)} (future-dated reservations came later than the project's "
            "floor, botocore 1.34). Fix: pip install --upgrade boto3 botocore"
        )
    answer = call(ec2, "ec2", "CreateCapacityReservation", **request)
    return answer["CapacityReservation"]["CapacityReservationId"]


def future_parameters_missing(ec2: Any) -> list[str]:
    """The future-dated parameters the client's service model lacks (an old botocore)."""
    members = ec2.meta.service_model.operation_model("CreateCapacityReservation").input_shape
    return [name for name in FUTURE_PARAMETERS if name not in members.members]


def plan_text(plan: FutureReservationPlan) -> list[str]:
    """What `gpuc` prints before creating it."""
    if plan.total_usd is None or plan.usd_per_hour is None:
        cost = f"no On-Demand price for {plan.instance_type} in {plan.region} ({plan.price_source})"
    else:
        rate = plan.usd_per_hour / plan.instance_count
        cost = (
            f"${plan.total_usd:,.2f} ({plan.instance_count} x ${rate:.4f}/h x "
            f"{plan.reservation_hours} h; {plan.price_source})"
        )
    return [
        f"future-dated Capacity Reservation for stack {plan.stack}: {plan.instance_count} x "
        f"{plan.instance_type} in {plan.availability_zone}",
        f"  starts {plan.start:%Y-%m-%d %H:%M} UTC, committed {plan.commitment_days} days, ends "
        f"{plan.end:%Y-%m-%d %H:%M} UTC (targeted, delivery incremental, no placement group)",
        f"  cost: {cost}, billed from the start whether or not nodes run",
        "  AWS assesses the request (state assessing, typically up to 5 days), then scheduled; "
        "cancelling once scheduled or within the commitment carries a charge.",
        "  Once it is active: pulumi config set purchaseOption capacity-reservation && "
        "pulumi config set --path capacityReservation.id <cr-id>",
    ]
