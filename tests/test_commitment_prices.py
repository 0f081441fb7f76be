"""Savings Plan and Reserved Instance rates from AWS's price list files: trimmed fixture files in
AWS's real formats (tests/fixtures/price_list, fixture values), a fetch that serves them (no
network), the streamed parse, the all-or-nothing write, and the lookup."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import pytest

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.infra.aws import price_list_files as plf
from gpu_cluster.infra.prices import commitment_prices as cp
from gpu_cluster.infra.problems import AwsError

FIXTURES = Path(__file__).parent / "fixtures" / "price_list"
SP_VERSION = "/savingsPlan/v1.0/aws/AWSComputeSavingsPlan/20260915120000"
FILES = {
    plf.SP_REGION_INDEX_URL: "AWSComputeSavingsPlan-region_index.json",
    plf.PRICING_HOST + SP_VERSION + "/us-east-1/index.json": (
        "AWSComputeSavingsPlan-us-east-1-index.json"
    ),
    plf.EC2_OFFER_URL.format(region="us-east-1"): "AmazonEC2-us-east-1-index.json",
}
GPU_TYPES = sorted(load_catalog().instance_types)
SP_SOURCE = "AWS price list: AWSComputeSavingsPlan us-east-1 index.json"
EC2_SOURCE = "AWS price list: AmazonEC2 us-east-1 index.json"


class Trickle:
    """A response body that hands out at most a few bytes per read, as a slow socket does, and
    refuses to be read whole (json.load reads a file whole)."""

    def __init__(self, data: bytes, chunk: int = 5) -> None:
        self._data = io.BytesIO(data)
        self.chunk = chunk
        self.reads = 0

    def read(self, size: int = -1) -> bytes:
        if size is None or size < 0:
            raise AssertionError("the price list file was read whole")
        self.reads += 1
        return self._data.read(min(size, self.chunk))


def fixture_fetch(trickle: bool = False, opened: list[Trickle] | None = None) -> plf.Fetch:
    def fetch(url: str) -> BinaryIO:
        data = (FIXTURES / FILES[url]).read_bytes()  # KeyError: a URL the refresh must not ask
        if trickle and url != plf.SP_REGION_INDEX_URL:  # the small region index is read whole
            body = Trickle(data)
            if opened is not None:
                opened.append(body)
            return body  # type: ignore[return-value]
        return io.BytesIO(data)

    return fetch


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    return plf.refresh_commitments(["us-east-1"], GPU_TYPES, fixture_fetch())


@pytest.fixture
def table(
    rows: list[dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[cp.RateKey, cp.CommitmentRate]:
    """The refreshed rows written and read back as the lookup's table."""
    path, meta = tmp_path / "rates.csv", tmp_path / "rates.meta.json"
    plf.write_commitments(rows, path, meta, today="2026-10-01")
    table = cp.read_commitment_table(path)
    monkeypatch.setattr(cp, "commitment_table", lambda: table)
    return table


def test_compute_savings_plan_p4d_1_year_no_upfront(table: dict) -> None:
    rate = cp.savings_plan_rate("us-east-1", "p4d.24xlarge", 1)
    assert rate == cp.CommitmentRate(
        plan="Compute Savings Plan",
        term_years=1,
        purchase_option="No Upfront",
        usd_per_hour=15.1234,
        recurring_usd_per_hour=15.1234,
        upfront_usd=0.0,
        offering_class=None,
        source=SP_SOURCE,
        published="2026-09-15",
    )
    assert cp.savings_plan_rate("us-east-1", "p4d.24xlarge", 3).usd_per_hour == 11.2222  # type: ignore[union-attr]
    all_upfront = cp.savings_plan_rate("us-east-1", "p4d.24xlarge", 1, "compute", "All Upfront")
    assert all_upfront is not None and all_upfront.usd_per_hour == 14.3333


def test_ec2_instance_savings_plan_3_years(table: dict) -> None:
    rate = cp.savings_plan_rate("us-east-1", "p4d.24xlarge", 3, plan="ec2-instance")
    assert rate is not None
    assert (rate.plan, rate.usd_per_hour, rate.source) == (
        "EC2 Instance Savings Plan",
        9.8765,
        SP_SOURCE,
    )
    # the family's plan covers p4d only: no EC2 Instance Savings Plan rate for g5 in the file
    assert cp.savings_plan_rate("us-east-1", "g5.xlarge", 3, plan="ec2-instance") is None
    assert cp.savings_plan_rate("us-east-1", "g5.xlarge", 1).usd_per_hour == 0.7123  # type: ignore[union-attr]


