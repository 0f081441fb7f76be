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

# A value set with `pulumi config set --secret`: offline, the stack file holds its ciphertext
# ({secure: ...}), which gpuc cannot and need not decrypt; the spec holds a stand-in for it.
# Under the Pulumi CLI the program receives the decrypted value (infra/secrets_config.py).
SECRET_STAND_IN = "[secret: encrypted in the stack file]"
SECRET_NOT_SHOWN = "(a secret value, not shown)"  # what a Problem says it received


def ciphertext_stand_in(value: Any) -> Any:
    """A secure value ({secure: ...}) as the stand-in; anything else as it is."""
    return SECRET_STAND_IN if isinstance(value, dict) and set(value) == {"secure"} else value


SecretText = Annotated[str, BeforeValidator(ciphertext_stand_in)]

# Config numbers are finite: pydantic's float also takes inf, nan and Infinity (as numbers or
# strings), and no price, budget, percentage or target means that (its error: finite_number).
ConfigFloat = Annotated[float, Field(allow_inf_nan=False)]


class StrictModel(BaseModel):
    # A number where text is expected is the text of its digits, as the program receives it
    # (`pulumi config set --path ami.release 20261009` stores a number; YAML `cost-center: 1234`).
    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, frozen=True, coerce_numbers_to_str=True
    )


class RootVolumeSpec(StrictModel):
    """Every node's gp3 root volume, encrypted with the cluster's KMS key."""

    size_gib: ConfigInt = Field(
        default=200, ge=GP3_MIN_GIB, le=GP3_MAX_GIB, description="size of the root volume in GiB"
    )
    iops: ConfigInt = Field(
        default=GP3_MIN_IOPS,
        ge=GP3_MIN_IOPS,
        le=GP3_MAX_IOPS,
        description=f"provisioned IOPS (at most {GP3_IOPS_PER_GIB} per GiB)",
    )
    throughput: ConfigInt = Field(
        default=GP3_MIN_THROUGHPUT,
        ge=GP3_MIN_THROUGHPUT,
        le=GP3_MAX_THROUGHPUT,
        description=f"throughput in MiB/s (at most {GP3_MIBPS_PER_IOPS} per IOPS)",
    )


class NetworkSpec(StrictModel):
    """The VPC gpu-cluster creates, or one you already have (vpcId, subnetIds, ...)."""

    vpc_cidr: str = Field(
        default=DEFAULT_VPC_CIDR, description="the address range of the VPC created"
    )
    private_subnet_cidr: str | None = Field(
        default=None, description="the nodes' subnet inside vpcCidr (unset: carved out of vpcCidr)"
    )
    public_subnet_cidr: str | None = Field(
        default=None,
        description="the public subnet (NAT gateway, load balancer) inside vpcCidr (unset: "
        "carved out of vpcCidr)",
    )
    avoid_cidrs: list[str] = Field(
        default_factory=list, description="ranges the VPC must not overlap (peered networks, VPN)"
    )
    nat_gateway: ConfigBool = Field(
        default=True,
        description="a NAT gateway for the nodes' way out; with vpcId: whether the node subnet "
        "already reaches the internet (false: air-gapped, the boot uses VPC endpoints)",
    )
    public_ip: ConfigBool = Field(default=False, description="public IP addresses on the nodes")
    # A network the user already has: infra/validation/existing_network.py
    vpc_id: str | None = Field(
        default=None,
        description="your own VPC (vpc- and 8 or 17 hex digits): gpu-cluster then creates no "
        "VPC, subnet, route, NAT or internet gateway",
    )
    subnet_ids: list[str] = Field(
        default_factory=list,
        description="with vpcId: the nodes' subnet, one for a training cluster, one per "
        "inference.availabilityZones zone (in order) for a service",
    )
    load_balancer_subnet_ids: list[str] = Field(
        default_factory=list,
        description="with vpcId, role inference only: one public subnet per zone for the load "
        "balancer",
    )
    security_group_ids: list[str] = Field(
        default_factory=list,
        description="with vpcId: your security groups added to every node interface (at most 4)",
    )
    create_endpoints: list[str] = Field(
        default_factory=list,
        description="with vpcId: the interface endpoints your VPC lacks, created in the node "
        "subnet",
    )


