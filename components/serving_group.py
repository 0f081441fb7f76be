"""The serving node group: launch template, Auto Scaling group with the launch hook that holds
a node out of service until its model answers, and the target-tracking policy. Created as
children of the InferenceService (same names and parents as before the split).

Updates that drop no request (terraform-provider-aws internal/service/autoscaling/group.go,
resourceGroupCreate/Update and statusGroupCapacity):
- The group is replaced only when an input the provider cannot change in place changes: its
  name (autonamed: never) and its initial lifecycle hooks (ForceNew: warmupSeconds is the
  hook's heartbeat timeout); infra/diff/replace_rules.py holds the same list.
- A replaced group (it is autonamed, so the engine creates the new one first and deletes the old
  one at the end: step_generator.go) is created with ``min_elb_capacity`` = the minimum: the
  create waits, up to ``wait_for_capacity_timeout``, until that many nodes are InService, healthy
  and healthy in the target group, so the old group is drained only once the new one serves.
  Not ``wait_for_elb_capacity``: on an update that changes min_size the provider wants EXACTLY
  that many healthy targets, which a group that target tracking has scaled out never has - the
  update would wait out the timeout and fail. ``ignore_failed_scaling_activities``: a failed
  launch (a spot or zone shortfall, a node abandoned by its launch hook) is retried by the
  group instead of failing the step at once.
- A new AMI or boot (a new launch-template version) updates the group in place and starts an
  instance refresh (the provider starts it and does not wait for it): Rolling, with the stack's
  minimum healthy percentage, the highest maximum AWS allows beside it, the warm-up, matching
  nodes skipped, and rolled back when it fails.
- Scale-in never picks a node that is loading its model: new nodes are protected from scale-in
  and lift it themselves once in service (the warm-up after that blocks dynamic scale-in by
  itself: EC2 Auto Scaling User Guide, "Set the default instance warmup")."""

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
QUEUE_NAMESPACE = "gpu-cluster/ModelServer"  # the CloudWatch agent's EMF (boot/*-gpu-metrics.sh)
QUEUE_METRIC = "nv_inference_queue_duration_us"  # Triton: microseconds queued, a counter
SUCCESS_METRIC = "nv_inference_request_success"  # Triton: requests answered, a counter

# What a new node takes before its model loads (the warm-up, warmupSeconds, runs after). Not
# measured on AWS; the sources: the Deep Learning AMI boots in 2-3 min and the boot steps
# before the model server (NVMe scratch, Docker) take about 2 more (docs/guides/
# spot-interruptions.md, "Boot and health check"); Triton's and vLLM's images are 8-10 GB
# compressed (nvcr.io and Docker Hub listings), 2-5 min through the NAT gateway at 50-100 MB/s
# plus their extraction; the model copy from S3 runs at several hundred MB/s per node.
BOOT_SECONDS = 5 * 60
IMAGE_PULL_SECONDS = 10 * 60
# Once the new group serves, the old one is drained and deleted: the target group's
# deregistration delay (components/inference.py, 60 s) and EC2's shutdown of each node.
DRAIN_SECONDS = 10 * 60


def cold_start_seconds(warmup_seconds: int) -> int:
    """The longest a new node may take from launch to serving: boot, image pull, warm-up."""
    return BOOT_SECONDS + IMAGE_PULL_SECONDS + warmup_seconds


def capacity_timeout(warmup_seconds: int) -> str:
    """wait_for_capacity_timeout: a Go duration (time.ParseDuration) covering a cold start;
    the group launches its minimum at once, so a large minimum waits no longer than one node."""
    return f"{-(-cold_start_seconds(warmup_seconds) // 60)}m"


def group_timeouts(warmup_seconds: int) -> pulumi.CustomTimeouts:
    """The provider declares update and delete timeouts (10 min each: target-group attachment
    waits, the old group's drain) and none for create, whose wait is wait_for_capacity_timeout
    (pulumi/pulumi#12987); each is set to outlast a cold start and the drain."""
    minutes = f"{-(-(cold_start_seconds(warmup_seconds) + DRAIN_SECONDS) // 60)}m"
    return pulumi.CustomTimeouts(create=minutes, update=minutes, delete=minutes)


