"""The CloudWatch agent profile (documented measurements only, rolled up, per-device series
dropped), what it costs, the node log it ships and the metric filters that count lines."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from boot_fakes import FakeImds
from boot_harness import G4DN, BootNode
from conftest import plan_stack
from test_cost import spec_of

from gpu_cluster.components.aws_limits import violations
from gpu_cluster.components.cloudwatch_agent import (
    EFA_MEASUREMENTS,
    GPU_MEASUREMENTS,
    NODE_LOG_FILE,
    PROFILE_PATH,
    AgentProfile,
    agent_config,
    documented,
    documented_measurements,
)
from gpu_cluster.components.jobs import JOB_LOG_DIR
from gpu_cluster.components.log_metrics import (
    LOG_METRIC_FILTERS,
    LOG_METRICS,
    log_metric_namespace,
    matches,
)
from gpu_cluster.components.names import StackIdentity, node_log_group
from gpu_cluster.components.user_data import (
    BootConfig,
    ServingBoot,
    boot_script,
    decoded_user_data,
    render_serving_user_data,
    render_user_data,
)
from gpu_cluster.infra.cost.model import estimate_cluster, estimate_serving
from gpu_cluster.infra.prices.unit_prices import unit_prices

LT = "aws:ec2/launchTemplate:LaunchTemplate"
FILTER = "aws:cloudwatch/logMetricFilter:LogMetricFilter"
PER_DEVICE = {"index", "name", "arch", "uuid", "device", "port", "eniId", "host"}
PRICE = unit_prices("us-east-1")


def shipped_profile(script: str) -> dict:
    """The agent JSON a node's user data installs (the heredoc at PROFILE_PATH)."""
    found = re.search(rf"cat > \"\$R{PROFILE_PATH}\" <<'SCRIPT'\n(.*?)\nSCRIPT", script, re.S)
    assert found, "no CloudWatch agent profile in the user data"
    return json.loads(found.group(1))


def planned_profile(stack: str) -> dict:
    (template,) = plan_stack(stack).of_type(LT)
    return shipped_profile(decoded_user_data(template.inputs["userData"]))


def count(config: dict, nodes: int, in_group: bool) -> int:
    """Custom metrics the agent publishes under ``config``, read off the JSON by the agent's
    rule (cloudwatch.go ProcessRollup: a roll-up needs every one of its dimensions)."""
    metrics = config["metrics"]
    total = 0
    for section in metrics["metrics_collected"].values():
        carried = {"InstanceId"} | ({"AutoScalingGroupName"} if in_group else set())
        carried |= set(section.get("append_dimensions", {}))
        for dims in metrics["aggregation_dimensions"]:
            if set(dims) <= carried:
                total += len(section["measurement"]) * (nodes if "InstanceId" in dims else 1)
    return total


# --- the documented sets ------------------------------------------------------------------


def test_the_documented_sets_are_the_agents_17_gpu_and_22_efa_names_with_their_source():
    assert len(documented_measurements("nvidia_gpu")) == 17
    assert len(documented_measurements("efa")) == 22
    data = documented()
    assert "CloudWatch-Agent-NVIDIA-GPU" in data["source"] and "awsefa" in data["source"]
    assert data["plugins"]["nvidia_gpu"]["published_prefix"] == "nvidia_smi_"
    assert data["plugins"]["efa"]["published_prefix"] == "efa_"
    # the driver's rx_drops counter is the agent's rx_dropped
    assert "rx_dropped" in documented_measurements("efa")
    assert "rx_drops" not in documented_measurements("efa")


def test_an_undocumented_measurement_never_renders(monkeypatch):
    import gpu_cluster.components.cloudwatch_agent as agent

    monkeypatch.setattr(agent, "GPU_MEASUREMENTS", (*GPU_MEASUREMENTS, "gpu_temp"))
    with pytest.raises(ValueError, match="gpu_temp"):
        agent.agent_config(AgentProfile("p/s/r"))


# --- the profile a stack's nodes get ------------------------------------------------------


