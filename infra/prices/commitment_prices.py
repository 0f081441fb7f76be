"""Savings Plan and Reserved Instance rates per GPU instance type, from AWS's public price list
files (bundled in infra/data/aws_commitment_prices.csv, each row with the file it came from and
that file's publicationDate; provenance in aws_commitment_prices.SOURCE.md; refreshed by
infra/aws/price_list_files.py).

- Savings Plans: the ``terms.savingsPlan[].rates[].discountedRate.price`` of the
  AWSComputeSavingsPlan regional file, a USD price per instance-hour of usage covered by the plan
  ("Reading the service price list file for a Savings Plan", AWS Billing User Guide). The payment
  option changes the rate, not the shape: the plan's upfront is a share of its $/hour commitment,
  never a per-instance fee, so ``upfront_usd`` is 0 and the rate is the effective price.
- Reserved Instances: the EC2 offer file's ``terms.Reserved`` price dimensions, unit ``Hrs`` (the
  recurring hourly fee) and unit ``Quantity`` ("Upfront Fee", once per instance). The effective
  hourly figure spreads the upfront fee over the term at 8,760 hours a year (365 x 24), as
  ec2instances.info computes it (vantage-sh/ec2instances.info ec2.py, get_reserved_pricing:
  ``hours_in_term = years * 365 * 24``).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpu_cluster.infra.prices.gpu_prices import DATA_DIR  # infra/data, the bundled snapshots

COMMITMENT_PRICES_PATH = DATA_DIR / "aws_commitment_prices.csv"
COMMITMENT_META_PATH = DATA_DIR / "aws_commitment_prices.meta.json"
COLUMNS = (
    "region",
    "instance_type",
    "plan",
    "term_years",
    "purchase_option",
    "offering_class",
    "recurring_usd_per_hour",
    "upfront_usd",
    "usd_per_hour",
    "source",
    "source_url",
    "published",
    "retrieved",  # the day `gpuc prices refresh --commitments` read it ("" before the column)
)

COMPUTE_SP = "Compute Savings Plan"
EC2_INSTANCE_SP = "EC2 Instance Savings Plan"
RESERVED = "Reserved Instance"
SAVINGS_PLANS = {"compute": COMPUTE_SP, "ec2-instance": EC2_INSTANCE_SP}
TERMS = (1, 3)
PURCHASE_OPTIONS = ("No Upfront", "Partial Upfront", "All Upfront")
OFFERING_CLASSES = ("standard", "convertible")
HOURS_PER_YEAR = 8760  # 365 x 24: the hours AWS spreads an RI's upfront fee over


@dataclass(frozen=True)
class CommitmentRate:
    plan: str  # COMPUTE_SP | EC2_INSTANCE_SP | RESERVED
    term_years: int  # 1 | 3
    purchase_option: str  # one of PURCHASE_OPTIONS
    usd_per_hour: float  # effective per instance-hour: recurring + upfront over the term's hours
    recurring_usd_per_hour: float
    upfront_usd: float  # per instance, once
    offering_class: str | None  # RIs: "standard" | "convertible"; None for savings plans
    source: str  # e.g. "AWS price list: AWSComputeSavingsPlan us-east-1 index.json"
    published: str  # that file's publicationDate, "YYYY-MM-DD"
    retrieved: str = ""  # the day the refresh read that file ("" in a snapshot made before)

    @property
    def snapshot(self) -> str:
        """How old the figure is: when it was read (AWS republishes unchanged files)."""
        return self.retrieved or self.published

    @property
    def label(self) -> str:
        return f"{self.source}, published {self.published}"


RateKey = tuple[str, str, str, int, str, str]  # region, type, plan, term, option, class ("")


def effective_hourly(recurring: float, upfront: float, term_years: int) -> float:
    """USD per instance-hour: the recurring fee plus the upfront fee spread over the term."""
    return recurring + upfront / (term_years * HOURS_PER_YEAR)


def check_choice(name: str, value: object, allowed: tuple[object, ...]) -> None:
    """A clear ValueError (what, the value, what is allowed) for a term or option we don't know."""
    if value not in allowed:
        shown = ", ".join(repr(item) if isinstance(item, str) else str(item) for item in allowed)
        raise ValueError(f"unknown {name} {value!r}: allowed {shown}")


