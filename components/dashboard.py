"""A CloudWatch dashboard per compute and inference stack: the nodes' GPUs and EFA, their health
and GPU errors, jobs and launch failures, the burn rate against the budget, and (inference) the
load balancer and the model server.

Every per-node widget is a CloudWatch Metrics Insights query filtered on the stack's StackId
(``SELECT AVG(m) FROM SCHEMA("gpu-cluster", InstanceId, StackId) WHERE StackId = '...' GROUP BY
InstanceId``): CloudWatch finds the nodes when the graph is drawn, so a replaced node shows up
and the body names no instance id. Sources: CloudWatch User Guide, "Metrics Insights query
components and syntax" (one function, FROM SCHEMA with the exact dimension set, label values in
single quotes, a quote in a value escaped with a backslash, ORDER BY ... LIMIT at most 500) and
"Metrics Insights quotas" (a query returns at most 500 time series; a GetMetricData, i.e. a
widget, holds one query); "Use Metrics Insights queries with metric math" (a GROUP BY query is an
array of time series for math functions); "Dashboard Body Structure and Syntax" (widgets on a
24-column grid, metric widget properties, horizontal annotations). The limits a body must meet
are in components/aws_limits.py (dashboard_violations), which the plan engine's mocks apply.

`dashboard_body` is pure (values in, a dict out); `stack_dashboard` is the thin part that
creates the aws.cloudwatch.Dashboard."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.cloudwatch_agent import (
    EFA_MEASUREMENTS,
    GPU_MEASUREMENTS,
    GROUP_MODEL_METRICS,
    MODEL_NAMESPACE,
    published_prefix,
)
from gpu_cluster.components.cost_controls import METRIC_NAMESPACE, CostControls
from gpu_cluster.components.log_metrics import log_metric_namespace
from gpu_cluster.components.names import StackIdentity
from gpu_cluster.components.node_errors import GPU_ERROR_INCREASES

# The prefixes the CloudWatch agent gives its plugins' measurements (nvidia_gpu: nvidia_smi_,
# efa: efa_), from the agent's documented data (components/cloudwatch_agent.py).
GPU_PREFIX, EFA_PREFIX = published_prefix("nvidia_gpu"), published_prefix("efa")
# What every node's own metrics carry (the agent's roll-up per instance, the health script).
NODE_DIMENSIONS = ("InstanceId", "StackId")
STACK_DIMENSION = "StackId"
HEALTHY, DEGRADED, GPU_ERRORS = "NodeHealthy", "NodeDegraded", "GpuErrors"
ERROR_CLASS_DIMENSION = "Class"
INCREASE_TITLES = {"NvlinkErrors": "NVLink errors", "EfaErrors": "EFA errors"}
# The GPU measurements the dashboard draws per node, with the statistic that makes sense of the
# agent's per-instance roll-up of a node's GPUs, and the order that keeps the interesting nodes
# when a query matches more than 500 (ORDER BY): the least busy, the fullest, the hottest.
GPU_WIDGETS: tuple[tuple[str, str, str, str], ...] = (
    ("utilization_gpu", "AVG", "ASC", "GPU utilization per node (%, average of its GPUs)"),
    ("memory_used", "MAX", "DESC", "GPU memory used per node (its fullest GPU)"),
    ("power_draw", "AVG", "DESC", "GPU power draw per node (W, average of its GPUs)"),
    ("temperature_gpu", "MAX", "DESC", "GPU temperature per node (C, its hottest GPU)"),
)
# EFA counters that measure traffic (the rest the agent collects are errors and events).
EFA_THROUGHPUT = ("rx_bytes", "tx_bytes")
# The node count behind the burn rate: every node's agent publishes this each minute.
PRESENCE_MEASUREMENT = "utilization_gpu"
PERIOD_SECONDS = 300
GRID_COLUMNS = 24  # "Dashboard Body Structure and Syntax": a 24-column grid
# The console's link to a dashboard by name, per partition (dashboards are global per account:
# the region only says which console opens it)
CONSOLE_HOSTS = {
    "aws": "console.aws.amazon.com",
    "aws-us-gov": "console.amazonaws-us-gov.com",
    "aws-cn": "console.amazonaws.cn",
}


@dataclass(frozen=True)
class ServingMetrics:
    """An inference stack's load balancer, target group and node group, as CloudWatch names
    them (the ARN suffixes app/... and targetgroup/..., the group's name)."""

    load_balancer: str
    target_group: str
    group_name: str
    triton: bool  # Triton's metrics reach gpu-cluster/ModelServer (vLLM's are not scraped)


@dataclass(frozen=True)
class BurnPrices:
    """What the burn-rate widget multiplies by: a node's USD/hour (the program passes the cost
    model's, `gpuc cost`'s), and the hours of a month a monthly budget spreads over."""

    node_usd_per_hour: float | None = None
    hours_per_month: float = 730.0  # AWS prices a month of hourly use as 730 h
    unpriced: str = "no node price given"  # why node_usd_per_hour is None


@dataclass(frozen=True)
class DashboardSpec:
    """What the dashboard of one stack shows."""

    stack_id: str  # the StackId dimension every node of the stack publishes (names.py)
    region: str
    title: str
    efa: bool = False
    # the nodes' Auto Scaling group: the agent's EFA counters roll up only per group (their
    # series carry no StackId: components/cloudwatch_agent.py); known once the group exists
    group_name: str | None = None
    health: bool = True  # nodes run the health check (NodeHealthy, NodeDegraded, GpuErrors)
    log_metrics: tuple[str, ...] = ()  # the metric filters this stack has (log_metrics.py)
    burn: BurnPrices = BurnPrices()
    budget_usd_per_month: float | None = None
    scheduled_hours_per_day: float | None = None  # a working-hours schedule's average
    serving: ServingMetrics | None = None


def stack_spec(
    identity: StackIdentity,
    region: str,
    what: str,
    controls: CostControls,
    burn: BurnPrices,
    **shown: Any,
) -> DashboardSpec:
    """A stack's dashboard: its identity, what it runs (``what``, for the title), its budget
    and schedule, and what else it shows (``shown``: DashboardSpec's fields)."""
    return DashboardSpec(
        stack_id=identity.stack_id,
        region=region,
        title=f"{identity.stack} ({identity.cluster}, {region}): {what}",
        burn=burn,
        budget_usd_per_month=controls.budget.monthly_usd if controls.budget else None,
        scheduled_hours_per_day=controls.schedule.hours_per_day() if controls.schedule else None,
        **shown,
    )


# --- Metrics Insights ---------------------------------------------------------------------


def identifier(name: str) -> str:
    """A namespace, metric or label key: bare when letters, digits and _, else double-quoted
    (quotes inside escaped with a backslash)."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return name
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def label_value(value: str) -> str:
    """A label value: always in single quotes, quotes inside escaped with a backslash."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def insights_query(
    function: str,
    metric: str,
    namespace: str,
    dimensions: tuple[str, ...],
    where: dict[str, str],
    group_by: tuple[str, ...] = (),
    order: str = "",
    where_not: tuple[tuple[str, str], ...] = (),
) -> str:
    """``SELECT FUNCTION(metric) FROM SCHEMA(namespace, dims) WHERE k = 'v' [AND k != 'w' ...]
    [GROUP BY ...] [ORDER BY FUNCTION() order]``: the metrics with exactly these dimensions
    (the WHERE clause's operators and AND: CloudWatch User Guide, "Metrics Insights query
    components and syntax")."""
    schema = ", ".join([identifier(namespace), *(identifier(d) for d in sorted(dimensions))])
    query = f"SELECT {function}({identifier(metric)}) FROM SCHEMA({schema})"
    conditions = [f"{identifier(k)} = {label_value(v)}" for k, v in sorted(where.items())]
    conditions += [f"{identifier(k)} != {label_value(v)}" for k, v in where_not]
    if conditions:
        query += " WHERE " + " AND ".join(conditions)
    if group_by:
        query += " GROUP BY " + ", ".join(identifier(g) for g in group_by)
    if order:
        query += f" ORDER BY {function}() {order}"
    return query


