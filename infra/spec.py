"""The typed stack-config spec (pydantic, extra="forbid"), keyed as in Pulumi.<stack>.yaml."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from gpu_cluster.components.names import DEFAULT_PROJECT

PROJECT = DEFAULT_PROJECT  # Pulumi.yaml's name: the names room keeps it (components/names.py)
DEFAULT_VPC_CIDR = "10.42.0.0/16"
# The project's own data stack, as self-managed backends name it (Pulumi Cloud: <org>/...).
DEFAULT_DATA_STACK = "organization/gpu-cluster/data"
# A GPU node takes 5-15 minutes from launch to a passed health check (README, "Time to
# resume"); twice that before a partial gang is called a capacity failure.
DEFAULT_GANG_TIMEOUT_MINUTES = 30
MIN_GANG_TIMEOUT_MINUTES = 10
GP3_MIN_GIB, GP3_MAX_GIB = 8, 65536
GP3_MIN_IOPS, GP3_MAX_IOPS = 3000, 80000
GP3_MIN_THROUGHPUT, GP3_MAX_THROUGHPUT = 125, 2000
GP3_IOPS_PER_GIB = 500
GP3_MIBPS_PER_IOPS = 0.25


def whole_number(value: Any) -> Any:
    """Config integers: digits only ("4", "-1"); not "4.0", "1_0", " 4 " or true."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError("expected a whole number")
    if isinstance(value, str) and not re.fullmatch(r"-?[0-9]+", value):
        raise ValueError("expected a whole number written with digits only")
    return int(value)


ConfigInt = Annotated[int, BeforeValidator(whole_number)]


YAML11_TRUE = ("y", "yes", "on")
YAML11_FALSE = ("n", "no", "off")


def true_or_false(value: Any) -> Any:
    """Config booleans: true or false (YAML booleans, or the strings Pulumi stores them as);
    not "yes", "on", "1" or 1, which pydantic would otherwise take. Pulumi's YAML is 1.2
    (gopkg.in/yaml.v3), where yes/no/on/off are strings, and its Python SDK's get_bool takes
    only true/True/false/False."""
    if isinstance(value, bool):
        return value
    if value in ("true", "false", "True", "False"):
        return value in ("true", "True")
    word = value.lower() if isinstance(value, str) else None
    if word in YAML11_TRUE + YAML11_FALSE:
        raise PydanticCustomError(
            "bool_strict",
            "Pulumi reads '{word}' as a string, not a boolean (its YAML is 1.2): write true or "
            "false",
            {"word": value, "meant": "true" if word in YAML11_TRUE else "false"},
        )
    raise PydanticCustomError("bool_strict", "expected true or false")


ConfigBool = Annotated[bool, BeforeValidator(true_or_false)]


class StrictModel(BaseModel):
    # A number where text is expected is the text of its digits, as the program receives it
    # (`pulumi config set --path ami.release 20261009` stores a number; YAML `cost-center: 1234`).
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, frozen=True, coerce_numbers_to_str=True
    )


class RootVolumeSpec(StrictModel):
    size_gib: ConfigInt = Field(200, ge=GP3_MIN_GIB, le=GP3_MAX_GIB)
    iops: ConfigInt = Field(GP3_MIN_IOPS, ge=GP3_MIN_IOPS, le=GP3_MAX_IOPS)
    throughput: ConfigInt = Field(GP3_MIN_THROUGHPUT, ge=GP3_MIN_THROUGHPUT, le=GP3_MAX_THROUGHPUT)


class NetworkSpec(StrictModel):
    vpc_cidr: str = DEFAULT_VPC_CIDR
    private_subnet_cidr: str | None = None
    public_subnet_cidr: str | None = None
    avoid_cidrs: list[str] = Field(default_factory=list)
    nat_gateway: ConfigBool = True
    public_ip: ConfigBool = False
    # A network the user already has (infra/validation/existing_network.py): gpu-cluster then
    # creates no VPC, subnet, route, NAT or internet gateway, and natGateway says whether the
    # node subnet already reaches the internet.
    vpc_id: str | None = None
    subnet_ids: list[str] = Field(default_factory=list)
    load_balancer_subnet_ids: list[str] = Field(default_factory=list)
    security_group_ids: list[str] = Field(default_factory=list)
    create_endpoints: list[str] = Field(default_factory=list)