@pytest.mark.parametrize("stack", ["train", "dev", "inference"])
def test_every_measurement_is_documented_rolled_up_and_the_originals_dropped(stack):
    config = planned_profile(stack)
    metrics = config["metrics"]
    assert metrics["namespace"] == "gpu-cluster"
    assert ["StackId", "InstanceId"] in metrics["aggregation_dimensions"]
    assert ["StackId"] in metrics["aggregation_dimensions"]
    # serving_group.py's scaling policy reads nvidia_smi_utilization_gpu by group
    assert ["AutoScalingGroupName"] in metrics["aggregation_dimensions"]
    assert metrics["append_dimensions"]["InstanceId"] == "${aws:InstanceId}"
    for plugin, section in metrics["metrics_collected"].items():
        assert set(section["measurement"]) <= documented_measurements(plugin)
        # the agent decorates nvidia_gpu's entries, takes efa's as they are (metrics.go)
        prefix = "" if plugin == "nvidia_gpu" else "efa_"
        assert section["drop_original_metrics"] == [prefix + m for m in section["measurement"]]
    named = {d for dims in metrics["aggregation_dimensions"] for d in dims}
    for section in metrics["metrics_collected"].values():
        named |= set(section.get("append_dimensions", {}))
    assert not named & PER_DEVICE


def test_efa_only_on_efa_nodes_and_the_stack_id_on_the_gpu_series():
    train, dev = planned_profile("train"), planned_profile("dev")
    assert set(train["metrics"]["metrics_collected"]) == {"nvidia_gpu", "efa"}
    assert train["metrics"]["metrics_collected"]["efa"]["measurement"] == list(EFA_MEASUREMENTS)
    assert set(dev["metrics"]["metrics_collected"]) == {"nvidia_gpu"}
    assert set(planned_profile("inference")["metrics"]["metrics_collected"]) == {"nvidia_gpu"}
    gpu = train["metrics"]["metrics_collected"]["nvidia_gpu"]
    assert gpu["append_dimensions"] == {"StackId": "gpu-cluster/train/us-east-1"}
    assert gpu["measurement"] == list(GPU_MEASUREMENTS)


def test_two_stacks_of_one_cluster_name_publish_under_their_own_stack_id():
    a = BootConfig(
        "x", "us-east-1", 1, 1, 0, "b", identity=StackIdentity("p", "a", "us-east-1", "x")
    )
    b = replace(a, identity=StackIdentity("q", "a", "us-east-1", "x"))
    ids = {
        shipped_profile(render_user_data(boot))["metrics"]["metrics_collected"]["nvidia_gpu"][
            "append_dimensions"
        ]["StackId"]
        for boot in (a, b)
    }
    assert ids == {"p/a/us-east-1", "q/a/us-east-1"}


def test_every_node_has_its_stack_id_in_cluster_env():
    serving = ServingBoot(
        "x", "us-east-1", 1, 1, "b", "m/", "triton", "img", 8000, (), "/", (1,), 0, 0, "h",
        stack_id="p/s/us-east-1",
    )  # fmt: skip
    assert "\nSTACK_ID=p/s/us-east-1\n" in render_serving_user_data(serving)
    train = BootConfig("x", "us-east-1", 1, 1, 0, "b", identity=StackIdentity("p", "s", "r", "x"))
    assert render_user_data(train).count("\nSTACK_ID=p/s/r\n") == 1


# --- what it costs ------------------------------------------------------------------------


def cost_line(estimate, item: str):
    (line,) = [line for line in estimate.lines if line.item == item]
    assert line.usd_per_hour is not None, line
    return line


def hourly(estimate, item: str) -> float:
    """The line's USD/hour, which every metrics and dashboard line has."""
    usd = cost_line(estimate, item).usd_per_hour
    assert usd is not None
    return usd


@pytest.mark.parametrize(("stack", "nodes", "in_group"), [("train", 4, True), ("dev", 1, False)])
def test_the_metrics_cost_line_is_the_count_of_the_shipped_profile_times_the_unit_price(
    stack, nodes, in_group
):
    spec = spec_of(stack)
    assert spec.node_count == nodes
    agent = count(planned_profile(stack), nodes, in_group)
    # the health check's NodeHealthy and NodeDegraded and the Activity metric per node, and
    # Activity per {Cluster, Stack}: what the scripts put
    health = boot_script("gpu-cluster-health.sh")
    assert "NodeHealthy" in health
    assert "MetricName=Activity" in boot_script("gpu-cluster-gpu-metrics.sh")
    expected = agent + nodes * 3 + 1
    line = cost_line(estimate_cluster(spec), "CloudWatch metrics")
    monthly = hourly(estimate_cluster(spec), "CloudWatch metrics") * PRICE.hours_per_month
    assert monthly == pytest.approx(expected * PRICE["cloudwatch_metric_month"])
    assert line.detail.startswith(f"{expected} metrics x $0.30 = ${monthly:,.2f}/month")
    assert not line.always_on  # prorated by the hour a metric is published: while nodes run


