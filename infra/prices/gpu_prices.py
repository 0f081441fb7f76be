"""Bundled GPU instance prices (infra/data/aws_gpu_prices.csv): Linux on-demand USD/hour per
region and spot USD/hour per availability-zone id, with the snapshot's source and date
(aws_gpu_prices.meta.json; provenance in aws_gpu_prices.SOURCE.md)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
PRICES_PATH = DATA_DIR / "aws_gpu_prices.csv"
META_PATH = DATA_DIR / "aws_gpu_prices.meta.json"
COLUMNS = (
    "instance_type",
    "gpu_name",
    "gpu_count",
    "vcpus",
    "memory_gib",
    "on_demand_usd_per_hour",
    "spot_usd_per_hour",
    "region",
    "availability_zone_id",
    "arch",
)


@dataclass(frozen=True)
class PriceTable:
    on_demand: dict[tuple[str, str], float]  # (region, type)
    spot: dict[tuple[str, str], dict[str, float]]  # (region, type) -> zone id -> price
    source: str
    date: str

    @property
    def label(self) -> str:
        return f"{self.source}, {self.date}"


def read_price_table(path: Path = PRICES_PATH, meta_path: Path = META_PATH) -> PriceTable:
    on_demand: dict[tuple[str, str], float] = {}
    spot: dict[tuple[str, str], dict[str, float]] = {}
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            key = (row["region"], row["instance_type"])
            if row["on_demand_usd_per_hour"]:
                on_demand[key] = float(row["on_demand_usd_per_hour"])
            if row["spot_usd_per_hour"]:
                spot.setdefault(key, {})[row["availability_zone_id"]] = float(
                    row["spot_usd_per_hour"]
                )
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    return PriceTable(on_demand, spot, meta.get("source", str(path.name)), meta.get("date", "?"))


@cache
def price_table() -> PriceTable:
    """The bundled snapshot (read once per process)."""
    return read_price_table()


def on_demand_hourly(region: str, instance_type: str) -> float | None:
    """Linux on-demand USD/hour for a type in a region, or None when the snapshot has none."""
    return price_table().on_demand.get((region, instance_type))


def spot_by_zone(region: str, instance_type: str) -> dict[str, float]:
    return dict(price_table().spot.get((region, instance_type), {}))