class StorageSpec(StrictModel):
    source: Literal["stack", "create", "existing"] = "stack"
    stack: str | None = None
    bucket: str | None = None
    kms_key_arn: str | None = None


class FsxSpec(StrictModel):
    """FSx for Lustre linked to the data bucket (set to turn it on)."""

    deployment_type: Literal["PERSISTENT_2", "SCRATCH_2"] = "PERSISTENT_2"
    storage_capacity_gib: ConfigInt = Field(1200, ge=1200, le=2_073_600)
    throughput_per_tib: ConfigInt = 250  # MB/s per TiB: 125, 250, 500 or 1000


class AmiSpec(StrictModel):
    id: str | None = None
    ssm_parameter: str | None = None
    release: str | None = None  # Deep Learning AMI release YYYYMMDD, or "latest"
    architecture: Literal["x86_64", "arm64"] | None = None


class SpotSpec(StrictModel):
    """Spot settings (purchaseOption: spot)."""

    max_price: float | None = Field(None, gt=0)  # USD per instance-hour; unset = on-demand price
    on_demand_base: ConfigInt = Field(0, ge=0)  # the first N nodes on-demand (e.g. rendezvous)
    fallback_types: list[str] = Field(default_factory=list)


class CapacityReservationSpec(StrictModel):
    """An On-Demand Capacity Reservation (purchaseOption: capacity-reservation)."""

    id: str | None = None
    resource_group_arn: str | None = None
    create: ConfigBool = False
    end_date: str | None = None  # with create: RFC 3339 UTC, e.g. 2027-01-31T00:00:00Z


class CapacityBlockSpec(StrictModel):
    """A purchased EC2 Capacity Block for ML (purchaseOption: capacity-block)."""

    id: str | None = None


class IdleStopSpec(StrictModel):
    """Stop idle GPUs: unset = the stage's default (dev box 30 min, cluster 60 min, under 5%)."""

    enabled: ConfigBool = True
    minutes: ConfigInt | None = Field(None, ge=10, le=1440)
    below_percent: float | None = Field(None, gt=0, le=100)


class ScheduleSpec(StrictModel):
    """Working hours: the nodes start at `start` and stop at `stop` on `days`."""

    days: str = "MON-FRI"
    start: str
    stop: str
    timezone: str = "UTC"


class BudgetSpec(StrictModel):
    monthly_usd: float = Field(gt=0)
    stop_at_limit: ConfigBool = False  # dev box only: a budget action stops it at 100%
    activate_cost_allocation_tag: ConfigBool = False  # management or standalone account


class ModelServerSpec(StrictModel):
    kind: Literal["triton", "vllm"] = "triton"
    image: str | None = None  # default: the kind's image (NVIDIA Triton, vLLM OpenAI server)
    port: ConfigInt = Field(8000, ge=1024, le=65535)
    readiness_path: str | None = None  # default: /v2/health/ready (Triton), /health (vLLM)
    args: list[str] = Field(default_factory=list)  # extra server arguments


class BatchingSpec(StrictModel):
    """Triton dynamic batching, written into every model's config.pbtxt at boot."""

    preferred_batch_sizes: list[ConfigInt] = Field(default_factory=lambda: [4, 8])
    max_queue_delay_microseconds: ConfigInt = Field(100, ge=0, le=1_000_000)


class EndpointTlsSpec(StrictModel):
    policy: str = "ELBSecurityPolicy-TLS13-1-2-Res-2021-06"
    certificate_arn: str | None = None  # an imported or existing ACM certificate, or
    domain: str | None = None  # a DNS-validated certificate for this name ...
    hosted_zone_id: str | None = None  # ... in this Route 53 hosted zone (+ the alias record)


class InferenceScalingSpec(StrictModel):
    metric: Literal["requestCount", "gpuUtilization"] = "requestCount"
    target: float = Field(100, gt=0)  # requests per node per minute, or GPU utilization %


