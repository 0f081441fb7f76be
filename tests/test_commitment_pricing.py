"""A commitment the stack holds (config `commitment`, `gpuc cost --savings-plan/--reserved`):
one price per node everywhere - the plan's estimate, `gpuc cost`, the dashboard's burn rate and
`gpuc status` - at the price list's exact rate when bundled, else a labelled assumption; bad
settings refused before anything is planned; the purchase options side by side; and the
freshness warnings of `gpuc plan` and `gpuc cost`."""

from __future__ import annotations

import json
from datetime import date

import boto3
import pytest
from botocore.stub import Stubber
from conftest import ROOT, plan_stack
from moto import mock_aws

from gpu_cluster.components.naming import STACK_ID_TAG as STACK_ID
from gpu_cluster.infra.aws.status import list_nodes
from gpu_cluster.infra.cli import main
from gpu_cluster.infra.cost.compare import compare_options
from gpu_cluster.infra.outcome import load_stack_spec
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.prices import commitment_prices
from gpu_cluster.infra.prices.commitment import Commitment
from gpu_cluster.infra.prices.commitment_prices import (
    COMPUTE_SP,
    EC2_INSTANCE_SP,
    RESERVED,
    CommitmentRate,
    effective_hourly,
)
from gpu_cluster.infra.prices.freshness import Snapshot, max_age_days, stale_warnings
from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly, price_table
from gpu_cluster.infra.prices.node_price import node_hourly
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation import ResolvedCluster

SOURCE = "AWS price list: AWSComputeSavingsPlan us-east-1 index.json (test table)"
SP_1Y = 15.1234  # test values, not AWS's
SP_3Y_EC2 = 9.8765
RI_RECURRING, RI_UPFRONT = 12.5, 30_000.0


def rate(plan: str, years: int, hourly: float, upfront: float = 0.0, cls: str | None = None):
    return CommitmentRate(
        plan=plan,
        term_years=years,
        purchase_option="No Upfront" if not upfront else "Partial Upfront",
        usd_per_hour=effective_hourly(hourly, upfront, years),
        recurring_usd_per_hour=hourly,
        upfront_usd=upfront,
        offering_class=cls,
        source=SOURCE,
        published="2026-11-20",
    )


TABLE = {
    ("us-east-1", "p4d.24xlarge", COMPUTE_SP, 1, "No Upfront", ""): rate(COMPUTE_SP, 1, SP_1Y),
    ("us-east-1", "p4d.24xlarge", EC2_INSTANCE_SP, 3, "No Upfront", ""): rate(
        EC2_INSTANCE_SP, 3, SP_3Y_EC2
    ),
    ("us-east-1", "p4d.24xlarge", RESERVED, 1, "Partial Upfront", "standard"): rate(
        RESERVED, 1, RI_RECURRING, RI_UPFRONT, "standard"
    ),
}


@pytest.fixture
def rates(monkeypatch):
    monkeypatch.setattr(commitment_prices, "commitment_table", lambda: TABLE)
    return TABLE


def cluster(stack: str) -> ResolvedCluster:
    spec = load_stack_spec(stack)
    assert isinstance(spec, ResolvedCluster)
    return spec


