"""The same cluster bought every way: on-demand, spot (the stack's AZ and the region's cheapest),
1- and 3-year savings plans, a capacity reservation, a capacity block — GPU instances only
(every other line of the estimate is the same whichever way the GPUs are bought)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpu_cluster.components.catalog import Catalog, load_catalog
from gpu_cluster.infra.aws.future_reservation import rules as future_rules
from gpu_cluster.infra.aws.future_reservation import series
from gpu_cluster.infra.cost.model import HOURS_PER_DAY, Usage
from gpu_cluster.infra.prices.block_quote import BlockQuote
from gpu_cluster.infra.prices.commitment_prices import reserved_rate, savings_plan_rate
from gpu_cluster.infra.prices.gpu_prices import PriceTable, price_table
from gpu_cluster.infra.prices.node_price import cheapest_spot_zone
from gpu_cluster.infra.prices.spot_advisor import band_text, spot_band
from gpu_cluster.infra.prices.unit_prices import hours_per_month, unit_prices
from gpu_cluster.infra.validation import ResolvedCluster

CAPACITY_BLOCK_QUOTE = "quote with `gpuc capacity-block offerings`"


@dataclass(frozen=True)
class OptionCost:
    option: str
    usd_per_hour: float | None  # the cluster's instances, while billed
    always_on: bool
    note: str
    hours_per_day: float
    days_per_month: float
    gpus: float  # a fractional GPU counts as its share
    committed: bool = False  # a commitment: bills every hour of the month, however few days used

    @property
    def daily(self) -> float | None:
        if self.usd_per_hour is None:
            return None
        return self.usd_per_hour * (HOURS_PER_DAY if self.always_on else self.hours_per_day)

    @property
    def monthly(self) -> float | None:
        daily = self.daily  # None exactly when usd_per_hour is
        if daily is None or self.usd_per_hour is None:
            return None
        if self.committed:
            return self.usd_per_hour * hours_per_month()
        return daily * self.days_per_month

    @property
    def per_gpu_hour_used(self) -> float | None:
        """What each GPU-hour the team actually uses costs (idle paid hours included)."""
        if self.daily is None or not self.gpus or not self.hours_per_day:
            return None
        if self.committed and self.monthly is not None and self.days_per_month:
            return self.monthly / (self.gpus * self.hours_per_day * self.days_per_month)
        return self.daily / (self.gpus * self.hours_per_day)


def compare_options(
    spec: ResolvedCluster,
    usage: Usage | None = None,
    prices: PriceTable | None = None,
    catalog: Catalog | None = None,
    block_quote: BlockQuote | None = None,
) -> list[OptionCost]:
    usage = usage or Usage()
    prices = prices or price_table()
    catalog = catalog or load_catalog()
    unit = unit_prices(spec.region)
    kind, nodes, gpus = spec.facts.instance_type, spec.node_count, spec.total_gpus
    on_demand = prices.on_demand.get((spec.region, kind))

    def row(
        option: str, hourly: float | None, always_on: bool, note: str, committed: bool = False
    ) -> OptionCost:
        return OptionCost(
            option,
            hourly,
            always_on,
            note,
            usage.hours_per_day,
            usage.days_per_month,
            gpus,
            committed,
        )

    od = nodes * on_demand if on_demand is not None else None
    rows = [
        row("on-demand", od, False, f"${on_demand:,.4f}/h per node" if on_demand else "no price")
    ]
    spot = prices.spot.get((spec.region, kind), {})
    zone = catalog.zone_id(spec.region, spec.availability_zone)
    if zone in spot:
        rows.append(
            row(
                f"spot, {spec.availability_zone}",
                nodes * spot[zone],
                False,
                f"{zone}; may be interrupted with 2 minutes' notice" + band_note(spec.region, kind),
            )
        )
    else:
        rows.append(row(f"spot, {spec.availability_zone}", None, False, "no spot price"))
    best = cheapest_spot_zone(spec.region, kind, spot, catalog)
    if best is not None:
        cheapest, price = best
        name = catalog.zone_name(spec.region, cheapest) or "not in the catalog's AZ mapping"
        rows.append(
            row(
                f"spot, cheapest AZ ({cheapest})",
                nodes * price,
                False,
                f"{name}; {kind} offered there: "
                + ("yes" if kind in catalog.offerings.get(spec.region, {}).get(name, ()) else "no"),
            )
        )
    for years, default in ((1, unit.savings_plan_1y), (3, unit.savings_plan_3y)):
        given = usage.savings_plan_1y if years == 1 else usage.savings_plan_3y
        exact = savings_plan_rate(spec.region, kind, years) if given is None else None
        if exact is not None:
            hourly, note = (
                nodes * exact.usd_per_hour,
                (
                    f"Compute, No Upfront: ${exact.usd_per_hour:,.4f}/h per node ({exact.label}); "
                    "the hourly commitment bills every hour of the month"
                ),
            )
        else:
            rate = default if given is None else given
            hourly = od * (1 - rate) if od is not None else None
            why = "your rate" if given is not None else "assumed: no price list rate bundled"
            note = (
                f"{rate:.0%} off on-demand ({why}); the hourly commitment bills every hour of "
                "the month"
            )
        rows.append(row(f"savings plan, {years} year", hourly, True, note, committed=True))
    unbundled = (
        f"no rate for {kind} in {spec.region} bundled: `gpuc prices refresh --commitments "
        f"--region {spec.region}` reads AWS's price list files"
    )
    for years in (1, 3):
        instance_plan = savings_plan_rate(spec.region, kind, years, "ec2-instance")
        hourly, note = (None, unbundled)
        if instance_plan is not None:
            hourly = nodes * instance_plan.usd_per_hour
            note = (
                f"{kind.split('.')[0]} in {spec.region} only, No Upfront: "
                f"${instance_plan.usd_per_hour:,.4f}/h per node ({instance_plan.label})"
            )
        name = f"EC2 instance savings plan, {years} year"
        rows.append(row(name, hourly, True, note, committed=True))
    for years in (1, 3):
        reserved = reserved_rate(spec.region, kind, years)
        hourly, note = (None, unbundled)
        if reserved is not None:
            hourly = nodes * reserved.usd_per_hour
            note = (
                f"standard, No Upfront: ${reserved.usd_per_hour:,.4f}/h per node ({reserved.label})"
            )
        rows.append(row(f"reserved instances, {years} year", hourly, True, note, committed=True))
    rows.append(
        row(
            "capacity reservation",
            od,
            True,
            "on-demand rate, billed every hour from creation until cancelled, used or not",
            committed=True,
        )
    )
    rows.append(future_reservation_row(spec, od, row))
    if "capacity-block" in spec.facts.usage_classes:
        if block_quote is not None:
            rows.append(
                row(
                    "capacity block",
                    nodes * block_quote.instance_hourly,
                    True,
                    f"offering {block_quote.offering_id}: ${block_quote.upfront_usd:,.2f} for "
                    f"{block_quote.duration_hours} h x {block_quote.instance_count} instances, "
                    "prepaid",
                )
            )
        else:
            rows.append(row("capacity block", None, True, CAPACITY_BLOCK_QUOTE))
    return rows


def band_note(region: str, instance_type: str) -> str:
    """The Spot Instance Advisor's interruption band, labelled advisory, if bundled."""
    band = spot_band(region, instance_type)
    return f"; {band_text(band)}" if band else ""


