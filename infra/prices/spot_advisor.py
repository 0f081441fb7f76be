"""Spot interruption risk from AWS's Spot Instance Advisor data (advisory): the band a type's
spot capacity falls in, and what a reclaim costs a training stage at the upper bands.

The bundled infra/data/spot_advisor.json is AWS's own feed
(https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json) trimmed to the catalog's
GPU types, in its own format: ``ranges`` [{index, label, dots, max}] and ``spot_advisor``
{region: {os: {instance type: {"s": savings % vs on-demand, "r": index into ranges}}}}
(read the same way by alexei-led/spotinfo internal/spot/data.go and
nint8835/interruption-spotter pkg/spotdata/types.go). Its source and date are in
spot_advisor.meta.json (provenance: spot_advisor.SOURCE.md); `infra/aws/spot_advisor_refresh.py`
takes a new one. The advisor's band is "the rate at which Spot has reclaimed capacity during
the trailing month" (aws.amazon.com/ec2/spot/instance-advisor/): history, not a forecast."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from gpu_cluster.components.catalog import InstanceFacts
from gpu_cluster.components.purchase import Purchase, Spot
from gpu_cluster.infra.prices.gpu_prices import DATA_DIR  # infra/data, the bundled snapshots

ADVISOR_PATH = DATA_DIR / "spot_advisor.json"
ADVISOR_META_PATH = DATA_DIR / "spot_advisor.meta.json"
RECLAIM_PATH = DATA_DIR / "spot_reclaim.json"
ADVISORY = "AWS Spot Instance Advisor data (advisory)"
# The advisor's ranges 3 and 4 ("15-20%", ">20%"): a training stage is warned (issue 32).
UPPER_INDEX = 3
TRAINING_STACKS = ("train", "experiment")


@dataclass(frozen=True)
class SpotBand:
    label: str  # the advisor's own label, e.g. "<5%", "5-10%", ... ">20%"
    index: int  # 0..4 (the advisor's ranges index)
    savings_percent: int | None  # the advisor's "s": savings vs on-demand over the last 30 days
    upper: bool  # index >= 3 (15-20%, >20%): training stages warn
    source: str
    date: str  # the snapshot's date


@dataclass(frozen=True)
class Advisor:
    labels: dict[int, str]  # ranges: index -> label
    regions: dict[str, Any]  # spot_advisor: region -> os -> type -> {"s", "r"}
    source: str
    date: str


def read_advisor(path: Path = ADVISOR_PATH, meta_path: Path = ADVISOR_META_PATH) -> Advisor | None:
    """The bundled advisor data, or None when there is none (it is optional)."""
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    return Advisor(
        labels={int(r["index"]): str(r["label"]) for r in data["ranges"]},
        regions=data.get("spot_advisor", {}),
        source=f"{ADVISORY}: {meta.get('source', 'source unknown')}",
        date=str(meta.get("date", "")),
    )


@cache
def bundled_advisor() -> Advisor | None:
    return read_advisor()


def advisor_snapshot_date() -> str | None:
    """The bundled advisor snapshot's date (ISO), None when none is bundled."""
    advisor = bundled_advisor()
    return advisor.date or None if advisor else None


def spot_band(
    region: str, instance_type: str, os: str = "Linux", advisor: Advisor | None = None
) -> SpotBand | None:
    """The advisor's interruption band for a type in a region; None when its data has none."""
    advisor = advisor or bundled_advisor()
    if advisor is None:
        return None
    entry = advisor.regions.get(region, {}).get(os, {}).get(instance_type)
    if entry is None or entry.get("r") not in advisor.labels:
        return None
    index = int(entry["r"])
    savings = entry.get("s")
    return SpotBand(
        label=advisor.labels[index],
        index=index,
        savings_percent=int(savings) if savings is not None else None,
        upper=index >= UPPER_INDEX,
        source=advisor.source,
        date=advisor.date,
    )


def band_text(band: SpotBand) -> str:
    """One line beside a spot price: 'interrupted <5% (a month; AWS Spot Instance Advisor ...)'."""
    savings = f", saves {band.savings_percent}% vs on-demand" if band.savings_percent else ""
    return f"interruption frequency {band.label} a month{savings} ({ADVISORY}, {band.date})"