def per_node(spec: DashboardSpec, metric: str, function: str, order: str = "DESC") -> str:
    """One series per node of the stack."""
    return insights_query(
        function,
        metric,
        METRIC_NAMESPACE,
        NODE_DIMENSIONS,
        {STACK_DIMENSION: spec.stack_id},
        ("InstanceId",),
        order,
    )


# --- widgets ------------------------------------------------------------------------------


def query_widget(
    spec: DashboardSpec, title: str, query: str, y_axis: dict[str, Any] | None = None, **extra: Any
) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "title": title,
        "region": spec.region,
        "view": "timeSeries",
        "stacked": False,
        "period": PERIOD_SECONDS,
        "metrics": [[{"expression": query, "id": "q1", "period": PERIOD_SECONDS}]],
    }
    if y_axis:
        properties["yAxis"] = {"left": y_axis}
    return {"type": "metric", "properties": properties | extra}


def metric_widget(
    spec: DashboardSpec, title: str, metrics: list[list[Any]], stat: str = "Sum", **extra: Any
) -> dict[str, Any]:
    """A graph of named metrics (fixed dimensions: the stack's, not a node's)."""
    properties = {
        "title": title,
        "region": spec.region,
        "view": "timeSeries",
        "stacked": False,
        "period": PERIOD_SECONDS,
        "stat": stat,
        "metrics": metrics,
    }
    return {"type": "metric", "properties": properties | extra}