class InferenceSpec(StrictModel):
    """role: inference - a model server behind an HTTPS load balancer, across zones."""

    availability_zones: list[str] = Field(default_factory=list)  # two or more
    min_nodes: ConfigInt = Field(2, ge=1)  # scaling needs a node to measure
    max_nodes: ConfigInt = Field(6, ge=1)
    model_repository: str = "models/"  # a prefix of the data bucket
    server: ModelServerSpec = Field(default_factory=ModelServerSpec)
    batching: BatchingSpec = Field(default_factory=BatchingSpec)
    tls: EndpointTlsSpec = Field(default_factory=EndpointTlsSpec)
    scaling: InferenceScalingSpec = Field(default_factory=InferenceScalingSpec)
    warmup_seconds: ConfigInt = Field(600, ge=60, le=3600)  # model download + load
    deletion_protection: ConfigBool = True  # set false before `pulumi destroy`


class JobsSpec(StrictModel):
    """`gpuc run` jobs (role: cluster): the ECR repositories whose images the nodes may pull
    (`--image`): names in the stack's account and region, or repository ARNs
    (infra/validation/jobs.py)."""

    repositories: list[str] = Field(default_factory=list)


PurchaseOption = Literal["on-demand", "spot", "capacity-reservation", "capacity-block"]


class StackSpec(StrictModel):
    """Every key a stack may set under the ``gpu-cluster:`` namespace (plus ``aws:region``)."""

    region: str
    role: Literal["cluster", "data", "inference"] = "cluster"
    cluster_name: str | None = None
    availability_zone: str | None = None
    instance_type: str | None = None
    gpu: str | None = None
    gpus_per_node: ConfigInt | None = Field(None, ge=1)
    nodes: ConfigInt = Field(1, ge=1)
    purchase_option: PurchaseOption = "on-demand"
    spot: SpotSpec | None = None
    capacity_reservation: CapacityReservationSpec | None = None
    capacity_block: CapacityBlockSpec | None = None
    efa: ConfigBool | None = None
    root_volume: RootVolumeSpec = Field(default_factory=RootVolumeSpec)
    network: NetworkSpec = Field(default_factory=NetworkSpec)
    storage: StorageSpec = Field(default_factory=StorageSpec)
    ami: AmiSpec = Field(default_factory=AmiSpec)
    fsx: FsxSpec | None = None
    container_network: Literal["host", "bridge"] = "host"  # IMDS hop limit 1, or 2 for bridge
    secrets: list[str] = Field(default_factory=list)  # names only (infra/secrets_config.py)
    jobs: JobsSpec | None = None  # training jobs' container images (`gpuc run --image`)
    # stop paying for idle GPUs (compute stacks)
    inference: InferenceSpec | None = None  # role: inference
    idle_stop: IdleStopSpec | None = None
    schedule: ScheduleSpec | None = None
    expires_at: str | None = None  # RFC 3339 UTC: the nodes stop then
    # all or nothing: a multi-node group short of its size after this long scales to 0 (0: off)
    gang_timeout_minutes: ConfigInt = Field(DEFAULT_GANG_TIMEOUT_MINUTES, ge=0, le=1440)
    budget: BudgetSpec | None = None
    alert_emails: list[str] = Field(default_factory=list)
    # data stack only: the audit trail and the account-level guards
    audit_trail: ConfigBool = False
    ebs_encryption_by_default: ConfigBool = False
    snapshot_block_public_access: ConfigBool = False
    tags: dict[str, str] = Field(default_factory=dict)

    @field_validator(
        "spot",
        "capacity_reservation",
        "capacity_block",
        "inference",
        "fsx",
        "idle_stop",
        "schedule",
        "budget",
        "jobs",
        mode="before",
    )
    @classmethod
    def settings_are_objects(cls, value: Any) -> Any:
        """Unset means not given; an explicit null is a mistake like any other non-mapping."""
        if value is None:
            raise ValueError("expected a mapping of settings, got null")
        return value


OBJECT_KEYS = frozenset(
    {
        "rootVolume",
        "network",
        "storage",
        "ami",
        "tags",
        "spot",
        "capacityReservation",
        "capacityBlock",
        "fsx",
        "secrets",
        "idleStop",
        "schedule",
        "budget",
        "inference",
        "jobs",
    }
)
LIST_KEYS = frozenset({"alertEmails"})  # JSON-decoded like objects, but lists
CONFIG_KEYS = frozenset(
    field.alias or name for name, field in StackSpec.model_fields.items() if name != "region"
)
