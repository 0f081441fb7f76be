"""ServingStack: the inference stage - the cluster's key, role and network (across the service's
zones), the pinned Deep Learning AMI, and the InferenceService; the data comes from the data
stack (model repositories are a prefix of its bucket, read through the S3 gateway endpoint)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.ami import AmiChoice, resolve_ami
from gpu_cluster.components.catalog import InstanceFacts
from gpu_cluster.components.cidr import SubnetLayout, service_zone_subnets
from gpu_cluster.components.cluster import StorageArgs
from gpu_cluster.components.cost_controls import CostControls
from gpu_cluster.components.dashboard import (
    BurnPrices,
    ServingMetrics,
    stack_dashboard,
    stack_spec,
)
from gpu_cluster.components.inference import InferenceService
from gpu_cluster.components.inference_args import InferenceArgs
from gpu_cluster.components.launch_template import RootVolume
from gpu_cluster.components.names import (
    StackIdentity,
    dashboard_name,
    load_balancer_name,
    model_metrics_log_group,
    node_log_group,
    runtime_identity,
    target_group_name,
    waf_log_group,
    waf_log_group_prefix,
    web_acl_name,
)
from gpu_cluster.components.naming import CLUSTER_TAG, child_name
from gpu_cluster.components.network import ClusterNetwork, ClusterNetworkArgs, ExistingNetwork
from gpu_cluster.components.node_logs import node_log
from gpu_cluster.components.policies import log_group_writer_policy
from gpu_cluster.components.purchase import OnDemand, Purchase
from gpu_cluster.components.security import ClusterSecurity, ClusterSecurityArgs
from gpu_cluster.components.serving_config import ServingConfig
from gpu_cluster.components.serving_group import LIFECYCLE_HOOK
from gpu_cluster.components.stack_cost_controls import CostControlArgs, StackCostControls
from gpu_cluster.components.user_data import ServingBoot, render_serving_user_data

TRITON_METRICS_PORT = 8002


def metrics_log_policy(log_group_arn: str) -> dict[str, Any]:
    """The CloudWatch agent writes the model server's metrics into this log group only."""
    return log_group_writer_policy("ModelServerMetrics", log_group_arn)


@dataclass
class ServingStackArgs:
    facts: InstanceFacts
    serving: ServingConfig
    region: str
    layout: SubnetLayout | None  # None with existing_network
    storage: StorageArgs
    purchase: Purchase = field(default_factory=OnDemand)
    ami_ssm_parameter: str | None = None
    ami_id: str | None = None
    ami_release: str | None = None
    root_volume: RootVolume = field(default_factory=RootVolume)
    identity: StackIdentity | None = None  # whose names (None: the running stack's)
    cost_controls: CostControls = field(default_factory=CostControls)
    burn: BurnPrices = field(default_factory=BurnPrices)  # the dashboard's node price
    existing_network: ExistingNetwork | None = None  # the user's VPC and subnets
    tags: dict[str, str] = field(default_factory=dict)


