"""`gpuc capacity-block`: list Capacity Block offerings for a stack, in its region or across
several, and buy one (explicitly: a purchased block cannot be cancelled).

DescribeCapacityBlockOfferings is regional: each region is asked through a client of its own,
and a region the bundled catalog says does not offer the type (components/data catalog: per
region and zone, from DescribeInstanceTypeOfferings) is refused before any call, naming the
regions that do offer it."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import boto3

from gpu_cluster.components.catalog import Catalog, load_catalog
from gpu_cluster.infra.aws import AwsError, call, client
from gpu_cluster.infra.prices.block_quote import BlockQuote
from gpu_cluster.infra.regions import region_problem

# Durations AWS sells: 1-14 days in 1-day steps, then up to 182 days in 7-day steps.
MAX_DAYS_DAILY, MAX_DAYS = 14, 182
INSTANCE_PLATFORM = "Linux/UNIX"


@dataclass(frozen=True)
class Offering:
    offering_id: str
    instance_type: str
    availability_zone: str
    instance_count: int
    start: datetime
    end: datetime
    duration_hours: int
    upfront_usd: float
    currency: str
    region: str = ""  # the region whose endpoint answered (the answer names only the zone)

    @property
    def instance_hourly(self) -> float:
        return self.upfront_usd / (self.duration_hours * self.instance_count)


def duration_problem(hours: int) -> str | None:
    """Why AWS would refuse this duration, or None."""
    days, rest = divmod(hours, 24)
    if hours <= 0 or rest:
        return f"--hours must be whole days (24, 48, ...), got {hours}"
    if days > MAX_DAYS or (days > MAX_DAYS_DAILY and days % 7):
        return (
            f"--hours {hours} = {days} days: AWS sells 1-{MAX_DAYS_DAILY} days, then multiples of "
            f"7 days up to {MAX_DAYS}"
        )
    return None


def list_offerings(
    region: str,
    instance_type: str,
    instance_count: int,
    hours: int,
    start: datetime | None = None,
    session: boto3.Session | None = None,
) -> list[Offering]:
    """Offerings for the group's type and size, cheapest per instance-hour first."""
    ec2 = client("ec2", region, session)
    offerings = _ask(ec2, region, instance_type, instance_count, hours, start)
    return sorted(offerings, key=lambda o: (o.instance_hourly, o.start, o.offering_id))


def offerings_request(
    instance_type: str, instance_count: int, hours: int, start: datetime | None = None
) -> dict[str, Any]:
    """DescribeCapacityBlockOfferings' parameters: a start date asks for blocks starting from
    it, within a week of it."""
    request: dict[str, Any] = {
        "InstanceType": instance_type,
        "InstanceCount": instance_count,
        "CapacityDurationHours": hours,
    }
    if start is not None:
        request["StartDateRange"] = start
        request["EndDateRange"] = start + timedelta(hours=hours) + timedelta(days=7)
    return request


def _ask(
    ec2: Any,
    region: str,
    instance_type: str,
    instance_count: int,
    hours: int,
    start: datetime | None,
) -> list[Offering]:
    request = offerings_request(instance_type, instance_count, hours, start)
    items: list[dict[str, Any]] = []
    while True:  # NextToken by hand: botocore 1.34 (the floor) has no paginator for it
        answer = call(ec2, "ec2", "DescribeCapacityBlockOfferings", **request)
        items += answer.get("CapacityBlockOfferings", [])
        if not answer.get("NextToken"):
            break
        request = {**request, "NextToken": answer["NextToken"]}
    return [
        Offering(
            offering_id=item["CapacityBlockOfferingId"],
            instance_type=item["InstanceType"],
            availability_zone=item["AvailabilityZone"],
            instance_count=item["InstanceCount"],
            start=item["StartDate"],
            end=item["EndDate"],
            duration_hours=item["CapacityBlockDurationHours"],
            upfront_usd=float(item["UpfrontFee"]),
            currency=item.get("CurrencyCode", "USD"),
            region=region,
        )
        for item in items
    ]


def ranked(offerings: list[Offering]) -> list[Offering]:
    """Cheapest total upfront fee first, then the earliest start (then region, id: stable)."""
    return sorted(offerings, key=lambda o: (o.upfront_usd, o.start, o.region, o.offering_id))


