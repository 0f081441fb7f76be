"""`gpuc prices refresh`: rebuild the GPU price snapshot through boto3 — on-demand from the AWS
Price List API (``pricing:GetProducts``, served from us-east-1) and spot from
``ec2:DescribeSpotPriceHistory`` per region, keyed by AZ id (``ec2:DescribeAvailabilityZones``).
A refresh is all or nothing: the snapshot is replaced only when every call succeeded."""

from __future__ import annotations

import csv
import json
import os
import tempfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3

from gpu_cluster.components.catalog import Catalog, InstanceFacts, load_catalog
from gpu_cluster.infra.aws import call, client, paginate
from gpu_cluster.infra.prices.gpu_prices import COLUMNS, META_PATH, PRICES_PATH

PRICING_REGION = "us-east-1"  # the Price List API answers from us-east-1 and ap-south-1
LINUX_ON_DEMAND = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
    "licenseModel": "No License required",
}
SPOT_PRODUCT = "Linux/UNIX"


def on_demand_prices(pricing: Any, region: str, instance_types: Iterable[str]) -> dict[str, float]:
    """USD/hour per instance type from GetProducts (one paginated query per region)."""
    wanted = set(instance_types)
    filters = [
        {"Type": "TERM_MATCH", "Field": field, "Value": value}
        for field, value in {"regionCode": region, **LINUX_ON_DEMAND}.items()
    ]
    prices: dict[str, float] = {}
    for item in paginate(
        pricing, "pricing", "GetProducts", "PriceList", ServiceCode="AmazonEC2", Filters=filters
    ):
        product = json.loads(item) if isinstance(item, str) else item
        kind = product["product"]["attributes"].get("instanceType")
        if kind not in wanted:
            continue
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = float(dimension.get("pricePerUnit", {}).get("USD", "0") or 0)
                if usd > 0:
                    prices[kind] = usd
    return prices


def spot_prices(ec2: Any, instance_types: list[str]) -> dict[tuple[str, str], float]:
    """The latest spot price per (instance type, AZ name)."""
    latest: dict[tuple[str, str], tuple[Any, float]] = {}
    for item in paginate(
        ec2,
        "ec2",
        "DescribeSpotPriceHistory",
        "SpotPriceHistory",
        InstanceTypes=instance_types,
        ProductDescriptions=[SPOT_PRODUCT],
        StartTime=datetime.now(UTC),
    ):
        key = (item["InstanceType"], item["AvailabilityZone"])
        stamp = item.get("Timestamp")
        if key not in latest or (stamp and stamp > latest[key][0]):
            latest[key] = (stamp, float(item["SpotPrice"]))
    return {key: price for key, (_, price) in latest.items()}


def price_rows(
    region: str,
    catalog: Catalog,
    on_demand: dict[str, float],
    spot: dict[tuple[str, str], float],
    zone_ids: dict[str, str],
) -> list[dict[str, str]]:
    """One row per (type, AZ id) with a spot price, or per type when only on-demand is known."""
    rows = []
    for kind in sorted(catalog.instance_types):
        facts = catalog.instance_types[kind]
        zones = sorted(
            (zone_ids[zone], price)
            for (spot_kind, zone), price in spot.items()
            if spot_kind == kind and zone in zone_ids
        )
        if not zones and kind not in on_demand:
            continue
        for zone_id, price in zones or [("", None)]:
            rows.append(_row(facts, region, on_demand.get(kind), price, zone_id))
    return rows


def _row(
    facts: InstanceFacts, region: str, od: float | None, spot: float | None, zone_id: str
) -> dict[str, str]:
    return {
        "instance_type": facts.instance_type,
        "gpu_name": facts.gpu_model,
        "gpu_count": f"{facts.gpu_count:.1f}",
        "vcpus": f"{facts.vcpus:.1f}",
        "memory_gib": f"{facts.memory_mib / 1024:.1f}",
        "on_demand_usd_per_hour": f"{od:g}" if od is not None else "",
        "spot_usd_per_hour": f"{spot:.6f}" if spot is not None else "",
        "region": region,
        "availability_zone_id": zone_id,
        "arch": facts.architecture,
    }


def fetch_prices(
    regions: Iterable[str],
    catalog: Catalog | None = None,
    session: boto3.Session | None = None,
    pricing: Any = None,
) -> list[dict[str, str]]:
    """Every row of a new snapshot; raises AwsError on the first failed call."""
    catalog = catalog or load_catalog()
    kinds = sorted(catalog.instance_types)
    pricing = pricing or client("pricing", PRICING_REGION, session)
    rows: list[dict[str, str]] = []
    for region in regions:
        ec2 = client("ec2", region, session)
        zones = call(ec2, "ec2", "DescribeAvailabilityZones")["AvailabilityZones"]
        zone_ids = {zone["ZoneName"]: zone["ZoneId"] for zone in zones}
        on_demand = on_demand_prices(pricing, region, kinds)
        offered = sorted({k for types in catalog.offerings.get(region, {}).values() for k in types})
        spot = spot_prices(ec2, offered or kinds)
        rows += price_rows(region, catalog, on_demand, spot, zone_ids)
    return sorted(rows, key=lambda r: (r["instance_type"], r["region"], r["availability_zone_id"]))


def merged_price_rows(
    path: Path, fresh: list[dict[str, str]], regions: list[str]
) -> tuple[list[dict[str, str]], list[str]]:
    """The refreshed regions' rows, and the snapshot's rows of every other region (a refresh
    of one region keeps the others priced); also the regions kept."""
    old: list[dict[str, str]] = []
    if path.is_file():
        with path.open(newline="") as handle:
            old = [row for row in csv.DictReader(handle) if row.get("region") not in regions]
    rows = sorted(
        [*old, *fresh], key=lambda r: (r["instance_type"], r["region"], r["availability_zone_id"])
    )
    return rows, sorted({row["region"] for row in old})


def write_prices(
    rows: list[dict[str, str]],
    regions: list[str],
    path: Path = PRICES_PATH,
    meta_path: Path = META_PATH,
    today: str | None = None,
    kept_regions: list[str] | None = None,
) -> None:
    """Replace the snapshot atomically, with its source and date."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, newline="") as handle:
        writer: csv.DictWriter[str] = csv.DictWriter(
            handle, fieldnames=COLUMNS, lineterminator="\n"
        )
        writer.writeheader()
        writer.writerows(rows)
    os.replace(handle.name, path)
    meta = {
        "source": "AWS Price List API (pricing:GetProducts, Linux, shared tenancy) and "
        f"ec2:DescribeSpotPriceHistory (Linux/UNIX, latest per AZ) for {', '.join(regions)}"
        + (f"; {', '.join(kept_regions)} from the earlier snapshot" if kept_regions else ""),
        "date": today or datetime.now(UTC).date().isoformat(),
    }
    meta_path.write_text(json.dumps(meta, indent=2) + "\n")
