"""A Capacity Block quote: what `gpuc capacity-block` reads from EC2 (infra/aws/capacity_blocks.py)
and the cost comparison prices a month of use with (infra/cost/compare.py)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BlockQuote:
    """A Capacity Block offering: its upfront fee covers every instance-hour of the block."""

    offering_id: str
    upfront_usd: float
    duration_hours: int
    instance_count: int

    @property
    def instance_hourly(self) -> float:
        return self.upfront_usd / (self.duration_hours * self.instance_count)
