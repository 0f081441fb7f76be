"""Spot placement scores over several regions (`gpuc preflight --regions ...`): where AWS thinks
a spot request for the stack's types and size is likeliest to be filled, ranked, the stack's own
region (and zone) marked.

AWS semantics (EC2 API Reference, GetSpotPlacementScores; EC2 User Guide, "Spot placement
score" and "How Spot placement score works"):
- one call from any region scores the regions in RegionNames (botocore's ec2 model: at most 10);
  SingleAvailabilityZone=true scores zones (by zone id) instead of regions;
- TargetCapacity counts instances unless TargetCapacityUnitType says vcpu or memory-mib;
- each score is 1-10 (10: highly likely to succeed), a recommendation at the time of the request,
  never a guarantee; only the top 10 regions or zones are returned (paginated);
- with fewer than three instance types the score is always low (the guide's limitation).
Regions are checked before any call: each must be an AWS region where the bundled catalog offers
the stack's type (as the stack's own validation requires)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpu_cluster.components.catalog import Catalog, load_catalog
from gpu_cluster.infra.aws import call, paginate
from gpu_cluster.infra.regions import region_problem

MAX_REGIONS = 10  # botocore ec2 model: GetSpotPlacementScoresRequest RegionNames "max": 10
MIN_TYPES_FOR_A_FAIR_SCORE = 3  # EC2 User Guide, Spot placement score, "Limitations"
SCORE_RANGE = (1, 10)


@dataclass(frozen=True)
class RegionScore:
    region: str
    zone_id: str | None  # None: a region's score (single_zone=False)
    score: int
    own: bool  # the stack's region (and, for zone scores, its zone)


def checked_regions(
    regions: Sequence[str], instance_types: Sequence[str], catalog: Catalog | None = None
) -> list[str]:
    """``regions`` deduplicated, in order; a ValueError naming the bad value and the allowed
    ones when one is not an AWS region, the catalog does not offer the stack's type (the first
    of ``instance_types``; the rest are its fallbacks) there, or there are more than the API
    takes."""
    catalog = catalog or load_catalog()
    wanted = list(dict.fromkeys(r.strip() for r in regions))
    kind = instance_types[0] if instance_types else ""
    offering = [r for r in catalog.regions if catalog.zones_offering(r, kind)]
    allowed = "regions that offer " + (
        f"{kind}: {', '.join(offering) or 'none in the catalog'}" if kind else "it: none"
    )
    if not wanted or not kind:
        raise ValueError(
            f"--regions needs at least one region and an instance type to score; {allowed}"
        )
    if len(wanted) > MAX_REGIONS:
        raise ValueError(
            f"--regions lists {len(wanted)} regions; GetSpotPlacementScores takes at most "
            f"{MAX_REGIONS} (RegionNames): pick up to {MAX_REGIONS}; {allowed}"
        )
    for region in wanted:
        problem = region_problem(region, flag="--regions")
        if problem:
            raise ValueError(f"{problem}; {allowed}")
        if region not in offering:
            raise ValueError(
                f"--regions '{region}': the catalog offers {kind} in no zone of {region}, so "
                f"the stack cannot run there; {allowed} (a newer catalog: gpuc catalog refresh "
                f"--regions {region})"
            )
    return wanted


def own_zone_id(ec2: Any, zone_name: str) -> str | None:
    """The zone id of the stack's zone in this account (names map to different physical zones
    in each account, and scores come by zone id: as preflight's check_spot reads it)."""
    zones = call(ec2, "ec2", "DescribeAvailabilityZones", ZoneNames=[zone_name])
    return next(
        (z["ZoneId"] for z in zones["AvailabilityZones"] if z["ZoneName"] == zone_name), None
    )


def placement_scores(
    ec2: Any,
    instance_types: list[str],
    capacity: int,
    regions: list[str],
    own_region: str,
    own_zone_id: str | None,
    single_zone: bool = True,
) -> list[RegionScore]:
    """AWS's spot placement scores for ``capacity`` instances of ``instance_types`` in
    ``regions`` (checked first: checked_regions), best first, ties by region then zone id."""
    wanted = checked_regions(regions, instance_types)
    if capacity < 1:
        raise ValueError(f"the target capacity is {capacity}; it must be at least 1 instance")
    request: dict[str, Any] = {
        "InstanceTypes": list(dict.fromkeys(instance_types)),
        "TargetCapacity": capacity,  # instances: no TargetCapacityUnitType (vcpu, memory-mib)
        "SingleAvailabilityZone": single_zone,
        "RegionNames": wanted,
    }
    scores = []
    for item in paginate(ec2, "ec2", "GetSpotPlacementScores", "SpotPlacementScores", **request):
        region, zone_id = item.get("Region"), item.get("AvailabilityZoneId")
        if region is None or item.get("Score") is None:
            continue
        zone = zone_id if single_zone else None
        own = region == own_region and (not single_zone or own_zone_id in (None, zone_id))
        scores.append(RegionScore(region, zone, int(item["Score"]), own))
    return sorted(scores, key=lambda s: (-s.score, s.region, s.zone_id or ""))


def placement_text(
    scores: list[RegionScore],
    regions: Sequence[str] = (),
    instance_types: Sequence[str] = (),
) -> list[str]:
    """Lines for the terminal: one per region or zone, best first, the stack's own marked;
    ``regions`` asked for that got no score, and a note when too few types were scored."""
    lines = [
        f"{s.score:>2}/10  {s.region}"
        + (f" {s.zone_id}" if s.zone_id else "")
        + ("  <- this stack" if s.own else "")
        for s in scores
    ]
    if not scores:
        lines.append("no placement score returned")
    missing = [r for r in regions if r not in {s.region for s in scores}]
    if missing:
        lines.append(
            f"no score for {', '.join(missing)} (AWS returns only the top 10 regions or zones)"
        )
    if instance_types and len(set(instance_types)) < MIN_TYPES_FOR_A_FAIR_SCORE:
        lines.append(
            f"scored for {len(set(instance_types))} instance type(s): AWS scores a request with "
            f"fewer than {MIN_TYPES_FOR_A_FAIR_SCORE} types low everywhere (EC2 User Guide, "
            "Spot placement score); spot.fallbackTypes adds types"
        )
    lines.append(
        "scores 1-10: how likely AWS thinks the spot request is filled now (a recommendation, "
        "not a guarantee)"
    )
    return lines
