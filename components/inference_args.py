"""InferenceArgs: what the serving stack hands the InferenceService (the load balancer's side
and the node group's side read it; components/inference.py, components/serving_group.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi

from gpu_cluster.components.catalog import InstanceFacts
from gpu_cluster.components.launch_template import RootVolume
from gpu_cluster.components.purchase import OnDemand, Purchase
from gpu_cluster.components.serving_config import ServingConfig


@dataclass
class InferenceArgs:
    serving: ServingConfig
    facts: InstanceFacts
    load_balancer_name: str  # 32 characters at most (ELB)
    target_group_name: str
    region: str
    account_id: pulumi.Input[str]
    partition: pulumi.Input[str]
    vpc_id: pulumi.Input[str]
    private_subnet_ids: list[pulumi.Input[str]]
    public_subnet_ids: list[pulumi.Input[str]]
    node_security_group_id: pulumi.Input[str]
    node_role_name: pulumi.Input[str]
    instance_profile_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    ami_id: pulumi.Input[str]
    root_device_name: pulumi.Input[str]
    ami_min_root_gib: pulumi.Input[int]
    user_data: pulumi.Input[str]
    purchase: Purchase = field(default_factory=OnDemand)
    root_volume: RootVolume = field(default_factory=RootVolume)
    boot_dependencies: list[pulumi.Resource] = field(default_factory=list)
    extra_security_group_ids: tuple[str, ...] = ()  # the user's own groups on every node
    web_acl_name: str = ""  # components/names.py web_acl_name (components/waf.py)
    waf_log_group: str = ""  # components/names.py waf_log_group: aws-waf-logs-...
    tags: dict[str, str] = field(default_factory=dict)
