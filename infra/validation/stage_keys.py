"""Which keys each stage uses, as one table; a key set on a stage that ignores it is refused
with the stage and the key (issue 29). Each row says where the program reads the key, so the
table follows the program (infra/program.py, components/), not a guess."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import StackSpec
from gpu_cluster.infra.validation.common import key

# A stack's stage: its role, and for a cluster what the program builds (components/purchase.py
# is_single_instance: one on-demand node is a plain instance; else an Auto Scaling group, and
# validation/cost_controls.py gang_timeout_minutes: a gang is a group of 2 or more nodes).
STAGES = ("data", "dev box", "experiment", "train", "inference")
MEANING = {
    "data": "role: data, the bucket and its key",
    "dev box": "one on-demand node, a plain instance",
    "experiment": "a node group of one node",
    "train": "a node group of 2 or more nodes",
    "inference": "role: inference, a model server behind HTTPS",
}
ALL = frozenset(STAGES)
CLUSTER = frozenset({"dev box", "experiment", "train"})
NODES = CLUSTER | {"inference"}
GROUPS = frozenset({"experiment", "train", "inference"})  # the stages that are node groups


@dataclass(frozen=True)
class Use:
    stages: frozenset[str]  # the stages whose program reads the key
    reader: str  # where (what the key becomes)
    ignored: str = ""  # why the other node stages do not read it
    data: str = ""  # why the data stage does not (unset: it has no nodes)


# Pulumi.yaml declares these with a default, and the Pulumi CLI hands a declared default to the
# program as config like any other value: that value is no sign the stack set the key.
PROJECT_DEFAULTS = ("role", "nodes", "purchaseOption")


NO_NODES = "a data stack has no nodes (infra/program.py deploy_data builds the bucket and key)"
SERVICE = "the serving stack (components/serving_stack.py) does not take it"
DATA_ONLY = "only the data stack sets it: it owns the bucket the trail records, and a compute "
DATA_ONLY += "stack's teardown must not touch account-wide guards"

KEYS: dict[str, Use] = {
    "role": Use(ALL, "the stage itself"),
    "clusterName": Use(ALL, "every resource name (check_name)"),
    "availabilityZone": Use(
        CLUSTER,
        "GpuClusterArgs.availability_zone",
        "a service's zones are inference.availabilityZones",
    ),
    "instanceType": Use(NODES, "the nodes' type (pick_instance_type)", NO_NODES),
    "gpu": Use(NODES, "the nodes' type (pick_instance_type)", NO_NODES),
    "gpusPerNode": Use(NODES, "the nodes' type (pick_instance_type)", NO_NODES),
    "nodes": Use(
        CLUSTER,
        "GpuClusterArgs.node_count",
        "a service's size is inference.minNodes and inference.maxNodes",
    ),
    "purchaseOption": Use(NODES, "the Purchase (check_purchase)", NO_NODES),
    "spot": Use(
        GROUPS, "Purchase Spot: the group's mixed instances policy", "a dev box is on-demand"
    ),
    "capacityReservation": Use(
        GROUPS, "Purchase CapacityReservation (check_purchase)", "a dev box is on-demand"
    ),
    "capacityBlock": Use(
        CLUSTER - {"dev box"},
        "Purchase CapacityBlock: the launch template's market options",
        "a dev box is on-demand; a service's launch template takes no Capacity Block",
    ),
    "commitment": Use(
        NODES, "the GPU line's price (gpu_lines), the dashboard's burn rate", NO_NODES
    ),
    "efa": Use(CLUSTER, "the launch template's NIC layout (nic_layout)", SERVICE),
    "rootVolume": Use(NODES, "node_root_volume: every node's root volume", NO_NODES),
    "network": Use(NODES, "the VPC (ClusterNetwork) or yours (existing_network)", NO_NODES),
    "network.natGateway": Use(NODES, "ClusterNetworkArgs.nat_gateway; your subnet's egress"),
    "network.publicIp": Use(CLUSTER, "ClusterNetworkArgs.public_nodes", SERVICE),
    "network.loadBalancerSubnetIds": Use(
        frozenset({"inference"}),
        "the load balancer's subnets",
        "only an inference service has a load balancer",
    ),
    "storage": Use(ALL, "storage_args (a cluster), the bucket (data)"),
    "storage.stack": Use(
        NODES,
        "the StackReference to the data stack",
        data="the data stack is the one the others read",
    ),
    "storage.kmsKeyArn": Use(
        NODES, "StorageArgs.data_key_arn", data="the data stack creates its own key"
    ),
    "ami": Use(NODES, "the nodes' image (resolve_ami)", NO_NODES),
    "fsx": Use(
        CLUSTER,
        "GpuClusterArgs.fsx (Lustre)",
        "a service mounts no FSx for Lustre file system (its nodes read the model from the "
        "bucket), so nothing would be created for it",
    ),
    "containerNetwork": Use(CLUSTER, "GpuClusterArgs.container_network", SERVICE),
    "secrets": Use(CLUSTER, "GpuClusterArgs.secrets (SSM parameters)", SERVICE),
    "jobs": Use(
        CLUSTER, "GpuClusterArgs.image_repositories", "`gpuc run` starts jobs on a cluster"
    ),
    "inference": Use(
        frozenset({"inference"}),
        "ServingStackArgs.serving",
        "it configures a model server (a stack with role: inference)",
    ),
    "idleStop": Use(NODES, "CostControls.idle (a service: only {enabled: false})", NO_NODES),
    "idleStop.minutes": Use(
        CLUSTER, "CostControls.idle", "a service is idle between requests; scaling sizes it"
    ),
    "idleStop.belowPercent": Use(
        CLUSTER, "CostControls.idle", "a service is idle between requests; scaling sizes it"
    ),
    "schedule": Use(NODES, "CostControls.schedule", NO_NODES),
    "expiresAt": Use(NODES, "CostControls.expires_at", NO_NODES),
    "gangTimeoutMinutes": Use(
        frozenset({"train"}),
        "CostControls.gang_timeout_minutes",
        "all or nothing applies to a group of 2 or more nodes, which a dev box, a group of one "
        "and a service are not",
    ),
    "budget": Use(NODES, "CostControls.budget", NO_NODES),
    "budget.stopAtLimit": Use(
        frozenset({"dev box"}),
        "the budget action that stops the instance",
        "a budget action stops only named instances, and a node group replaces its instances "
        "(idleStop, schedule or expiresAt stop a group)",
    ),
    "alertEmails": Use(NODES, "CostControls.alerts (the alert topic)", NO_NODES),
    "auditTrail": Use(frozenset({"data"}), "DataVaultArgs.audit_trail", DATA_ONLY),
    "ebsEncryptionByDefault": Use(
        frozenset({"data"}), "DataVaultArgs.ebs_encryption_by_default", DATA_ONLY
    ),
    "snapshotBlockPublicAccess": Use(
        frozenset({"data"}), "DataVaultArgs.snapshot_block_public_access", DATA_ONLY
    ),
    "tags": Use(ALL, "every resource's tags"),
}

# The fields read wherever their mapping is (every nested key has its row: a new field of the
# spec fails tests/test_stage_keys.py until it is placed here or given a row of its own).
SAME_AS_PARENT = {
    "spot": ("maxPrice", "onDemandBase", "fallbackTypes"),
    "capacityReservation": ("id", "resourceGroupArn", "create", "endDate"),
    "capacityBlock": ("id",),
    "commitment": ("savingsPlan", "planType", "reservedInstances", "offeringClass", "payment"),
    "rootVolume": ("sizeGib", "iops", "throughput"),
    "network": (
        "vpcCidr",
        "privateSubnetCidr",
        "publicSubnetCidr",
        "avoidCidrs",
        "vpcId",
        "subnetIds",
        "securityGroupIds",
        "createEndpoints",
    ),
    "storage": ("source", "bucket"),
    "ami": ("id", "ssmParameter", "release", "architecture"),
    "fsx": ("deploymentType", "storageCapacityGib", "throughputPerTib"),
    "jobs": ("repositories",),
    "inference": (
        "availabilityZones",
        "minNodes",
        "maxNodes",
        "modelRepository",
        "server",
        "server.kind",
        "server.image",
        "server.port",
        "server.readinessPath",
        "server.args",
        "batching",
        "batching.preferredBatchSizes",
        "batching.maxQueueDelayMicroseconds",
        "tls",
        "tls.policy",
        "tls.certificateArn",
        "tls.domain",
        "tls.hostedZoneId",
        "scaling",
        "scaling.metric",
        "scaling.target",
        "warmupSeconds",
        "deletionProtection",
        "access",
        "access.cidrs",
        "access.prefixLists",
        "access.apiKeys",
        "access.apiKeyHeader",
        "access.oidc",
        "access.oidc.issuer",
        "access.oidc.authorizationEndpoint",
        "access.oidc.tokenEndpoint",
        "access.oidc.userInfoEndpoint",
        "access.oidc.clientId",
        "access.oidc.clientSecret",
        "access.cognito",
        "access.cognito.userPoolArn",
        "access.cognito.userPoolClientId",
        "access.cognito.userPoolDomain",
        "access.public",
        "waf",
        "waf.enabled",
        "waf.rateLimit",
        "waf.rateWindowSeconds",
        "rollout",
        "rollout.minHealthyPercent",
    ),
    "idleStop": ("enabled",),
    "schedule": ("days", "start", "stop", "timezone"),
    "budget": ("monthlyUsd", "activateCostAllocationTag"),
}
KEYS |= {
    f"{parent}.{field}": Use(KEYS[parent].stages, f"as {parent}", KEYS[parent].ignored)
    for parent, fields in SAME_AS_PARENT.items()
    for field in fields
}


def spec_keys(model: type[BaseModel] = StackSpec, prefix: str = "") -> list[str]:
    """Every key of the spec, top-level and nested (aws:region aside)."""
    found: list[str] = []
    for name, field in model.model_fields.items():
        if model is StackSpec and name == "region":
            continue
        path = prefix + (field.alias or name)
        found.append(path)
        inner = _model(field.annotation)
        if inner is not None:
            found += spec_keys(inner, f"{path}.")
    return found


def _model(annotation: Any) -> type[BaseModel] | None:
    for option in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(option, type) and issubclass(option, BaseModel):
            return option
    return None


def use_of(path: str) -> Use:
    """A key's row (a key the spec does not have: its nearest parent's)."""
    while path not in KEYS and "." in path:
        path = path.rsplit(".", 1)[0]
    return KEYS[path]


def stages_using(path: str) -> tuple[str, ...]:
    """The stages that read a key (in STAGES order); the others refuse it."""
    stages = use_of(path).stages
    parent = path.rsplit(".", 1)[0] if "." in path else None
    if parent is not None:
        stages = stages & frozenset(stages_using(parent))
    return tuple(s for s in STAGES if s in stages)


def stage_of(spec: StackSpec) -> str:
    if spec.role != "cluster":
        return spec.role
    if spec.nodes >= 2:
        return "train"
    return "dev box" if spec.purchase_option == "on-demand" else "experiment"


def set_keys(model: BaseModel, prefix: str = "") -> list[tuple[str, Any]]:
    """(path, value as given) of every key the stack sets, parents before their fields."""
    found: list[tuple[str, Any]] = []
    for name in sorted(model.model_fields_set):
        field = type(model).model_fields[name]
        if isinstance(model, StackSpec) and name == "region":
            continue
        path, value = prefix + (field.alias or name), getattr(model, name)
        if path in PROJECT_DEFAULTS and value == field.get_default():
            continue
        if isinstance(value, BaseModel):
            found.append((path, value.model_dump(by_alias=True, exclude_unset=True)))
            found += set_keys(value, f"{path}.")
        else:
            found.append((path, value))
    return found


def why_ignored(path: str, stage: str) -> str:
    """The program's reason; for a key whose parent the stage ignores, the parent's."""
    while "." in path and stage not in stages_using(path.rsplit(".", 1)[0]):
        path = path.rsplit(".", 1)[0]
    use = use_of(path)
    return (use.data or NO_NODES) if stage == "data" else use.ignored


def _command(path: str) -> str:
    return f"pulumi config rm{' --path' if '.' in path else ''} {path}"


def stage_problems(spec: StackSpec) -> tuple[list[Problem], StackSpec]:
    """The keys the stack's stage ignores, each a Problem; and the spec without them (so the
    other checks judge only what the stage uses)."""
    stage = stage_of(spec)
    refused: list[str] = []
    problems = []
    for path, value in set_keys(spec):
        if any(path.startswith(f"{parent}.") for parent in refused):
            continue  # its parent is refused already
        if stage in stages_using(path):
            continue
        refused.append(path)
        parent = path.rsplit(".", 1)[0] + "." if "." in path else ""
        siblings = [
            k
            for k in spec_keys()
            if k.startswith(parent) and "." not in k[len(parent) :] and stage in stages_using(k)
        ]
        problems.append(
            Problem(
                path=key(path),
                received=value,
                problem=f"the {stage} stage ({MEANING[stage]}) ignores {path}: "
                f"{why_ignored(path, stage)}",
                allowed=f"not set on this stage; the {stage} stage uses "
                + (", ".join(siblings) or "no key here"),
                fix=_command(path),
            )
        )
    return problems, (without(spec, refused) if refused else spec)


def without(spec: StackSpec, paths: list[str]) -> StackSpec:
    raw = spec.model_dump(by_alias=True, exclude_unset=True)
    for path in paths:
        *parents, last = path.split(".")
        node = raw
        for part in parents:
            node = node[part]
        del node[last]
    return StackSpec.model_validate(raw)
