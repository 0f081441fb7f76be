"""`gpuc capacity-block offerings|purchase`: the CLI side of infra/aws/capacity_blocks."""

from __future__ import annotations

import sys
from datetime import UTC, datetime

from infra.aws.capacity_blocks import duration_problem, list_offerings, purchase
from infra.config import load_spec
from infra.errors import AwsError, ConfigError
from infra.stack_files import StackFileError, load_stack_config
from infra.validation import ResolvedCluster

EXIT_OK, EXIT_USAGE, EXIT_CONFIG = 0, 1, 2


def parse_start(text: str | None) -> datetime | None:
    if text is None:
        return None
    start = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return start if start.tzinfo else start.replace(tzinfo=UTC)


def run_offerings(stack: str, hours: int, start_text: str | None) -> int:
    problem = duration_problem(hours)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        start = parse_start(start_text)
    except ValueError:
        print(
            f"error: --start must be a date such as 2027-01-15, got {start_text!r}", file=sys.stderr
        )
        return EXIT_USAGE
    try:
        spec = load_spec(load_stack_config(stack), stack)
    except StackFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_CONFIG
    if not isinstance(spec, ResolvedCluster):
        print(f"error: stack '{stack}' has no GPU nodes", file=sys.stderr)
        return EXIT_USAGE
    kind = spec.facts.instance_type
    if "capacity-block" not in spec.facts.usage_classes:
        print(f"error: {kind} is not sold as Capacity Blocks", file=sys.stderr)
        return EXIT_USAGE
    try:
        offerings = list_offerings(spec.region, kind, spec.node_count, hours, start)
    except AwsError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    if not offerings:
        print(f"no Capacity Block offerings for {spec.node_count} x {kind} for {hours} h")
        return EXIT_OK
    print(f"Capacity Block offerings for {spec.node_count} x {kind}, {hours} h, {spec.region}:")
    print(
        f"{'offering':<28}{'zone':<13}{'start (UTC)':<18}{'end (UTC)':<18}"
        f"{'upfront':>14}{'$/node-h':>10}"
    )
    for o in offerings:
        print(
            f"{o.offering_id:<28}{o.availability_zone:<13}{o.start:%Y-%m-%d %H:%M}  "
            f"{o.end:%Y-%m-%d %H:%M}  {o.upfront_usd:>13,.2f}{o.instance_hourly:>10.3f}"
        )
    print(
        "\nBuy one with `gpuc capacity-block purchase OFFERING_ID --region "
        f"{spec.region} --yes`, then set purchaseOption capacity-block and capacityBlock.id; "
        f"the block's zone must be the stack's availabilityZone ({spec.availability_zone})."
    )
    return EXIT_OK


def run_purchase(offering_id: str, region: str, yes: bool) -> int:
    if not yes:
        print(
            f"error: buying {offering_id} charges its upfront fee now, and a Capacity Block "
            "cannot be cancelled. Run again with --yes to buy it.",
            file=sys.stderr,
        )
        return EXIT_USAGE
    try:
        block = purchase(region, offering_id)
    except AwsError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(
        f"bought Capacity Block {block['id']} ({block['instanceType']}, "
        f"{block['availabilityZone']}, {block['start']} to {block['end']}); it cannot be "
        "cancelled.\nUse it: pulumi config set purchaseOption capacity-block && "
        f"pulumi config set --path capacityBlock.id {block['id']}"
    )
    return EXIT_OK
