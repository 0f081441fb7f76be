"""Cost arithmetic against hand computations from the bundled data files (read here with the
csv and json modules, not through the code under test)."""

from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest
from conftest import ROOT

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.cost.compare import BlockQuote, compare_options
from gpu_cluster.infra.cost.model import DAYS_PER_MONTH, Usage, estimate_cluster, is_gpu_line
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation import ResolvedCluster

DATA = ROOT / "infra" / "data"


def csv_rows() -> list[dict[str, str]]:
    with (DATA / "aws_gpu_prices.csv").open(newline="") as handle:
        return list(csv.DictReader(handle))


def on_demand(region: str, kind: str) -> float:
    (price,) = {
        float(r["on_demand_usd_per_hour"])
        for r in csv_rows()
        if r["region"] == region and r["instance_type"] == kind
    }
    return price


def spot(kind: str, zone_id: str) -> float:
    (row,) = [
        r for r in csv_rows() if r["instance_type"] == kind and r["availability_zone_id"] == zone_id
    ]
    return float(row["spot_usd_per_hour"])


UNIT = json.loads((DATA / "aws_unit_prices.json").read_text())
US_EAST_1 = UNIT["regions"]["us-east-1"]


def spec_of(stack: str, **overrides: str) -> ResolvedCluster:
    config = load_stack_config(stack, ROOT)
    config.update({f"gpu-cluster:{k}": v for k, v in overrides.items()})
    spec = load_spec(config, stack)
    assert isinstance(spec, ResolvedCluster)
    return spec


def gpuc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpu_cluster.infra.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_train_on_demand_hourly_is_four_times_the_snapshot_price():
    estimate = estimate_cluster(spec_of("train"))
    (gpu,) = [line for line in estimate.lines if is_gpu_line(line)]
    assert gpu.usd_per_hour == pytest.approx(4 * on_demand("us-east-1", "p4d.24xlarge"))
    assert not gpu.always_on


