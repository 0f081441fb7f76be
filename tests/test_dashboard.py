"""A CloudWatch dashboard per stack (issue 31, section 3; components/dashboard.py): one per
compute and inference stack, its body valid JSON within CloudWatch's limits, naming only metrics
the stack publishes, no instance id (Metrics Insights queries filtered on the stack's StackId),
its console URL an output; the limits table refuses a body AWS would refuse."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import Any

import pytest
from conftest import ROOT, only, plan_stack, stack_names

from gpu_cluster.components import dashboard as board
from gpu_cluster.components.aws_limits import DASHBOARD, dashboard_violations, violations
from gpu_cluster.components.cloudwatch_agent import (
    EFA_MEASUREMENTS,
    GPU_MEASUREMENTS,
    GROUP_MODEL_METRICS,
    MODEL_NAMESPACE,
    published_prefix,
)
from gpu_cluster.components.cost_controls import METRIC_NAMESPACE
from gpu_cluster.components.log_metrics import LOG_METRIC_FILTERS, log_metric_namespace
from gpu_cluster.components.names import dashboard_name
from gpu_cluster.components.node_errors import GPU_ERROR_COUNTS
from gpu_cluster.infra.diff.replace_rules import REPLACE_ON_CHANGE
from gpu_cluster.infra.plan.engine import Plan, run_plan
from gpu_cluster.infra.plan.mocks import refusals
from gpu_cluster.infra.prices.node_price import node_hourly
from gpu_cluster.infra.stack_files import load_stack_config

BOOT = ROOT / "components" / "boot"
# An EC2 instance id: i- and 8 or 17 hex digits (EC2 User Guide, "Resource IDs").
INSTANCE_ID = re.compile(r"\bi-(?:[0-9a-f]{17}|[0-9a-f]{8})\b")
QUERY = re.compile(
    r'^SELECT (?P<fn>AVG|COUNT|MAX|MIN|SUM)\((?P<metric>\w+)\) FROM SCHEMA\("(?P<ns>[^"]+)", '
    r"(?P<dims>[\w, ]+)\) WHERE (?P<where>\w+ !?= '[^']+'(?: AND \w+ !?= '[^']+')*)"
    r"(?: GROUP BY (?P<group>[\w, ]+))?(?: ORDER BY (?P=fn)\(\) (?:ASC|DESC))?$"
)
# AWS/ApplicationELB metrics AWS publishes per load balancer and target group (Elastic Load
# Balancing User Guide, "CloudWatch metrics for your Application Load Balancer")
ELB_METRICS = {
    "RequestCount",
    "HTTPCode_Target_5XX_Count",
    "HTTPCode_ELB_5XX_Count",
    "TargetResponseTime",
    "HealthyHostCount",
    "UnHealthyHostCount",
}


@pytest.fixture(scope="module")
def inference_plan() -> Plan:
    plan = plan_stack("inference")
    assert plan.error is None, plan.error
    return plan


def body_of(plan: Plan) -> tuple[dict[str, Any], str]:
    inputs = only(plan, DASHBOARD).inputs
    return json.loads(inputs["dashboardBody"]), inputs["dashboardBody"]


def named_metrics(body: dict[str, Any]) -> list[tuple[str, str, dict[str, str]]]:
    """(namespace, metric, dimensions) of every metric the body names: Metrics Insights queries
    (their WHERE values as dimensions) and metric arrays; math expressions name none."""
    found = []
    for widget in body["widgets"]:
        for entry in widget["properties"].get("metrics", []):
            first = entry[0]
            if isinstance(first, dict):
                expression = first["expression"]
                if not expression.startswith("SELECT"):
                    assert "SELECT" not in expression and not INSTANCE_ID.search(expression)
                    continue
                match = QUERY.match(expression)
                assert match, expression
                dims = {d.strip(): "*" for d in match["dims"].split(",")}
                equal = dict(re.findall(r"(\w+) = '([^']+)'", match["where"]))
                assert "StackId" in equal and set(equal) <= set(dims), expression
                found.append((match["ns"], match["metric"], dims | {"StackId": equal["StackId"]}))
                assert match["group"] is None or set(match["group"].split(", ")) <= set(dims)
                continue
            names = [e for e in entry if isinstance(e, str)]
            if names[0] == ".":
                pytest.fail(f"a metric row by reference: {entry}")
            pairs = names[2:]
            found.append((names[0], names[1], dict(zip(pairs[::2], pairs[1::2], strict=True))))
    return found


def published(plan: Plan, efa: bool, health: bool) -> dict[str, set[str]]:
    """What the stack's nodes, its log metric filters and AWS publish: namespace -> names."""
    gpu, efa_prefix = published_prefix("nvidia_gpu"), published_prefix("efa")
    agent = {gpu + m for m in GPU_MEASUREMENTS} | (
        {efa_prefix + m for m in EFA_MEASUREMENTS} if efa else set()
    )
    health_script = (BOOT / "gpu-cluster-health.sh").read_text()
    node = {m for m in ("NodeHealthy", "NodeDegraded", "GpuErrors") if health}
    for metric in node:  # the health script really puts each one
        assert f"MetricName={metric}" in health_script, metric
    found: dict[str, set[str]] = {METRIC_NAMESPACE: agent | node, MODEL_NAMESPACE: set()}
    for log_filter in plan.of_type("aws:cloudwatch/logMetricFilter:LogMetricFilter"):
        transformation = log_filter.inputs["metricTransformation"]
        found.setdefault(transformation["namespace"], set()).add(transformation["name"])
    if plan.of_type("aws:lb/loadBalancer:LoadBalancer"):
        found["AWS/ApplicationELB"] = ELB_METRICS
        found[MODEL_NAMESPACE] = set(GROUP_MODEL_METRICS)  # the agent's per-group counters
    return found


