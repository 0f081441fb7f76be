"""The CloudWatch agent's profile on a node: which documented measurements it collects, how
they roll up, and which logs it ships; rendered as the agent's JSON (pure) and counted.

Facts from the agent's source (aws/amazon-cloudwatch-agent at ab55b8d) and the CloudWatch
User Guide ("Collect NVIDIA GPU metrics", "Collect EFA metrics", "Manually create or edit the
CloudWatch agent configuration file"); the measurement names are data
(data/cloudwatch_agent_measurements.json):

- ``aggregation_dimensions``: besides a metric's own series the agent publishes one per listed
  dimension set, aggregated over the rest, only when the metric carries every dimension of the
  set (plugins/outputs/cloudwatch/cloudwatch.go, ProcessRollup).
- ``drop_original_metrics`` (per plugin, a list): the original series of those metrics (per GPU,
  per EFA device) are not sent, only the roll-ups (cloudwatch.go IsDropping). For nvidia_gpu an
  entry is a measurement name the agent decorates to ``nvidia_smi_<name>``; for efa the entry is
  taken as it is, so it must be the published ``efa_<name>`` (translator/translate/otel/common/
  metrics.go GetDropOriginalMetrics, toDropMap).
- ``append_dimensions`` in ``metrics``: only the EC2 keys (InstanceId, AutoScalingGroupName, ...;
  otel/processor/ec2taggerprocessor); in a plugin: any key and value, as telegraf tags
  (metrics/util/commonconfigutil.go ProcessAppendDimensions) - for the telegraf-based nvidia_gpu.
  The efa section has no append_dimensions (its schema: measurement, metrics_collection_interval,
  drop_original_metrics; otel/receiver/awsefa reads no more): its series carry only InstanceId
  and AutoScalingGroupName, so EFA rolls up per Auto Scaling group; each node's own EFA errors
  come from the health check (GpuErrors Class=EfaErrors, components/node_errors.py)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

MEASUREMENTS_PATH = Path(__file__).parent / "data" / "cloudwatch_agent_measurements.json"
NAMESPACE = "gpu-cluster"
AGENT_DIR = "/opt/aws/amazon-cloudwatch-agent"
# where the user data puts this stack's rendered profile; the gpu-metrics step hands it to the
# agent from the agent's own etc/ (boot/gpu-cluster-gpu-metrics.sh)
PROFILE_PATH = "/usr/local/lib/gpu-cluster/cloudwatch-agent.json"
PROMETHEUS_PATH = f"{AGENT_DIR}/etc/prometheus.yaml"  # the step writes it (the group's label)
# every `log` line of the gpu-cluster units (boot/gpu-cluster-lib.sh) also goes here
NODE_LOG_FILE = "/var/log/gpu-cluster/node.log"
INTERVAL_SECONDS = 60

# Per GPU, rolled up per node: what the dashboard draws (utilization, memory, power,
# temperature) and what explains a slow GPU (SM clock and PCIe link width; the health check
# reads the throttle reasons and the link's maximum). Not fan_speed (datacenter GPUs have no
# fan: N/A), the encoder stats (video) or memory_free (memory_total - memory_used).
GPU_MEASUREMENTS: tuple[str, ...] = (
    "utilization_gpu",
    "utilization_memory",
    "memory_used",
    "memory_total",
    "power_draw",
    "temperature_gpu",
    "clocks_current_sm",
    "pcie_link_width_current",
)
# Per EFA device, rolled up per group: throughput, and every error or event counter (zero on a
# healthy fabric). Not the per-operation byte and work-request counters (send/recv/rdma_*
# bytes and wrs): rx/tx bytes already say how busy the fabric is.
EFA_MEASUREMENTS: tuple[str, ...] = (
    "rx_bytes",
    "tx_bytes",
    "rx_dropped",
    "rdma_read_wr_err",
    "rdma_write_wr_err",
    "retrans_pkts",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
)
# Per node (the dashboard's rows, Metrics Insights filtered by stack), per stack, per group
# (components/serving_group.py's scaling policy reads nvidia_smi_utilization_gpu by group).
AGGREGATION: tuple[tuple[str, ...], ...] = (
    ("StackId", "InstanceId"),
    ("StackId",),
    ("AutoScalingGroupName",),
)
# The model server's Prometheus metrics (Triton) as embedded metric format logs, per model, and
# the queueTime policy's two counters per group (components/serving_group.py).
MODEL_NAMESPACE = "gpu-cluster/ModelServer"
MODEL_METRICS = (
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_infer_duration_us",
)
GROUP_MODEL_METRICS = ("nv_inference_request_success", "nv_inference_queue_duration_us")


@cache
def documented() -> dict[str, Any]:
    return json.loads(MEASUREMENTS_PATH.read_text())


def documented_measurements(plugin: str) -> frozenset[str]:
    """The agent's documented measurement names of ``plugin`` (nvidia_gpu, efa)."""
    return frozenset(documented()["plugins"][plugin]["measurements"])