def test_a_p5_node_costs_a_few_dollars_a_month_in_metrics():
    """Its 8 GPUs and 32 EFA devices rolled up: one series per measurement per node."""
    spec = spec_of("train", instanceType="p5.48xlarge", availabilityZone="us-east-1a")
    assert spec.facts.gpus == 8 and spec.efa
    two, three = replace(spec, node_count=2), replace(spec, node_count=3)
    per_node = (
        hourly(estimate_cluster(three), "CloudWatch metrics")
        - hourly(estimate_cluster(two), "CloudWatch metrics")
    ) * PRICE.hours_per_month
    assert 1 < per_node < 5, per_node


def test_the_inference_stack_counts_the_model_servers_metrics_and_has_a_dashboard():
    spec = spec_of("inference")
    estimate = estimate_serving(spec)
    config = planned_profile("inference")
    emf = config["logs"]["metrics_collected"]["prometheus"]["emf_processor"]
    model_series = sum(len(d["metric_selectors"]) for d in emf["metric_declaration"])
    assert spec.inference is not None
    nodes = spec.inference.min_nodes
    expected = count(config, nodes, True) + model_series  # one model
    assert hourly(estimate, "CloudWatch metrics") * PRICE.hours_per_month == pytest.approx(
        expected * PRICE["cloudwatch_metric_month"]
    )
    dashboard = cost_line(estimate, "CloudWatch dashboard")
    assert dashboard.detail.startswith("1 dashboard x $3.00/month")
    assert hourly(estimate, "CloudWatch dashboard") * PRICE.hours_per_month == pytest.approx(3.0)


# --- the node log and the metric filters --------------------------------------------------


def test_the_filters_are_planned_per_stack_on_their_log_groups():
    plan = plan_stack("train")
    filters = {r.inputs["metricTransformation"]["name"]: r.inputs for r in plan.of_type(FILTER)}
    assert set(filters) == set(LOG_METRICS)
    groups = {
        "NodeUnhealthy": "/gpu-cluster/train-node-log",
        "XidError": "/gpu-cluster/train-node-log",
        "SlowNetwork": "/gpu-cluster/train-jobs",
        "JobRestarted": "/gpu-cluster/train-jobs",
        "JobFailed": "/gpu-cluster/train-jobs",
        "LaunchFailed": "/aws/events/gpu-cluster/train-nodes",
        "InsufficientCapacity": "/aws/events/gpu-cluster/train-nodes",
    }
    for name, inputs in filters.items():
        assert inputs["logGroupName"] == groups[name]
        transformation = inputs["metricTransformation"]
        assert transformation["namespace"] == "gpu-cluster/Logs/gpu-cluster/train/us-east-1"
        assert transformation["value"] == "1" and not transformation.get("dimensions")
    log = plan.named("train-node-log")
    assert log.inputs["kmsKeyId"] == plan.state(plan.named("train-security-key"))["arn"]
    assert log.inputs["retentionInDays"] == plan.named("train-jobs-log").inputs["retentionInDays"]
    access = json.loads(plan.named("train-node-log-access").inputs["policy"])
    arn = plan.state(log)["arn"]
    assert access["Statement"][0]["Resource"] == [arn, f"{arn}:*"]
    assert plan.error is None


def test_a_single_box_has_no_node_events_filters_and_inference_none():
    dev = {r.inputs["metricTransformation"]["name"] for r in plan_stack("dev").of_type(FILTER)}
    assert dev == {"NodeUnhealthy", "XidError", "SlowNetwork", "JobRestarted", "JobFailed"}
    assert not plan_stack("inference").of_type(FILTER)


