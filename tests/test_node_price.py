"""One price per node in every command: a spot node at its own zone's spot price, "the
cheapest zone" only among standard zones that offer the type."""

from __future__ import annotations

from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.infra.aws.status import list_nodes
from gpu_cluster.infra.aws.sweep import Sweeper
from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly, spot_by_zone
from gpu_cluster.infra.prices.node_price import cheapest_spot_zone, node_hourly

REGION = "us-east-1"
KIND = "g5.12xlarge"


def zone_prices() -> dict[str, float]:
    prices = spot_by_zone(REGION, KIND)
    assert len(set(prices.values())) > 1, prices  # zones differ, or the test proves nothing
    return prices


def dearest_zone_name() -> tuple[str, float]:
    catalog, prices = load_catalog(), zone_prices()
    zone_id = max(prices, key=lambda zone: prices[zone])
    name = catalog.zone_name(REGION, zone_id)
    assert name is not None
    return name, prices[zone_id]


def described(lifecycle: str | None, zone: str) -> dict:
    instance = {
        "InstanceId": "i-0123456789abcdef0",
        "InstanceType": KIND,
        "State": {"Name": "running"},
        "Placement": {"AvailabilityZone": zone},
        "LaunchTime": datetime(2026, 12, 1, tzinfo=UTC),
        "Tags": [
            {"Key": "managed-by", "Value": "gpu-cluster"},
            {"Key": "gpu-cluster:stack", "Value": "experiment"},
        ],
    }
    if lifecycle:
        instance["InstanceLifecycle"] = lifecycle
    return {"Reservations": [{"Instances": [instance]}]}


def test_a_spot_node_is_priced_at_its_own_zone_not_the_cheapest():
    zone, price = dearest_zone_name()
    assert price > min(zone_prices().values())
    assert node_hourly(REGION, KIND, True, zone) == price
    assert node_hourly(REGION, KIND, False, zone) == on_demand_hourly(REGION, KIND)


def test_a_zone_without_a_spot_price_is_priced_on_demand_an_upper_bound():
    assert node_hourly(REGION, KIND, True, "us-east-1-bos-1a") == on_demand_hourly(REGION, KIND)


@pytest.mark.parametrize("command", ["status", "sweep"])
def test_status_and_sweep_price_a_spot_node_the_same_way(command):
    zone, price = dearest_zone_name()
    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(ec2) as stub:
        stub.add_response("describe_instances", described("spot", zone))
        if command == "status":
            (node,) = list_nodes(ec2, REGION, now=datetime(2026, 12, 1, 1, tzinfo=UTC))
            assert node.usd_per_hour == price and node.lifecycle == "spot"
        else:
            (left,) = Sweeper(ec2, None, None, REGION, "experiment").instances()
            assert left.usd_per_hour == price


def test_the_cheapest_zone_is_a_standard_zone_that_offers_the_type():
    prices = dict(zone_prices())
    found = cheapest_spot_zone(REGION, KIND)
    assert found is not None
    cheapest_id, cheapest = found
    assert cheapest == min(prices.values())
    # a Local Zone and a zone that does not offer the type, both cheaper, are never chosen
    catalog = load_catalog()
    not_offering = next(
        (z for z in catalog.zones(REGION) if z not in catalog.zones_offering(REGION, KIND)), None
    )
    cheaper = {**prices, "use1-bos1-az1": cheapest / 10}
    not_offering_id = catalog.zone_id(REGION, not_offering) if not_offering else None
    if not_offering_id:
        cheaper[not_offering_id] = cheapest / 20
    assert cheapest_spot_zone(REGION, KIND, cheaper, catalog) == (cheapest_id, cheapest)
