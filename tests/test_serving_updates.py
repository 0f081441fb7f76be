"""Issue 30 s2 and s4: inference updates that drop no request, and scaling the service.

The serving group waits for its minimum of healthy targets when it is created (so a create-first
replacement serves before the old group drains), rolls a new AMI or boot with an instance
refresh above the stack's floor, scales on Triton's queue time, and keeps a loading node out of
scale-in (components/serving_group.py, boot/gpu-cluster-model-server.sh)."""

from __future__ import annotations

import json
import re

import pytest
from boot_fakes import FakeImds
from boot_harness import G4DN, BootNode
from conftest import ROOT, plan_config
from hypothesis import given
from hypothesis import strategies as st

from gpu_cluster.components.aws_limits import healthy_percentage_violations
from gpu_cluster.components.serving_group import (
    BOOT_SECONDS,
    DRAIN_SECONDS,
    IMAGE_PULL_SECONDS,
    QUEUE_METRIC,
    QUEUE_NAMESPACE,
    SUCCESS_METRIC,
    capacity_timeout,
    cold_start_seconds,
    max_healthy_percent,
)
from gpu_cluster.components.user_data import ServingBoot, render_serving_user_data
from gpu_cluster.infra.plan.update_rules import hazards
from gpu_cluster.infra.stack_files import load_stack_config

INFERENCE = load_stack_config("inference", ROOT)
GROUP = "aws:autoscaling/group:Group"
ASG = "aws:autoscaling/group:Group"
WORKING_HOURS = json.dumps({"days": "MON-FRI", "start": "08:00", "stop": "18:00"})


def planned(config: dict | None = None, **settings):
    """The inference stack with inference.<path> settings (dotted paths) changed."""
    config = dict(config or INFERENCE)
    inference = json.loads(config["gpu-cluster:inference"])
    for path, value in settings.items():
        target = inference
        *parents, last = path.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[last] = value
    return plan_config({**config, "gpu-cluster:inference": json.dumps(inference)}, "inference")


def group_of(plan):
    (group,) = plan.of_type(GROUP)
    return group


def minutes(duration: str) -> int:
    """A Go duration as this program writes it ("25m")."""
    match = re.fullmatch(r"(\d+)m", duration)
    assert match, duration
    return int(match.group(1))


# --- the group waits for ELB capacity ------------------------------------------------------


@pytest.mark.parametrize(("min_nodes", "warmup"), [(1, 60), (2, 600), (4, 1800), (3, 3600)])
def test_the_serving_group_waits_for_its_minimum_of_healthy_targets(min_nodes, warmup):
    plan = planned(minNodes=min_nodes, maxNodes=max(6, min_nodes), warmupSeconds=warmup)
    assert plan.error is None, plan.error
    group = group_of(plan)
    inputs = group.inputs
    assert inputs["minElbCapacity"] == inputs["minSize"] == min_nodes
    # wait_for_elb_capacity would want EXACTLY that many on an update that changes min_size
    assert "waitForElbCapacity" not in inputs
    assert inputs["ignoreFailedScalingActivities"] is True
    wait = minutes(inputs["waitForCapacityTimeout"])
    assert wait * 60 >= BOOT_SECONDS + IMAGE_PULL_SECONDS + warmup
    assert inputs["waitForCapacityTimeout"] == capacity_timeout(warmup)
    timeouts = group.custom_timeouts
    assert set(timeouts) == {"create", "update", "delete"}
    assert all(minutes(t) * 60 >= wait * 60 + DRAIN_SECONDS for t in timeouts.values())
    assert hazards(group) == []  # the plan engine's update rules accept this shape


@given(st.integers(min_value=60, max_value=3600))
def test_the_capacity_timeout_covers_a_cold_start_and_no_more_than_a_minute_over(warmup):
    seconds = minutes(capacity_timeout(warmup)) * 60
    assert cold_start_seconds(warmup) <= seconds < cold_start_seconds(warmup) + 60


def test_a_group_that_waits_for_exact_elb_capacity_breaks_an_update_rule():
    group = group_of(planned())
    import dataclasses

    exact = dataclasses.replace(group, inputs={**group.inputs, "waitForElbCapacity": 2})
    assert any("exactly" in p.problem for p in hazards(exact))
    fatal = dataclasses.replace(
        group, inputs={**group.inputs, "ignoreFailedScalingActivities": False}
    )
    assert any("waitForCapacityTimeout" in p.problem for p in hazards(fatal))


