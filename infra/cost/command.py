"""`gpuc cost`: a stack's line-by-line cost and its purchase options side by side."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from gpu_cluster.infra.aws.capacity_blocks import MAX_DAYS_DAILY
from gpu_cluster.infra.cost.compare import BlockQuote, compare_options
from gpu_cluster.infra.cost.model import (
    Usage,
    estimate_cluster,
    estimate_data,
    estimate_serving,
    is_gpu_line,
    scheduled_usage,
)
from gpu_cluster.infra.cost.render import cost_json, estimate_text, options_text
from gpu_cluster.infra.cost.serving import serving_summary, serving_text
from gpu_cluster.infra.outcome import OK, load_stack_spec
from gpu_cluster.infra.problems import AwsError
from gpu_cluster.infra.validation import ResolvedCluster


def quote_capacity_block(spec: ResolvedCluster, usage: Usage) -> BlockQuote | None:
    """The cheapest offering for the cluster, for as long as a month of its use (needs AWS)."""
    from gpu_cluster.infra.aws.capacity_blocks import cheapest_offering

    return cheapest_offering(
        spec.region, spec.facts.instance_type, spec.node_count, block_hours(usage.days_per_month)
    )


def block_hours(days_per_month: float) -> int:
    """The block length AWS sells closest to a month of use: whole days up to 14, then whole
    weeks (30 days -> 28)."""
    days = max(1, int(days_per_month))
    return 24 * (days if days <= MAX_DAYS_DAILY else days - days % 7)


def run_cost(
    stack: str,
    usage: Usage,
    as_json: bool = False,
    quote_block: bool = False,
    follow_schedule: bool = False,
    overrides: Sequence[tuple[str, str]] = (),
) -> int:
    """``follow_schedule``: no --hours-per-day was given, so the stack's schedule decides."""
    spec = load_stack_spec(stack, overrides)
    if follow_schedule:
        usage = scheduled_usage(spec, usage)
    serving = None
    if not isinstance(spec, ResolvedCluster):
        estimate, options = estimate_data(spec, usage), []
    elif spec.inference is not None:
        estimate, options = estimate_serving(spec, usage), []
        serving = serving_summary(spec, usage)
    else:
        estimate = estimate_cluster(spec, usage)
        quote = None
        if quote_block and "capacity-block" in spec.facts.usage_classes:
            try:
                quote = quote_capacity_block(spec, usage)
            except AwsError as error:
                print(f"warning: no capacity block quote: {error}", file=sys.stderr)
        options = compare_options(spec, usage, block_quote=quote)
    if as_json:
        document = cost_json(stack, estimate, options)
        if serving is not None:
            document["serving"] = serving
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return OK
    lines = estimate_text(stack, estimate)
    if options:
        rest = sum(line.monthly(usage) for line in estimate.lines if not is_gpu_line(line))
        lines += options_text(options, rest)
    if serving is not None:
        lines += serving_text(serving)
    print("\n".join(lines))
    return OK
