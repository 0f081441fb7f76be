"""Bundled USD/hour prices (infra/data/aws_gpu_prices.csv; provenance in its SOURCE.md)."""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

PRICES_PATH = Path(__file__).parent / "data" / "aws_gpu_prices.csv"


@cache
def _on_demand_table(path: Path = PRICES_PATH) -> dict[tuple[str, str], float]:
    table: dict[tuple[str, str], float] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["on_demand_usd_per_hour"]:
                table[(row["region"], row["instance_type"])] = float(row["on_demand_usd_per_hour"])
    return table


def on_demand_hourly(region: str, instance_type: str) -> float | None:
    """Linux on-demand USD/hour for a type in a region, or None when the snapshot has none."""
    return _on_demand_table().get((region, instance_type))