class StorageSpec(StrictModel):
    """Where the data bucket and its KMS key come from."""

    source: Literal["stack", "create", "existing"] = Field(
        default="stack",
        description="stack: the data stack's bucket and key (a StackReference); create: a "
        "bucket in this stack (a data stack); existing: a bucket and key you name",
    )
    stack: str | None = Field(
        default=None,
        description=f"with source stack: the data stack (unset: {DEFAULT_DATA_STACK}; Pulumi "
        "Cloud: <org>/gpu-cluster/data)",
    )
    bucket: str | None = Field(default=None, description="with source existing: the bucket's name")
    kms_key_arn: str | None = Field(
        default=None, description="with source existing: the ARN of the bucket's KMS key"
    )


class FsxSpec(StrictModel):
    """FSx for Lustre linked to the data bucket (set to turn it on)."""

    deployment_type: Literal["PERSISTENT_2", "SCRATCH_2"] = Field(
        default="PERSISTENT_2",
        description="PERSISTENT_2 (SCRATCH_2 is refused: it cannot use the cluster's KMS key)",
    )
    storage_capacity_gib: ConfigInt = Field(
        default=1200, ge=1200, le=2_073_600, description="1200 GiB or a multiple of 2400 GiB"
    )
    throughput_per_tib: ConfigInt = Field(
        default=250, description="MB/s per TiB of storage: 125, 250, 500 or 1000"
    )


class AmiSpec(StrictModel):
    """The nodes' image (unset: the bundled Deep Learning AMI release)."""

    id: str | None = Field(default=None, description="an AMI id (with architecture)")
    ssm_parameter: str | None = Field(
        default=None, description="an SSM parameter holding the AMI id"
    )
    release: str | None = Field(
        default=None,
        description='another Deep Learning AMI release, YYYYMMDD, or "latest" to follow '
        "AWS's SSM parameter",
    )
    architecture: Literal["x86_64", "arm64"] | None = Field(
        default=None, description="the architecture of ami.id"
    )


class SpotSpec(StrictModel):
    """Spot settings (purchaseOption: spot)."""

    max_price: ConfigFloat | None = Field(
        default=None, gt=0, description="USD per instance-hour (unset: up to the on-demand price)"
    )
    on_demand_base: ConfigInt = Field(
        default=0, ge=0, description="the first N nodes on-demand (e.g. the rendezvous node)"
    )
    fallback_types: list[str] = Field(
        default_factory=list,
        description="other instance types with the same GPU model and count, architecture and "
        "EFA layout, offered in the zone",
    )


class CapacityReservationSpec(StrictModel):
    """An On-Demand Capacity Reservation (purchaseOption: capacity-reservation)."""

    id: str | None = Field(default=None, description="an existing reservation's id (cr-...)")
    resource_group_arn: str | None = Field(
        default=None, description="a resource group of reservations (arn:aws:resource-groups:...)"
    )
    create: ConfigBool = Field(default=False, description="create a reservation with the stack")
    end_date: str | None = Field(
        default=None,
        description="with create: when it ends, RFC 3339 UTC, e.g. 2027-01-31T00:00:00Z (unset: "
        "until the stack is destroyed)",
    )


class CapacityBlockSpec(StrictModel):
    """A purchased EC2 Capacity Block for ML (purchaseOption: capacity-block)."""

    id: str | None = Field(
        default=None, description="the purchased block's reservation id (cr-...)"
    )