def run_node(stack: str, kind: str) -> None:
    """A running on-demand node of this project's stack in moto, tagged as the program tags it."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    tags = {
        "managed-by": "gpu-cluster",
        "gpu-cluster:stack": stack,
        "gpu-cluster:name": stack,
        "gpu-cluster:stack-id": f"gpu-cluster/{stack}/us-east-1",
    }
    ec2.run_instances(
        ImageId=image,
        InstanceType=kind,
        MinCount=1,
        MaxCount=1,
        Placement={"AvailabilityZone": "us-east-1a"},
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ],
    )


def train_with(commitment: dict) -> dict[str, str]:
    return load_stack_config("train", ROOT) | {"gpu-cluster:commitment": json.dumps(commitment)}


def test_a_held_savings_plan_prices_the_plan_the_cost_and_the_dashboard_at_its_exact_rate(
    rates, capsys
):
    plan = run_plan("train", train_with({"savingsPlan": "1y"}))
    assert plan.error is None, plan.error
    assert plan.outputs["gpuUsdPerHour"] == round(4 * SP_1Y, 2)
    (dashboard,) = plan.of_type("aws:cloudwatch/dashboard:Dashboard")
    assert f"nodes*{SP_1Y:.6g}" in dashboard.inputs["dashboardBody"]  # the burn rate's price
    note = " ".join(plan.outputs["costNotes"])
    assert "1-year Compute Savings Plan, No Upfront" in note and "2026-11-20" in note
    assert main(["cost", "--stack", "train", "--savings-plan", "1y", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    (gpu,) = [line for line in cost["lines"] if line["item"].startswith("GPU instances")]
    assert gpu["usdPerHour"] == pytest.approx(4 * SP_1Y)
    assert SOURCE in gpu["detail"] and "published 2026-11-20" in gpu["detail"]


def test_reserved_instances_spread_their_upfront_fee_over_the_term(rates, capsys):
    args = ["cost", "--stack", "train", "--reserved", "1y", "--payment", "partial-upfront"]
    assert main([*args, "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    (gpu,) = [line for line in cost["lines"] if line["item"].startswith("GPU instances")]
    per_node = RI_RECURRING + RI_UPFRONT / 8760
    assert gpu["usdPerHour"] == pytest.approx(4 * per_node)
    assert "$30,000 upfront" in gpu["detail"]


def test_without_a_bundled_rate_the_flat_assumption_is_labelled(monkeypatch, capsys):
    monkeypatch.setattr(commitment_prices, "commitment_table", lambda: {})
    assert main(["cost", "--stack", "train", "--savings-plan", "3y", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    (gpu,) = [line for line in cost["lines"] if line["item"].startswith("GPU instances")]
    on_demand = on_demand_hourly("us-east-1", "p4d.24xlarge")
    assert on_demand is not None
    assert gpu["usdPerHour"] == pytest.approx(4 * on_demand * 0.5)
    assert "assumed" in gpu["detail"] and "gpuc prices refresh --commitments" in gpu["detail"]
    options = {o["option"]: o for o in cost["options"]}
    assert "assumed" in options["savings plan, 1 year"]["note"]


def test_the_options_side_by_side_use_each_exact_rate_with_its_source(rates):
    spec = cluster("train")
    options = {o.option: o for o in compare_options(spec)}
    assert options["savings plan, 1 year"].usd_per_hour == pytest.approx(4 * SP_1Y)
    assert "published 2026-11-20" in options["savings plan, 1 year"].note
    assert "assumed" in options["savings plan, 3 year"].note  # no 3-year Compute rate bundled
    assert options["EC2 instance savings plan, 3 year"].usd_per_hour == pytest.approx(4 * SP_3Y_EC2)
    unbundled = options["EC2 instance savings plan, 1 year"]  # no rate: said, not assumed
    assert unbundled.usd_per_hour is None
    assert "gpuc prices refresh --commitments --region us-east-1" in unbundled.note
    assert options["reserved instances, 3 year"].usd_per_hour is None
    # P types cannot be reserved ahead (EC2 User Guide: future-dated reservations take C, G, I,
    # M, R, T, U and X); a G type can, at the on-demand rate
    future = options["future capacity reservation"]
    assert future.usd_per_hour is None and "Capacity Block" in future.note
    dev = {o.option: o for o in compare_options(cluster("dev"))}
    g5 = on_demand_hourly("us-east-1", "g5.xlarge")
    assert g5 is not None
    assert dev["future capacity reservation"].usd_per_hour == pytest.approx(g5)
    assert "under AWS's minimum of 32" in dev["future capacity reservation"].note  # 4 vCPUs


@mock_aws
def test_gpuc_status_burns_at_the_same_price_as_gpuc_cost(rates, monkeypatch, capsys, tmp_path):
    """Budget truth: a stack file holding a Savings Plan; its running on-demand node is priced
    in `gpuc status` at the rate `gpuc cost` uses."""
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    text = (ROOT / "stacks" / "Pulumi.train.yaml").read_text()
    (stacks / "Pulumi.train.yaml").write_text(
        text + "  gpu-cluster:commitment:\n    savingsPlan: 1y\n"
    )
    monkeypatch.chdir(tmp_path)
    run_node("train", "p4d.24xlarge")
    assert main(["status", "--stack", "train", "--json"]) == 0
    (node,) = json.loads(capsys.readouterr().out)
    assert node["usdPerHour"] == pytest.approx(SP_1Y)
    assert main(["cost", "--stack", "train", "--json"]) == 0
    cost = json.loads(capsys.readouterr().out)
    (gpu,) = [line for line in cost["lines"] if line["item"].startswith("GPU instances")]
    assert gpu["usdPerHour"] == pytest.approx(4 * node["usdPerHour"])


def test_gpuc_status_prices_only_on_demand_nodes_at_a_held_rate(rates):
    """EC2's InstanceLifecycle is absent for on-demand, else spot, capacity-block, ...: a
    Capacity Block's node is prepaid (unpriced, as `gpuc cost` leaves it), never at the
    Savings Plan's rate; spot stays at the spot price."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stack_id = "gpu-cluster/train/us-east-1"

    def instance(number: int, lifecycle: str | None) -> dict:
        tags = {"managed-by": "gpu-cluster", "gpu-cluster:stack": "train"}
        found = {
            "InstanceId": f"i-0000000000000000{number}",
            "InstanceType": "p4d.24xlarge",
            "State": {"Name": "running"},
            "Placement": {"AvailabilityZone": "us-east-1a"},
            "Tags": [{"Key": k, "Value": v} for k, v in (tags | {STACK_ID: stack_id}).items()],
        }
        return found | ({"InstanceLifecycle": lifecycle} if lifecycle else {})

    described = [instance(1, None), instance(2, "spot"), instance(3, "capacity-block")]
    stub = Stubber(ec2)
    stub.add_response("describe_instances", {"Reservations": [{"Instances": described}]})
    with stub:
        nodes = list_nodes(ec2, "us-east-1", commitments={stack_id: Commitment("savings-plan", 1)})
    prices = {node.lifecycle: node.usd_per_hour for node in nodes}
    assert prices["on-demand"] == pytest.approx(SP_1Y)
    assert prices["spot"] == pytest.approx(
        node_hourly("us-east-1", "p4d.24xlarge", True, "us-east-1a")
    )
    assert prices["capacity-block"] is None


