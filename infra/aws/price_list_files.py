"""Savings Plan and Reserved Instance rates from AWS's public price list files (no credentials):
download, streamed parse, and an all-or-nothing refresh of infra/data/aws_commitment_prices.csv.

Files (AWS Billing User Guide, "Reading the price list files", "Service Region index file for
Savings Plan", "Reading the service price list file for a Savings Plan"):
- ``/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/current/region_index.json``: ``regions[]`` of
  ``regionCode`` and ``versionUrl``, the regional Savings Plans file. That one file holds both
  plan kinds: ``products[]`` with ``productFamily`` "ComputeSavingsPlans" or
  "EC2InstanceSavingsPlans" (the latter with ``attributes.instanceType`` = the family, e.g.
  "p4d") and ``attributes.purchaseOption``/``purchaseTerm``; ``terms.savingsPlan[]`` with
  ``sku``, ``leaseContractLength {duration, unit}`` and ``rates[]`` of ``discountedUsageType``
  ("BoxUsage:p4d.24xlarge" in us-east-1, "USE2-BoxUsage:..." elsewhere), ``discountedOperation``
  ("RunInstances" = Linux, "RunInstances:0002" = Windows, ...), ``discountedServiceCode``,
  ``unit`` and ``discountedRate {price, currency}``. There is no separate EC2 Instance Savings
  Plan offer file (an Amazon MIT-0 sample Savings Plan calculator and public parsers read
  both families from this file).
- ``/offers/v1.0/aws/AmazonEC2/current/<region>/index.json``: ``publicationDate``,
  ``products{sku: {productFamily, attributes{instanceType, operatingSystem, tenancy,
  preInstalledSw, capacitystatus, licenseModel, usagetype, operation, regionCode, ...}}}`` and
  ``terms.Reserved{sku: {sku.offerTermCode: {priceDimensions{rateCode: {unit "Hrs"|"Quantity",
  pricePerUnit{USD}}}, termAttributes{LeaseContractLength, OfferingClass, PurchaseOption}}}}``.

A Savings Plan rate is matched to an instance type through the EC2 file's Linux, shared-tenancy
product (its ``usagetype`` and ``operation``), so the region prefix and OS codes come from AWS's
own data and Windows, dedicated, capacity-reservation and local-zone rates fall away. The EC2 file
is hundreds of MB: both files are parsed as a stream (ijson), never loaded whole."""

from __future__ import annotations

import csv
import http.client
import json
import os
import tempfile
import urllib.request
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, BinaryIO

import ijson
from ijson.common import ObjectBuilder

from gpu_cluster.infra.aws.price_refresh import LINUX_ON_DEMAND
from gpu_cluster.infra.prices.commitment_prices import (
    COLUMNS,
    COMMITMENT_META_PATH,
    COMMITMENT_PRICES_PATH,
    COMPUTE_SP,
    EC2_INSTANCE_SP,
    OFFERING_CLASSES,
    PURCHASE_OPTIONS,
    RESERVED,
    TERMS,
    effective_hourly,
)
from gpu_cluster.infra.problems import AwsError

PRICING_HOST = "https://pricing.us-east-1.amazonaws.com"
SP_OFFER = "AWSComputeSavingsPlan"
SP_REGION_INDEX_URL = f"{PRICING_HOST}/savingsPlan/v1.0/aws/{SP_OFFER}/current/region_index.json"
EC2_OFFER_URL = PRICING_HOST + "/offers/v1.0/aws/AmazonEC2/current/{region}/index.json"
SP_FAMILIES = {"ComputeSavingsPlans": COMPUTE_SP, "EC2InstanceSavingsPlans": EC2_INSTANCE_SP}
INSTANCE_FAMILIES = ("Compute Instance", "Compute Instance (bare metal)")
LEASE_YEARS = {"1yr": 1, "3yr": 3}
PROGRESS_STEP = 16_000_000  # bytes between progress lines
DOWNLOAD_TIMEOUT = 60  # seconds per socket operation, not for the whole file
PRICE_LIST_ERROR = "PriceListFile"  # AwsError.code

Fetch = Callable[[str], BinaryIO]
Progress = Callable[[str], None]
Event = tuple[str, str, Any]
SCALARS = ("string", "number", "boolean", "null")  # ijson's events for a value with no members


def download(url: str) -> BinaryIO:
    """The file's HTTP body as a binary stream (the price list files are public)."""
    return urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT)


