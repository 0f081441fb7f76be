"""Streamed parsers of AWS's price list files: the EC2 offer file's Reserved Instance terms and
Linux products, and the regional Savings Plans file's rates (file layout: price_list_files.py).
The EC2 file is hundreds of MB, so both are read as ijson events and only the members wanted
are ever built."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, BinaryIO

import ijson
from ijson.common import ObjectBuilder

from gpu_cluster.infra.aws.price_refresh import LINUX_ON_DEMAND
from gpu_cluster.infra.prices.commitment_prices import (
    COMPUTE_SP,
    EC2_INSTANCE_SP,
    OFFERING_CLASSES,
    PURCHASE_OPTIONS,
    RESERVED,
    TERMS,
    effective_hourly,
)

SP_FAMILIES = {"ComputeSavingsPlans": COMPUTE_SP, "EC2InstanceSavingsPlans": EC2_INSTANCE_SP}
INSTANCE_FAMILIES = ("Compute Instance", "Compute Instance (bare metal)")
LEASE_YEARS = {"1yr": 1, "3yr": 3}

Event = tuple[str, str, Any]
SCALARS = ("string", "number", "boolean", "null")  # ijson's events for a value with no members


def _members(
    events: Iterable[Event],
    maps: set[str],
    arrays: set[str],
    wanted: Callable[[str, str | None], bool],
) -> Iterator[tuple[str, str | None, Any]]:
    """Each member of the named containers as (container, key, value), built one at a time: a
    map's (key, value), an array's (None, item); members ``wanted`` refuses are skipped without
    being built. Top-level scalars come out as ("", key, value)."""
    pending: tuple[str, str | None] | None = None
    builder: Any = None
    depth = 0
    where: tuple[str, str | None] = ("", None)
    for prefix, event, value in events:
        if depth:  # inside a member: build it or skip it
            if builder is not None:
                builder.event(event, value)
            if event in ("start_map", "start_array"):
                depth += 1
            elif event in ("end_map", "end_array"):
                depth -= 1
                if not depth and builder is not None:
                    yield (where[0], where[1], builder.value)
                    builder = None
            continue
        if event == "map_key":
            pending = (prefix, value) if prefix in maps else None
            continue
        if pending is None and prefix.endswith(".item") and prefix[: -len(".item")] in arrays:
            pending = (prefix[: -len(".item")], None)
        if pending is not None:
            where, pending = pending, None
            if event in ("start_map", "start_array"):
                depth = 1
                if wanted(*where):
                    builder = ObjectBuilder()
                    builder.event(event, value)
            elif wanted(*where):
                yield (where[0], where[1], value)
        elif prefix and "." not in prefix and event in SCALARS:
            yield ("", prefix, value)


def _events(stream: BinaryIO) -> Iterator[Event]:
    return ijson.parse(stream, use_float=True)


def _number(text: object) -> str:
    """A price as the file writes it, without trailing zeros ("0.0300000000" -> "0.03")."""
    try:
        return format(Decimal(str(text)).normalize(), "f")
    except InvalidOperation as error:
        raise ValueError(f"not a price: {text!r}") from error


def _day(stamp: object) -> str:
    return str(stamp)[:10]  # "2023-03-22T14:56:51Z" -> "2023-03-22"


@dataclass
class Ec2Offer:
    """What the refresh keeps of a region's EC2 offer file."""

    published: str = ""
    usage: dict[tuple[str, str], str] = field(default_factory=dict)  # (usagetype, op) -> type
    rows: list[dict[str, str]] = field(default_factory=list)


def _linux_shared(product: dict[str, Any], region: str, kinds: set[str]) -> str | None:
    """The instance type of a Linux, shared-tenancy, on-demand product of the region, else None
    (the filter infra/aws/price_refresh.py puts on on-demand prices)."""
    attributes = product.get("attributes", {})
    if product.get("productFamily") not in INSTANCE_FAMILIES:
        return None
    if attributes.get("instanceType") not in kinds:
        return None
    if any(attributes.get(name) != value for name, value in LINUX_ON_DEMAND.items()):
        return None
    if attributes.get("regionCode", region) != region:  # local zones have their own code
        return None
    if attributes.get("marketoption", "OnDemand") != "OnDemand":  # e.g. CapacityBlock
        return None
    return attributes["instanceType"]