def band_bounds(label: str) -> tuple[float, float | None]:
    """The share of instances a month a label stands for: "15-20%" (0.15, 0.20), ">20%" (0.20,
    None), "<5%" (0.0, 0.05)."""
    numbers = [float(n) / 100 for n in re.findall(r"\d+(?:\.\d+)?", label)]
    if label.startswith(">"):
        return numbers[0], None
    if label.startswith("<"):
        return 0.0, numbers[0]
    return numbers[0], numbers[-1]


class Stage(Protocol):
    """What reclaim_warning reads of a resolved cluster (infra/validation ResolvedCluster; a
    protocol, since the prices room sits below validation)."""

    @property
    def stack(self) -> str: ...
    @property
    def region(self) -> str: ...
    @property
    def node_count(self) -> int: ...
    @property
    def facts(self) -> InstanceFacts: ...
    @property
    def purchase(self) -> Purchase: ...
    @property
    def inference(self) -> object | None: ...


@cache
def reclaim_facts(path: Path = RECLAIM_PATH) -> dict[str, Any]:
    return json.loads(path.read_text())


def resume_minutes(facts: dict[str, Any] | None = None) -> tuple[int, int]:
    """How long until the cluster is back at full size after a reclaim (the guide's estimate)."""
    parts = (facts or reclaim_facts())["resume_parts"]
    return sum(p["min_minutes"] for p in parts), sum(p["max_minutes"] for p in parts)


def reclaim_warning(
    spec: Stage, checkpoint_minutes: float | None = None, advisor: Advisor | None = None
) -> str | None:
    """A training stage on spot in an upper advisor band (15-20%, >20%): what a reclaim costs
    it - the work since its last checkpoint (up to its checkpoint interval: ``checkpoint_minutes``
    when known) and the time until the cluster is back at full size. None otherwise (not
    training, not spot, a lower band, or no advisor data for the type)."""
    purchase = spec.purchase
    if spec.inference is not None or not isinstance(purchase, Spot):
        return None
    if spec.node_count <= 1 and spec.stack not in TRAINING_STACKS:
        return None
    spot_nodes = spec.node_count - min(purchase.on_demand_base, spec.node_count)
    kind = spec.facts.instance_type
    band = spot_band(spec.region, kind, advisor=advisor)
    if not spot_nodes or band is None or not band.upper:
        return None
    facts = reclaim_facts()
    low, high = band_bounds(band.label)
    expected = (
        f"more than {spot_nodes * low:.1f}"
        if high is None
        else f"about {spot_nodes * low:.1f}-{spot_nodes * high:.1f}"
    )
    nodes = spec.node_count
    interval = (
        f"up to its checkpoint interval ({checkpoint_minutes:g} min x {nodes} nodes = "
        f"{checkpoint_minutes * nodes / 60:.1f} node-hours)"
        if checkpoint_minutes
        else "up to its checkpoint interval on all of them"
    )
    first, last = resume_minutes(facts)
    degraded = f"training on {nodes - 1} meanwhile" if nodes > 1 else "idle meanwhile"
    return (
        f"spot {kind} in {spec.region} is in the {band.label} interruption band "
        f"({ADVISORY}, {band.date}: the share of its spot capacity AWS reclaimed in "
        f"{facts['advisor_period']}): {expected} reclaims per 30 days for {spot_nodes} "
        f"spot node(s) (derived: nodes x band). Each reclaim costs the work since the last "
        f"checkpoint on all {nodes} node(s) - seconds for a job that checkpoints on the "
        f"{facts['notice_minutes']}-minute notice (SIGUSR1 or $GPUC_CHECKPOINT_FILE), "
        f"{interval} for one that does not - and about {first}-{last} min until the cluster is "
        f"back at {nodes} node(s) ({degraded}; estimate: {facts['cite']}). Fix: checkpoint at "
        "once on SIGUSR1, or pick a type or region in a lower band (spot.fallbackTypes), an "
        "on-demand base (spot.onDemandBase) or a capacity reservation"
    )
