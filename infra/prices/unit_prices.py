"""Non-GPU unit prices (infra/data/aws_unit_prices.json): EBS gp3, NAT gateway, interface
endpoints, public IPv4, KMS, CloudWatch Logs, S3 — plus the default savings-plan discount rates
and usage assumptions, each with its source and date. Data, never literals in code."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

UNIT_PRICES_PATH = Path(__file__).resolve().parent.parent / "data" / "aws_unit_prices.json"


@dataclass(frozen=True)
class UnitPrices:
    region: str
    prices: dict
    from_region: str  # the region whose figures were used (the default when none is bundled)
    hours_per_month: int
    savings_plan_1y: float
    savings_plan_3y: float
    dataset_gb: float
    flow_log_gb_per_month: float
    trail_data_events_per_month: float
    serving_requests_per_second: float
    serving_kb_per_request: float
    serving_requests_per_gpu_second: float
    source: str
    date: str

    def __getitem__(self, name: str):
        return self.prices[name]

    @property
    def label(self) -> str:
        note = "" if self.from_region == self.region else f" ({self.from_region} figures)"
        return f"AWS public pricing{note}, {self.date}"


@cache
def _document(path: Path = UNIT_PRICES_PATH) -> dict:
    return json.loads(path.read_text())


def unit_prices(region: str, path: Path = UNIT_PRICES_PATH) -> UnitPrices:
    doc = _document(path)
    used = region if region in doc["regions"] else doc["default_region"]
    return UnitPrices(
        region=region,
        prices=dict(doc["regions"][used]),
        from_region=used,
        hours_per_month=doc["hours_per_month"],
        savings_plan_1y=doc["discounts"]["savings_plan_1y"],
        savings_plan_3y=doc["discounts"]["savings_plan_3y"],
        dataset_gb=doc["assumptions"]["dataset_gb"],
        flow_log_gb_per_month=doc["assumptions"]["flow_log_gb_per_month"],
        trail_data_events_per_month=doc["assumptions"]["trail_data_events_per_month"],
        serving_requests_per_second=doc["assumptions"]["serving_requests_per_second"],
        serving_kb_per_request=doc["assumptions"]["serving_kb_per_request"],
        serving_requests_per_gpu_second=doc["assumptions"]["serving_requests_per_gpu_second"],
        source=doc["source"],
        date=doc["date"],
    )


def hours_per_month(region: str | None = None) -> int:
    """The one hours-per-month convention of every monthly figure (the unit-price snapshot's,
    730 as AWS's pricing pages use)."""
    return unit_prices(region or _document()["default_region"]).hours_per_month