def parse_ec2_offer(
    stream: BinaryIO, region: str, instance_types: Iterable[str], source: str, url: str = ""
) -> Ec2Offer:
    """Reserved Instance rows (Linux, shared tenancy) of the wanted types, and the usage type and
    operation of each type's Linux product, from a streamed EC2 offer file."""
    kinds = set(instance_types)
    offer = Ec2Offer()
    products: dict[str, dict[str, str]] = {}  # sku -> product attributes kept
    seen_products = False

    def wanted(container: str, key: str | None) -> bool:
        if container == "terms.Reserved":
            if not seen_products:
                raise ValueError("its terms come before its products")
            return key in products
        return True

    members = _members(_events(stream), {"products", "terms.Reserved"}, set(), wanted)
    for container, key, value in members:
        if container == "":
            if key == "publicationDate":
                offer.published = _day(value)
        elif container == "products":
            seen_products = True
            kind = _linux_shared(value, region, kinds)
            if kind is not None:
                attributes = value["attributes"]
                products[str(key)] = attributes
                offer.usage[(attributes.get("usagetype", ""), attributes.get("operation", ""))] = (
                    kind
                )
        else:
            attributes = products[str(key)]
            for term in value.values():
                row = _reserved_row(term, region, attributes["instanceType"])
                if row:
                    offer.rows.append({**row, "source": source, "source_url": url})
    for row in offer.rows:
        row["published"] = offer.published
    return offer


def _reserved_row(term: dict[str, Any], region: str, kind: str) -> dict[str, str] | None:
    attributes = term.get("termAttributes", {})
    years = LEASE_YEARS.get(attributes.get("LeaseContractLength", ""))
    option = attributes.get("PurchaseOption")
    offering_class = attributes.get("OfferingClass")
    if years not in TERMS or option not in PURCHASE_OPTIONS:
        return None
    if offering_class not in OFFERING_CLASSES:
        return None
    recurring, upfront = "0", "0"
    for dimension in term.get("priceDimensions", {}).values():
        usd = dimension.get("pricePerUnit", {}).get("USD")
        if usd is None:
            continue
        if dimension.get("unit") == "Hrs":
            recurring = _number(usd)
        elif dimension.get("unit") == "Quantity":  # "Upfront Fee", once per instance
            upfront = _number(usd)
    return {
        "region": region,
        "instance_type": kind,
        "plan": RESERVED,
        "term_years": str(years),
        "purchase_option": str(option),
        "offering_class": str(offering_class),
        "recurring_usd_per_hour": recurring,
        "upfront_usd": upfront,
        "usd_per_hour": f"{effective_hourly(float(recurring), float(upfront), years):.6f}",
    }


def parse_savings_plans(
    stream: BinaryIO,
    region: str,
    usage: dict[tuple[str, str], str],
    source: str,
    url: str = "",
) -> tuple[str, list[dict[str, str]]]:
    """(publication date, rows) of Compute and EC2 Instance Savings Plan rates for the usage
    types and operations given (the Linux shared-tenancy products of the EC2 offer file)."""
    plans: dict[str, tuple[str, int, str]] = {}  # sku -> (plan, years, purchase option)
    published = ""
    rows: list[dict[str, str]] = []
    seen_products = False

    def wanted(container: str, key: str | None) -> bool:
        if container == "terms.savingsPlan" and not seen_products:
            raise ValueError("its terms come before its products")
        return True

    members = _members(_events(stream), set(), {"products", "terms.savingsPlan"}, wanted)
    for container, key, value in members:
        if container == "":
            if key == "publicationDate":
                published = _day(value)
        elif container == "products":
            seen_products = True
            plan = SP_FAMILIES.get(value.get("productFamily", ""))
            attributes = value.get("attributes", {})
            years = LEASE_YEARS.get(attributes.get("purchaseTerm", ""))
            option = attributes.get("purchaseOption")
            if plan and years in TERMS and option in PURCHASE_OPTIONS:
                plans[value["sku"]] = (plan, years, option)
        elif value.get("sku") in plans:
            plan, years, option = plans[value["sku"]]
            lease = value.get("leaseContractLength", {})
            if lease and (lease.get("duration"), lease.get("unit")) != (years, "year"):
                raise ValueError(f"plan {value['sku']} is {lease}, its product says {years}yr")
            for rate in value.get("rates", []):
                kind = usage.get(
                    (rate.get("discountedUsageType", ""), rate.get("discountedOperation", ""))
                )
                if kind is None or rate.get("discountedServiceCode") != "AmazonEC2":
                    continue
                if rate.get("unit") != "Hrs" or rate["discountedRate"].get("currency") != "USD":
                    continue
                price = _number(rate["discountedRate"]["price"])
                rows.append(
                    {
                        "region": region,
                        "instance_type": kind,
                        "plan": plan,
                        "term_years": str(years),
                        "purchase_option": option,
                        "offering_class": "",
                        "recurring_usd_per_hour": price,
                        "upfront_usd": "0",
                        "usd_per_hour": price,
                        "source": source,
                        "source_url": url,
                    }
                )
    for row in rows:
        row["published"] = published
    return published, rows
