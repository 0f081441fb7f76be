"""`gpuc capacity-block offerings|purchase`: the CLI side of infra/aws/capacity_blocks."""

from __future__ import annotations

from datetime import UTC, datetime

from gpu_cluster.infra.aws.capacity_blocks import duration_problem, list_offerings, purchase
from gpu_cluster.infra.json_doc import camel_fields, dump
from gpu_cluster.infra.outcome import INPUT, OK, USAGE, CommandError, load_cluster_spec


def parse_start(text: str | None) -> datetime | None:
    if text is None:
        return None
    start = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return start if start.tzinfo else start.replace(tzinfo=UTC)


def run_offerings(stack: str, hours: int, start_text: str | None, as_json: bool = False) -> int:
    problem = duration_problem(hours)
    if problem:
        raise CommandError(INPUT, problem)
    try:
        start = parse_start(start_text)
    except ValueError:
        raise CommandError(
            INPUT, f"--start must be a date such as 2027-01-15, got {start_text!r}"
        ) from None
    spec = load_cluster_spec(stack)
    kind = spec.facts.instance_type
    if "capacity-block" not in spec.facts.usage_classes:
        raise CommandError(INPUT, f"{kind} is not sold as Capacity Blocks")
    offerings = list_offerings(spec.region, kind, spec.node_count, hours, start)
    if as_json:
        dump(
            {
                "stack": stack,
                "region": spec.region,
                "availabilityZone": spec.availability_zone,
                "offerings": [
                    camel_fields(o) | {"usdPerInstanceHour": o.instance_hourly} for o in offerings
                ],
            }
        )
        return OK
    if not offerings:
        print(f"no Capacity Block offerings for {spec.node_count} x {kind} for {hours} h")
        return OK
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
    return OK


def run_purchase(offering_id: str, region: str, yes: bool, as_json: bool = False) -> int:
    if not yes:
        raise CommandError(
            USAGE,
            f"buying {offering_id} charges its upfront fee now, and a Capacity Block cannot be "
            "cancelled. Run again with --yes to buy it.",
        )
    block = purchase(region, offering_id)
    if as_json:
        dump(block)
        return OK
    when = f"{block['start']} to {block['end']}" if block["start"] and block["end"] else ""
    facts = ", ".join(filter(None, [block["instanceType"], block["availabilityZone"], when]))
    print(
        f"bought Capacity Block {block['id']}" + (f" ({facts})" if facts else "") + "; it cannot "
        "be cancelled.\nUse it: pulumi config set purchaseOption capacity-block && "
        f"pulumi config set --path capacityBlock.id {block['id']}"
    )
    return OK