def future_reservation_row(
    spec: ResolvedCluster, on_demand: float | None, row: Callable[..., OptionCost]
) -> OptionCost:
    """A future-dated capacity reservation: the on-demand rate from its start, for at least its
    commitment; EC2 takes them for some series only (infra/data/future_reservations.json)."""
    rules = future_rules()
    kind = spec.facts.instance_type
    if series(kind) not in rules["series"]:
        return row(
            "future capacity reservation",
            None,
            True,
            f"EC2 reserves only {', '.join(s.upper() for s in rules['series'])} types ahead, not "
            f"{kind}; a Capacity Block is how to book it ahead",
            committed=True,
        )
    vcpus = spec.facts.vcpus * spec.node_count
    short = (
        f"; {vcpus} vCPUs is under AWS's minimum of {rules['min_total_vcpus']}"
        if vcpus < rules["min_total_vcpus"]
        else ""
    )
    return row(
        "future capacity reservation",
        on_demand,
        True,
        f"on-demand rate from a start {rules['min_days_ahead']}-{rules['max_days_ahead']} days "
        f"ahead, committed for at least {rules['min_commitment_days']} days, used or not{short} "
        "(`gpuc capacity-reservation`)",
        committed=True,
    )


def saving(row: OptionCost, baseline: OptionCost) -> float | None:
    """Monthly saving against on-demand, as a fraction (negative: costs more)."""
    if row.monthly is None or not baseline.monthly:
        return None
    return 1 - row.monthly / baseline.monthly