def text_widget(markdown: str) -> dict[str, Any]:
    return {"type": "text", "properties": {"markdown": markdown}}


def gpu_widgets(spec: DashboardSpec) -> list[dict[str, Any]]:
    shown = [w for w in GPU_WIDGETS if w[0] in GPU_MEASUREMENTS]
    return [
        query_widget(
            spec,
            title,
            per_node(spec, GPU_PREFIX + measurement, function, order),
            {"min": 0, **({"max": 100} if measurement == "utilization_gpu" else {})},
        )
        for measurement, function, order, title in shown
    ]


def efa_widgets(spec: DashboardSpec) -> list[dict[str, Any]]:
    """The group's EFA traffic and its error counters, summed over its nodes and devices (the
    agent's roll-up per Auto Scaling group: the only one EFA series have). Which node has EFA
    errors is the health check's GpuErrors Class=EfaErrors (health_widgets)."""
    if spec.group_name is None:
        return []
    group = ["AutoScalingGroupName", spec.group_name]

    def rows(names: list[str]) -> list[list[Any]]:
        return [[METRIC_NAMESPACE, EFA_PREFIX + m, *group, {"label": m}] for m in names]

    traffic = [m for m in EFA_THROUGHPUT if m in EFA_MEASUREMENTS]
    errors = [m for m in EFA_MEASUREMENTS if m not in EFA_THROUGHPUT]
    minutes = PERIOD_SECONDS // 60
    return [
        metric_widget(spec, f"EFA traffic of the group (bytes per {minutes} min)", rows(traffic)),
        metric_widget(
            spec, "EFA errors and events of the group (zero on a healthy fabric)", rows(errors)
        ),
    ]


def health_widgets(spec: DashboardSpec) -> list[dict[str, Any]]:
    """The health script's states and error counts (GpuErrors only exists where non-zero). A
    gauge class is re-published every minute while it holds, so it is drawn with MAX (a sum
    over the period would count one Xid five times); the increases (NVLink, EFA: new since the
    previous check) with SUM (components/node_errors.py)."""
    schema = (*NODE_DIMENSIONS, ERROR_CLASS_DIMENSION)
    stack = {STACK_DIMENSION: spec.stack_id}
    gauges_only = tuple((ERROR_CLASS_DIMENSION, name) for name in GPU_ERROR_INCREASES)
    gauges_by_class = insights_query(
        "MAX",
        GPU_ERRORS,
        METRIC_NAMESPACE,
        schema,
        stack,
        (ERROR_CLASS_DIMENSION,),
        "DESC",
        gauges_only,
    )
    gauges_by_node = insights_query(
        "MAX", GPU_ERRORS, METRIC_NAMESPACE, schema, stack, ("InstanceId",), "DESC", gauges_only
    )
    minutes = PERIOD_SECONDS // 60
    increases = [
        query_widget(
            spec,
            f"{INCREASE_TITLES.get(name, name)} by node (new, per {minutes} min)",
            insights_query(
                "SUM",
                GPU_ERRORS,
                METRIC_NAMESPACE,
                schema,
                stack | {ERROR_CLASS_DIMENSION: name},
                ("InstanceId",),
                "DESC",
            ),
        )
        for name in GPU_ERROR_INCREASES
    ]
    return [
        query_widget(
            spec,
            "Node healthy (1 ok or degraded, 0 failed: replaced)",
            per_node(spec, HEALTHY, "MIN", "ASC"),
            {"min": 0, "max": 1},
        ),
        query_widget(
            spec,
            "Node degraded (1: degraded:*, still in service)",
            per_node(spec, DEGRADED, "MAX"),
            {"min": 0, "max": 1},
        ),
        query_widget(spec, "GPU errors by class (the worst node's count)", gauges_by_class),
        query_widget(spec, "GPU errors by node (its largest count)", gauges_by_node),
        *increases,
    ]


