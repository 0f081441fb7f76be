"""Counts CloudWatch Logs metric filters make of the nodes' logs (ingest cost only): which
lines they match, in which log group, and where the counts are published.

Every pattern here is an unstructured term pattern (CloudWatch Logs User Guide, "Filter pattern
syntax for metric filters, subscription filters, and filter log events": a quoted term matches
that exact text, case-sensitive; terms separated by spaces must all match; terms each prefixed
with ``?`` match when any does). Such a filter cannot take dimensions ("You can specify
dimensions only for metric filters that use JSON or space-delimited patterns"; at most three,
PutMetricFilter), and a stack id is in none of the lines (EventBridge's events do not carry it
either), so each stack's counts go to a namespace of their own: ``gpu-cluster/Logs/<stack id>``
(project/stack/region: unique where a cluster name is not), each metric without dimensions."""

from __future__ import annotations

import re
from dataclasses import dataclass

LOG_METRIC_NAMESPACE = "gpu-cluster/Logs"
NAMESPACE_PATTERN = LOG_METRIC_NAMESPACE + "/{stack_id}"

# the log groups a stack's filters read (components/node_logs.py makes the filters)
NODE_LOG, JOBS_LOG, EVENTS_LOG = "node-log", "jobs-log", "node-events"


@dataclass(frozen=True, slots=True)
class LogMetric:
    name: str  # the metric's name in the stack's namespace
    source: str  # NODE_LOG, JOBS_LOG or EVENTS_LOG
    pattern: str
    why: str  # what the writer prints, where


LOG_METRIC_FILTERS: tuple[LogMetric, ...] = (
    LogMetric(
        "NodeUnhealthy",
        NODE_LOG,
        '"gpu-cluster health: failed:"',
        "boot/gpu-cluster-health.sh publish: log of the failed status (lib.sh log -> node.log)",
    ),
    LogMetric(
        "XidError",
        NODE_LOG,
        '"gpu-cluster health: Xid "',
        "boot/gpu-cluster-health.sh: one line per Xid seen, 'Xid <n> (<class>) on <pci id>'",
    ),
    LogMetric(
        "SlowNetwork",
        JOBS_LOG,
        '?"gpu-cluster: stopped: " ?"gpu-cluster: warning: "',
        "boot/gpu-cluster-jobs.sh watch_output slow(): the job stopped (or, with "
        "GPUC_ALLOW_SLOW_NETWORK=1, warned) for TCP sockets, a non-EFA provider or too few NICs",
    ),
    LogMetric(
        "JobRestarted",
        JOBS_LOG,
        '"will restart worker group"',
        "torchrun's elastic agent at INFO (LOGLEVEL=INFO, set by boot/gpu-cluster-jobs.sh): "
        "'Worker group FAILED. N/M attempts left; will restart worker group': once per node",
    ),
    LogMetric(
        "JobFailed",
        JOBS_LOG,
        '"errors.ChildFailedError:"',
        "torchrun's error when the workers failed with no restart left, its traceback's last "
        "line 'torch.distributed.elastic.multiprocessing.errors.ChildFailedError:' (not the "
        "'raise ChildFailedError(' line above it, torch/distributed/launcher/api.py), in the "
        "job's output: once per node of the job",
    ),
    LogMetric(
        "LaunchFailed",
        EVENTS_LOG,
        '"EC2 Instance Launch Unsuccessful"',
        "EventBridge's Auto Scaling event (components/node_events.py), its detail-type",
    ),
    LogMetric(
        "InsufficientCapacity",
        EVENTS_LOG,
        '?"InsufficientInstanceCapacity" ?"do not have sufficient" ?"no Spot capacity available"',
        "the unsuccessful launch's detail.StatusMessage: 'Could not launch On-Demand Instances. "
        "InsufficientInstanceCapacity - We currently do not have sufficient <type> capacity ...' "
        "or, for spot, 'There is no Spot capacity available that matches your request'",
    ),
)
# every count's name, each published in its stack's namespace (NAMESPACE_PATTERN,
# log_metric_namespace) with no dimensions
LOG_METRICS: tuple[str, ...] = tuple(f.name for f in LOG_METRIC_FILTERS)


def log_metric_namespace(stack_id: str) -> str:
    """Where a stack's log counts are published (no dimensions)."""
    return NAMESPACE_PATTERN.format(stack_id=stack_id)


def filters_of(sources: tuple[str, ...]) -> tuple[LogMetric, ...]:
    """The filters a stack has, given the log groups it has."""
    return tuple(f for f in LOG_METRIC_FILTERS if f.source in sources)


TERM = re.compile(r'(\?)?(?:"((?:[^"\\]|\\.)*)"|(\S+))')


def matches(pattern: str, line: str) -> bool:
    """Whether an unstructured term pattern matches ``line`` as CloudWatch Logs does: every
    term, or any of the ?-terms (only these two forms are used here)."""
    terms = [(bool(m.group(1)), m.group(2) if m.group(2) is not None else m.group(3))
             for m in TERM.finditer(pattern)]  # fmt: skip
    if terms and all(optional for optional, _ in terms):
        return any(text in line for _, text in terms)
    if any(optional for optional, _ in terms):
        raise ValueError(f"mixed ?-terms and terms: {pattern!r}")
    return all(text in line for _, text in terms)