class CommitmentSpec(StrictModel):
    """A Savings Plan or Reserved Instances the account holds for these nodes' on-demand hours:
    the plan's estimate, `gpuc cost`, the dashboard's burn rate and `gpuc status` price them
    at its rate (AWS's price list files, infra/prices/commitment_prices.py)."""

    savings_plan: Literal["1y", "3y"] | None = Field(
        default=None, description="a Savings Plan of this term covers the nodes"
    )
    plan_type: Literal["compute", "ec2-instance"] = Field(
        default="compute",
        description="with savingsPlan: a Compute or an EC2 Instance Savings Plan",
    )
    reserved_instances: Literal["1y", "3y"] | None = Field(
        default=None, description="instead: Reserved Instances of this term for the nodes' type"
    )
    offering_class: Literal["standard", "convertible"] = Field(
        default="standard", description="with reservedInstances: the offering class"
    )
    payment: Literal["no-upfront", "partial-upfront", "all-upfront"] = Field(
        default="no-upfront", description="how it was paid (the upfront part spread over the term)"
    )


class IdleStopSpec(StrictModel):
    """Stop idle GPUs: unset = the stage's default (dev box 30 min, cluster 60 min, under 5%)."""

    enabled: ConfigBool = Field(default=True, description="false turns the idle stop off")
    minutes: ConfigInt | None = Field(
        default=None, ge=10, le=1440, description="idle this long (a multiple of 5) before the stop"
    )
    below_percent: ConfigFloat | None = Field(
        default=None, gt=0, le=100, description="idle: GPU utilization under this percentage"
    )


class ScheduleSpec(StrictModel):
    """Working hours: the nodes start at `start` and stop at `stop` on `days`."""

    days: str = Field(default="MON-FRI", description="days, e.g. MON-FRI, MON,WED,FRI or *")
    start: str = Field(description='when the nodes start, HH:MM (quote it: "08:00")')
    stop: str = Field(description='when the nodes stop, HH:MM (quote it: "20:00")')
    timezone: str = Field(default="UTC", description="an IANA time zone, e.g. Europe/Berlin")


class BudgetSpec(StrictModel):
    """A monthly AWS Budget on the stack's resources, alerting at 80 % and 100 %."""

    monthly_usd: ConfigFloat = Field(gt=0, description="the monthly budget in USD")
    stop_at_limit: ConfigBool = Field(
        default=False, description="dev box only: a budget action stops it at 100 %"
    )
    activate_cost_allocation_tag: ConfigBool = Field(
        default=False,
        description="activate the cost allocation tag the budget filters on (a management or "
        "standalone account)",
    )


class ModelServerSpec(StrictModel):
    """The model server every inference node runs."""

    kind: Literal["triton", "vllm"] = Field(default="triton", description="NVIDIA Triton or vLLM")
    image: str | None = Field(
        default=None, description="unset: the kind's image (NVIDIA Triton, vLLM OpenAI server)"
    )
    port: ConfigInt = Field(default=8000, ge=1024, le=65535, description="the server's HTTP port")
    readiness_path: str | None = Field(
        default=None, description="unset: /v2/health/ready (Triton), /health (vLLM)"
    )
    args: list[str] = Field(default_factory=list, description="extra server arguments")


class BatchingSpec(StrictModel):
    """Triton dynamic batching, written into every model's config.pbtxt at boot."""

    preferred_batch_sizes: list[ConfigInt] = Field(
        default_factory=lambda: [4, 8], description="the batch sizes Triton prefers to form"
    )
    max_queue_delay_microseconds: ConfigInt = Field(
        default=100, ge=0, le=1_000_000, description="how long a request may wait for a batch"
    )


class EndpointTlsSpec(StrictModel):
    """The HTTPS listener: certificateArn, or domain + hostedZoneId."""

    policy: str = Field(
        default="ELBSecurityPolicy-TLS13-1-2-Res-2021-06",
        description="the load balancer's TLS policy (TLS 1.3 and 1.2 with forward secrecy)",
    )
    certificate_arn: str | None = Field(
        default=None,
        description="an ACM certificate (imported or existing) in the stack's region, or "
        "else domain and hostedZoneId",
    )
    domain: str | None = Field(
        default=None, description="a DNS-validated certificate for this name, in hostedZoneId"
    )
    hosted_zone_id: str | None = Field(
        default=None, description="the Route 53 hosted zone of domain (it gets the alias record)"
    )


