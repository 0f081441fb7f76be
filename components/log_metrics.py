"""Counts CloudWatch Logs metric filters make of the nodes' logs (ingest cost only)."""

from __future__ import annotations

LOG_METRIC_NAMESPACE = "gpu-cluster/Logs"
# metric names; each stack's filters publish them with a StackId dimension where the log
# events are JSON, else under a per-stack metric name (see the filters' module)
LOG_METRICS: tuple[str, ...] = (
    "NodeUnhealthy",
    "SlowNetwork",
    "XidError",
    "InsufficientCapacity",
    "LaunchFailed",
    "JobFailed",
    "JobRestarted",
)