def test_a_replaced_group_is_reported_as_serving_before_the_old_one_drains(capsys):
    from gpu_cluster.infra import cli
    from gpu_cluster.infra.outcome import OK

    argv = ["diff", "--stack", "inference", "--set-path", "inference.warmupSeconds=900", "--json"]
    assert cli.main(argv) == OK  # applies as planned: the overlap is no collision
    changes = {c["role"]: c for c in json.loads(capsys.readouterr().out)["changes"]}
    group = changes["service-group"]
    assert group["change"] == "replace"
    assert any("serves its minimum (2 healthy targets) before" in i for i in group["impact"])


def test_a_new_model_prefix_rolls_the_nodes_with_an_instance_refresh(capsys):
    from gpu_cluster.infra import cli
    from gpu_cluster.infra.outcome import OK

    argv = ["diff", "--stack", "inference", "--set-path", "inference.modelRepository=models/v2/"]
    assert cli.main([*argv, "--json"]) == OK
    changes = {c["role"]: c for c in json.loads(capsys.readouterr().out)["changes"]}
    group = changes["service-group"]
    assert group["change"] == "update"  # in place: the refresh replaces the nodes
    assert any("instance refresh" in i and "100%" in i for i in group["impact"])


def test_with_a_schedule_the_group_still_only_waits_on_create():
    """The schedule's stop sets MinSize 0 at night; `pulumi up` never waits for an exact
    count (wait_for_elb_capacity), so a night-time update cannot wait for targets the stop
    removed, and a create waits at most the finite timeout for the minimum it launches."""
    plan = planned({**INFERENCE, "gpu-cluster:schedule": WORKING_HOURS})
    assert plan.error is None, plan.error
    inputs = group_of(plan).inputs
    assert "waitForElbCapacity" not in inputs and inputs["minElbCapacity"] == 2
    assert minutes(inputs["waitForCapacityTimeout"]) < 24 * 60
    schedules = {s.name: s.inputs for s in plan.of_type("aws:scheduler/schedule:Schedule")}
    start = json.loads(schedules["inference-cost-schedule-start"]["target"]["input"])
    assert start["MinSize"] == inputs["minElbCapacity"]  # the morning start serves the minimum


def test_spot_groups_wait_for_the_same_minimum():
    """A mixed-instances (spot) group counts healthy targets the same way; a spot shortfall
    is a failed scaling activity the wait ignores while the group retries."""
    plan = planned({**INFERENCE, "gpu-cluster:purchaseOption": "spot"})
    assert plan.error is None, plan.error
    inputs = group_of(plan).inputs
    assert "mixedInstancesPolicy" in inputs and "launchTemplate" not in inputs
    assert inputs["minElbCapacity"] == inputs["minSize"]
    assert inputs["ignoreFailedScalingActivities"] is True


# --- the instance refresh ---------------------------------------------------------------


@pytest.mark.parametrize("percent", [1, 50, 90, 100])
def test_an_instance_refresh_keeps_the_rollout_floor(percent):
    plan = planned(**{"rollout.minHealthyPercent": percent, "warmupSeconds": 900})
    assert plan.error is None, plan.error
    inputs = group_of(plan).inputs
    refresh = inputs["instanceRefresh"]
    assert refresh["strategy"] == "Rolling"
    assert refresh["preferences"] == {
        "minHealthyPercentage": percent,
        "maxHealthyPercentage": min(200, percent + 100),
        "instanceWarmup": "900",
        "skipMatching": True,
        "autoRollback": True,
        "scaleInProtectedInstances": "Refresh",
    }
    assert inputs["defaultInstanceWarmup"] == 900
    assert inputs["instanceMaintenancePolicy"] == {
        "minHealthyPercentage": 100,
        "maxHealthyPercentage": 200,
    }


@given(st.integers(min_value=0, max_value=100))
def test_every_floor_gets_a_maximum_aws_accepts(percent):
    pair = {"minHealthyPercentage": percent, "maxHealthyPercentage": max_healthy_percent(percent)}
    inputs = {"instanceRefresh": {"preferences": pair}, "instanceMaintenancePolicy": pair}
    assert healthy_percentage_violations(ASG, inputs) == []
    if percent == 100:  # each replacement launches before an old node goes
        assert pair["maxHealthyPercentage"] > 100