def log_metric(spec: DashboardSpec, name: str) -> list[Any]:
    """A log metric filter's count: the stack's own namespace, no dimensions (the filters match
    plain text, which can give no dimension: components/log_metrics.py)."""
    return [log_metric_namespace(spec.stack_id), name, {"label": name}]


LOG_WIDGETS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Jobs failed and restarted (one per node of the job)", ("JobFailed", "JobRestarted")),
    ("Launch failures by reason", ("InsufficientCapacity", "LaunchFailed")),
    ("Node events in the logs", ("NodeUnhealthy", "XidError", "SlowNetwork")),
)


def log_widgets(spec: DashboardSpec) -> list[dict[str, Any]]:
    widgets = []
    for title, names in LOG_WIDGETS:
        shown = [n for n in names if n in spec.log_metrics]
        if shown:
            widgets.append(metric_widget(spec, title, [log_metric(spec, n) for n in shown]))
    return widgets


def burn_rate_widget(spec: DashboardSpec) -> dict[str, Any]:
    """Running nodes and what they cost an hour, against the budget's hourly equivalent.

    The arithmetic: q1 returns one series per node that published its GPU utilization in the
    period (the CloudWatch agent does every minute on every node, so a stopped or terminated
    node has no data); ``q1*0+1`` turns each point into 1 and ``SUM(...)`` adds the series at
    each time stamp: the nodes running in that period (a node running any part of it counts).
    Times the node's hourly price (the estimate's GPU line per node, `gpuc cost`'s price) that
    is the GPU nodes' burn in USD/h (the NAT gateway, disks and the rest of the stack are not in
    it; they are in the budget). The budget line is the monthly budget spread over the hours of
    a month (AWS bills hourly prices over a 730 h month): a burn above it all month would spend
    more than the budget. With a working-hours schedule a second line spreads the budget over
    the hours the nodes are scheduled to run."""
    nodes = per_node(spec, GPU_PREFIX + PRESENCE_MEASUREMENT, "AVG")
    metrics: list[list[Any]] = [
        [{"expression": nodes, "id": "q1", "period": PERIOD_SECONDS, "visible": False}],
        [{"expression": "SUM(q1*0+1)", "id": "nodes", "label": "running nodes", "yAxis": "right"}],
    ]
    annotations: list[dict[str, Any]] = []
    price, month = spec.burn.node_usd_per_hour, spec.burn.hours_per_month
    if price is not None:
        label = f"GPU nodes, USD/h (${price:,.4f}/h per node)"
        metrics.append([{"expression": f"nodes*{price:.6g}", "label": label}])
    if spec.budget_usd_per_month is not None:
        hourly = spec.budget_usd_per_month / month
        annotations.append(
            {
                "label": f"budget ${spec.budget_usd_per_month:,.0f}/month over "
                f"{month:g} h: ${hourly:,.2f}/h",
                "value": round(hourly, 4),
            }
        )
        if spec.scheduled_hours_per_day:
            hours = spec.scheduled_hours_per_day * month / 24
            annotations.append(
                {
                    "label": f"budget over the {hours:,.0f} scheduled h: "
                    f"${spec.budget_usd_per_month / hours:,.2f}/h",
                    "value": round(spec.budget_usd_per_month / hours, 4),
                }
            )
    title = "Burn rate: running nodes x hourly price" + (
        "" if price is not None else f" (not priced: {spec.burn.unpriced})"
    )
    properties: dict[str, Any] = {
        "title": title,
        "region": spec.region,
        "view": "timeSeries",
        "stacked": False,
        "period": PERIOD_SECONDS,
        "metrics": metrics,
        "yAxis": {"left": {"min": 0, "label": "USD/h"}, "right": {"min": 0, "label": "nodes"}},
    }
    if annotations:
        properties["annotations"] = {"horizontal": annotations}
    return {"type": "metric", "properties": properties}