def test_the_train_stack_has_one_dashboard_and_its_url(train_plan):
    dashboard = only(train_plan, DASHBOARD)
    name = dashboard.inputs["dashboardName"]
    assert name == dashboard_name(stack_names("train"))
    assert train_plan.outputs["dashboardUrl"] == (
        f"https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1"
        f"#dashboards:name={name}"
    )
    # a child of the cluster, as every resource of it
    assert dashboard.parent.endswith("GpuCluster::train")


def test_the_train_body_is_within_cloudwatchs_limits(train_plan):
    body, text = body_of(train_plan)
    assert dashboard_violations(DASHBOARD, {"dashboardBody": text}) == []
    assert 0 < len(body["widgets"]) <= 500
    for widget in body["widgets"]:
        assert 0 <= widget["x"] <= 23 and widget["x"] + widget["width"] <= 24
        metrics = widget["properties"].get("metrics", [])
        queries = [e for e in metrics if isinstance(e[0], dict) and "SELECT" in e[0]["expression"]]
        assert len(queries) <= 1 and all(len(q[0]["expression"]) <= 2048 for q in queries)


def test_the_train_body_names_only_metrics_the_stack_publishes(train_plan):
    body, _ = body_of(train_plan)
    stack_id = "gpu-cluster/train/us-east-1"
    publishes = published(train_plan, efa=True, health=True)
    named = named_metrics(body)
    group = train_plan.state(only(train_plan, "aws:autoscaling/group:Group"))["name"]
    for namespace, metric, dims in named:
        assert metric in publishes.get(namespace, set()), (namespace, metric)
        if metric.startswith("efa_"):  # the agent's EFA roll-up: per group only
            assert dims == {"AutoScalingGroupName": group}
        elif namespace == METRIC_NAMESPACE:  # the nodes' own: {InstanceId, StackId}[, Class]
            assert set(dims) - {"Class"} == {"InstanceId", "StackId"}
            assert dims["StackId"] == stack_id
        else:  # the log counts: the stack's own namespace, no dimension
            assert namespace == log_metric_namespace(stack_id) and dims == {}
    shown = {m for _, m, _ in named}
    # what the issue asks for: GPU use, memory, power and temperature, EFA traffic and errors,
    # the health states, GPU errors, jobs, restarts and launch failures by reason
    assert {
        "nvidia_smi_utilization_gpu",
        "nvidia_smi_memory_used",
        "nvidia_smi_power_draw",
        "nvidia_smi_temperature_gpu",
        "efa_rx_bytes",
        "efa_tx_bytes",
        "efa_rdma_read_wr_err",
        "XidError",
        "NodeHealthy",
        "NodeDegraded",
        "GpuErrors",
        "JobFailed",
        "JobRestarted",
        "InsufficientCapacity",
        "LaunchFailed",
    } <= shown
    assert {f"efa_{m}" for m in EFA_MEASUREMENTS} <= shown  # every counter the agent collects
    # every count the stack's metric filters make
    assert {f.name for f in LOG_METRIC_FILTERS} <= shown


def test_gpu_errors_are_drawn_by_class(train_plan):
    body, _ = body_of(train_plan)
    queries = [
        e[0]["expression"]
        for w in body["widgets"]
        for e in w["properties"].get("metrics", [])
        if isinstance(e[0], dict) and "GpuErrors" in e[0]["expression"]
    ]
    assert all('SCHEMA("gpu-cluster", Class, InstanceId, StackId)' in q for q in queries)
    # gauges are re-published every minute while they hold: MAX, never summed over the period
    (by_class,) = [q for q in queries if "GROUP BY Class" in q]
    assert by_class.startswith("SELECT MAX(GpuErrors)")
    increases = [name for name, what in GPU_ERROR_COUNTS.items() if what.endswith("(increase)")]
    assert increases == ["NvlinkErrors", "EfaErrors"]
    assert all(f"Class != '{name}'" in by_class for name in increases)
    for name in increases:  # the counts new since the last check: summed, one widget each
        (query,) = [q for q in queries if f"Class = '{name}'" in q]
        assert query.startswith("SELECT SUM(GpuErrors)") and "GROUP BY InstanceId" in query
    for query in queries:  # every class drawn once: a gauge by MAX, an increase by SUM
        assert query.startswith("SELECT SUM") == any(f"Class = '{n}'" in query for n in increases)


