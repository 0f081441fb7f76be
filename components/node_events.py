"""Node-group events recorded to a log group: launches, terminations (with their cause) and, for
spot groups, interruption warnings and rebalance recommendations (EventBridge rules)."""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.names import StackIdentity, node_events_group, node_events_policy
from gpu_cluster.components.naming import child_name

LOG_RETENTION_DAYS = 365
GROUP_EVENTS = (
    "EC2 Instance Launch Successful",
    "EC2 Instance Launch Unsuccessful",
    "EC2 Instance Terminate Successful",
    "EC2 Instance Terminate Unsuccessful",
)
SPOT_EVENTS = ("EC2 Spot Instance Interruption Warning", "EC2 Instance Rebalance Recommendation")


def group_event_pattern(group_name: str) -> str:
    return json.dumps(
        {
            "source": ["aws.autoscaling"],
            "detail-type": list(GROUP_EVENTS),
            "detail": {"AutoScalingGroupName": [group_name]},
        }
    )


def spot_event_pattern() -> str:
    """EventBridge cannot match on instance tags, so this rule sees every spot instance of the
    account and region; each record names its instance id."""
    return json.dumps({"source": ["aws.ec2"], "detail-type": list(SPOT_EVENTS)})


def events_to_logs_policy(log_group_arn: str) -> dict[str, Any]:
    """The CloudWatch Logs resource policy EventBridge needs to deliver into one log group."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "EventBridgeToClusterLog",
                "Effect": "Allow",
                "Principal": {"Service": ["events.amazonaws.com", "delivery.logs.amazonaws.com"]},
                "Action": ["logs:CreateLogStream", "logs:PutLogEvents"],
                "Resource": f"{log_group_arn}:*",
            }
        ],
    }


def record_node_events(
    name: str,
    group_name: pulumi.Input[str],
    spot: bool,
    kms_key_arn: pulumi.Input[str],
    tags: dict[str, str],
    parent: pulumi.Resource,
    identity: StackIdentity,
    role: str,
) -> aws.cloudwatch.LogGroup:
    """A KMS-encrypted log group and the rules that feed it; children of ``parent``."""
    child = pulumi.ResourceOptions(parent=parent)
    log = aws.cloudwatch.LogGroup(
        child_name(name, "events"),
        name=node_events_group(identity, role),
        kms_key_id=kms_key_arn,
        retention_in_days=LOG_RETENTION_DAYS,
        tags=tags,
        opts=child,
    )
    # Resource policies are per account and region (at most 10): one per cluster, scoped to
    # its own log group.
    aws.cloudwatch.LogResourcePolicy(
        child_name(name, "events-policy"),
        policy_name=node_events_policy(identity, role),
        policy_document=log.arn.apply(lambda arn: json.dumps(events_to_logs_policy(arn))),
        opts=child,
    )
    patterns: dict[str, pulumi.Input[str]] = {
        "group-events": pulumi.Output.from_input(group_name).apply(group_event_pattern)
    }
    if spot:
        patterns["spot-events"] = spot_event_pattern()
    for role, pattern in patterns.items():
        rule = aws.cloudwatch.EventRule(
            child_name(name, role),
            description=f"gpu-cluster {name}: {role.replace('-', ' ')}",
            event_pattern=pattern,
            tags=tags,
            opts=child,
        )
        aws.cloudwatch.EventTarget(
            child_name(name, f"{role}-log"), rule=rule.name, arn=log.arn, opts=child
        )
    return log
