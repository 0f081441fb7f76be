"""`gpuc capacity-block`: list Capacity Block offerings for a stack, and buy one (explicitly:
a purchased block cannot be cancelled)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import boto3

from gpu_cluster.infra.aws import call, client
from gpu_cluster.infra.prices.block_quote import BlockQuote

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
    request = {
        "InstanceType": instance_type,
        "InstanceCount": instance_count,
        "CapacityDurationHours": hours,
    }
    if start is not None:
        request["StartDateRange"] = start
        request["EndDateRange"] = start + timedelta(hours=hours) + timedelta(days=7)
    ec2 = client("ec2", region, session)
    answer = call(ec2, "ec2", "DescribeCapacityBlockOfferings", **request)
    offerings = [
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
        )
        for item in answer.get("CapacityBlockOfferings", [])
    ]
    return sorted(offerings, key=lambda o: (o.instance_hourly, o.start, o.offering_id))


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