@pytest.mark.parametrize(
    ("low", "high", "words"),
    [
        (100, 201, "outside 100-200"),
        (0, 150, "more than 100 above"),
        (40, 99, "outside 100-200"),
        (101, 200, "outside 0-100"),
        (-5, 100, "outside 0-100"),
    ],
)
@pytest.mark.parametrize("where", ["instanceRefresh.preferences", "instanceMaintenancePolicy"])
def test_the_plan_engine_refuses_healthy_percentages_aws_refuses(low, high, words, where):
    pair = {"minHealthyPercentage": low, "maxHealthyPercentage": high}
    inputs = (
        {"instanceRefresh": {"strategy": "Rolling", "preferences": pair}}
        if where.startswith("instanceRefresh")
        else {"instanceMaintenancePolicy": pair}
    )
    (violation,) = healthy_percentage_violations(ASG, inputs)
    assert violation.input_name == where and words in violation.message()
    assert "Auto Scaling API Reference" in violation.message()
    from gpu_cluster.infra.plan.mocks import refusals

    (problem,) = refusals(ASG, "inference-service-group", inputs)
    assert words in problem.problem and problem.fix


# --- scaling on queue time ------------------------------------------------------------------


def test_queue_time_scales_on_the_groups_mean_queue_milliseconds():
    plan = planned(**{"scaling.metric": "queueTime", "scaling.target": 50})
    assert plan.error is None, plan.error
    tracking = plan.named("inference-service-scaling").inputs["targetTrackingConfiguration"]
    assert tracking["targetValue"] == 50
    metrics = {m["id"]: m for m in tracking["customizedMetricSpecification"]["metrics"]}
    group = plan.state(group_of(plan))["name"]
    for id_, name in (("queued", QUEUE_METRIC), ("answered", SUCCESS_METRIC)):
        stat = metrics[id_]["metricStat"]
        assert stat["metric"] == {
            "metricName": name,
            "namespace": QUEUE_NAMESPACE,
            "dimensions": [{"name": "AutoScalingGroupName", "value": group}],
        }
        assert stat["stat"] == "Sum" and metrics[id_]["returnData"] is False
    (returned,) = [m for m in metrics.values() if m["returnData"]]
    assert returned["expression"] == "IF(answered > 0, queued / answered / 1000, 0)"


@pytest.mark.parametrize(
    ("settings", "path", "words", "fix"),
    [
        (
            {"scaling.metric": "queueTime", "scaling.target": 0.05},
            "inference.scaling.target",
            "0.05 s is 50 ms",
            "inference.scaling.target 50",
        ),
        (
            {"scaling.metric": "queueTime", "scaling.target": 250000},
            "inference.scaling.target",
            "250000 us is 250 ms",
            "inference.scaling.target 250",
        ),
        (
            {"scaling.metric": "queueTime", "scaling.target": 10**9},
            "inference.scaling.target",
            "over a minute",
            "inference.scaling.target 60000",
        ),
        (
            {"scaling.metric": "queueTime", "scaling.target": 50, "server.kind": "vllm"},
            "inference.scaling.metric",
            "histogram, which the CloudWatch agent drops",
            "inference.scaling.metric gpuUtilization",
        ),
        (
            {"rollout.minHealthyPercent": 0},
            "inference.rollout.minHealthyPercent",
            "every node out of service at once",
            "inference.rollout.minHealthyPercent 100",
        ),
    ],
)
def test_bad_scaling_and_rollout_inputs_are_refused_with_their_fix(settings, path, words, fix):
    if settings.get("server.kind") == "vllm":
        settings = {**settings, "batching": None}
    plan = planned(**{k: v for k, v in settings.items() if v is not None})
    assert plan.error is not None
    problems = {p.path: p for p in plan.error.problems}
    problem = problems[f"gpu-cluster:{path}"]
    assert words in problem.problem, problem.problem
    assert problem.fix.endswith(fix) and problem.allowed


@given(st.floats(min_value=1, max_value=60_000))
def test_every_queue_time_target_in_range_plans(target):
    from gpu_cluster.infra.spec import InferenceSpec
    from gpu_cluster.infra.validation.inference import _queue_time_problems

    settings = InferenceSpec.model_validate({"scaling": {"metric": "queueTime", "target": target}})
    assert _queue_time_problems(settings) == []


# --- the boot: queue metric and scale-in protection ----------------------------------------


@pytest.fixture
def imds():
    with FakeImds(instance_type="g4dn.xlarge") as server:
        yield server


