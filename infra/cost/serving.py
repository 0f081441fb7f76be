"""The inference stage's cost: at its minimum and maximum size, and per 1,000 requests at a
stated load and throughput per GPU (assumptions in infra/data/aws_unit_prices.json)."""

from __future__ import annotations

from typing import Any

from gpu_cluster.infra.cost.model import (
    Estimate,
    Usage,
    estimate_serving,
    nodes_for_load,
    serving_load,
)
from gpu_cluster.infra.prices.unit_prices import unit_prices
from gpu_cluster.infra.validation import ResolvedCluster


def serving_summary(spec: ResolvedCluster, usage: Usage) -> dict[str, Any]:
    assert spec.inference is not None
    load = serving_load(usage, unit_prices(spec.region))
    low = estimate_serving(spec, usage, spec.inference.min_nodes)
    high = estimate_serving(spec, usage, spec.inference.max_nodes)
    nodes = nodes_for_load(spec, load)
    at_load: Estimate = estimate_serving(spec, usage, nodes)
    per_thousand = at_load.hourly_usd / (load.requests_per_second * 3600) * 1000
    return {
        "minNodes": spec.inference.min_nodes,
        "maxNodes": spec.inference.max_nodes,
        "usdPerMonthAtMin": low.monthly_usd,
        "usdPerMonthAtMax": high.monthly_usd,
        "requestsPerSecond": load.requests_per_second,
        "requestsPerGpuSecond": load.requests_per_gpu_second,
        "nodesForLoad": nodes,
        "usdPer1000Requests": per_thousand,
    }


def serving_text(summary: dict[str, Any]) -> list[str]:
    return [
        "",
        f"Serving: ${summary['usdPerMonthAtMin']:,.0f}/month at {summary['minNodes']} nodes "
        f"(minimum), ${summary['usdPerMonthAtMax']:,.0f}/month at {summary['maxNodes']} (maximum)",
        f"At {summary['requestsPerSecond']:g} req/s and {summary['requestsPerGpuSecond']:g} req/s "
        f"per GPU: {summary['nodesForLoad']} node(s), ${summary['usdPer1000Requests']:.4f} per "
        "1,000 requests (--requests-per-second, --requests-per-gpu-second, --kb-per-request)",
    ]