def published_prefix(plugin: str) -> str:
    return documented()["plugins"][plugin]["published_prefix"]


def min_agent_version(plugin: str) -> str:
    """The first agent release that collects ``plugin`` on EC2 ("" for any): an EFA node with
    an older agent (an older AMI's) installs the regional latest (gpu-cluster-gpu-metrics.sh)."""
    return documented()["plugins"][plugin].get("min_agent_version", "")


@dataclass(frozen=True, slots=True)
class AgentProfile:
    """What one stack's nodes collect; every field the same on each node of the stack."""

    stack_id: str
    efa: bool = False  # the node has EFA interfaces
    node_log_group: str = ""  # where the units' log lines go ("" for none)
    jobs_log_group: str = ""  # training: every job's output
    job_log_files: str = ""  # the jobs' files (a glob)
    model_metrics_log_group: str = ""  # inference: the model server's metrics as EMF


def plugin_section(plugin: str, measurements: tuple[str, ...], extra: dict) -> dict[str, Any]:
    unknown = set(measurements) - documented_measurements(plugin)
    if unknown:  # a programming error: only documented names reach a node
        raise ValueError(f"{plugin}: not documented measurements: {sorted(unknown)}")
    prefix = "" if plugin == "nvidia_gpu" else published_prefix(plugin)
    return {
        "measurement": list(measurements),
        "metrics_collection_interval": INTERVAL_SECONDS,
        "drop_original_metrics": [prefix + m for m in measurements],
        **extra,
    }


def model_server_section(log_group: str) -> dict[str, Any]:
    def declaration(dimensions: list[list[str]], names: tuple[str, ...]) -> dict[str, Any]:
        return {
            "source_labels": ["job"],
            "label_matcher": "^model-server$",
            "dimensions": dimensions,
            "metric_selectors": [f"^{n}$" for n in names],
        }

    return {
        "log_group_name": log_group,
        "prometheus_config_path": PROMETHEUS_PATH,
        "emf_processor": {
            "metric_declaration_dedup": True,
            "metric_namespace": MODEL_NAMESPACE,
            "metric_declaration": [
                declaration([["model"]], MODEL_METRICS),
                declaration([["AutoScalingGroupName"]], GROUP_MODEL_METRICS),
            ],
        },
    }


def agent_config(profile: AgentProfile) -> dict[str, Any]:
    """The agent's JSON configuration for ``profile``."""
    collected: dict[str, Any] = {
        "nvidia_gpu": plugin_section(
            "nvidia_gpu", GPU_MEASUREMENTS, {"append_dimensions": {"StackId": profile.stack_id}}
        )
    }
    if profile.efa:
        collected["efa"] = plugin_section("efa", EFA_MEASUREMENTS, {})
    config: dict[str, Any] = {
        "agent": {"metrics_collection_interval": INTERVAL_SECONDS, "run_as_user": "root"},
        "metrics": {
            "namespace": NAMESPACE,
            "append_dimensions": {
                "InstanceId": "${aws:InstanceId}",
                "AutoScalingGroupName": "${aws:AutoScalingGroupName}",
            },
            "aggregation_dimensions": [list(dims) for dims in AGGREGATION],
            "metrics_collected": collected,
        },
    }
    files = [
        {"file_path": path, "log_group_name": group, "log_stream_name": "{instance_id}"}
        for path, group in (
            (NODE_LOG_FILE, profile.node_log_group),
            (profile.job_log_files, profile.jobs_log_group),
        )
        if path and group
    ]
    logs: dict[str, Any] = {}
    if files:
        logs["logs_collected"] = {"files": {"collect_list": files}}
    if profile.model_metrics_log_group:
        prometheus = model_server_section(profile.model_metrics_log_group)
        logs["metrics_collected"] = {"prometheus": prometheus}
    if logs:
        config["logs"] = logs
    return config