def serving_boot(port: int = 8000, metrics_port: int | None = 8002) -> ServingBoot:
    return ServingBoot(
        cluster="x",
        region="us-east-1",
        gpus_per_node=1,
        nvme_disk_count=1,
        bucket="gpuc-data-1",
        model_prefix="models/",
        server_kind="triton",
        image="nvcr.io/nvidia/tritonserver:25.01-py3",
        port=port,
        server_args=(),
        readiness_path="/v2/health/ready",
        batch_sizes=(4, 8),
        queue_delay_us=100,
        warmup_seconds=60,
        lifecycle_hook="x-launch",
        metrics_port=metrics_port,
        metrics_log_group="/gpu-cluster/x-metrics" if metrics_port else "",
    )


def node_for(tmp_path, imds, port: int = 8000) -> BootNode:
    node = BootNode(tmp_path, render_serving_user_data(serving_boot(port)), imds, G4DN)
    assert node.install_only().returncode == 0
    return node


def protection_calls(node: BootNode) -> list[list[str]]:
    return [c for c in node.aws_calls() if "set-instance-protection" in c]


def test_the_queue_counters_reach_cloudwatch_per_group(tmp_path, imds):
    node = node_for(tmp_path, imds)
    node.answer_aws([("describe-auto-scaling-instances", "x-group-20261202")])
    done = node.step("gpu-cluster-gpu-metrics")
    assert done.returncode == 0, done.stderr
    agent = node.file("/opt/aws/amazon-cloudwatch-agent/etc")
    assert 'labels: {AutoScalingGroupName: "x-group-20261202"}' in (
        (agent / "prometheus.yaml").read_text()
    )
    config = json.loads((agent / "gpu-cluster.json").read_text())
    emf = config["logs"]["metrics_collected"]["prometheus"]["emf_processor"]
    assert emf["metric_namespace"] == QUEUE_NAMESPACE  # what the scaling policy reads
    (per_group,) = [
        d for d in emf["metric_declaration"] if d["dimensions"] == [["AutoScalingGroupName"]]
    ]
    selected = {s.strip("^$") for s in per_group["metric_selectors"]}
    assert selected == {QUEUE_METRIC, SUCCESS_METRIC}


def test_a_node_that_cannot_find_its_group_fails_the_metrics_step(tmp_path, imds):
    node = node_for(tmp_path, imds)
    node.answer_aws([("describe-auto-scaling-instances", "None")])
    done = node.step("gpu-cluster-gpu-metrics")
    assert done.returncode == 1  # systemd retries the step (options: retry)
    assert node.read("/run/gpu-cluster/step-gpu-metrics").startswith("failed: could not look up")


def test_a_ready_node_lifts_its_scale_in_protection_after_its_launch_hook(
    tmp_path, imds, ready_server
):
    node = node_for(tmp_path, imds, ready_server)
    node.answer_aws([("describe-auto-scaling-instances", "x-group")])
    done = node.step("gpu-cluster-model-server", timeout=60)
    assert done.returncode == 0, done.stderr
    calls = node.aws_calls()
    (complete,) = [c for c in calls if "complete-lifecycle-action" in c]
    (lift,) = protection_calls(node)
    assert calls.index(complete) < calls.index(lift)  # in service first, then unprotected
    assert lift[lift.index("--auto-scaling-group-name") + 1] == "x-group"
    assert lift[lift.index("--instance-ids") + 1] == "i-0abc1234def567890"  # FakeImds
    assert "--no-protected-from-scale-in" in lift
    assert node.read("/run/gpu-cluster/step-model-server") == "ok\n"


def test_protection_that_cannot_be_lifted_fails_the_step_after_retries(
    tmp_path, imds, ready_server
):
    node = node_for(tmp_path, imds, ready_server)
    node.answer_aws(
        [("describe-auto-scaling-instances", "x-group")], down=["set-instance-protection"]
    )
    done = node.step("gpu-cluster-model-server", timeout=90)
    assert done.returncode == 1
    assert len(protection_calls(node)) == 5
    (complete,) = [c for c in node.aws_calls() if "complete-lifecycle-action" in c]
    assert complete[complete.index("--lifecycle-action-result") + 1] == "CONTINUE"  # it serves
    assert node.read("/run/gpu-cluster/step-model-server") == (
        "failed: scale-in protection not lifted\n"
    )