def serving_widgets(spec: DashboardSpec) -> list[dict[str, Any]]:
    """The load balancer's requests, errors and latency (AWS/ApplicationELB, by its ARN
    suffix), the targets' health, and Triton's queue time per request (the two counters the
    agent publishes per group: components/serving_group.py's queueTime metric)."""
    s = spec.serving
    if s is None:
        return []
    lb = ["AWS/ApplicationELB"]
    widgets = [
        metric_widget(
            spec,
            "Requests and errors (load balancer)",
            [
                [*lb, "RequestCount", "LoadBalancer", s.load_balancer],
                [*lb, "HTTPCode_Target_5XX_Count", "LoadBalancer", s.load_balancer],
                [*lb, "HTTPCode_ELB_5XX_Count", "LoadBalancer", s.load_balancer],
            ],
        ),
        metric_widget(
            spec,
            "Response time (s, p50 and p99)",
            [
                [*lb, "TargetResponseTime", "LoadBalancer", s.load_balancer, {"stat": "p50"}],
                [*lb, "TargetResponseTime", "LoadBalancer", s.load_balancer, {"stat": "p99"}],
            ],
            stat="p50",
        ),
        metric_widget(
            spec,
            "Targets healthy and unhealthy",
            [
                [*lb, m, "TargetGroup", s.target_group, "LoadBalancer", s.load_balancer]
                for m in ("HealthyHostCount", "UnHealthyHostCount")
            ],
            stat="Minimum",
        ),
    ]
    if s.triton:  # the two counters the agent publishes per group
        success, queue = GROUP_MODEL_METRICS
        group = ["AutoScalingGroupName", s.group_name]
        widgets.append(
            metric_widget(
                spec,
                "Model server: requests and queue time per request (us)",
                [
                    [MODEL_NAMESPACE, success, *group, {"id": "ok"}],
                    [
                        MODEL_NAMESPACE,
                        queue,
                        *group,
                        {"id": "queue", "visible": False},
                    ],
                    [{"expression": "queue/ok", "label": "queue time per request (us)"}],
                ],
            )
        )
    return widgets


def layout(widgets: list[dict[str, Any]], width: int = 12, height: int = 6) -> list[dict]:
    """Row by row on the 24-column grid: text across the whole row, graphs two to a row."""
    placed, x, y = [], 0, 0
    for widget in widgets:
        w, h = (GRID_COLUMNS, 2) if widget["type"] == "text" else (width, height)
        if x + w > GRID_COLUMNS:
            x, y = 0, y + height
        placed.append({**widget, "x": x, "y": y, "width": w, "height": h})
        x += w
        if x >= GRID_COLUMNS:
            x, y = 0, y + h
    return placed


def dashboard_body(spec: DashboardSpec) -> dict[str, Any]:
    """The dashboard as PutDashboard takes it (json.dumps of this is the DashboardBody)."""
    header = text_widget(
        f"# {spec.title}\n"
        f"Stack `{spec.stack_id}`. Nodes are found by their StackId when a graph is drawn, so "
        "replaced nodes appear on their own. Made by `pulumi up`: edits here are overwritten."
    )
    widgets = [header, burn_rate_widget(spec), *gpu_widgets(spec)]
    if spec.efa:
        widgets += efa_widgets(spec)
    if spec.health:
        widgets += health_widgets(spec)
    widgets += log_widgets(spec) + serving_widgets(spec)
    return {"start": "-PT6H", "periodOverride": "inherit", "widgets": layout(widgets)}


def dashboard_json(spec: DashboardSpec) -> str:
    return json.dumps(dashboard_body(spec), separators=(",", ":"))


def dashboard_url(region: str, name: str, partition: str = "aws") -> str:
    """The console page of the dashboard (its name is letters, digits, - and _: no escaping)."""
    host = CONSOLE_HOSTS.get(partition, CONSOLE_HOSTS["aws"])
    return f"https://{region}.{host}/cloudwatch/home?region={region}#dashboards:name={name}"


# --- the resource -------------------------------------------------------------------------


def stack_dashboard(
    name: str,
    dashboard_name: str,
    spec: DashboardSpec,
    opts: pulumi.ResourceOptions,
    known_later: pulumi.Output[dict[str, Any]] | None = None,
) -> tuple[aws.cloudwatch.Dashboard, pulumi.Output[str]]:
    """The stack's dashboard and its console URL. ``known_later``: spec fields known once other
    resources exist (the node group's name, the load balancer's): the body follows them when
    `pulumi up` replaces one of those."""
    body: pulumi.Input[str] = (
        known_later.apply(lambda fields: dashboard_json(replace(spec, **fields)))
        if known_later is not None
        else dashboard_json(spec)
    )
    dashboard = aws.cloudwatch.Dashboard(
        name, dashboard_name=dashboard_name, dashboard_body=body, opts=opts
    )
    partition = aws.get_partition_output(opts=pulumi.InvokeOptions(parent=opts.parent)).partition
    url = pulumi.Output.all(dashboard.dashboard_name, partition).apply(
        lambda v: dashboard_url(spec.region, v[0], v[1])
    )
    return dashboard, url
