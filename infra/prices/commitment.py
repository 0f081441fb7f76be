"""A node's hourly price under a commitment the account holds (stack config `commitment`): the
exact per-type rate from AWS's price list files when the bundled data has it
(infra/prices/commitment_prices.py), else, for a Savings Plan, the flat discount of
aws_unit_prices.json, labelled as an assumption. One price per node, the same in the plan's
estimate, `gpuc cost`, the dashboard's burn rate and `gpuc status`.

AWS applies Savings Plans and Reserved Instances to on-demand usage, Capacity Reservations
included, never to Spot Instances or Capacity Blocks ("Savings Plans do not apply to Spot
Instances"; Capacity Blocks are prepaid): spot nodes keep their spot price."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from gpu_cluster.infra.prices.commitment_prices import reserved_rate, savings_plan_rate
from gpu_cluster.infra.prices.unit_prices import unit_prices

PAYMENT = {
    "no-upfront": "No Upfront",
    "partial-upfront": "Partial Upfront",
    "all-upfront": "All Upfront",
}
TERM_YEARS = {"1y": 1, "3y": 3}


@dataclass(frozen=True)
class Commitment:
    """What the stack says it holds (config `commitment`)."""

    kind: Literal["savings-plan", "reserved"]
    term_years: int
    plan_type: str = "compute"  # savings plans: compute | ec2-instance
    offering_class: str = "standard"  # reserved instances: standard | convertible
    payment: str = "no-upfront"

    @property
    def name(self) -> str:
        if self.kind == "savings-plan":
            plan = "Compute" if self.plan_type == "compute" else "EC2 Instance"
            return f"{self.term_years}-year {plan} Savings Plan, {PAYMENT[self.payment]}"
        return (
            f"{self.term_years}-year {self.offering_class} Reserved Instances, "
            f"{PAYMENT[self.payment]}"
        )


@dataclass(frozen=True)
class CommittedPrice:
    usd_per_hour: float | None  # per node; None: no rate and no assumption to fall back on
    label: str  # what the rate is and where it comes from (source, publication date)
    exact: bool  # the price list's own rate for this type (False: an assumption)


def committed_hourly(
    region: str, instance_type: str, on_demand: float | None, commitment: Commitment
) -> CommittedPrice:
    """One node's USD/hour under ``commitment``: the exact rate, else the labelled assumption."""
    payment = PAYMENT[commitment.payment]
    if commitment.kind == "savings-plan":
        rate = savings_plan_rate(
            region, instance_type, commitment.term_years, commitment.plan_type, payment
        )
    else:
        rate = reserved_rate(
            region, instance_type, commitment.term_years, commitment.offering_class, payment
        )
    if rate is not None:
        upfront = (
            f", ${rate.upfront_usd:,.0f} upfront spread over the term" if rate.upfront_usd else ""
        )
        return CommittedPrice(
            rate.usd_per_hour,
            f"{commitment.name} at ${rate.usd_per_hour:,.4f}/h{upfront} "
            f"({rate.source}, published {rate.published})",
            True,
        )
    if commitment.kind == "savings-plan" and on_demand is not None:
        unit = unit_prices(region)
        off = unit.savings_plan_1y if commitment.term_years == 1 else unit.savings_plan_3y
        return CommittedPrice(
            on_demand * (1 - off),
            f"{commitment.name}: no rate for {instance_type} in {region} in the bundled price "
            f"list data; {off:.0%} off on-demand assumed (`gpuc prices refresh --commitments`)",
            False,
        )
    return CommittedPrice(
        on_demand,
        f"{commitment.name}: no rate for {instance_type} in {region} in the bundled price list "
        "data; the on-demand rate shown (`gpuc prices refresh --commitments`)",
        False,
    )