def test_namespaces_tell_stacks_of_one_cluster_name_apart():
    a = StackIdentity("p", "train", "us-east-1", "x").stack_id
    b = StackIdentity("q", "train", "us-east-1", "x").stack_id
    assert log_metric_namespace(a) != log_metric_namespace(b)
    assert all(len(log_metric_namespace(a)) <= 255 for _ in LOG_METRIC_FILTERS)


FILTERS = {f.name: f.pattern for f in LOG_METRIC_FILTERS}
HEALTH = boot_script("gpu-cluster-health.sh")
JOBS = boot_script("gpu-cluster-jobs.sh")


def test_the_health_lines_are_counted_and_a_degraded_one_is_not():
    # publish() logs the status with STEP=health (lib.sh log: "gpu-cluster health: ...")
    assert "export STEP=health" in HEALTH or "STEP=health" in HEALTH
    assert 'log "$status"' in HEALTH
    line = "2026-12-01T08:00:00Z gpu-cluster health: failed:ecc-uncorrectable"
    assert matches(FILTERS["NodeUnhealthy"], line)
    assert not matches(FILTERS["NodeUnhealthy"], "gpu-cluster health: degraded:gpu-metrics:missing")
    xid = "2026-12-01T08:00:00Z gpu-cluster health: Xid 79 (XidFatal) on 0000:10:1c.0"
    assert matches(FILTERS["XidError"], xid)
    assert not matches(FILTERS["XidError"], line)


def test_the_job_lines_are_the_ones_the_jobs_supervisor_and_torchrun_write():
    # watch_output's slow(): both forms of the line it prints into the job's log
    assert '"] gpu-cluster: stopped: ' in JOBS and '"] gpu-cluster: warning: ' in JOBS
    stopped = (
        "[pretrain] gpu-cluster: stopped: NCCL uses 2 of 4 EFA interfaces (gpuc jobs says why;"
    )
    warned = "[pretrain] gpu-cluster: warning: NCCL uses TCP sockets, not EFA"
    assert matches(FILTERS["SlowNetwork"], stopped) and matches(FILTERS["SlowNetwork"], warned)
    assert not matches(FILTERS["SlowNetwork"], "[pretrain] step 10 loss 2.1")
    # the supervisor counts restarts by the same words of torch's elastic agent
    assert "attempts left; will restart worker group" in JOBS
    restart = (
        "[pretrain] [default0]:torch.distributed.elastic.agent.server.api:[WARNING] Worker group "
        "FAILED. 3/3 attempts left; will restart worker group"
    )
    assert matches(FILTERS["JobRestarted"], restart)
    assert "ChildFailedError" in JOBS
    failed = "[pretrain] torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"
    assert matches(FILTERS["JobFailed"], failed)
    assert not matches(FILTERS["JobFailed"], restart)
    # the traceback above that line names it too: one failure, one count per node
    raised = '[pretrain]   File "torch/distributed/launcher/api.py", line 383, in launch_agent'
    assert not matches(FILTERS["JobFailed"], raised)
    assert not matches(FILTERS["JobFailed"], "[pretrain]     raise ChildFailedError(")


def event(detail_type: str, message: str = "") -> str:
    """An Auto Scaling event as EventBridge writes it into the node events log group."""
    detail = {"AutoScalingGroupName": "train-nodes-group", "StatusCode": "Failed"}
    if message:
        detail["StatusMessage"] = message
    return json.dumps(
        {"version": "0", "detail-type": detail_type, "source": "aws.autoscaling", "detail": detail}
    )


def test_launch_failures_and_capacity_shortfalls_are_counted_from_the_node_events():
    from test_all_or_nothing import NO_CAPACITY

    on_demand = event(
        "EC2 Instance Launch Unsuccessful",
        f"Could not launch On-Demand Instances. InsufficientInstanceCapacity - {NO_CAPACITY}",
    )
    spot = event(
        "EC2 Instance Launch Unsuccessful",
        "There is no Spot capacity available that matches your request. Launching EC2 "
        "instance failed.",
    )
    quota = event(
        "EC2 Instance Launch Unsuccessful",
        "You have requested more vCPU capacity than your current vCPU limit of 96 allows",
    )
    launched = event("EC2 Instance Launch Successful")
    for line in (on_demand, spot, quota):
        assert matches(FILTERS["LaunchFailed"], line)
    assert matches(FILTERS["InsufficientCapacity"], on_demand)
    assert matches(FILTERS["InsufficientCapacity"], event("x", NO_CAPACITY))
    assert matches(FILTERS["InsufficientCapacity"], spot)
    assert not matches(FILTERS["InsufficientCapacity"], quota)
    assert not matches(FILTERS["LaunchFailed"], launched)


