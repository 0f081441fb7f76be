"""Describe a Capacity Reservation or Capacity Block through EC2, for the checks that need
the live reservation (its instance type, zone, size and state)."""

from __future__ import annotations

from typing import Any

import boto3

from gpu_cluster.infra.aws import AwsError, call, client
from gpu_cluster.infra.facts import NOT_FOUND_CODES, ReservationFacts


def describe_reservation(
    reservation_id: str, region: str, session: boto3.Session | None = None, ec2: Any = None
) -> ReservationFacts:
    """The reservation's facts; AwsError (code ...NotFound) when it does not exist."""
    ec2 = ec2 or client("ec2", region, session)
    found = call(
        ec2, "ec2", "DescribeCapacityReservations", CapacityReservationIds=[reservation_id]
    ).get("CapacityReservations", [])
    if not found:
        raise AwsError(
            f"capacity reservation {reservation_id} not found in {region}",
            NOT_FOUND_CODES[0],
        )
    item = found[0]
    return ReservationFacts(
        reservation_id=item["CapacityReservationId"],
        instance_type=item["InstanceType"],
        availability_zone=item["AvailabilityZone"],
        total_instances=item.get("TotalInstanceCount", 0),
        available_instances=item.get("AvailableInstanceCount", 0),
        state=item.get("State", "unknown"),
        reservation_type=item.get("ReservationType", "default"),
        platform=item.get("InstancePlatform", ""),
        start_date=item.get("StartDate"),
        end_date=item.get("EndDate"),
    )
