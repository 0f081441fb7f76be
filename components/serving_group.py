"""The serving node group: launch template, Auto Scaling group with the launch hook that holds
a node out of service until its model answers, and the target-tracking policy. Created as
children of the InferenceService (same names and parents as before the split)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.cost_controls import GPU_METRIC, METRIC_NAMESPACE
from gpu_cluster.components.inference_args import InferenceArgs
from gpu_cluster.components.launch_template import (
    encoded_user_data,
    metadata_options,
    root_block_device,
    tag_specifications,
)
from gpu_cluster.components.naming import child_name
from gpu_cluster.components.purchase import Spot, TemplateVersion, mixed_instances_policy
from gpu_cluster.components.serving_config import ServingConfig

LIFECYCLE_HOOK = "model-loaded"


@dataclass
class ServingGroupArgs:
    service: InferenceArgs
    target_group_arn: pulumi.Input[str]
    after: list[
        pulumi.Resource
    ]  # what the nodes need before they launch (the load balancer's rule)


def complete_launch_policy(group_arn: str) -> dict[str, Any]:
    """A node may keep its launch hook open and put itself in service once its model server
    is ready - in this stack's group only (found by the group's name prefix: the group is
    autonamed, so a replacement can be created before the old one is deleted)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "CompleteOwnLaunch",
                "Effect": "Allow",
                "Action": [
                    "autoscaling:CompleteLifecycleAction",
                    "autoscaling:RecordLifecycleActionHeartbeat",
                ],
                "Resource": group_arn,
            },
            {
                "Sid": "FindOwnGroup",
                "Effect": "Allow",
                "Action": "autoscaling:DescribeAutoScalingInstances",
                "Resource": "*",  # Describe calls take no resource scope
            },
        ],
    }


def group_arn_pattern(partition: str, region: str, account_id: str, group: str) -> str:
    return (
        f"arn:{partition}:autoscaling:{region}:{account_id}:autoScalingGroup:*:"
        f"autoScalingGroupName/{group}"
    )


def scaling_configuration(
    serving: ServingConfig, resource_label: pulumi.Input[str] | None, group_name: pulumi.Input[str]
) -> aws.autoscaling.PolicyTargetTrackingConfigurationArgsDict:
    if serving.scaling_metric == "requestCount":
        return {
            "predefined_metric_specification": {
                "predefined_metric_type": "ALBRequestCountPerTarget",
                "resource_label": resource_label,
            },
            "target_value": serving.scaling_target,
        }
    return {
        "customized_metric_specification": {
            "metric_name": GPU_METRIC,
            "namespace": METRIC_NAMESPACE,
            "statistic": "Average",
            "metric_dimensions": [{"name": "AutoScalingGroupName", "value": group_name}],
        },
        "target_value": serving.scaling_target,
    }


def serving_group(
    name: str, group: ServingGroupArgs, opts: pulumi.ResourceOptions
) -> aws.autoscaling.Group:
    """The service's launch template, the nodes' right to complete their launch hook, and the
    Auto Scaling group, as children of ``opts.parent``."""
    a = group.service
    child = pulumi.ResourceOptions(parent=opts.parent)
    s = a.serving
    template = aws.ec2.LaunchTemplate(
        child_name(name, "launch-template"),
        image_id=a.ami_id,
        instance_type=a.facts.instance_type,
        ebs_optimized="true",
        update_default_version=True,
        iam_instance_profile={"arn": a.instance_profile_arn},
        metadata_options=metadata_options("host"),
        monitoring={"enabled": True},
        vpc_security_group_ids=[a.node_security_group_id, *a.extra_security_group_ids],
        block_device_mappings=[
            root_block_device(a.root_device_name, a.root_volume, a.kms_key_arn, a.ami_min_root_gib)
        ],
        user_data=encoded_user_data(a.user_data),
        tag_specifications=tag_specifications(a.tags),
        tags=a.tags,
        opts=child,
    )
    version: TemplateVersion = {
        "id": template.id,
        "version": template.latest_version.apply(str),
    }
    spot = isinstance(a.purchase, Spot)
    launch = aws.iam.RolePolicy(
        child_name(name, "node-launch"),
        role=a.node_role_name,
        policy=pulumi.Output.all(a.partition, a.account_id).apply(
            lambda v: json.dumps(
                complete_launch_policy(
                    group_arn_pattern(v[0], a.region, v[1], f"{child_name(name, 'group')}-*")
                )
            )
        ),
        opts=child,
    )
    return aws.autoscaling.Group(
        child_name(name, "group"),
        min_size=s.min_nodes,
        max_size=s.max_nodes,
        vpc_zone_identifiers=a.private_subnet_ids,
        target_group_arns=[group.target_group_arn],
        health_check_type="ELB",
        health_check_grace_period=s.warmup_seconds,
        default_instance_warmup=s.warmup_seconds,
        launch_template=(None if spot else {"id": version["id"], "version": version["version"]}),
        mixed_instances_policy=(
            mixed_instances_policy(a.purchase, a.facts.instance_type, version, s.max_nodes)
            if isinstance(a.purchase, Spot)
            else None
        ),
        capacity_rebalance=spot,
        initial_lifecycle_hooks=[
            {
                "name": LIFECYCLE_HOOK,
                "lifecycle_transition": "autoscaling:EC2_INSTANCE_LAUNCHING",
                "heartbeat_timeout": s.warmup_seconds,
                "default_result": "ABANDON",
            }
        ],
        instance_maintenance_policy={
            "min_healthy_percentage": 100,
            "max_healthy_percentage": 200,
        },
        wait_for_capacity_timeout="0",  # nodes join as their models load, after `up`
        tags=[
            {"key": k, "value": v, "propagate_at_launch": True}
            for k, v in sorted({**a.tags, "Name": child_name(name, "node")}.items())
        ],
        opts=pulumi.ResourceOptions(
            parent=opts.parent, depends_on=[*a.boot_dependencies, *group.after, launch]
        ),
    )


def scaling_policy(
    name: str,
    serving: ServingConfig,
    group: aws.autoscaling.Group,
    resource_label: pulumi.Input[str],
    opts: pulumi.ResourceOptions,
) -> aws.autoscaling.Policy:
    """Target tracking on the serving group, counting a new node after the warm-up."""
    return aws.autoscaling.Policy(
        child_name(name, "scaling"),
        autoscaling_group_name=group.name,
        policy_type="TargetTrackingScaling",
        estimated_instance_warmup=serving.warmup_seconds,
        target_tracking_configuration=scaling_configuration(serving, resource_label, group.name),
        opts=opts,
    )