@pytest.mark.parametrize(
    ("commitment", "overrides", "says"),
    [
        ({"savingsPlan": "1y", "reservedInstances": "3y"}, {}, "one commitment prices the nodes"),
        ({"payment": "all-upfront"}, {}, "neither a Savings Plan nor Reserved Instances"),
        ({"savingsPlan": "1y", "offeringClass": "standard"}, {}, "describes a reservedInstances"),
        ({"savingsPlan": "2y"}, {}, "2y"),
    ],
)
def test_a_commitment_that_cannot_be_is_refused_and_nothing_is_planned(commitment, overrides, says):
    plan = run_plan("train", train_with(commitment) | overrides)
    assert plan.error is not None
    assert says in str(plan.error) and "commitment" in str(plan.error)
    assert not [r for r in plan.resources if r.custom]


def test_a_commitment_that_covers_no_node_is_warned_and_prices_nothing_differently():
    spot = run_plan(
        "experiment",
        load_stack_config("experiment", ROOT)
        | {"gpu-cluster:commitment": json.dumps({"savingsPlan": "1y"})},
    )
    assert spot.error is None, spot.error
    assert any("never apply to Spot" in w for w in spot.outputs["configWarnings"])
    assert spot.outputs["gpuUsdPerHour"] == plan_stack("experiment").outputs["gpuUsdPerHour"]