def test_reserved_instance_g5_partial_upfront_spreads_the_fee_over_8760_hours_a_year(
    table: dict,
) -> None:
    rate = cp.reserved_rate("us-east-1", "g5.xlarge", 1, "standard", "Partial Upfront")
    assert rate is not None
    assert (rate.recurring_usd_per_hour, rate.upfront_usd) == (0.208, 1822.0)
    assert rate.usd_per_hour == pytest.approx(0.208 + 1822 / 8760, abs=1e-6)
    assert (rate.plan, rate.offering_class, rate.source, rate.published) == (
        "Reserved Instance",
        "standard",
        EC2_SOURCE,
        "2026-09-20",
    )
    three = cp.reserved_rate("us-east-1", "g5.xlarge", 3, "convertible", "All Upfront")
    assert three is not None and three.usd_per_hour == pytest.approx(7500 / (3 * 8760), abs=1e-6)
    no_upfront = cp.reserved_rate("us-east-1", "g5.xlarge", 1)
    assert no_upfront is not None and no_upfront.usd_per_hour == 0.44
    assert "1,822 upfront over 8,760 h" in cp.commitment_text(rate)


def test_windows_dedicated_and_unused_reservation_rates_are_ignored(
    rows: list[dict[str, str]],
) -> None:
    prices = {row["usd_per_hour"] for row in rows}
    # Windows (RunInstances:0002), DedicatedUsage and the Windows RIs are fixture prices that
    # must never come out; Fargate is not an EC2 rate
    assert not prices & {"19.9999", "16.5432", "13", "99", "0.999", "9999", "0.0321"}
    p4d_compute_1y = [
        row
        for row in rows
        if (row["instance_type"], row["plan"], row["term_years"])
        == ("p4d.24xlarge", cp.COMPUTE_SP, "1")
        and row["purchase_option"] == "No Upfront"
    ]
    assert [row["usd_per_hour"] for row in p4d_compute_1y] == ["15.1234"]


def test_a_type_outside_the_catalog_is_ignored(rows: list[dict[str, str]]) -> None:
    assert "m5.large" not in load_catalog().instance_types
    assert {row["instance_type"] for row in rows} == {"g5.xlarge", "p4d.24xlarge", "p5.48xlarge"}
    only_g5 = plf.refresh_commitments(["us-east-1"], ["g5.xlarge"], fixture_fetch())
    assert {row["instance_type"] for row in only_g5} == {"g5.xlarge"}


def test_the_files_are_parsed_as_a_stream_of_small_reads(rows: list[dict[str, str]]) -> None:
    opened: list[Trickle] = []
    streamed = plf.refresh_commitments(["us-east-1"], GPU_TYPES, fixture_fetch(True, opened))
    assert streamed == rows
    assert len(opened) == 2  # the EC2 offer file and the Savings Plans file, never read whole
    names = ["AmazonEC2-us-east-1-index.json", "AWSComputeSavingsPlan-us-east-1-index.json"]
    for body, name in zip(opened, names, strict=True):
        assert body.reads > (FIXTURES / name).stat().st_size // body.chunk


def test_progress_is_reported_per_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plf, "PROGRESS_STEP", 4_000)
    said: list[str] = []
    plf.refresh_commitments(["us-east-1"], GPU_TYPES, fixture_fetch(), said.append)
    assert any(line.startswith("EC2 offer file us-east-1: ") and "MB read" in line for line in said)
    assert "EC2 offer file us-east-1: done, 0.0 MB" in said
    assert any(line.startswith("Savings Plans file us-east-1: done") for line in said)


def _bundle(tmp_path: Path) -> tuple[Path, Path, dict[str, bytes]]:
    path, meta = tmp_path / "rates.csv", tmp_path / "rates.meta.json"
    path.write_text(
        ",".join(cp.COLUMNS) + "\nus-west-2,p4d.24xlarge,Reserved Instance,1,No Upfront,"
        "standard,1,0,1,src,url,2026-01-01\n"
    )
    meta.write_text('{"date": "2026-01-01"}\n')
    return path, meta, {p.name: p.read_bytes() for p in (path, meta)}


@pytest.mark.parametrize(
    "failure",
    [
        "savings plans file unreachable",
        "ec2 file truncated",
    ],
)
def test_a_failed_download_leaves_the_bundled_files_unchanged(tmp_path: Path, failure: str) -> None:
    path, meta, before = _bundle(tmp_path)
    good = fixture_fetch()

    def fetch(url: str) -> BinaryIO:
        if (
            failure.startswith("savings")
            and "savingsPlan" in url
            and url.endswith("index.json")
            and (url != plf.SP_REGION_INDEX_URL)
        ):
            raise OSError("connection reset by peer")
        if failure.startswith("ec2") and "AmazonEC2" in url:
            return io.BytesIO(good(url).read()[:5_000])
        return good(url)

    with pytest.raises(AwsError, match="could not read the AWS price list file https://pricing"):
        plf.run_commitments_refresh(["us-east-1"], GPU_TYPES, fetch, path=path, meta_path=meta)
    assert {p.name: p.read_bytes() for p in (path, meta)} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rates.csv", "rates.meta.json"]