class InferenceScalingSpec(StrictModel):
    """Target tracking on the serving node group."""

    metric: Literal["requestCount", "gpuUtilization", "queueTime"] = Field(
        default="requestCount",
        description="what the node group scales on: requests per node, GPU utilization, or "
        "the model server's queue time (per-token servers)",
    )
    target: ConfigFloat = Field(
        default=100,
        gt=0,
        description="requests per node per minute, GPU utilization % (1-100), or queue time "
        "in milliseconds",
    )


class OidcSpec(StrictModel):
    """The load balancer signs browser users in with an OpenID Connect identity provider
    (the listener's authenticate-oidc action) before it forwards their requests."""

    issuer: str = Field(description="the provider's issuer URL (https://...)")
    authorization_endpoint: str = Field(description="its authorization endpoint (https://...)")
    token_endpoint: str = Field(description="its token endpoint (https://...)")
    user_info_endpoint: str = Field(description="its user info endpoint (https://...)")
    client_id: str = Field(description="this application's client id at the provider")
    client_secret: SecretText = Field(
        description="its client secret: set it with --secret (pulumi config set --secret --path "
        "inference.access.oidc.clientSecret ...)"
    )


class CognitoSpec(StrictModel):
    """The load balancer signs browser users in with an Amazon Cognito user pool (the
    listener's authenticate-cognito action) before it forwards their requests."""

    user_pool_arn: str = Field(description="the user pool's ARN")
    user_pool_client_id: str = Field(description="the app client id (with a client secret)")
    user_pool_domain: str = Field(description="the user pool's domain prefix")


class InferenceAccessSpec(StrictModel):
    """Who may call the service. Unset, the stack is refused: a service is never open to the
    internet by accident. CIDRs and prefix lists limit the network; an API key, OIDC or Cognito
    authenticate each request at the edge; `public: true` opens it to anyone, flagged."""

    cidrs: list[str] = Field(
        default_factory=list, description="IPv4 CIDRs that may connect, e.g. [203.0.113.0/24]"
    )
    prefix_lists: list[str] = Field(
        default_factory=list, description="managed prefix list ids that may connect (pl-...)"
    )
    api_keys: list[SecretText] = Field(
        default_factory=list,
        description="API keys checked at the edge (WAF, exact match on apiKeyHeader); set each "
        "with --secret; two while rotating",
    )
    api_key_header: str = Field(default="x-api-key", description="the header that carries the key")
    oidc: OidcSpec | None = Field(default=None, description="sign users in with OIDC")
    cognito: CognitoSpec | None = Field(default=None, description="sign users in with Cognito")
    public: ConfigBool = Field(
        default=False,
        description="true: anyone on the internet may call the service (flagged by gpuc plan "
        "and gpuc audit)",
    )


class InferenceWafSpec(StrictModel):
    """The AWS WAF web ACL in front of the load balancer: AWS's managed common rule set (its
    body-size rule counted, not blocked), known bad inputs, the IP reputation list, and a
    per-IP rate limit."""

    enabled: ConfigBool = Field(default=True, description="false: no web ACL (flagged by audit)")
    rate_limit: ConfigInt = Field(
        default=2000,
        ge=10,
        le=2_000_000_000,
        description="requests one IP address may send per rateWindowSeconds before WAF blocks it",
    )
    rate_window_seconds: Literal[60, 120, 300, 600] = Field(
        default=300, description="the rate limit's window: 60, 120, 300 or 600 seconds"
    )