def test_a_45_day_old_snapshot_warns_and_names_the_refresh_command():
    snapshot = Snapshot("GPU prices (on-demand and spot)", "2026-10-19", "gpuc prices refresh")
    (warning,) = stale_warnings([snapshot], 30, today=date(2026, 12, 3))
    assert "45 days old" in warning and "`gpuc prices refresh`" in warning
    assert stale_warnings([snapshot], 45, today=date(2026, 12, 3)) == []
    assert stale_warnings([snapshot], 30, today=date(2026, 11, 18)) == []
    (undated,) = stale_warnings([Snapshot("x", None, "gpuc prices refresh")], 30)
    assert "no date" in undated


def test_the_price_age_limit_comes_from_the_flag_the_environment_or_30_days():
    assert max_age_days(None, lambda _: None) == 30
    assert max_age_days(None, lambda _: "7") == 7
    assert max_age_days(3, lambda _: "7") == 3
    for bad in ("0", "x", "-2"):
        with pytest.raises(ValueError, match="whole number of days"):
            max_age_days(None, lambda _, bad=bad: bad)


def test_plan_and_cost_warn_of_an_old_snapshot_on_stderr_only(capsys, monkeypatch):
    monkeypatch.setenv("GPUC_MAX_PRICE_AGE_DAYS", "1")  # the snapshot of 2026-11-30 is older
    assert main(["plan", "--stack", "train"]) == 0
    out, err = capsys.readouterr()
    assert "warning: GPU prices (on-demand and spot) are" in err and "gpuc prices refresh" in err
    assert "days old" not in out
    assert "Spot Instance Advisor" not in err  # an on-demand plan prints no spot band
    assert main(["plan", "--stack", "experiment"]) == 0
    assert "Spot Instance Advisor bands are" in capsys.readouterr().err
    monkeypatch.setenv("GPUC_MAX_PRICE_AGE_DAYS", "zero")
    assert main(["cost", "--stack", "train"]) == 3
    assert "GPUC_MAX_PRICE_AGE_DAYS='zero'" in capsys.readouterr().err


def test_the_shipped_stacks_plan_without_a_commitment_as_before():
    plan = plan_stack("train")
    on_demand = on_demand_hourly("us-east-1", "p4d.24xlarge")
    assert on_demand is not None
    assert plan.outputs["gpuUsdPerHour"] == round(4 * on_demand, 2)


def test_every_price_table_names_its_snapshot_date(capsys):
    date_taken = price_table().date
    for args in (["stacks"], ["catalog", "list"], ["cost", "--stack", "train"]):
        assert main(args) == 0
        assert date_taken in capsys.readouterr().out, args


@mock_aws
def test_gpuc_status_holds_the_burn_against_the_stacks_budget(capsys):
    """The dev stack's $300 budget against its running box, at the price `gpuc cost` uses."""
    run_node("dev", "g5.xlarge")
    assert main(["status", "--stack", "dev"]) == 0
    out = capsys.readouterr().out
    price = on_demand_hourly("us-east-1", "g5.xlarge")
    assert price is not None
    assert f"budget $300/month: this burn spends it in {300 / (price * 24):,.1f} days" in out


def test_a_plan_priced_at_a_held_rate_warns_when_the_rates_are_old(rates, monkeypatch, capsys):
    from gpu_cluster.infra.prices import snapshots

    monkeypatch.setattr(snapshots, "commitment_table", lambda: TABLE)
    monkeypatch.setattr(snapshots, "commitment_snapshot_date", lambda: "2026-11-20")
    monkeypatch.setenv("GPUC_MAX_PRICE_AGE_DAYS", "1")
    held = ["plan", "--stack", "train", "--set", 'commitment={"savingsPlan": "1y"}']
    assert main(held) == 0
    err = capsys.readouterr().err
    assert "Savings Plan and Reserved Instance rates are" in err
    assert "gpuc prices refresh --commitments" in err
    assert main(["plan", "--stack", "train"]) == 0  # no commitment: those rates print nowhere
    assert "Savings Plan and Reserved Instance rates" not in capsys.readouterr().err
