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
is hundreds of MB: both files are parsed as a stream (ijson, infra/aws/price_list_parse.py), never
loaded whole."""

from __future__ import annotations

import csv
import http.client
import json
import os
import tempfile
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import ijson

from gpu_cluster.infra.aws.price_list_parse import Ec2Offer, parse_ec2_offer, parse_savings_plans
from gpu_cluster.infra.prices.commitment_prices import (
    COLUMNS,
    COMMITMENT_META_PATH,
    COMMITMENT_PRICES_PATH,
)
from gpu_cluster.infra.problems import AwsError

PRICING_HOST = "https://pricing.us-east-1.amazonaws.com"
SP_OFFER = "AWSComputeSavingsPlan"
SP_REGION_INDEX_URL = f"{PRICING_HOST}/savingsPlan/v1.0/aws/{SP_OFFER}/current/region_index.json"
EC2_OFFER_URL = PRICING_HOST + "/offers/v1.0/aws/AmazonEC2/current/{region}/index.json"
PROGRESS_STEP = 16_000_000  # bytes between progress lines
DOWNLOAD_TIMEOUT = 60  # seconds per socket operation, not for the whole file
PRICE_LIST_ERROR = "PriceListFile"  # AwsError.code

Fetch = Callable[[str], BinaryIO]
Progress = Callable[[str], None]


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
            old = [
                {name: row.get(name) or "" for name in COLUMNS}
                for row in csv.DictReader(handle)
                if row["region"] not in regions
            ]
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
    today: str | None = None,
) -> list[dict[str, str]]:
    """Refresh the regions (the catalog's GPU types by default), keep the other regions' rows
    (with the day each was read), and write; nothing is written unless every file was read.
    Returns the rows written."""
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
    today = today or datetime.now(UTC).date().isoformat()
    fresh = [{**row, "retrieved": today} for row in fresh]
    rows = merged_commitment_rows(path, fresh, regions)
    write_commitments(rows, path, meta_path, today)
    return rows