def read_commitment_table(
    path: Path = COMMITMENT_PRICES_PATH,
) -> dict[RateKey, CommitmentRate]:
    table: dict[RateKey, CommitmentRate] = {}
    if not path.is_file():
        return table
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            rate = CommitmentRate(
                plan=row["plan"],
                term_years=int(row["term_years"]),
                purchase_option=row["purchase_option"],
                usd_per_hour=float(row["usd_per_hour"]),
                recurring_usd_per_hour=float(row["recurring_usd_per_hour"]),
                upfront_usd=float(row["upfront_usd"]),
                offering_class=row["offering_class"] or None,
                source=row["source"],
                published=row["published"],
                retrieved=row.get("retrieved") or "",
            )
            key = (
                row["region"],
                row["instance_type"],
                rate.plan,
                rate.term_years,
                rate.purchase_option,
                row["offering_class"],
            )
            table[key] = rate
    return table


def read_commitment_meta(meta_path: Path = COMMITMENT_META_PATH) -> dict[str, object]:
    return json.loads(meta_path.read_text()) if meta_path.is_file() else {}


@cache
def commitment_table() -> dict[RateKey, CommitmentRate]:
    """The bundled snapshot (read once per process)."""
    return read_commitment_table()


def savings_plan_rate(
    region: str,
    instance_type: str,
    term_years: int,
    plan: str = "compute",
    purchase_option: str = "No Upfront",
) -> CommitmentRate | None:
    """The Linux shared-tenancy Savings Plan rate of a type in a region, or None when the bundled
    data has none. plan: "compute" | "ec2-instance"; a term or option AWS doesn't sell is a
    ValueError naming the allowed values."""
    check_choice("savings plan", plan, tuple(SAVINGS_PLANS))
    check_choice("term (years)", term_years, TERMS)
    check_choice("purchase option", purchase_option, PURCHASE_OPTIONS)
    key = (region, instance_type, SAVINGS_PLANS[plan], term_years, purchase_option, "")
    return commitment_table().get(key)


def reserved_rate(
    region: str,
    instance_type: str,
    term_years: int,
    offering_class: str = "standard",
    purchase_option: str = "No Upfront",
) -> CommitmentRate | None:
    """The Linux shared-tenancy regional Reserved Instance rate, or None when the bundled data
    has none; a term, class or option AWS doesn't sell is a ValueError naming the allowed values."""
    check_choice("term (years)", term_years, TERMS)
    check_choice("offering class", offering_class, OFFERING_CLASSES)
    check_choice("purchase option", purchase_option, PURCHASE_OPTIONS)
    key = (region, instance_type, RESERVED, term_years, purchase_option, offering_class)
    return commitment_table().get(key)


def oldest_snapshot(table: dict[RateKey, CommitmentRate]) -> str | None:
    return min((rate.snapshot for rate in table.values()), default=None)


def commitment_snapshot_date() -> str | None:
    """The day the oldest bundled rate was read (its file's publication date when the snapshot
    predates that record), or None when none is bundled."""
    return oldest_snapshot(commitment_table())


def commitment_text(rate: CommitmentRate) -> str:
    """One line for the CLI: the rate, how it is made up, and its source and date."""
    what = rate.plan if rate.offering_class is None else f"{rate.offering_class} {rate.plan}"
    line = f"{what}, {rate.term_years}y {rate.purchase_option}: ${rate.usd_per_hour:.4f}/h"
    if rate.upfront_usd:
        line += (
            f" (${rate.recurring_usd_per_hour:.4f}/h + ${rate.upfront_usd:,.0f} upfront"
            f" over {rate.term_years * HOURS_PER_YEAR:,} h)"
        )
    return f"{line} [{rate.label}]"
