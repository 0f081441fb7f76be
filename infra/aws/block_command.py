"""`gpuc capacity-block offerings|purchase`: the CLI side of infra/aws/capacity_blocks."""

from __future__ import annotations

from datetime import UTC, datetime

from gpu_cluster.infra.aws.capacity_blocks import (
    Offering,
    duration_problem,
    purchase,
    regions_problem,
    search_regions,
)
from gpu_cluster.infra.json_doc import camel_fields, dump
from gpu_cluster.infra.outcome import INPUT, OK, USAGE, CommandError, load_cluster_spec


def parse_start(text: str | None) -> datetime | None:
    if text is None:
        return None
    start = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return start if start.tzinfo else start.replace(tzinfo=UTC)


def offerings_text(
    offerings: list[Offering],
    no_offering: dict[str, str],
    instance_type: str,
    instance_count: int,
    hours: int,
) -> list[str]:
    """The ranked table (cheapest total first, then the earliest start), then each region
    that had none and why."""
    lines = []
    if offerings:
        regions = sorted({o.region for o in offerings})
        lines.append(
            f"Capacity Block offerings for {instance_count} x {instance_type}, {hours} h, "
            f"{', '.join(regions)} (cheapest total first, then earliest start):"
        )
        lines.append(
            f"{'offering':<22}{'region':<16}{'zone':<17}{'start (UTC)':<18}{'end (UTC)':<18}"
            f"{'hours':>6}{'count':>6}{'total $':>14}{'$/inst-h':>10}"
        )
        for o in offerings:
            lines.append(
                f"{o.offering_id:<22}{o.region:<16}{o.availability_zone:<17}"
                f"{o.start:%Y-%m-%d %H:%M}  {o.end:%Y-%m-%d %H:%M}  "
                f"{o.duration_hours:>6}{o.instance_count:>6}{o.upfront_usd:>14,.2f}"
                f"{o.instance_hourly:>10.3f}"
            )
    else:
        lines.append(
            f"no Capacity Block offerings for {instance_count} x {instance_type} for {hours} h"
        )
    lines.extend(f"  {region}: {why}" for region, why in sorted(no_offering.items()))
    return lines


def run_offerings(
    stack: str,
    hours: int,
    start_text: str | None,
    as_json: bool = False,
    regions: list[str] | None = None,
) -> int:
    """``regions``: where to search (default: the stack's own region)."""
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
    wanted = list(dict.fromkeys(regions or [spec.region]))
    problem = regions_problem(wanted, kind)
    if problem:
        raise CommandError(INPUT, problem)
    offerings, empty, failed = search_regions(wanted, kind, spec.node_count, hours, start)
    if failed and len(failed) == len(wanted):
        # no region answered: "could not look", never an empty listing
        raise next(iter(failed.values()))
    no_offering = empty | {region: str(error) for region, error in failed.items()}
    if as_json:
        dump(
            {
                "stack": stack,
                "region": spec.region,
                "availabilityZone": spec.availability_zone,
                "regions": wanted,
                "offerings": [
                    camel_fields(o) | {"usdPerInstanceHour": o.instance_hourly} for o in offerings
                ],
                "noOffering": no_offering,
            }
        )
        return OK
    for line in offerings_text(offerings, no_offering, kind, spec.node_count, hours):
        print(line)
    if not offerings:
        return OK
    best = offerings[0].region
    print(
        f"\nBuy one with `gpuc capacity-block purchase OFFERING_ID --region {best} --yes` "
        "(the offering's region), then set purchaseOption capacity-block and capacityBlock.id; "
        f"the block's zone must be the stack's availabilityZone ({spec.availability_zone})"
        + (
            f", and a block outside {spec.region} needs the stack moved to its region."
            if any(o.region != spec.region for o in offerings)
            else "."
        )
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