def render_agent_config(profile: AgentProfile) -> str:
    """The JSON as the node gets it: compact (it rides in the user data)."""
    return json.dumps(agent_config(profile), separators=(",", ":"))


# --- what the profile publishes -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MetricCount:
    """Custom metrics (a name and a set of dimension values each): per node and per stack."""

    per_node: int
    per_stack: int

    def total(self, nodes: int) -> int:
        return nodes * self.per_node + self.per_stack


# The health check's metrics (boot/gpu-cluster-health.sh publish: NodeHealthy and NodeDegraded
# per {StackId, InstanceId}; GpuErrors only while non-zero, so not counted) and the idle stop's
# Activity (boot/gpu-cluster-gpu-metrics.sh --activity: per {InstanceId} and per {Cluster,
# Stack}); training nodes only.
HEALTH_METRICS_PER_NODE = ("NodeHealthy", "NodeDegraded")
ACTIVITY_PER_NODE, ACTIVITY_PER_STACK = 1, 1


def series_dimensions(config: dict[str, Any], plugin: str, in_group: bool) -> frozenset[str]:
    """The dimensions a plugin's metrics carry beside their own (per GPU, per EFA device)."""
    metrics = config["metrics"]
    keys = set(metrics.get("append_dimensions", {}))
    if not in_group:  # ${aws:AutoScalingGroupName} resolves to nothing on a plain instance
        keys.discard("AutoScalingGroupName")
    keys |= set(metrics["metrics_collected"][plugin].get("append_dimensions", {}))
    return frozenset(keys)


def agent_metrics(config: dict[str, Any], in_group: bool, models: int = 1) -> MetricCount:
    """What the agent publishes under ``config``, by the agent's roll-up rule: per node the
    roll-ups naming InstanceId (and every original series not dropped, counted once per
    measurement: a lower bound), per stack the others; the model server's EMF metrics per
    model (``models``) and per group."""
    metrics = config["metrics"]
    per_node = per_stack = 0
    for plugin, section in metrics["metrics_collected"].items():
        carried = series_dimensions(config, plugin, in_group)
        kept = [dims for dims in metrics.get("aggregation_dimensions", []) if set(dims) <= carried]
        measurements = len(section["measurement"])
        per_node += measurements * sum("InstanceId" in dims for dims in kept)
        per_stack += measurements * sum("InstanceId" not in dims for dims in kept)
        if not section.get("drop_original_metrics"):
            per_node += measurements
    prometheus = config.get("logs", {}).get("metrics_collected", {}).get("prometheus")
    if prometheus:
        for declaration in prometheus["emf_processor"]["metric_declaration"]:
            names = len(declaration["metric_selectors"])
            per_group = declaration["dimensions"] == [["AutoScalingGroupName"]]
            per_stack += names * (1 if per_group else models)
    return MetricCount(per_node, per_stack)


def node_metrics(config: dict[str, Any], in_group: bool, training: bool) -> MetricCount:
    """Every custom metric a stack's nodes publish: the agent's, plus on a training node the
    health check's and the idle stop's Activity."""
    agent = agent_metrics(config, in_group)
    if not training:
        return agent
    return MetricCount(
        agent.per_node + len(HEALTH_METRICS_PER_NODE) + ACTIVITY_PER_NODE,
        agent.per_stack + ACTIVITY_PER_STACK,
    )