class InferenceRolloutSpec(StrictModel):
    """How a new AMI or model version reaches the nodes: an instance refresh that launches
    each replacement before it terminates an old node."""

    min_healthy_percent: ConfigInt = Field(
        default=100,
        ge=0,
        le=100,
        description="the share of nodes that stay in service while nodes are replaced",
    )


class InferenceSpec(StrictModel):
    """role: inference - a model server behind an HTTPS load balancer, across zones."""

    availability_zones: list[str] = Field(
        default_factory=list, description="two or more zones of the region"
    )
    min_nodes: ConfigInt = Field(
        default=2, ge=1, description="the fewest nodes (scaling needs a node to measure)"
    )
    max_nodes: ConfigInt = Field(default=6, ge=1, description="the most nodes")
    model_repository: str = Field(default="models/", description="a prefix of the data bucket")
    server: ModelServerSpec = Field(default_factory=ModelServerSpec, description="the server")
    batching: BatchingSpec = Field(
        default_factory=BatchingSpec, description="Triton's dynamic batching"
    )
    tls: EndpointTlsSpec = Field(default_factory=EndpointTlsSpec, description="HTTPS")
    scaling: InferenceScalingSpec = Field(
        default_factory=InferenceScalingSpec, description="how the service scales"
    )
    warmup_seconds: ConfigInt = Field(
        default=600, ge=60, le=3600, description="a new node's model download and load"
    )
    deletion_protection: ConfigBool = Field(
        default=True, description="the load balancer's; set false before `pulumi destroy`"
    )
    access: InferenceAccessSpec | None = Field(
        default=None, description="who may call the service (required)"
    )
    waf: InferenceWafSpec = Field(
        default_factory=InferenceWafSpec, description="the AWS WAF web ACL (on by default)"
    )
    rollout: InferenceRolloutSpec = Field(
        default_factory=InferenceRolloutSpec, description="how new versions reach the nodes"
    )


class JobsSpec(StrictModel):
    """`gpuc run` jobs (role: cluster): the ECR repositories whose images the nodes may pull
    (`--image`): names in the stack's account and region, or repository ARNs
    (infra/validation/jobs.py)."""

    repositories: list[str] = Field(
        default_factory=list,
        description="ECR repository names in the stack's account and region, or repository "
        "ARNs (unset: the nodes get no ECR rights)",
    )


PurchaseOption = Literal["on-demand", "spot", "capacity-reservation", "capacity-block"]


