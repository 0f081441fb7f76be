"""A stack's node log group (the gpu-cluster units' log lines, shipped by the CloudWatch agent)
and the metric filters that count what matters in it, in the jobs' output and in the node
events (components/log_metrics.py). Children of the stack's component."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.jobs import JOB_LOG_RETENTION_DAYS
from gpu_cluster.components.log_metrics import (
    EVENTS_LOG,
    JOBS_LOG,
    NODE_LOG,
    filters_of,
    log_metric_namespace,
)
from gpu_cluster.components.names import StackIdentity, metric_filter_name, node_log_group
from gpu_cluster.components.naming import child_name
from gpu_cluster.components.policies import log_group_writer_policy


def node_log(
    name: str,
    ids: StackIdentity,
    kms_key_arn: pulumi.Input[str],
    role_name: pulumi.Input[str],
    tags: dict[str, str],
    child: pulumi.ResourceOptions,
) -> tuple[aws.cloudwatch.LogGroup, aws.iam.RolePolicy]:
    """The units' log lines (boot steps, health), encrypted with the cluster key and kept as
    long as the jobs' output; the nodes' agent may write into it, nothing more."""
    group = aws.cloudwatch.LogGroup(
        child_name(name, "node-log"),
        name=node_log_group(ids),
        kms_key_id=kms_key_arn,
        retention_in_days=JOB_LOG_RETENTION_DAYS,
        tags=tags,
        opts=child,
    )
    access = aws.iam.RolePolicy(
        child_name(name, "node-log-access"),
        role=role_name,
        policy=group.arn.apply(lambda arn: json.dumps(log_group_writer_policy("NodeLogs", arn))),
        opts=child,
    )
    return group, access


def log_metric_filters(
    name: str,
    ids: StackIdentity,
    groups: dict[str, aws.cloudwatch.LogGroup],
    child: pulumi.ResourceOptions,
) -> list[aws.cloudwatch.LogMetricFilter]:
    """One filter per count whose log group the stack has (``groups`` by NODE_LOG, JOBS_LOG,
    EVENTS_LOG), publishing 1 per matching line into the stack's own namespace."""
    sources = tuple(s for s in (NODE_LOG, JOBS_LOG, EVENTS_LOG) if s in groups)
    return [
        aws.cloudwatch.LogMetricFilter(
            child_name(name, f"log-metric-{metric.name}"),
            name=metric_filter_name(ids, metric.name),
            log_group_name=groups[metric.source].name,
            pattern=metric.pattern,
            metric_transformation=aws.cloudwatch.LogMetricFilterMetricTransformationArgs(
                name=metric.name,
                namespace=log_metric_namespace(ids.stack_id),
                value="1",
                unit="Count",
            ),
            opts=child,
        )
        for metric in filters_of(sources)
    ]