def test_a_node_that_never_gets_ready_is_abandoned_still_protected(tmp_path, imds):
    node = node_for(tmp_path, imds, port=9)  # nothing answers: the launch is abandoned
    node.answer_aws([("describe-auto-scaling-instances", "x-group")])
    done = node.step("gpu-cluster-model-server", timeout=120)
    assert done.returncode == 1
    (complete,) = [c for c in node.aws_calls() if "complete-lifecycle-action" in c]
    assert complete[complete.index("--lifecycle-action-result") + 1] == "ABANDON"
    assert protection_calls(node) == []  # ABANDON terminates it: protection does not matter


# --- what the README and the guide promise ---------------------------------------------------

README = " ".join((ROOT / "README.md").read_text().split())
GUIDE = " ".join((ROOT / "docs/guides/serve-a-model.md").read_text().split())


def test_the_cold_start_figures_the_docs_state_are_the_codes():
    from gpu_cluster.infra.spec import InferenceSpec

    default = InferenceSpec().warmup_seconds
    largest = next(
        m.le for m in InferenceSpec.model_fields["warmup_seconds"].metadata if hasattr(m, "le")
    )
    default_min, largest_min = cold_start_seconds(default) // 60, cold_start_seconds(largest) // 60
    assert f"serves again a cold start of up to {default_min} minutes after the morning start" in (
        README
    )
    assert (
        f"5 minutes of boot, 10 of image pull and `warmupSeconds` of model load, {default_min} "
        f"minutes at the default warm-up ({largest_min} at the largest)"
    ) in GUIDE
    assert (BOOT_SECONDS, IMAGE_PULL_SECONDS) == (5 * 60, 10 * 60)
    assert f"up to {default_min} minutes at the default warm-up (boot, image pull" in GUIDE
    assert minutes(capacity_timeout(default)) == default_min  # the wait `pulumi up` allows


@pytest.mark.parametrize(
    ("sentence", "change", "kind", "words"),
    [
        (
            "a replaced serving group serves its minimum before the old one drains",
            {"warmupSeconds": 900},
            "replace",
            "serves its minimum (2 healthy targets) before the old one is drained",
        ),
        (
            "a new AMI or model rolls node by node",
            {"modelRepository": "models/v2/"},
            "update",
            "an instance refresh replaces the running nodes, keeping 100% of them in service",
        ),
    ],
)
def test_each_promise_about_serving_updates_holds(sentence, change, kind, words):
    """The README's sentences, held against the diff engine (infra/diff), as `gpuc diff`."""
    from gpu_cluster.infra.diff.collisions import collisions
    from gpu_cluster.infra.diff.model import diff_plans

    assert sentence in README
    before, after = planned(), planned(**change)
    assert before.error is None and after.error is None
    changes = diff_plans(before, after)
    (group,) = [c for c in changes if c.type == GROUP]
    assert group.kind == kind and any(words in i for i in group.impact), group.impact
    assert collisions(before, after, changes) == []  # it applies as planned


def test_a_new_ami_rolls_the_serving_nodes_too():
    """docs/guides/new-ami.md, "Move a service"."""
    from gpu_cluster.infra.diff.model import diff_plans

    guide = " ".join((ROOT / "docs/guides/new-ami.md").read_text().split())
    assert (
        "the new template version starts an instance refresh that launches each replacement "
        "before an old node goes"
    ) in guide
    ami = json.dumps({"id": "ami-0123456789abcdef0", "architecture": "x86_64"})
    before, after = planned(), planned({**INFERENCE, "gpu-cluster:ami": ami})
    assert after.error is None, after.error
    (group,) = [c for c in diff_plans(before, after) if c.type == GROUP]
    assert group.kind == "update" and any("instance refresh" in i for i in group.impact)
    preferences = group_of(after).inputs["instanceRefresh"]["preferences"]
    assert preferences["maxHealthyPercentage"] > 100  # room to launch before terminating


@pytest.mark.parametrize("purchase", ["on-demand", "spot"])
def test_auto_rollback_needs_the_numbered_template_version(purchase):
    import dataclasses

    plan = planned({**INFERENCE, "gpu-cluster:purchaseOption": purchase})
    group = group_of(plan)
    assert hazards(group) == []
    inputs = json.loads(json.dumps(group.inputs))
    spec = (
        inputs["mixedInstancesPolicy"]["launchTemplate"]["launchTemplateSpecification"]
        if purchase == "spot"
        else inputs["launchTemplate"]
    )
    assert spec["version"] not in ("$Latest", "$Default")
    spec["version"] = "$Latest"
    (problem,) = hazards(dataclasses.replace(group, inputs=inputs))
    assert "autoRollback" in problem.problem and "$Latest" in problem.problem