def max_healthy_percent(min_healthy: int) -> int:
    """The most a refresh may launch beside the nodes it keeps: AWS takes 100-200, at most 100
    above the minimum (components/aws_limits.py), so a minimum of 100 launches each
    replacement before it terminates an old node."""
    return min(200, min_healthy + 100)


def instance_refresh(serving: ServingConfig) -> aws.autoscaling.GroupInstanceRefreshArgsDict:
    return {
        "strategy": "Rolling",
        "preferences": {
            "min_healthy_percentage": serving.min_healthy_percent,
            "max_healthy_percentage": max_healthy_percent(serving.min_healthy_percent),
            "instance_warmup": str(serving.warmup_seconds),
            "skip_matching": True,
            "auto_rollback": True,
            # a node still protected is one loading its model, or one whose boot could not
            # lift its protection: replaced all the same
            "scale_in_protected_instances": "Refresh",
        },
    }


@dataclass
class ServingGroupArgs:
    service: InferenceArgs
    target_group_arn: pulumi.Input[str]
    after: list[
        pulumi.Resource
    ]  # what the nodes need before they launch (the load balancer's rule)


def complete_launch_policy(group_arn: str) -> dict[str, Any]:
    """A node may keep its launch hook open, put itself in service once its model server is
    ready and lift its scale-in protection then - in this stack's group only (found by the
    group's name prefix: the group is autonamed, so a replacement can be created before the
    old one is deleted)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "CompleteOwnLaunch",
                "Effect": "Allow",
                "Action": [
                    "autoscaling:CompleteLifecycleAction",
                    "autoscaling:RecordLifecycleActionHeartbeat",
                    "autoscaling:SetInstanceProtection",  # lifts its own, once in service
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
    if serving.scaling_metric == "queueTime":
        return {
            "customized_metric_specification": queue_time_metric(group_name),
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


def queue_time_metric(
    group_name: pulumi.Input[str],
) -> aws.autoscaling.PolicyTargetTrackingConfigurationCustomizedMetricSpecificationArgsDict:
    """The group's mean queue time per request, in milliseconds: Triton's two counters (the
    CloudWatch agent sends a counter as its delta since the last scrape: CloudWatch User Guide,
    "Prometheus metric type conversion by the CloudWatch agent"), summed over the group's nodes
    each minute, in target-tracking metric math."""

    def counter(
        id_: str, metric: str
    ) -> (
        aws.autoscaling.PolicyTargetTrackingConfigurationCustomizedMetricSpecificationMetricArgsDict
    ):
        return {
            "id": id_,
            "metric_stat": {
                "metric": {
                    "metric_name": metric,
                    "namespace": QUEUE_NAMESPACE,
                    "dimensions": [{"name": "AutoScalingGroupName", "value": group_name}],
                },
                "stat": "Sum",
            },
            "return_data": False,
        }

    return {
        "metrics": [
            counter("queued", QUEUE_METRIC),
            counter("answered", SUCCESS_METRIC),
            {
                "id": "queue_ms",
                "expression": "IF(answered > 0, queued / answered / 1000, 0)",
                "label": "mean queue time per request (ms)",
                "return_data": True,
            },
        ]
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
        # a new group serves its minimum before the old one drains (see the module's docstring)
        # healthy targets, each node counting 1 (the provider counts a node's WeightedCapacity,
        # and the spot mixed-instances policy sets none: components/purchase.py)
        min_elb_capacity=s.min_nodes,
        wait_for_capacity_timeout=capacity_timeout(s.warmup_seconds),
        ignore_failed_scaling_activities=True,
        # a node loading its model is never the one scale-in picks; its boot lifts this once
        # it serves (boot/gpu-cluster-model-server.sh)
        protect_from_scale_in=True,
        instance_refresh=instance_refresh(s),
        tags=[
            {"key": k, "value": v, "propagate_at_launch": True}
            for k, v in sorted({**a.tags, "Name": child_name(name, "node")}.items())
        ],
        opts=pulumi.ResourceOptions(
            parent=opts.parent,
            depends_on=[*a.boot_dependencies, *group.after, launch],
            custom_timeouts=group_timeouts(s.warmup_seconds),
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