class StackSpec(StrictModel):
    """Every key a stack may set under the ``gpu-cluster:`` namespace (plus ``aws:region``)."""

    region: str = Field(description="the AWS region, read from aws:region only")
    role: Literal["cluster", "data", "inference"] = Field(
        default="cluster",
        description="cluster (GPU nodes), inference (a model server behind HTTPS) or data (the "
        "long-lived bucket and key other stacks read)",
    )
    cluster_name: str | None = Field(
        default=None,
        description="the prefix of every resource name: 2-20 characters, lowercase letters, "
        "digits and '-', starting with a letter (unset: the stack name)",
    )
    availability_zone: str | None = Field(
        default=None,
        description="the one zone of the nodes, subnet and placement group (unset with your own "
        "network.subnetIds: the subnet's zone)",
    )
    instance_type: str | None = Field(
        default=None,
        description="an NVIDIA GPU instance type of the catalog, e.g. p4d.24xlarge (or gpu)",
    )
    gpu: str | None = Field(
        default=None,
        description="instead of instanceType: a GPU model, e.g. A100, resolved to the cheapest "
        "offered type",
    )
    gpus_per_node: ConfigInt | None = Field(
        default=None, ge=1, description="with gpu: how many GPUs each node has"
    )
    nodes: ConfigInt = Field(default=1, ge=1, description="the number of GPU nodes")
    purchase_option: PurchaseOption = Field(
        default="on-demand",
        description="how the nodes are bought (settings in spot, capacityReservation, "
        "capacityBlock)",
    )
    spot: SpotSpec | None = Field(default=None, description="purchaseOption spot: its settings")
    capacity_reservation: CapacityReservationSpec | None = Field(
        default=None,
        description="purchaseOption capacity-reservation: one of id, resourceGroupArn, or "
        "create (+ endDate)",
    )
    capacity_block: CapacityBlockSpec | None = Field(
        default=None, description="purchaseOption capacity-block: the purchased block"
    )
    commitment: CommitmentSpec | None = Field(
        default=None,
        description="a Savings Plan or Reserved Instances you hold: on-demand nodes are priced "
        "at its rate",
    )
    efa: ConfigBool | None = Field(
        default=None,
        description="EFA on every EFA-capable network card (unset: on when nodes > 1 and the "
        "type supports it)",
    )
    root_volume: RootVolumeSpec = Field(
        default_factory=RootVolumeSpec, description="every node's root volume"
    )
    network: NetworkSpec = Field(default_factory=NetworkSpec, description="the network")
    storage: StorageSpec = Field(
        default_factory=StorageSpec, description="the data bucket and its KMS key"
    )
    ami: AmiSpec = Field(default_factory=AmiSpec, description="the nodes' image")
    fsx: FsxSpec | None = Field(
        default=None, description="FSx for Lustre linked to the data bucket (set to turn it on)"
    )
    container_network: Literal["host", "bridge"] = Field(
        default="host",
        description="bridge when jobs run in bridge-network containers (IMDS hop limit 2 "
        "instead of 1)",
    )
    secrets: list[str] = Field(
        default_factory=list,
        description="NAME: <Pulumi secret> pairs (pulumi config set --secret --path "
        "secrets.NAME ...): SSM SecureString parameters the nodes read at boot",
    )
    jobs: JobsSpec | None = Field(
        default=None, description="training jobs' container images (`gpuc run --image`)"
    )
    inference: InferenceSpec | None = Field(
        default=None, description="the serving stack's settings (role inference)"
    )
    # stop paying for idle GPUs (compute stacks)
    idle_stop: IdleStopSpec | None = Field(
        default=None,
        description="stop the dev box or scale the group to 0 after minutes under belowPercent "
        "GPU utilization (unset: dev box 30 min, cluster 60 min, under 5 %; off on prepaid "
        "capacity; an inference stack takes only {enabled: false})",
    )
    schedule: ScheduleSpec | None = Field(
        default=None, description="working hours: the nodes start at start and stop at stop on days"
    )
    expires_at: str | None = Field(
        default=None,
        description="the maximum lifetime: the nodes stop then (RFC 3339 UTC), with a warning "
        "an hour before",
    )
    gang_timeout_minutes: ConfigInt = Field(
        default=DEFAULT_GANG_TIMEOUT_MINUTES,
        ge=0,
        le=1440,
        description="all or nothing: a multi-node training group short of its size this long "
        f"after the first node booted scales to 0 (0: off; else at least "
        f"{MIN_GANG_TIMEOUT_MINUTES}; off on prepaid capacity unless set)",
    )
    budget: BudgetSpec | None = Field(default=None, description="a monthly budget with alerts")
    alert_emails: list[str] = Field(
        default_factory=list,
        description="addresses subscribed to the stack's alert topic (budget and lifetime "
        "warnings, a partial gang's stop)",
    )
    audit_trail: ConfigBool = Field(
        default=False,
        description="a CloudTrail trail of the data bucket's object reads and writes and of "
        "management events",
    )
    ebs_encryption_by_default: ConfigBool = Field(
        default=False,
        description="the account-level guard for the region: EBS encryption by default",
    )
    snapshot_block_public_access: ConfigBool = Field(
        default=False,
        description="the account-level guard for the region: block public access to snapshots",
    )
    tags: dict[str, str] = Field(
        default_factory=dict, description="merged into every resource's tags"
    )

    @field_validator(
        "spot",
        "capacity_reservation",
        "capacity_block",
        "commitment",
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
        "commitment",
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