def test_the_body_names_no_instance(train_plan, inference_plan):
    for plan in (train_plan, inference_plan):
        _, text = body_of(plan)
        assert not INSTANCE_ID.search(text)
        assert "InstanceId = " not in text and 'InstanceId","i-' not in text


def test_the_burn_rate_is_running_nodes_times_the_node_price(train_plan):
    body, _ = body_of(train_plan)
    (burn,) = [w for w in body["widgets"] if "Burn rate" in w["properties"].get("title", "")]
    metrics = burn["properties"]["metrics"]
    assert metrics[1][0]["expression"] == "SUM(q1*0+1)"
    # p4d.24xlarge on demand: the price `gpuc cost` shows per node
    price = node_hourly("us-east-1", "p4d.24xlarge", spot=False, zone=None)
    assert price is not None
    assert metrics[2][0]["expression"] == f"nodes*{price:.6g}"
    assert round(4 * price, 2) == train_plan.outputs["gpuUsdPerHour"]


def test_the_budget_line_is_the_monthly_budget_over_730_hours():
    spec = board.DashboardSpec(
        "p/s/us-east-1",
        "us-east-1",
        "t",
        burn=board.BurnPrices(1.006),
        budget_usd_per_month=300.0,
        scheduled_hours_per_day=10.0,
    )
    (burn,) = [w for w in board.dashboard_body(spec)["widgets"] if "Burn" in str(w)]
    month, scheduled = burn["properties"]["annotations"]["horizontal"]
    assert month["value"] == round(300 / 730, 4)
    assert scheduled["value"] == round(300 / (10 * 730 / 24), 4)
    assert burn["properties"]["metrics"][2][0]["expression"] == "nodes*1.006"
    unpriced = replace(spec, burn=board.BurnPrices(None, unpriced="prepaid capacity"))
    (burn,) = [w for w in board.dashboard_body(unpriced)["widgets"] if "Burn" in str(w)]
    assert "prepaid capacity" in burn["properties"]["title"]
    assert len(burn["properties"]["metrics"]) == 2  # nodes only, no price line


def test_a_stack_with_the_same_cluster_name_gets_its_own_dashboard(train_plan):
    other = run_plan(
        "train-eu", load_stack_config("train", ROOT) | {"gpu-cluster:clusterName": "train"}
    )
    assert other.error is None, other.error
    mine, theirs = only(train_plan, DASHBOARD).inputs, only(other, DASHBOARD).inputs
    assert mine["dashboardName"] != theirs["dashboardName"]
    assert theirs["dashboardName"] in other.outputs["dashboardUrl"]
    theirs_id = "gpu-cluster/train-eu/us-east-1"
    for namespace, _, dims in named_metrics(json.loads(theirs["dashboardBody"])):
        assert dims.get("StackId", theirs_id) == theirs_id
        assert namespace.startswith(("gpu-cluster/Logs/" + theirs_id, "gpu-cluster", "AWS/"))
        assert "gpu-cluster/train/us-east-1" not in namespace


def test_the_inference_dashboard_follows_its_load_balancer_and_group(inference_plan):
    body, _ = body_of(inference_plan)
    publishes = published(inference_plan, efa=False, health=False)
    balancer = inference_plan.state(only(inference_plan, "aws:lb/loadBalancer:LoadBalancer"))
    targets = inference_plan.state(only(inference_plan, "aws:lb/targetGroup:TargetGroup"))
    group = inference_plan.state(only(inference_plan, "aws:autoscaling/group:Group"))
    named = named_metrics(body)
    for namespace, metric, dims in named:
        assert metric in publishes[namespace], (namespace, metric)
        if namespace == "AWS/ApplicationELB":
            assert dims["LoadBalancer"] == balancer["arnSuffix"]
            assert dims.get("TargetGroup", targets["arnSuffix"]) == targets["arnSuffix"]
        if namespace == MODEL_NAMESPACE:
            assert dims == {"AutoScalingGroupName": group["name"]}
    shown = {m for _, m, _ in named}
    assert {"RequestCount", "TargetResponseTime", "nv_inference_request_success"} <= shown
    assert "NodeHealthy" not in shown  # an inference node runs no health check
    assert GROUP_MODEL_METRICS[0] in shown
    assert not any(m.startswith("efa_") for m in shown)
    assert inference_plan.outputs["dashboardUrl"].endswith(
        "#dashboards:name=" + only(inference_plan, DASHBOARD).inputs["dashboardName"]
    )