def regions_problem(
    regions: list[str], instance_type: str, catalog: Catalog | None = None
) -> str | None:
    """Why these regions cannot be searched for Capacity Blocks of ``instance_type`` (None when
    they can): not an AWS region, a type the catalog does not sell as blocks, or a region the
    catalog covers where no zone offers the type. A region the catalog does not cover is
    left to AWS to answer."""
    catalog = catalog or load_catalog()
    if not regions:
        return "--regions needs at least one region, e.g. --regions us-east-1,us-west-2"
    for region in regions:
        problem = region_problem(region, "--regions")
        if problem:
            return problem
    offering = [r for r in catalog.regions if catalog.zones_offering(r, instance_type)]
    facts = catalog.get(instance_type)
    if facts is None:
        return (
            f"{instance_type} is not in the bundled catalog; refresh it "
            "(`gpuc catalog refresh`) or choose a type it lists (`gpuc catalog`)"
        )
    if "capacity-block" not in facts.usage_classes:
        return f"{instance_type} is not sold as Capacity Blocks"
    missing = [r for r in regions if r in catalog.offerings and r not in offering]
    if missing:
        return (
            f"{instance_type} is not offered in {', '.join(missing)} (the bundled catalog; "
            "`gpuc catalog refresh` updates it); regions that offer it: "
            f"{', '.join(offering) or 'none'}. Drop {', '.join(missing)} from --regions."
        )
    return None


def search_regions(
    regions: list[str],
    instance_type: str,
    instance_count: int,
    hours: int,
    start: datetime | None = None,
    clients: Callable[[str], Any] | None = None,
) -> tuple[list[Offering], dict[str, str], dict[str, AwsError]]:
    """Ask each region (concurrently, a client each): the offerings ranked, the regions that
    answered with none (region -> why), and the regions whose call failed (region -> error)."""
    make = clients or (lambda region: client("ec2", region))

    def ask(region: str) -> list[Offering] | AwsError:
        try:
            return _ask(make(region), region, instance_type, instance_count, hours, start)
        except AwsError as error:
            return error

    with ThreadPoolExecutor(max_workers=min(8, len(regions)) or 1) as pool:
        answers = dict(zip(regions, pool.map(ask, regions), strict=True))
    found = [o for answer in answers.values() if isinstance(answer, list) for o in answer]
    failed = {r: a for r, a in answers.items() if isinstance(a, AwsError)}
    empty = {
        r: f"no Capacity Block offering for {instance_count} x {instance_type}, {hours} h"
        for r, a in answers.items()
        if isinstance(a, list) and not a
    }
    return ranked(found), empty, failed


def offerings_across_regions(
    regions: list[str],
    instance_type: str,
    instance_count: int,
    hours: int,
    start: datetime | None = None,
    clients: Callable[[str], Any] | None = None,
    catalog: Catalog | None = None,
) -> tuple[list[Offering], dict[str, str]]:
    """Capacity Block offerings in every region, ranked by total upfront fee then start; and
    region -> why it had none (AWS answered none, or its call failed: one region's error does
    not hide the others' offerings). ValueError, before any call, for a region that is not
    AWS's or where the catalog says the type is not offered (naming the regions that offer
    it), and for a type not sold as blocks. ``clients``: region -> EC2 client (default: the
    project's wrapper)."""
    regions = list(dict.fromkeys(regions))  # once each, in the order given
    problem = regions_problem(regions, instance_type, catalog)
    if problem:
        raise ValueError(problem)
    offerings, empty, failed = search_regions(
        regions, instance_type, instance_count, hours, start, clients
    )
    return offerings, empty | {region: str(error) for region, error in failed.items()}


def cheapest_offering(
    region: str, instance_type: str, instance_count: int, hours: int
) -> BlockQuote | None:
    offerings = list_offerings(region, instance_type, instance_count, hours)
    if not offerings:
        return None
    best = offerings[0]
    return BlockQuote(best.offering_id, best.upfront_usd, best.duration_hours, best.instance_count)


def purchase(region: str, offering_id: str, session: boto3.Session | None = None) -> dict[str, str]:
    """Buy the offering; returns the block's reservation id, zone, start and end."""
    ec2 = client("ec2", region, session)
    answer = call(
        ec2,
        "ec2",
        "PurchaseCapacityBlock",
        CapacityBlockOfferingId=offering_id,
        InstancePlatform=INSTANCE_PLATFORM,
    )
    reservation = answer["CapacityReservation"]
    return {
        "id": reservation["CapacityReservationId"],
        "instanceType": reservation.get("InstanceType", ""),
        "availabilityZone": reservation.get("AvailabilityZone", ""),
        "start": str(reservation.get("StartDate") or ""),
        "end": str(reservation.get("EndDate") or ""),
    }
