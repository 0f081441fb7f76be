"""`gpuc catalog refresh`: rebuild the bundled GPU catalog from EC2 through boto3."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import ClientError

from gpu_cluster.components.catalog import (
    CATALOG_PATH,
    Catalog,
    facts_from_describe,
    is_nvidia_gpu_item,
)
from gpu_cluster.infra.aws import AwsError, client, paginate

DEFAULT_REGIONS = (
    "us-east-1",
    "us-east-2",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-northeast-1",
    "ap-southeast-1",
)


def fetch_catalog(
    regions: Iterable[str] = DEFAULT_REGIONS, session: boto3.Session | None = None
) -> Catalog:
    """Describe every NVIDIA GPU instance type and where it is offered, per region and AZ."""
    regions = list(regions)
    instance_types = {}
    offerings: dict[str, dict[str, frozenset[str]]] = {}
    zone_ids: dict[str, dict[str, str]] = {}
    for region in regions:
        ec2 = client("ec2", region, session)
        for item in paginate(ec2, "ec2", "DescribeInstanceTypes", "InstanceTypes"):
            if is_nvidia_gpu_item(item):
                instance_types.setdefault(item["InstanceType"], facts_from_describe(item))
        zones: dict[str, set[str]] = {}
        for offer in paginate(
            ec2,
            "ec2",
            "DescribeInstanceTypeOfferings",
            "InstanceTypeOfferings",
            LocationType="availability-zone",
        ):
            if offer["InstanceType"] in instance_types:
                zones.setdefault(offer["Location"], set()).add(offer["InstanceType"])
        offerings[region] = {zone: frozenset(types) for zone, types in zones.items()}
        zone_ids[region] = describe_zone_ids(ec2)
    return Catalog(
        instance_types=instance_types,
        offerings=offerings,
        source="EC2 DescribeInstanceTypes + DescribeInstanceTypeOfferings "
        f"(availability-zone) + DescribeAvailabilityZones for {', '.join(regions)}",
        zone_ids=zone_ids,
    )


def describe_zone_ids(ec2: Any) -> dict[str, str]:
    """This account's AZ name -> AZ id mapping (prices are published per AZ id)."""
    try:
        zones = ec2.describe_availability_zones()["AvailabilityZones"]
    except ClientError as exc:
        raise AwsError(
            f"ec2:DescribeAvailabilityZones failed: {exc}. The caller needs IAM permission "
            "'ec2:DescribeAvailabilityZones'."
        ) from exc
    return {
        zone["ZoneName"]: zone["ZoneId"] for zone in zones if zone.get("ZoneType") != "local-zone"
    }


def merged_catalog(old: Catalog, new: Catalog) -> Catalog:
    """The refreshed regions replace theirs; every other region stays as it was (a refresh of
    one region must not drop the others, whose stacks would stop validating)."""
    kept = sorted(set(old.offerings) - set(new.offerings))
    source = new.source + (f"; {', '.join(kept)} from the earlier snapshot" if kept else "")
    return Catalog(
        instance_types={**old.instance_types, **new.instance_types},
        offerings={**old.offerings, **new.offerings},
        source=source,
        zone_ids={**old.zone_ids, **new.zone_ids},
    )


def write_catalog(catalog: Catalog, path: Path = CATALOG_PATH) -> Path:
    """Write the catalog as stable, sorted JSON (diff-friendly)."""
    path.write_text(json.dumps(catalog.to_json(), indent=1, sort_keys=True) + "\n")
    return path