def synthetic(widgets: int, metrics_each: int = 1, queries_each: int = 1) -> str:
    query = 'SELECT AVG(NodeHealthy) FROM SCHEMA("gpu-cluster", InstanceId, StackId)'
    row = [[{"expression": query, "id": f"q{i}"}] for i in range(queries_each)]
    row += [["gpu-cluster", "NodeHealthy", "StackId", f"s{i}"] for i in range(metrics_each)]
    widget = {"type": "metric", "x": 0, "width": 12, "height": 6, "properties": {"metrics": row}}
    return json.dumps({"widgets": [widget] * widgets})


def test_the_limits_table_refuses_a_body_aws_would_refuse():
    def refused(body: str) -> list[str]:
        return [p.problem for p in refusals(DASHBOARD, "board", {"dashboardBody": body})]

    assert refused(synthetic(500, 4)) == []  # 500 widgets, 2,000 metrics: taken
    (too_many,) = refused(synthetic(501))
    assert "501 widgets" in too_many and "at most 500" in too_many
    assert any("2,505 metrics" in p for p in refused(synthetic(501, 4, 1)))
    (wide,) = refused(synthetic(1, 500))
    assert "501 metrics" in wide
    (two,) = refused(synthetic(1, 0, 2))
    assert "a widget holds one" in two
    (not_json,) = refused("{widgets: []}")
    assert "not JSON" in not_json
    long_query = json.dumps(
        {"widgets": [{"type": "metric", "properties": {"metrics": [[{"expression": "x" * 2049}]]}}]}
    )
    assert any("2,049 characters" in p for p in refused(long_query))
    # a body not known yet (the load balancer's names) is not judged
    assert violations(DASHBOARD, {"dashboardBody": None}) == []


def test_an_oversized_body_fails_the_plan(monkeypatch):
    """The plan engine's mocks apply the table to the program's own dashboard."""
    real = board.dashboard_body

    def oversized(spec: board.DashboardSpec) -> dict[str, Any]:
        body = real(spec)
        return body | {"widgets": body["widgets"] * 100}

    monkeypatch.setattr(board, "dashboard_body", oversized)
    plan = plan_stack("dev")
    assert plan.error is not None
    assert "dashboardBody widgets" in str(plan.error) and "at most 500" in str(plan.error)


def test_queries_quote_what_metrics_insights_needs_quoted():
    assert board.label_value("it's") == "'it\\'s'"
    assert board.identifier("gpu-cluster") == '"gpu-cluster"'
    assert board.identifier("NodeHealthy") == "NodeHealthy"
    query = board.insights_query("MAX", "m", "ns/x", ("b", "a"), {"StackId": "p/s/r"}, ("a",))
    assert query == "SELECT MAX(m) FROM SCHEMA(\"ns/x\", a, b) WHERE StackId = 'p/s/r' GROUP BY a"


def test_a_renamed_dashboard_is_replaced():
    # terraform-provider-aws cloudwatch/dashboard.go: dashboard_name ForceNew
    assert REPLACE_ON_CHANGE[DASHBOARD] == ("dashboardName",)


def test_the_url_uses_the_partitions_console():
    assert board.dashboard_url("cn-north-1", "d", "aws-cn").startswith(
        "https://cn-north-1.console.amazonaws.cn/cloudwatch/"
    )


def test_scaling_up_or_the_serving_range_leaves_the_dashboard_as_it_is(train_plan, inference_plan):
    """`pulumi config set nodes 8` updates the group only (docs/guides/scale.md): the body names
    no node count, and the graphs find the new nodes by their StackId."""
    config = load_stack_config("train", ROOT)
    bigger = run_plan("train", config | {"gpu-cluster:nodes": "8"})
    assert bigger.error is None, bigger.error
    assert body_of(bigger)[1] == body_of(train_plan)[1]
    serving = load_stack_config("inference", ROOT)
    inference = json.loads(serving["gpu-cluster:inference"])  # config objects are JSON strings
    wider = run_plan(
        "inference", serving | {"gpu-cluster:inference": json.dumps(inference | {"maxNodes": 9})}
    )
    assert wider.error is None, wider.error
    assert body_of(wider)[1] == body_of(inference_plan)[1]
    changed = run_plan("train", config | {"gpu-cluster:instanceType": "p5.48xlarge"})
    assert changed.error is None, changed.error
    assert body_of(changed)[1] != body_of(train_plan)[1]  # the check can see a change