class ProgressStream:
    """A binary stream that reports every PROGRESS_STEP bytes read through ``progress``."""

    def __init__(self, stream: BinaryIO, label: str, progress: Progress | None) -> None:
        self._stream = stream
        self.label = label
        self._progress = progress
        self.bytes_read = 0
        self._next = PROGRESS_STEP

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self.bytes_read += len(data)
        if self._progress and self.bytes_read >= self._next:
            self._progress(f"{self.label}: {self.bytes_read / 1e6:.0f} MB read")
            self._next = (self.bytes_read // PROGRESS_STEP + 1) * PROGRESS_STEP
        return data

    def done(self) -> None:
        if self._progress:
            self._progress(f"{self.label}: done, {self.bytes_read / 1e6:.1f} MB")


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


def _read(url: str, label: str, fetch: Fetch, progress: Progress | None, parse: Callable) -> Any:
    """Download and parse one file; any failure is an AwsError naming the file."""
    try:
        stream = ProgressStream(fetch(url), label, progress)
        result = parse(stream)
        stream.done()
        return result
    except (OSError, http.client.HTTPException, ijson.JSONError, ValueError, KeyError) as error:
        raise AwsError(
            f"could not read the AWS price list file {url}: {error}",
            code=PRICE_LIST_ERROR,
            endpoint=url,
        ) from error


def savings_plan_urls(fetch: Fetch, progress: Progress | None = None) -> dict[str, str]:
    """region -> URL of its Savings Plans file, from the (small) region index."""
    index = _read(SP_REGION_INDEX_URL, "Savings Plans region index", fetch, progress, json.load)
    try:
        return {item["regionCode"]: PRICING_HOST + item["versionUrl"] for item in index["regions"]}
    except (KeyError, TypeError) as error:
        raise AwsError(
            f"{SP_REGION_INDEX_URL} is not a Savings Plans region index (no regions[]"
            " of regionCode and versionUrl)",
            code=PRICE_LIST_ERROR,
            endpoint=SP_REGION_INDEX_URL,
        ) from error


def refresh_commitments(
    regions: list[str],
    instance_types: list[str],
    fetch: Fetch | None = None,
    progress: Progress | None = None,
) -> list[dict[str, str]]:
    """Every Savings Plan and Reserved Instance row of the regions and types (Linux, shared
    tenancy); raises AwsError on the first file that can't be read, before anything is written."""
    fetch = fetch or download
    sp_urls = savings_plan_urls(fetch, progress)
    rows: list[dict[str, str]] = []
    for region in regions:
        if region not in sp_urls:
            raise AwsError(
                f"AWS publishes no Savings Plans price list for region {region!r}"
                f" (regions in {SP_REGION_INDEX_URL}: {', '.join(sorted(sp_urls))})",
                code=PRICE_LIST_ERROR,
            )
        ec2_url = EC2_OFFER_URL.format(region=region)
        ec2_source = f"AWS price list: AmazonEC2 {region} index.json"
        ec2: Ec2Offer = _read(
            ec2_url,
            f"EC2 offer file {region}",
            fetch,
            progress,
            lambda stream, r=region, u=ec2_url, s=ec2_source: parse_ec2_offer(
                stream, r, instance_types, s, u
            ),
        )
        sp_url = sp_urls[region]
        sp_source = f"AWS price list: {SP_OFFER} {region} index.json"
        _, sp_rows = _read(
            sp_url,
            f"Savings Plans file {region}",
            fetch,
            progress,
            lambda stream, r=region, u=sp_url, s=sp_source, e=ec2: parse_savings_plans(
                stream, r, e.usage, s, u
            ),
        )
        rows += ec2.rows + sp_rows
    return sorted(rows, key=_order)


def _order(row: dict[str, str]) -> tuple[str, ...]:
    return tuple(row[name] for name in COLUMNS[:6])


def merged_commitment_rows(
    path: Path, fresh: list[dict[str, str]], regions: list[str]
) -> list[dict[str, str]]:
    """The refreshed regions' rows and the bundled rows of every other region."""
    old: list[dict[str, str]] = []
    if path.is_file():
        with path.open(newline="") as handle:
            old = [row for row in csv.DictReader(handle) if row["region"] not in regions]
    return sorted([*old, *fresh], key=_order)


def _files(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    unique = {(row["source"], row["source_url"], row["published"]) for row in rows}
    return [
        {"source": source, "url": url, "publicationDate": published}
        for source, url, published in sorted(unique)
    ]


def write_commitments(
    rows: list[dict[str, str]],
    path: Path = COMMITMENT_PRICES_PATH,
    meta_path: Path = COMMITMENT_META_PATH,
    today: str | None = None,
) -> None:
    """Replace the bundled rates and their meta (each file's URL and publicationDate)
    atomically: both are written to temporary files first, then moved into place."""
    meta = {
        "source": "AWS public price list files (AWSComputeSavingsPlan regional index.json and the"
        " AmazonEC2 regional offer file's terms.Reserved); Linux, shared tenancy",
        "date": today or datetime.now(UTC).date().isoformat(),
        "rows": len(rows),
        "files": _files(rows),
    }
    temporary: list[str] = []
    try:
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, newline="") as handle:
            temporary.append(handle.name)
            writer: csv.DictWriter[str] = csv.DictWriter(
                handle, fieldnames=COLUMNS, lineterminator="\n"
            )
            writer.writeheader()
            writer.writerows(rows)
        with tempfile.NamedTemporaryFile("w", dir=meta_path.parent, delete=False) as handle:
            temporary.append(handle.name)
            handle.write(json.dumps(meta, indent=2) + "\n")
        os.replace(temporary[0], path)
        os.replace(temporary[1], meta_path)
    finally:
        for name in temporary:
            if os.path.exists(name):
                os.unlink(name)


def run_commitments_refresh(
    regions: list[str],
    instance_types: list[str] | None = None,
    fetch: Fetch | None = None,
    progress: Progress | None = None,
    path: Path = COMMITMENT_PRICES_PATH,
    meta_path: Path = COMMITMENT_META_PATH,
) -> list[dict[str, str]]:
    """Refresh the regions (the catalog's GPU types by default), keep the other regions' rows,
    and write; nothing is written unless every file was read. Returns the rows written."""
    if instance_types is None:
        from gpu_cluster.components.catalog import load_catalog

        instance_types = sorted(load_catalog().instance_types)
    fresh = refresh_commitments(regions, instance_types, fetch, progress)
    if not fresh:
        raise AwsError(
            f"the AWS price list files have no Savings Plan or Reserved Instance rate for"
            f" {', '.join(regions)}; the bundled commitment prices were kept unchanged",
            code=PRICE_LIST_ERROR,
        )
    rows = merged_commitment_rows(path, fresh, regions)
    write_commitments(rows, path, meta_path)
    return rows
