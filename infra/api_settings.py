"""The keyword arguments of the public Args (infra/api.py), typed for editors and type checkers:
the stack file's keys (infra/spec.py) in snake_case, every one optional as in a stack file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal, Required, TypedDict

import pulumi


class RootVolumeSettings(TypedDict, total=False):
    size_gib: int
    iops: int
    throughput: int


class NetworkSettings(TypedDict, total=False):
    vpc_cidr: str
    private_subnet_cidr: str | None
    public_subnet_cidr: str | None
    avoid_cidrs: Sequence[str]
    nat_gateway: bool
    public_ip: bool
    vpc_id: pulumi.Input[str] | None
    subnet_ids: Sequence[pulumi.Input[str]]
    load_balancer_subnet_ids: Sequence[pulumi.Input[str]]
    security_group_ids: Sequence[pulumi.Input[str]]
    create_endpoints: Sequence[str]


class StorageSettings(TypedDict, total=False):
    source: Literal["stack", "create", "existing"]
    stack: str | None
    bucket: pulumi.Input[str] | None
    kms_key_arn: pulumi.Input[str] | None


class FsxSettings(TypedDict, total=False):
    deployment_type: Literal["PERSISTENT_2", "SCRATCH_2"]
    storage_capacity_gib: int
    throughput_per_tib: int


class AmiSettings(TypedDict, total=False):
    id: str | None
    ssm_parameter: str | None
    release: str | None
    architecture: Literal["x86_64", "arm64"] | None


class SpotSettings(TypedDict, total=False):
    max_price: float | None
    on_demand_base: int
    fallback_types: Sequence[str]


class CapacityReservationSettings(TypedDict, total=False):
    id: str | None
    resource_group_arn: str | None
    create: bool
    end_date: str | None


class CapacityBlockSettings(TypedDict, total=False):
    id: str | None


class CommitmentSettings(TypedDict, total=False):
    savings_plan: Literal["1y", "3y"] | None
    plan_type: Literal["compute", "ec2-instance"]
    reserved_instances: Literal["1y", "3y"] | None
    offering_class: Literal["standard", "convertible"]
    payment: Literal["no-upfront", "partial-upfront", "all-upfront"]


class IdleStopSettings(TypedDict, total=False):
    enabled: bool
    minutes: int | None
    below_percent: float | None


class ScheduleSettings(TypedDict, total=False):
    days: str
    start: Required[str]
    stop: Required[str]
    timezone: str


class BudgetSettings(TypedDict, total=False):
    monthly_usd: Required[float]
    stop_at_limit: bool
    activate_cost_allocation_tag: bool


class JobsSettings(TypedDict, total=False):
    repositories: Sequence[str]


class ModelServerSettings(TypedDict, total=False):
    kind: Literal["triton", "vllm"]
    image: str | None
    port: int
    readiness_path: str | None
    args: Sequence[str]


class BatchingSettings(TypedDict, total=False):
    preferred_batch_sizes: Sequence[int]
    max_queue_delay_microseconds: int


class EndpointTlsSettings(TypedDict, total=False):
    policy: str
    certificate_arn: str | None
    domain: str | None
    hosted_zone_id: str | None


class InferenceScalingSettings(TypedDict, total=False):
    metric: Literal["requestCount", "gpuUtilization", "queueTime"]
    target: float


class OidcSettings(TypedDict, total=False):
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    user_info_endpoint: str
    client_id: str
    client_secret: pulumi.Input[str]


class CognitoSettings(TypedDict, total=False):
    user_pool_arn: str
    user_pool_client_id: str
    user_pool_domain: str


class InferenceAccessSettings(TypedDict, total=False):
    cidrs: Sequence[str]
    prefix_lists: Sequence[str]
    api_keys: Sequence[pulumi.Input[str]]
    api_key_header: str
    oidc: OidcSettings
    cognito: CognitoSettings
    public: bool


class InferenceWafSettings(TypedDict, total=False):
    enabled: bool
    rate_limit: int
    rate_window_seconds: Literal[60, 120, 300, 600]


class InferenceRolloutSettings(TypedDict, total=False):
    min_healthy_percent: int


class InferenceSettings(TypedDict, total=False):
    availability_zones: Sequence[str]
    min_nodes: int
    max_nodes: int
    model_repository: str
    server: ModelServerSettings
    batching: BatchingSettings
    tls: EndpointTlsSettings
    scaling: InferenceScalingSettings
    warmup_seconds: int
    deletion_protection: bool
    access: InferenceAccessSettings
    waf: InferenceWafSettings
    rollout: InferenceRolloutSettings


PurchaseOption = Literal["on-demand", "spot", "capacity-reservation", "capacity-block"]


class NodeGroupSettings(TypedDict, total=False):
    """GpuNodeGroupArgs: the nodes' keys."""

    availability_zone: str | None
    instance_type: str | None
    gpu: str | None
    gpus_per_node: int | None
    nodes: int
    purchase_option: PurchaseOption
    spot: SpotSettings | None
    capacity_reservation: CapacityReservationSettings | None
    capacity_block: CapacityBlockSettings | None
    efa: bool | None
    root_volume: RootVolumeSettings
    ami: AmiSettings
    tags: Mapping[str, str]


class ClusterSettings(NodeGroupSettings, total=False):
    """GpuClusterArgs: a cluster stack's keys (its name, role and secrets are arguments)."""

    network: NetworkSettings
    storage: StorageSettings
    fsx: FsxSettings | None
    container_network: Literal["host", "bridge"]
    jobs: JobsSettings | None
    idle_stop: IdleStopSettings | None
    schedule: ScheduleSettings | None
    expires_at: str | None
    gang_timeout_minutes: int
    budget: BudgetSettings | None
    commitment: CommitmentSettings | None
    alert_emails: Sequence[str]


class ServingSettings(ClusterSettings, total=False):
    """InferenceServiceArgs: a serving stack's keys."""

    inference: InferenceSettings


class DataSettings(TypedDict, total=False):
    """DataStoreArgs: the bucket's name (`bucket`), the data stack's account guards and tags."""

    bucket: pulumi.Input[str]
    storage: StorageSettings
    audit_trail: bool
    ebs_encryption_by_default: bool
    snapshot_block_public_access: bool
    tags: Mapping[str, str]