def test_putmetricfilter_limits_are_enforced_by_the_plans_mocks():
    base = {
        "name": "gpu-cluster-x-NodeUnhealthy",
        "logGroupName": "/gpu-cluster/x-node-log",
        "pattern": FILTERS["NodeUnhealthy"],
        "metricTransformation": {
            "name": "NodeUnhealthy",
            "namespace": "gpu-cluster/Logs/a",
            "value": "1",
        },
    }
    assert violations(FILTER, base) == []
    with_dims = {**base["metricTransformation"], "dimensions": {"StackId": "$.stack"}}
    (text,) = violations(FILTER, {**base, "metricTransformation": with_dims})
    assert "JSON" in text.why
    json_pattern = {**base, "pattern": "{ $.a = 1 }"}
    assert violations(FILTER, {**json_pattern, "metricTransformation": with_dims}) == []
    four = {**with_dims, "dimensions": {k: "$.a" for k in "abcd"}}
    (too_many,) = violations(FILTER, {**json_pattern, "metricTransformation": four})
    assert too_many.maximum == 3
    assert violations(FILTER, {**base, "pattern": "x" * 1025})[0].maximum == 1024
    assert violations(FILTER, {**base, "name": "a:b"})
    bad = {**base["metricTransformation"], "namespace": "gpu-cluster/Logs/$x"}
    assert violations(FILTER, {**base, "metricTransformation": bad})


# --- on a node ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def imds():
    with FakeImds(instance_type="g4dn.xlarge") as server:
        yield server


def test_the_gpu_metrics_step_hands_the_agent_the_rendered_profile_and_a_log_line_is_shipped(
    tmp_path, imds
):
    ids = StackIdentity("gpu-cluster", "train", "us-east-1", "train")
    boot = BootConfig(
        "train", "us-east-1", 8, 8, 4, "b", identity=ids,
        jobs_log_group="/gpu-cluster/train-jobs", node_log_group=node_log_group(ids),
    )  # fmt: skip
    node = BootNode(tmp_path, render_user_data(boot), imds, G4DN)
    assert node.install_only().returncode == 0
    done = node.step("gpu-cluster-gpu-metrics")
    assert done.returncode == 0, done.stderr
    written = json.loads(node.read("/opt/aws/amazon-cloudwatch-agent/etc/gpu-cluster.json"))
    profile = AgentProfile(
        ids.stack_id,
        efa=True,
        node_log_group=node_log_group(ids),
        jobs_log_group="/gpu-cluster/train-jobs",
        job_log_files=f"{JOB_LOG_DIR}/*.log",
    )
    assert written == agent_config(profile)
    shipped = {
        f["file_path"]: f for f in written["logs"]["logs_collected"]["files"]["collect_list"]
    }
    assert shipped[NODE_LOG_FILE]["log_group_name"] == "/gpu-cluster/train-node-log"
    # the step's own `log` line lands in the file the agent ships, as the unit's stderr does
    logged = node.read(NODE_LOG_FILE)
    assert re.search(
        r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ gpu-cluster gpu-metrics: publishing GPU metrics",
        logged,
        re.M,
    ), logged
    assert "gpu-cluster gpu-metrics: publishing GPU metrics" in done.stderr


def test_a_node_without_its_profile_fails_the_step(tmp_path, imds):
    user_data = render_user_data(BootConfig("t", "us-east-1", 1, 1, 0, "b"))
    node = BootNode(tmp_path, user_data, imds, G4DN)
    assert node.install_only().returncode == 0
    node.file(PROFILE_PATH).unlink()
    done = node.step("gpu-cluster-gpu-metrics")
    assert done.returncode == 1
    assert node.read("/run/gpu-cluster/step-gpu-metrics").startswith("failed: no CloudWatch agent")