def test_cost_cli_train_8_hours_a_day_acceptance():
    result = gpuc("cost", "--stack", "train", "--hours-per-day", "8", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    (gpu,) = [line for line in doc["lines"] if line["item"] == "GPU instances (on-demand)"]
    assert gpu["usdPerDay"] == pytest.approx(4 * 8 * on_demand("us-east-1", "p4d.24xlarge"))
    assert gpu["usdPerMonth"] == pytest.approx(DAYS_PER_MONTH * gpu["usdPerDay"])  # 730 h
    options = {row["option"]: row for row in doc["options"]}
    assert options["on-demand"]["usdPerDay"] == pytest.approx(gpu["usdPerDay"])
    assert options["on-demand"]["savingVsOnDemand"] == 0
    assert options["capacity block"]["usdPerHour"] is None
    assert "gpuc capacity-block offerings" in options["capacity block"]["note"]
    text = gpuc("cost", "--stack", "train", "--hours-per-day", "8")
    assert text.returncode == 0, text.stderr
    daily = f"${4 * 8 * on_demand('us-east-1', 'p4d.24xlarge'):,.2f}"
    assert daily in text.stdout  # the same figure in the breakdown and in the table
    for label in (
        "GPU instances (on-demand)",
        "NAT gateway",
        "spot, us-east-1a",
        "savings plan, 3 year",
        "capacity reservation",
        "GPU prices: ",
    ):
        assert label in text.stdout


def test_spot_uses_the_stack_zones_price_by_zone_id():
    spec = spec_of("experiment")  # us-east-1b, spot
    zone_id = load_catalog().zone_id("us-east-1", "us-east-1b")
    assert zone_id == "use1-az1"  # the bundled mapping
    estimate = estimate_cluster(spec)
    (gpu,) = [line for line in estimate.lines if is_gpu_line(line)]
    assert gpu.item == "GPU instances (spot)"
    assert gpu.usd_per_hour == pytest.approx(spot(spec.facts.instance_type, zone_id))


def test_spot_on_demand_base_is_priced_on_demand():
    spec = spec_of("train", purchaseOption="spot", spot='{"onDemandBase": 1}')
    lines = {line.item: line for line in estimate_cluster(spec).lines}
    price = on_demand("us-east-1", "p4d.24xlarge")
    assert lines["GPU instances (on-demand base)"].usd_per_hour == pytest.approx(price)
    assert lines["GPU instances (spot)"].usd_per_hour == pytest.approx(
        3 * spot("p4d.24xlarge", "use1-az6")
    )


def test_usage_pattern_scales_exactly():
    spec = spec_of("train")
    usage = Usage(hours_per_day=8, days_per_month=30)
    estimate = estimate_cluster(spec, usage)
    for line in estimate.lines:
        hours = 24 if line.always_on else 8
        assert line.usd_per_hour is not None
        assert line.monthly(usage) == pytest.approx(line.usd_per_hour * hours * 30), line.item
    full = estimate_cluster(spec, Usage(days_per_month=30))
    gpu = next(line for line in estimate.lines if is_gpu_line(line))
    assert gpu.monthly(usage) * 3 == pytest.approx(
        next(line for line in full.lines if is_gpu_line(line)).monthly(full.usage)
    )


def test_non_gpu_lines_sum_as_documented():
    """train: 4 x 500 GiB gp3 at 6000 IOPS / 500 MiB/s, NAT + its IPv4, 3 endpoints, flow logs,
    one KMS key, the nodes' metrics (the agent profile's roll-ups, counted in
    test_node_metrics, plus NodeHealthy, NodeDegraded and Activity per node and Activity per
    stack), the dashboard and the idle alarm; the bucket is the data stack's."""
    from test_node_metrics import count, planned_profile

    p = US_EAST_1
    hours = UNIT["hours_per_month"]
    volumes = (
        4
        * (
            500 * p["ebs_gp3_gb_month"]
            + 3000 * p["ebs_gp3_iops_month"]
            + 375 * p["ebs_gp3_mibps_month"]
        )
        / hours
    )
    network = p["nat_gateway_hour"] + p["public_ipv4_hour"] + 3 * p["interface_endpoint_hour"]
    flow = (
        UNIT["assumptions"]["flow_log_gb_per_month"]
        * (p["logs_ingestion_gb"] + p["logs_storage_gb_month"])
        / hours
    )
    kms = p["kms_key_month"] / hours
    series = count(planned_profile("train"), 4, True) + 4 * 3 + 1
    metrics = (
        series * p["cloudwatch_metric_month"]
        + p["cloudwatch_dashboard_month"]
        + p["cloudwatch_alarm_month"]
    ) / hours
    estimate = estimate_cluster(spec_of("train"))
    rest = [line for line in estimate.lines if not is_gpu_line(line)]
    assert {line.item for line in rest} == {
        "EBS root volumes (gp3)",
        "NAT gateway",
        "Public IPv4 address (NAT gateway)",
        "VPC interface endpoints",
        "VPC flow logs (CloudWatch Logs)",
        "KMS customer managed keys",
        "CloudWatch metrics",
        "CloudWatch dashboard",
        "CloudWatch idle alarm",
    }
    total = volumes + network + flow + kms + metrics
    assert all(line.usd_per_hour is not None for line in rest)
    assert sum(line.usd_per_hour or 0.0 for line in rest) == pytest.approx(total)


def test_stack_owning_its_bucket_pays_for_the_dataset_and_the_data_stack_too():
    spec = spec_of("train", storage='{"source": "create"}')
    lines = {line.item: line for line in estimate_cluster(spec, Usage(dataset_gb=2000)).lines}
    s3 = lines["S3 Standard (datasets, checkpoints)"]
    assert s3.usd_per_hour == pytest.approx(2000 * US_EAST_1["s3_standard_gb_month"] / 730)
    data = gpuc("cost", "--stack", "data", "--dataset-gb", "1000", "--json")
    assert data.returncode == 0, data.stderr
    doc = json.loads(data.stdout)
    assert doc["options"] == []
    assert doc["total"]["usdPerMonth"] == pytest.approx(
        1000 * US_EAST_1["s3_standard_gb_month"] + US_EAST_1["kms_key_month"]  # a 730 h month
    )


def test_options_side_by_side():
    spec = spec_of("train")
    usage = Usage(hours_per_day=8)
    rows = {row.option: row for row in compare_options(spec, usage)}
    od = 4 * on_demand("us-east-1", "p4d.24xlarge")
    assert rows["on-demand"].usd_per_hour == pytest.approx(od)
    assert rows["spot, us-east-1a"].usd_per_hour == pytest.approx(
        4 * spot("p4d.24xlarge", "use1-az6")
    )
    cheapest = min(
        (float(r["spot_usd_per_hour"]), r["availability_zone_id"])
        for r in csv_rows()
        if r["instance_type"] == "p4d.24xlarge" and r["region"] == "us-east-1"
    )
    assert rows[f"spot, cheapest AZ ({cheapest[1]})"].usd_per_hour == pytest.approx(4 * cheapest[0])
    one_year = rows["savings plan, 1 year"]
    assert one_year.usd_per_hour is not None
    assert one_year.usd_per_hour == pytest.approx(od * (1 - UNIT["discounts"]["savings_plan_1y"]))
    assert one_year.always_on and one_year.daily == pytest.approx(one_year.usd_per_hour * 24)
    reservation = rows["capacity reservation"]
    assert reservation.monthly == pytest.approx(od * 730)  # a commitment: every hour
    assert reservation.per_gpu_hour_used == pytest.approx(od * 24 / (32 * 8))
    assert rows["on-demand"].per_gpu_hour_used == pytest.approx(od / 32)


def test_savings_plan_rates_can_be_overridden_and_blocks_quoted():
    spec = spec_of("train")
    quote = BlockQuote(
        "cb-0123456789abcdef0", upfront_usd=4 * 48 * 15.0, duration_hours=48, instance_count=4
    )
    rows = {
        row.option: row
        for row in compare_options(spec, Usage(savings_plan_3y=0.6), block_quote=quote)
    }
    od = 4 * on_demand("us-east-1", "p4d.24xlarge")
    assert rows["savings plan, 3 year"].usd_per_hour == pytest.approx(od * 0.4)
    assert rows["capacity block"].usd_per_hour == pytest.approx(4 * 15.0)


def test_capacity_block_stack_lists_its_instances_as_not_priced_offline():
    spec = spec_of(
        "train", purchaseOption="capacity-block", capacityBlock='{"id": "cr-0123456789abcdef0"}'
    )
    estimate = estimate_cluster(spec)
    assert [line.item for line in estimate.unpriced] == [
        "GPU instances (capacity block cr-0123456789abcdef0)"
    ]
    assert estimate.hourly_usd == pytest.approx(
        sum(line.usd_per_hour for line in estimate.lines if line.usd_per_hour is not None)
    )


def test_plan_summary_shows_the_full_hourly_cost():
    result = gpuc("plan", "--stack", "train")
    assert result.returncode == 0, result.stderr
    estimate = estimate_cluster(spec_of("train"))
    gpu = 4 * on_demand("us-east-1", "p4d.24xlarge")
    assert (
        f"Estimated cost: ${estimate.hourly_usd:,.2f}/hour (GPU instances ${gpu:,.2f} + "
        f"everything else ${estimate.hourly_usd - gpu:,.2f})"
    ) in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--stack", "nope"], "no stack 'nope'"),
        (["--stack", "train", "--hours-per-day", "25"], "--hours-per-day must be 0-24, got 25"),
        (["--stack", "train", "--days-per-month", "x"], "--days-per-month must be a number"),
    ],
)
def test_cost_cli_mistakes_are_messages(args, message):
    result = gpuc("cost", *args)
    assert result.returncode != 0
    assert message in result.stderr and "Traceback" not in result.stderr
