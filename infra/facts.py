"""Live facts read from AWS, as plain data (the boto3 side lives in infra/aws/)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

NOT_FOUND_CODES = (
    "InvalidCapacityReservationId.NotFound",
    "InvalidCapacityReservationId.Malformed",
)


@dataclass(frozen=True)
class ReservationFacts:
    reservation_id: str
    instance_type: str
    availability_zone: str
    total_instances: int
    available_instances: int
    state: str  # active | scheduled | payment-pending | expired | cancelled | ...
    reservation_type: str  # default | capacity-block
    platform: str
    start_date: datetime | None = None
    end_date: datetime | None = None