class ServingStack(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: ServingStackArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:serving:ServingStack", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        identity = aws.get_caller_identity_output(opts=invoke)
        partition = aws.get_partition_output(opts=invoke).partition
        bucket_arn = pulumi.Output.concat("arn:", partition, ":s3:::", args.storage.bucket_name)
        serving = args.serving
        ids = args.identity or runtime_identity(name, args.region)
        self.security = ClusterSecurity(
            child_name(name, "security"),
            ClusterSecurityArgs(
                account_id=identity.account_id,
                partition=partition,
                region=args.region,
                data_bucket_arn=bucket_arn,
                extra_key_arns=[args.storage.data_key_arn] if args.storage.data_key_arn else [],
                protect_key=False,
                autoscaling=True,
                identity=ids,
                cluster=name,
                alert_topic=args.cost_controls.alerts,
                # the web ACL's logs (aws-waf-logs-..., components/waf.py) under the stack's key
                extra_log_group_prefixes=(
                    (waf_log_group_prefix(ids),) if serving.firewall.enabled else ()
                ),
                tags=args.tags,
            ),
            child,
        )
        # a created network's further zones, addressed by zone letter (cidr.zone_slots); an
        # existing one has the user's subnets, one per zone
        extra_zones = (
            tuple(
                (zone, private, public)
                for zone, (private, public) in zip(
                    serving.zones[1:],
                    service_zone_subnets(args.layout, serving.zones[1:]),
                    strict=True,
                )
            )
            if args.layout
            else ()
        )
        self.network = ClusterNetwork(
            child_name(name, "network"),
            ClusterNetworkArgs(
                layout=args.layout,
                availability_zone=serving.zones[0],
                region=args.region,
                account_id=identity.account_id,
                kms_key_arn=self.security.key.arn,
                identity=ids,
                extra_zones=extra_zones,
                existing=args.existing_network,
                tags=args.tags,
            ),
            child,
        )
        self.ami = resolve_ami(
            AmiChoice(
                architecture=args.facts.architecture,
                image_id=args.ami_id,
                ssm_parameter=args.ami_ssm_parameter,
                release=args.ami_release,
            ),
            invoke,
        )
        # Triton's Prometheus metrics, as CloudWatch embedded-metric logs (the key's Logs
        # statement covers /gpu-cluster/<cluster>-* log groups).
        metrics_port = TRITON_METRICS_PORT if serving.server_kind == "triton" else None
        metrics_group = aws.cloudwatch.LogGroup(
            child_name(name, "model-server-metrics"),
            name=model_metrics_log_group(ids, ""),
            kms_key_id=self.security.key.arn,
            retention_in_days=365,
            tags=args.tags,
            opts=child,
        )
        metrics_access = aws.iam.RolePolicy(
            child_name(name, "model-server-metrics-access"),
            role=self.security.role.name,
            policy=metrics_group.arn.apply(lambda arn: json.dumps(metrics_log_policy(arn))),
            opts=child,
        )
        # the units' log lines (no metric filters: an inference node runs no health check)
        self.node_log, node_log_access = node_log(
            name, ids, self.security.key.arn, self.security.role.name, args.tags, child
        )
        boot = pulumi.Output.from_input(args.storage.bucket_name).apply(
            lambda bucket: render_serving_user_data(
                ServingBoot(
                    cluster=name,
                    region=args.region,
                    gpus_per_node=max(1, int(args.facts.gpus)),
                    nvme_disk_count=args.facts.nvme_disk_count,
                    bucket=bucket,
                    model_prefix=serving.model_prefix,
                    server_kind=serving.server_kind,
                    image=serving.image,
                    port=serving.port,
                    server_args=serving.server_args,
                    readiness_path=serving.readiness_path,
                    batch_sizes=serving.preferred_batch_sizes,
                    queue_delay_us=serving.max_queue_delay_us,
                    warmup_seconds=serving.warmup_seconds,
                    lifecycle_hook=LIFECYCLE_HOOK,
                    metrics_port=metrics_port,
                    metrics_log_group=model_metrics_log_group(ids, ""),
                    stack_id=ids.stack_id,
                    node_log_group=node_log_group(ids),
                )
            )
        )
        self.service = InferenceService(
            child_name(name, "service"),
            InferenceArgs(
                serving=serving,
                facts=args.facts,
                load_balancer_name=load_balancer_name(ids, ""),
                target_group_name=target_group_name(ids, "", serving.port),
                web_acl_name=web_acl_name(ids),
                waf_log_group=waf_log_group(ids),
                region=args.region,
                account_id=identity.account_id,
                partition=partition,
                vpc_id=self.network.vpc_id,
                private_subnet_ids=self.network.service_private_subnet_ids,
                public_subnet_ids=self.network.service_public_subnet_ids,
                node_security_group_id=self.network.node_security_group.id,
                extra_security_group_ids=(
                    args.existing_network.security_group_ids if args.existing_network else ()
                ),
                node_role_name=self.security.role.name,
                instance_profile_arn=self.security.instance_profile.arn,
                kms_key_arn=self.security.key.arn,
                ami_id=self.ami.image_id,
                root_device_name=self.ami.root_device,
                ami_min_root_gib=self.ami.min_root_gib,
                user_data=boot,
                purchase=args.purchase,
                root_volume=args.root_volume,
                boot_dependencies=[
                    *self.network.boot_dependencies,
                    *self.security.boot_dependencies,
                    metrics_access,
                    node_log_access,
                ],
                tags={**args.tags, CLUSTER_TAG: name},
            ),
            child,
        )
        StackCostControls(
            child_name(name, "cost"),
            CostControlArgs(
                controls=args.cost_controls,
                stack=ids.stack,
                identity=ids,
                region=args.region,
                account_id=identity.account_id,
                partition=partition,
                kms_key_arn=self.security.key.arn,
                node_count=serving.max_nodes,
                group=self.service.group,
                serving_min=serving.min_nodes,
                tags=args.tags,
            ),
            child,
        )
        self.url = self.service.url
        service = self.service
        self.dashboard, self.dashboard_url = stack_dashboard(
            child_name(name, "dashboard"),
            dashboard_name(ids),
            stack_spec(
                ids,
                args.region,
                f"{args.facts.instance_type} serving",  # no count: scaling leaves it as it is
                args.cost_controls,
                args.burn,
                health=False,  # an inference node runs no health check: the ELB's is its own
            ),
            child,
            pulumi.Output.all(
                service.load_balancer.arn_suffix,
                service.target_group.arn_suffix,
                service.group.name,
            ).apply(
                lambda v: {"serving": ServingMetrics(*v, triton=serving.server_kind == "triton")}
            ),
        )
        self.register_outputs(
            {
                "url": self.url,
                "groupName": self.service.group.name,
                "dashboardUrl": self.dashboard_url,
            }
        )
