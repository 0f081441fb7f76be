"""Say what is wrong, and only that; and one cost everywhere (the plan, diff, stacks and cost
follow the schedule, one 730-hour month, commitments bill every hour, a block is prepaid)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from conftest import ROOT

from gpu_cluster.infra import cli
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.cost.compare import compare_options
from gpu_cluster.infra.cost.model import Usage, estimate_cluster, scheduled_usage
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.overrides import stack_config
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.prices.unit_prices import hours_per_month
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation import ResolvedCluster

SCHEDULE = {"days": "MON-FRI", "start": "08:00", "stop": "20:00", "timezone": "UTC"}


def cluster_spec(config: dict[str, str], stack: str) -> ResolvedCluster:
    """load_spec for a compute stack, typed as one."""
    spec = load_spec(config, stack)
    assert isinstance(spec, ResolvedCluster)
    return spec


def with_values(stack: str, **values: object) -> dict[str, str]:
    config = load_stack_config(stack, ROOT)
    for name, value in values.items():
        full = f"gpu-cluster:{name}"
        if value is None:
            config.pop(full, None)
        else:
            config[full] = value if isinstance(value, str) else json.dumps(value)
    return config


def problems(config: dict[str, str]) -> dict[str, str]:
    with pytest.raises(ConfigError) as raised:
        cluster_spec(config, "test")
    return {p.path: p.problem for p in raised.value.problems}


def warnings(config: dict[str, str]) -> list[str]:
    return list(cluster_spec(config, "test").warnings)


def inference(**fields: object) -> dict[str, str]:
    current = json.loads(load_stack_config("inference", ROOT)["gpu-cluster:inference"])
    return with_values("inference", inference={**current, **fields})


def test_a_mistake_inside_inference_is_the_only_problem():
    found = problems(inference(minNodes=0))
    assert set(found) == {"gpu-cluster:inference.minNodes"}  # no "a cluster needs one zone"


def test_fsx_on_an_inference_stack_is_refused_not_priced():
    found = problems(
        with_values("inference", fsx={"storageCapacityGib": 1200, "throughputPerTib": 250})
    )
    assert "nothing would be created" in found["gpu-cluster:fsx"]


def test_a_certificate_from_another_region_is_refused():
    arn = "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-1234-5678-9abc-0a1b2c3d4e5f"
    current = json.loads(load_stack_config("inference", ROOT)["gpu-cluster:inference"])
    found = problems(
        inference(
            tls={
                "policy": current["tls"].get("policy", "ELBSecurityPolicy-TLS13-1-2-Res-2021-06"),
                "certificateArn": arn,
            }
        )
    )
    assert (
        "ELB takes a certificate of its own region only"
        in found["gpu-cluster:inference.tls.certificateArn"]
    )


@pytest.mark.parametrize(("target", "fix"), [(150, "70"), (0.7, "70")])
def test_a_gpu_utilization_target_is_a_percentage(target, fix):
    config = inference(scaling={"metric": "gpuUtilization", "target": target})
    with pytest.raises(ConfigError) as raised:
        cluster_spec(config, "test")
    (problem,) = raised.value.problems
    assert problem.path == "gpu-cluster:inference.scaling.target"
    assert problem.fix.endswith(f" {fix}")


def test_triton_batching_on_a_vllm_server_is_refused():
    found = problems(inference(server={"kind": "vllm"}, batching={"preferredBatchSizes": [4, 8]}))
    assert "ignores it" in found["gpu-cluster:inference.batching"]


def test_the_projects_own_tags_cannot_be_overridden():
    found = problems(with_values("train", tags={"gpu-cluster:stack": "prod", "team": "x"}))
    assert "overridden" in found["gpu-cluster:tags.gpu-cluster:stack"]


def test_a_budget_without_alert_emails_warns_that_alerts_reach_no_one():
    config = with_values("dev", alertEmails=None)
    assert any("reach no one" in w for w in warnings(config))


def test_alert_emails_without_budget_or_expiry_warn_that_nothing_sends():
    config = with_values("dev", budget=None, expiresAt=None)
    assert any("nothing sends alerts" in w for w in warnings(config))


def test_below_percent_as_a_fraction_warns():
    config = with_values("dev", idleStop={"minutes": 30, "belowPercent": 0.05})
    assert any("0.05 is 0.05 %" in w for w in warnings(config))


def test_an_expiry_inside_its_own_warning_hour_warns():
    soon = (datetime.now(UTC) + timedelta(minutes=30)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert any("never sent" in w for w in warnings(with_values("dev", expiresAt=soon)))


def test_a_spot_max_price_below_the_spot_price_warns():
    from gpu_cluster.components.catalog import load_catalog
    from gpu_cluster.infra.prices.gpu_prices import spot_by_zone

    config = load_stack_config("experiment", ROOT)
    zone = config["gpu-cluster:availabilityZone"]
    zone_id = load_catalog().zone_id("us-east-1", zone)
    assert zone_id is not None
    kind = cluster_spec(config, "test").facts.instance_type
    price = spot_by_zone("us-east-1", kind)[zone_id]
    spot = json.loads(config.get("gpu-cluster:spot", "{}"))
    config["gpu-cluster:spot"] = json.dumps({**spot, "maxPrice": round(price / 2, 4)})
    assert any("below the current spot price" in w for w in warnings(config))


# --- one cost --------------------------------------------------------------------------


def test_plan_cost_and_stacks_follow_the_schedule(capsys):
    overrides = [("--set-path", f"schedule.{k}={v}") for k, v in SCHEDULE.items()]
    config = stack_config("dev", overrides)
    plan = run_plan("dev", config)
    assert plan.error is None, plan.error
    spec = cluster_spec(config, "dev")
    scheduled = estimate_cluster(spec, scheduled_usage(spec))
    always = estimate_cluster(spec, Usage())
    assert plan.outputs["estimatedUsdPerMonth"] == round(scheduled.monthly_usd, 2)
    assert scheduled.monthly_usd < 0.6 * always.monthly_usd
    argv = ["cost", "--stack", "dev", "--json", *[x for pair in overrides for x in pair]]
    assert cli.main(argv) == 0, capsys.readouterr()
    document = json.loads(capsys.readouterr().out)
    assert document["total"]["usdPerMonth"] == pytest.approx(scheduled.monthly_usd, abs=0.01)


def test_stacks_quotes_the_plans_monthly_cost(capsys):
    assert cli.main(["stacks", "--json"]) == 0
    rows = {row["stack"]: row for row in json.loads(capsys.readouterr().out)}
    for stack in ("dev", "train", "inference"):
        plan = run_plan(stack, load_stack_config(stack, ROOT))
        assert rows[stack]["usdPerMonth"] == pytest.approx(
            plan.outputs["estimatedUsdPerMonth"], abs=0.01
        ), stack


def test_a_month_is_730_hours_in_the_plan_and_in_cost(capsys):
    plan = run_plan("train", load_stack_config("train", ROOT))
    hourly, monthly = plan.outputs["estimatedUsdPerHour"], plan.outputs["estimatedUsdPerMonth"]
    assert monthly == pytest.approx(hourly * hours_per_month(), rel=1e-3)
    assert "a 730 h month" in plan.outputs["costBasis"]


def test_commitments_bill_every_hour_whatever_the_days():
    spec = cluster_spec(load_stack_config("train", ROOT), "train")
    short = {r.option: r for r in compare_options(spec, Usage(days_per_month=10))}
    full = {r.option: r for r in compare_options(spec, Usage())}
    plan, on_demand = short["savings plan, 1 year"].monthly, short["on-demand"].monthly
    full_on_demand = full["on-demand"].monthly
    assert plan is not None and on_demand is not None and full_on_demand is not None
    assert plan == pytest.approx(full["savings plan, 1 year"].monthly)
    assert on_demand == pytest.approx(full_on_demand * 10 / (730 / 24))
    assert plan > on_demand  # ten days a month: the plan costs more


def test_a_capacity_block_is_shown_prepaid_in_the_plan_and_diff(capsys):
    block = [
        ("--set", "purchaseOption=capacity-block"),
        ("--set-path", "capacityBlock.id=cr-0123456789abcdef0"),
    ]
    plan = run_plan("train", stack_config("train", block))
    assert plan.error is None, plan.error
    assert plan.outputs["costPrepaid"] and plan.outputs["gpuUsdPerHour"] == 0
    argv = ["diff", "--stack", "train", *[x for pair in block for x in pair]]
    cli.main(argv)
    assert "+ prepaid Capacity Block" in capsys.readouterr().out


def test_an_idle_stop_on_prepaid_capacity_does_not_claim_to_stop_the_bill():
    block = [
        ("--set", "purchaseOption=capacity-block"),
        ("--set-path", "capacityBlock.id=cr-0123456789abcdef0"),
        ("--set-path", "idleStop.enabled=true"),
    ]
    plan = run_plan("train", stack_config("train", block))
    assert plan.error is None, plan.error
    (idle,) = [c for c in plan.outputs["costControls"] if c.startswith("idle stop")]
    assert "bills anyway" in idle


def test_diff_shows_offline_ids_as_what_they_stand_for(capsys):
    assert cli.main(["diff", "--stack", "train", "--set", "availabilityZone=us-east-1b"]) == 0
    out = capsys.readouterr().out
    assert "<subnet id> -> <new subnet id>" in out
    assert "subnet-" not in out  # no made-up id that looks like a real one


def test_the_plan_invents_no_ami_name_for_the_latest_release():
    plan = run_plan("train", stack_config("train", [("--set-path", "ami.release=latest")]))
    assert plan.error is None, plan.error
    assert "read at pulumi up" in plan.outputs["amiName"]


def test_the_plan_summary_says_when_the_lustre_mount_is_known(capsys):
    fsx = [("--set-path", "fsx.storageCapacityGib=1200")]
    assert cli.main(["plan", "--stack", "train", *[x for p in fsx for x in p]]) == 0
    out = capsys.readouterr().out
    assert "FSx for Lustre: mounted at /fsx (its mount target is known after `pulumi up`)" in out
    assert "FSx for Lustre: output<string>" not in out


def test_a_root_volume_raised_to_the_amis_snapshot_is_priced_at_that_size():
    from gpu_cluster.infra.plan.mocks import MOCK_ROOT_SNAPSHOT_GIB

    small = MOCK_ROOT_SNAPSHOT_GIB // 2
    asked = run_plan(
        "train", stack_config("train", [("--set-path", f"rootVolume.sizeGib={small}")])
    )
    exact = run_plan(
        "train",
        stack_config("train", [("--set-path", f"rootVolume.sizeGib={MOCK_ROOT_SNAPSHOT_GIB}")]),
    )
    assert asked.error is None and exact.error is None
    assert asked.outputs["estimatedUsdPerMonth"] == exact.outputs["estimatedUsdPerMonth"]
    priced = f"priced at) {MOCK_ROOT_SNAPSHOT_GIB} GiB"
    assert any(priced in note for note in asked.outputs["costNotes"])