def test_refresh_writes_rows_and_meta_and_keeps_other_regions(tmp_path: Path) -> None:
    path, meta, _ = _bundle(tmp_path)
    written = plf.run_commitments_refresh(
        ["us-east-1"], GPU_TYPES, fixture_fetch(), path=path, meta_path=meta
    )
    with path.open(newline="") as handle:
        on_disk = list(csv.DictReader(handle))
    assert on_disk == written
    assert {row["region"] for row in on_disk} == {"us-east-1", "us-west-2"}  # us-west-2 kept
    info = json.loads(meta.read_text())
    assert info["rows"] == len(written)
    assert {
        "source": EC2_SOURCE,
        "url": plf.EC2_OFFER_URL.format(region="us-east-1"),
        "publicationDate": "2026-09-20",
    } in info["files"]
    assert {f["publicationDate"] for f in info["files"]} >= {"2026-09-15", "2026-09-20"}
    table = cp.read_commitment_table(path)
    oldest = min((rate.published for rate in table.values()), default=None)
    assert oldest == "2026-01-01"  # the kept us-west-2 row is the oldest


def test_a_refresh_dates_its_rows_by_when_they_were_read(tmp_path: Path) -> None:
    """Freshness is when a figure was read, not AWS's publication date (a file republished
    unchanged a month ago, read today, is fresh); a kept region keeps its own day."""
    path, meta, _ = _bundle(tmp_path)  # a us-west-2 row from before the column: its published
    plf.run_commitments_refresh(
        ["us-east-1"], GPU_TYPES, fixture_fetch(), path=path, meta_path=meta, today="2026-12-01"
    )
    table = cp.read_commitment_table(path)
    east = [rate for key, rate in table.items() if key[0] == "us-east-1"]
    assert east and {rate.retrieved for rate in east} == {"2026-12-01"}
    assert {rate.published for rate in east} <= {"2026-09-15", "2026-09-20"}  # AWS's dates
    assert cp.oldest_snapshot(table) == "2026-01-01"  # the kept row: no read day, its published
    # the next day's refresh of the same region: its rows read again, the kept row as it was
    plf.run_commitments_refresh(
        ["us-east-1"], GPU_TYPES, fixture_fetch(), path=path, meta_path=meta, today="2026-12-02"
    )
    again = cp.read_commitment_table(path)
    assert {rate.snapshot for key, rate in again.items() if key[0] == "us-east-1"} == {"2026-12-02"}
    assert [rate.snapshot for key, rate in again.items() if key[0] == "us-west-2"] == ["2026-01-01"]


def test_a_region_without_a_savings_plans_file_is_refused() -> None:
    with pytest.raises(AwsError, match="no Savings Plans price list for region 'mars-east-1'"):
        plf.refresh_commitments(["mars-east-1"], GPU_TYPES, fixture_fetch())


@pytest.mark.parametrize(
    ("lookup", "message"),
    [
        (
            lambda: cp.savings_plan_rate("us-east-1", "p4d.24xlarge", 2),
            "unknown term (years) 2: allowed 1, 3",
        ),
        (
            lambda: cp.savings_plan_rate(
                "us-east-1", "p4d.24xlarge", 1, purchase_option="Some Upfront"
            ),
            "unknown purchase option 'Some Upfront': allowed 'No Upfront', 'Partial Upfront',"
            " 'All Upfront'",
        ),
        (
            lambda: cp.savings_plan_rate("us-east-1", "p4d.24xlarge", 1, plan="sagemaker"),
            "unknown savings plan 'sagemaker': allowed 'compute', 'ec2-instance'",
        ),
        (
            lambda: cp.reserved_rate("us-east-1", "g5.xlarge", 5),
            "unknown term (years) 5: allowed 1, 3",
        ),
        (
            lambda: cp.reserved_rate("us-east-1", "g5.xlarge", 1, offering_class="flex"),
            "unknown offering class 'flex': allowed 'standard', 'convertible'",
        ),
    ],
)
def test_unknown_term_or_option_is_refused_with_the_allowed_values(
    lookup: Callable[[], object], message: str
) -> None:
    with pytest.raises(
        ValueError, match="^" + message.replace("(", r"\(").replace(")", r"\)") + "$"
    ):
        lookup()


def test_no_rate_is_none_and_the_snapshot_date_is_the_oldest(table: dict) -> None:
    assert cp.savings_plan_rate("us-west-2", "p4d.24xlarge", 1) is None
    assert cp.reserved_rate("us-east-1", "p5.48xlarge", 3) is None
    assert cp.commitment_snapshot_date() == "2026-09-15"


def test_the_bundled_data_is_well_formed() -> None:
    with cp.COMMITMENT_PRICES_PATH.open(newline="") as handle:
        reader = csv.DictReader(handle)
        bundled = list(reader)
        assert tuple(reader.fieldnames or ()) == cp.COLUMNS
    meta = json.loads(cp.COMMITMENT_META_PATH.read_text())
    assert meta["rows"] == len(bundled)
    for row in bundled:  # every bundled figure names its file and that file's date
        assert row["source"] and row["source_url"].startswith(plf.PRICING_HOST) and row["published"]
    table = cp.read_commitment_table()
    oldest = min((rate.snapshot for rate in table.values()), default=None)
    assert oldest == (min(r["retrieved"] or r["published"] for r in bundled) if bundled else None)
