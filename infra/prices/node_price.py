"""One hourly price per node, the same in `gpuc status`, `gpuc sweep`, `gpuc cost` and the plan:
on-demand at the region's price, spot at its own zone's price in the snapshot (the on-demand
price, an upper bound, where the snapshot has none for that zone).

"The cheapest zone" is only ever a standard Availability Zone that offers the type: Local Zones
and Wavelength Zones (ids like use1-bos1-az1, use1-wl1-bos-wlz1) have spot prices of their own
but other types, networks and quotas, and a cluster cannot be put there by this project."""

from __future__ import annotations

import re

from gpu_cluster.components.catalog import Catalog, load_catalog
from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly, spot_by_zone

STANDARD_ZONE_ID = re.compile(r"^[a-z]{2,5}\d+-az\d+$")  # use1-az4, euw1-az2, usgw1-az1


def node_hourly(region: str, instance_type: str, spot: bool, zone: str | None) -> float | None:
    """A node's USD/hour; ``zone`` is its AZ name (as EC2 reports it) or id."""
    on_demand = on_demand_hourly(region, instance_type)
    if not spot or not zone:
        return on_demand
    zone_id = zone if STANDARD_ZONE_ID.match(zone) else load_catalog().zone_id(region, zone)
    return spot_by_zone(region, instance_type).get(zone_id or "", on_demand)


def cheapest_spot_zone(
    region: str,
    instance_type: str,
    spot_prices: dict[str, float] | None = None,
    catalog: Catalog | None = None,
) -> tuple[str, float] | None:
    """(AZ id, price) of the cheapest standard zone that offers the type, if any is priced
    (``spot_prices``: AZ id -> price, default the snapshot's)."""
    catalog = catalog or load_catalog()
    prices = spot_by_zone(region, instance_type) if spot_prices is None else spot_prices
    offering = set(catalog.zones_offering(region, instance_type))
    candidates = {
        zone_id: price
        for zone_id, price in prices.items()
        if STANDARD_ZONE_ID.match(zone_id)
        and (not offering or catalog.zone_name(region, zone_id) in offering)
    }
    if not candidates:
        return None
    best = min(candidates, key=lambda z: (candidates[z], z))
    return best, candidates[best]
