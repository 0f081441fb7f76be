"""Meaning checks on a well-shaped StackSpec, resolved against the catalog and prices.

Each check returns Problems; ``resolve`` runs them all and returns either a resolved stack or
every problem found, never the first one only."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from components.catalog import Catalog, InstanceFacts, load_catalog
from components.cidr import (
    MAX_VPC_PREFIX,
    MIN_VPC_PREFIX,
    SubnetLayout,
    addresses_needed,
    default_layout,
    max_nodes,
    usable_addresses,
)
from components.nic_layout import ip_addresses_per_node, nic_layout
from infra.config import closest, suggest
from infra.errors import NOT_SET, Problem
from infra.prices import on_demand_hourly
from infra.spec import (
    GP3_IOPS_PER_GIB,
    GP3_MIBPS_PER_IOPS,
    PROJECT,
    AmiSpec,
    NetworkSpec,
    RootVolumeSpec,
    StackSpec,
    StorageSpec,
)

CLUSTER_NAME = re.compile(r"^[a-z][a-z0-9-]{0,18}[a-z0-9]\Z")
BUCKET_NAME = re.compile(r"^(?!xn--)(?!.*--ol-s3$)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
AMI_ID = re.compile(r"^ami-[0-9a-f]{8}([0-9a-f]{9})?\Z")
KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}\Z")
STACK_REF = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}\Z")
IMDS_TAG_KEY = re.compile(r"^[A-Za-z0-9+\-=._:@,]+\Z")  # instance metadata tags are enabled
MAX_USER_TAGS = 45  # AWS allows 50 per resource; gpu-cluster adds its own
COMPUTE_KEYS = (
    "availabilityZone",
    "instanceType",
    "gpu",
    "gpusPerNode",
    "nodes",
    "efa",
    "purchaseOption",
    "rootVolume",
    "network",
    "ami",
)
SUPPORTED_PURCHASE_OPTIONS = ("on-demand",)


def key(name: str) -> str:
    return f"{PROJECT}:{name}"


@dataclass(frozen=True)
class ResolvedCluster:
    stack: str
    name: str
    region: str
    availability_zone: str
    facts: InstanceFacts
    node_count: int
    efa: bool
    purchase_option: str
    layout: SubnetLayout
    network: NetworkSpec
    root_volume: RootVolumeSpec
    storage: StorageSpec
    ami: AmiSpec
    tags: dict[str, str]
    hourly_usd: float | None

    @property
    def total_gpus(self) -> int:
        return self.facts.gpu_count * self.node_count


@dataclass(frozen=True)
class ResolvedData:
    stack: str
    name: str
    region: str
    bucket: str | None
    tags: dict[str, str]


def check_name(spec: StackSpec, stack: str) -> tuple[str, list[Problem]]:
    name = spec.cluster_name or stack
    if CLUSTER_NAME.match(name):
        return name, []
    origin = "clusterName" if spec.cluster_name else "clusterName (defaults to the stack name)"
    return name, [
        Problem(
            path=key("clusterName"),
            received=name,
            problem=f"{origin} is not a valid cluster name",
            allowed="2-20 characters: lowercase letters, digits and '-', starting with a letter",
            fix=f"pulumi config set clusterName {re.sub(r'[^a-z0-9-]', '-', name.lower())[:20]}",
        )
    ]


def check_region(spec: StackSpec, catalog: Catalog) -> list[Problem]:
    if spec.region in catalog.offerings:
        return []
    return [
        Problem(
            path="aws:region",
            received=spec.region,
            problem="no GPU offerings are known for this region",
            allowed=", ".join(catalog.regions),
            fix=f"{suggest(spec.region, catalog.regions)}`pulumi config set aws:region <region>`, "
            "or add the region with `gpuc catalog refresh --region <region>`",
        )
    ]


def check_zone(spec: StackSpec, catalog: Catalog) -> list[Problem]:
    zones = catalog.zones(spec.region)
    if spec.availability_zone is None:
        return [
            Problem(
                path=key("availabilityZone"),
                received=NOT_SET,
                problem="a cluster needs one availability zone "
                "(EFA and placement groups are zonal)"
                "",
                allowed=", ".join(zones) or "an availability zone of the region",
                fix="pulumi config set availabilityZone <zone>",
            )
        ]
    if spec.availability_zone in zones or not zones:
        return []
    return [
        Problem(
            path=key("availabilityZone"),
            received=spec.availability_zone,
            problem=f"not an availability zone of {spec.region}",
            allowed=", ".join(zones),
            fix=f"{suggest(spec.availability_zone, zones)}pulumi config set availabilityZone "
            f"{closest(spec.availability_zone, zones) or zones[0]}",
        )
    ]


def pick_instance_type(
    spec: StackSpec, catalog: Catalog, zone_ok: bool
) -> tuple[InstanceFacts | None, list[Problem]]:
    """The requested type, or the cheapest type with the requested GPU model and count."""
    if spec.instance_type and spec.gpu:
        return None, [
            Problem(
                path=key("gpu"),
                received=spec.gpu,
                problem="both instanceType and gpu are set; they are two ways to ask for one thing",
                allowed="either instanceType, or gpu (+ gpusPerNode)",
                fix="pulumi config rm gpu  (or: pulumi config rm instanceType)",
            )
        ]
    if spec.instance_type:
        if spec.gpus_per_node is not None:
            return None, [
                Problem(
                    path=key("gpusPerNode"),
                    received=spec.gpus_per_node,
                    problem="gpusPerNode only applies to a gpu request; "
                    "instanceType fixes the count",
                    allowed="unset when instanceType is set",
                    fix="pulumi config rm gpusPerNode",
                )
            ]
        facts = catalog.get(spec.instance_type)
        if facts is None:
            return None, [
                Problem(
                    path=key("instanceType"),
                    received=spec.instance_type,
                    problem="not an NVIDIA GPU instance type in the catalog",
                    allowed="a type such as "
                    + ", ".join(
                        sorted(catalog.instance_types)[:: max(len(catalog.instance_types) // 8, 1)]
                    )
                    + " (`gpuc catalog list` shows all)",
                    fix=f"{suggest(spec.instance_type, list(catalog.instance_types))}"
                    "pulumi config set instanceType <type>",
                )
            ]
        return facts, check_offered(spec, catalog, facts, zone_ok)
    if spec.gpu:
        return pick_by_gpu(spec, catalog, zone_ok)
    return None, [
        Problem(
            path=key("instanceType"),
            received=NOT_SET,
            problem="no GPU requested",
            allowed="instanceType (e.g. p4d.24xlarge), or gpu (e.g. A100) with gpusPerNode",
            fix="pulumi config set instanceType g5.xlarge  (or: pulumi config set gpu A10G)",
        )
    ]


def pick_by_gpu(
    spec: StackSpec, catalog: Catalog, zone_ok: bool
) -> tuple[InstanceFacts | None, list[Problem]]:
    assert spec.gpu is not None
    models = catalog.gpu_models
    if not catalog.types_for_gpu(spec.gpu):
        return None, [
            Problem(
                path=key("gpu"),
                received=spec.gpu,
                problem="unknown GPU model",
                allowed=", ".join(models),
                fix=f"{suggest(spec.gpu, models)}pulumi config set gpu <model>",
            )
        ]
    counts = sorted({f.gpu_count for f in catalog.types_for_gpu(spec.gpu)})
    wanted = spec.gpus_per_node or counts[0]
    candidates = catalog.types_for_gpu(spec.gpu, wanted)
    if not candidates:
        return None, [
            Problem(
                path=key("gpusPerNode"),
                received=spec.gpus_per_node,
                problem=f"no instance type has {wanted} x {spec.gpu}",
                allowed=", ".join(str(c) for c in counts),
                fix=f"pulumi config set gpusPerNode {counts[-1]}",
            )
        ]
    if zone_ok and spec.availability_zone:
        offered = [
            f
            for f in candidates
            if spec.availability_zone in catalog.zones_offering(spec.region, f.instance_type)
        ]
    else:
        offered = [f for f in candidates if catalog.zones_offering(spec.region, f.instance_type)]
    if not offered:
        where = spec.availability_zone if zone_ok and spec.availability_zone else spec.region
        zones = sorted(
            {z for f in candidates for z in catalog.zones_offering(spec.region, f.instance_type)}
        )
        return None, [
            Problem(
                path=key("gpu"),
                received=f"{wanted} x {spec.gpu}",
                problem=f"no type with {wanted} x {spec.gpu} is offered in {where}",
                allowed=("zones offering it: " + ", ".join(zones))
                if zones
                else "another region (`gpuc catalog list` shows offerings)",
                fix="pick another availabilityZone, region, gpu or gpusPerNode",
            )
        ]
    if spec.efa:
        offered = [f for f in offered if f.efa_supported] or offered

    def price_key(facts: InstanceFacts) -> tuple[float, int, str]:
        price = on_demand_hourly(spec.region, facts.instance_type)
        return (price if price is not None else float("inf"), facts.vcpus, facts.instance_type)

    return min(offered, key=price_key), []


def check_offered(
    spec: StackSpec, catalog: Catalog, facts: InstanceFacts, zone_ok: bool
) -> list[Problem]:
    zones = catalog.zones_offering(spec.region, facts.instance_type)
    if not zones:
        regions = [r for r in catalog.regions if catalog.zones_offering(r, facts.instance_type)]
        return [
            Problem(
                path=key("instanceType"),
                received=facts.instance_type,
                problem=f"not offered in {spec.region}",
                allowed="regions offering it: " + (", ".join(regions) or "none known"),
                fix="choose another instanceType, or `pulumi config set aws:region <region>`",
            )
        ]
    if zone_ok and spec.availability_zone and spec.availability_zone not in zones:
        return [
            Problem(
                path=key("availabilityZone"),
                received=spec.availability_zone,
                problem=f"{facts.instance_type} is not offered in this zone",
                allowed=", ".join(zones),
                fix=f"pulumi config set availabilityZone {zones[0]}",
            )
        ]
    return []


def check_efa(
    spec: StackSpec, facts: InstanceFacts, catalog: Catalog
) -> tuple[bool, list[Problem]]:
    if spec.efa is None:
        return facts.efa_supported and spec.nodes > 1, []
    if spec.efa and not facts.efa_supported:
        alternatives = [
            f.instance_type for f in catalog.types_for_gpu(facts.gpu_model) if f.efa_supported
        ]
        return False, [
            Problem(
                path=key("efa"),
                received=True,
                problem=f"{facts.instance_type} does not support EFA",
                allowed="EFA-capable types with this GPU: " + (", ".join(alternatives) or "none"),
                fix="pulumi config set efa false, or pick one of the EFA-capable types",
            )
        ]
    return spec.efa, []


def check_purchase(spec: StackSpec, facts: InstanceFacts) -> list[Problem]:
    option = spec.purchase_option
    if option not in facts.usage_classes:
        return [
            Problem(
                path=key("purchaseOption"),
                received=option,
                problem=f"{facts.instance_type} cannot be bought as {option}",
                allowed=", ".join(facts.usage_classes),
                fix="pulumi config set purchaseOption on-demand",
            )
        ]
    if option not in SUPPORTED_PURCHASE_OPTIONS:
        return [
            Problem(
                path=key("purchaseOption"),
                received=option,
                problem=f"{option} nodes are not built yet in this version of gpu-cluster",
                allowed=", ".join(SUPPORTED_PURCHASE_OPTIONS),
                fix="pulumi config set purchaseOption on-demand",
            )
        ]
    return []


def check_ami(ami: AmiSpec, facts: InstanceFacts) -> list[Problem]:
    problems = []
    if ami.id and ami.ssm_parameter:
        problems.append(
            Problem(
                path=key("ami"),
                received={"id": ami.id, "ssmParameter": ami.ssm_parameter},
                problem="both ami.id and ami.ssmParameter are set",
                allowed="one of them (or neither, for the AWS Deep Learning AMI)",
                fix="pulumi config rm --path ami.ssmParameter",
            )
        )
    if ami.id and not AMI_ID.match(ami.id):
        problems.append(
            Problem(
                path=key("ami.id"),
                received=ami.id,
                problem="not an AMI id",
                allowed="ami- followed by 8 or 17 hex digits",
                fix="pulumi config set --path ami.id ami-0123456789abcdef0",
            )
        )
    if ami.ssm_parameter and not ami.ssm_parameter.startswith("/"):
        problems.append(
            Problem(
                path=key("ami.ssmParameter"),
                received=ami.ssm_parameter,
                problem="an SSM parameter name starts with '/'",
                allowed="e.g. /aws/service/deeplearning/ami/x86_64/<ami type>/latest/ami-id",
                fix="pulumi config set --path ami.ssmParameter /aws/service/...",
            )
        )
    declared = ami.architecture
    if declared is None and ami.ssm_parameter:
        for arch in ("x86_64", "arm64"):
            if f"/{arch}/" in ami.ssm_parameter:
                declared = arch
    if declared and declared not in facts.architectures:
        problems.append(
            Problem(
                path=key("ami.architecture" if ami.architecture else "ami.ssmParameter"),
                received=ami.architecture or ami.ssm_parameter,
                problem=f"the AMI is {declared} but {facts.instance_type} runs "
                f"{', '.join(facts.architectures)}",
                allowed=f"an AMI for {', '.join(facts.architectures)}",
                fix="use an AMI built for the instance's architecture, or another instanceType",
            )
        )
    if ami.id and declared is None:
        problems.append(
            Problem(
                path=key("ami.architecture"),
                received=NOT_SET,
                problem="a custom ami.id needs its architecture, so it can be checked offline",
                allowed="x86_64, arm64",
                fix=f"pulumi config set --path ami.architecture {facts.architecture}",
            )
        )
    return problems


def _network(
    text: str, path: str, example: str = "10.42.0.0/16"
) -> tuple[ipaddress.IPv4Network | None, list[Problem]]:
    try:
        return ipaddress.IPv4Network(text, strict=True), []
    except ValueError as error:
        return None, [
            Problem(
                path=path,
                received=text,
                problem=f"not a valid IPv4 CIDR block ({error})",
                allowed="a network address with a prefix, e.g. 10.42.0.0/16",
                fix=f"pulumi config set --path {path.split(':', 1)[1]} {example}",
            )
        ]


def check_network(
    network: NetworkSpec, node_count: int, ips_per_node: int, efa: bool
) -> tuple[SubnetLayout | None, list[Problem]]:
    vpc, problems = _network(network.vpc_cidr, key("network.vpcCidr"))
    if vpc is None:
        return None, problems
    if not MIN_VPC_PREFIX <= vpc.prefixlen <= MAX_VPC_PREFIX:
        return None, [
            Problem(
                path=key("network.vpcCidr"),
                received=network.vpc_cidr,
                problem=f"a /{vpc.prefixlen} VPC is outside the supported sizes",
                allowed=f"/{MIN_VPC_PREFIX} to /{MAX_VPC_PREFIX}",
                fix="pulumi config set --path network.vpcCidr 10.42.0.0/16",
            )
        ]
    layout = default_layout(network.vpc_cidr)
    private, public = layout.private, layout.public
    for field, text, example in (
        ("privateSubnetCidr", network.private_subnet_cidr, layout.private),
        ("publicSubnetCidr", network.public_subnet_cidr, layout.public),
    ):
        if text is None:
            continue
        subnet, found = _network(text, key(f"network.{field}"), str(example))
        problems += found
        if subnet is None:
            continue
        if not subnet.subnet_of(vpc):
            problems.append(
                Problem(
                    path=key(f"network.{field}"),
                    received=text,
                    problem=f"not inside the VPC {vpc}",
                    allowed=f"a subnet of {vpc}",
                    fix=f"pulumi config set --path network.{field} <cidr inside {vpc}>",
                )
            )
        elif field == "privateSubnetCidr":
            private = subnet
        else:
            public = subnet
    if problems:
        return None, problems
    if private.overlaps(public):
        problems.append(
            Problem(
                path=key("network.publicSubnetCidr"),
                received=str(public),
                problem=f"overlaps the private subnet {private}",
                allowed="two disjoint subnets of the VPC",
                fix="set network.privateSubnetCidr and network.publicSubnetCidr to disjoint blocks",
            )
        )
    for index, text in enumerate(network.avoid_cidrs):
        other, found = _network(text, key(f"network.avoidCidrs[{index}]"), "192.168.0.0/16")
        problems += found
        if other is not None and other.overlaps(vpc):
            problems.append(
                Problem(
                    path=key("network.vpcCidr"),
                    received=network.vpc_cidr,
                    problem=f"overlaps {other}, listed in network.avoidCidrs",
                    allowed="a block disjoint from every avoidCidrs entry",
                    fix="pick another network.vpcCidr, e.g. 10.200.0.0/16",
                )
            )
    if network.public_ip and efa:
        problems.append(
            Problem(
                path=key("network.publicIp"),
                received=True,
                problem="AWS cannot auto-assign a public IPv4 address to an instance with "
                "several network interfaces (EFA adds one per network card)",
                allowed="false (reach nodes with SSM Session Manager)",
                fix="pulumi config set --path network.publicIp false",
            )
        )
    node_subnet = public if network.public_ip else private
    needed = addresses_needed(node_count, ips_per_node)
    if needed > usable_addresses(node_subnet):
        problems.append(
            Problem(
                path=key("network.vpcCidr"),
                received=network.vpc_cidr,
                problem=f"the node subnet {node_subnet} has {usable_addresses(node_subnet)} usable "
                f"addresses; {node_count} nodes x {ips_per_node} IP(s) + endpoints need {needed}",
                allowed=f"at most {max_nodes(node_subnet, ips_per_node)} nodes in this subnet",
                fix=(
                    f"use a larger VPC (e.g. {vpc.supernet(new_prefix=MIN_VPC_PREFIX)}) "
                    "or fewer nodes"
                    if vpc.prefixlen > MIN_VPC_PREFIX
                    else "use fewer nodes, or set network.privateSubnetCidr to a larger block"
                ),
            )
        )
    return (
        SubnetLayout(vpc=vpc, private=private, public=public) if not problems else None
    ), problems


def check_root_volume(volume: RootVolumeSpec) -> list[Problem]:
    problems = []
    if volume.iops > volume.size_gib * GP3_IOPS_PER_GIB:
        problems.append(
            Problem(
                path=key("rootVolume.iops"),
                received=volume.iops,
                problem=f"gp3 allows at most {GP3_IOPS_PER_GIB} IOPS per GiB",
                allowed=f"at most {volume.size_gib * GP3_IOPS_PER_GIB} for {volume.size_gib} GiB",
                fix="lower rootVolume.iops or raise rootVolume.sizeGib",
            )
        )
    if volume.throughput > volume.iops * GP3_MIBPS_PER_IOPS:
        problems.append(
            Problem(
                path=key("rootVolume.throughput"),
                received=volume.throughput,
                problem=f"gp3 allows at most {GP3_MIBPS_PER_IOPS} MiB/s per provisioned IOPS",
                allowed=f"at most {int(volume.iops * GP3_MIBPS_PER_IOPS)} at {volume.iops} IOPS",
                fix="lower rootVolume.throughput or raise rootVolume.iops",
            )
        )
    return problems


def check_storage(storage: StorageSpec, role: str) -> list[Problem]:
    problems = []
    if role == "data" and storage.source != "create":
        return [
            Problem(
                path=key("storage.source"),
                received=storage.source,
                problem="the data stack creates the bucket other stacks use",
                allowed="create",
                fix="pulumi config set --path storage.source create",
            )
        ]
    if storage.source == "stack":
        if not storage.stack or not STACK_REF.match(storage.stack):
            problems.append(
                Problem(
                    path=key("storage.stack"),
                    received=storage.stack or NOT_SET,
                    problem="storage.source is 'stack' but the data stack is not named",
                    allowed="a stack reference: <organization>/gpu-cluster/<stack>",
                    fix="pulumi config set --path storage.stack organization/gpu-cluster/data",
                )
            )
    elif storage.stack is not None:
        problems.append(
            Problem(
                path=key("storage.stack"),
                received=storage.stack,
                problem=f"storage.stack is only read when storage.source is 'stack', not "
                f"'{storage.source}'",
                allowed="unset",
                fix="pulumi config rm --path storage.stack",
            )
        )
    if storage.source == "existing" and not storage.bucket:
        problems.append(
            Problem(
                path=key("storage.bucket"),
                received=NOT_SET,
                problem="storage.source is 'existing' but no bucket is named",
                allowed="the name of an S3 bucket in this account",
                fix="pulumi config set --path storage.bucket <bucket-name>",
            )
        )
    if storage.bucket and storage.source == "stack":
        problems.append(
            Problem(
                path=key("storage.bucket"),
                received=storage.bucket,
                problem="the bucket comes from the data stack when storage.source is 'stack'",
                allowed="unset",
                fix="pulumi config rm --path storage.bucket",
            )
        )
    if storage.bucket and not BUCKET_NAME.match(storage.bucket):
        problems.append(
            Problem(
                path=key("storage.bucket"),
                received=storage.bucket,
                problem="not a valid S3 bucket name",
                allowed="3-63 lowercase letters, digits, '.' and '-', starting and ending "
                "with a letter or digit",
                fix="pulumi config set --path storage.bucket <valid-name>",
            )
        )
    if storage.kms_key_arn and not KMS_KEY_ARN.match(storage.kms_key_arn):
        problems.append(
            Problem(
                path=key("storage.kmsKeyArn"),
                received=storage.kms_key_arn,
                problem="not a KMS key ARN",
                allowed="arn:aws:kms:<region>:<account>:key/<key-id>",
                fix="pulumi config set --path storage.kmsKeyArn <key arn>",
            )
        )
    return problems


def check_tags(tags: dict[str, str]) -> list[Problem]:
    problems = []
    if len(tags) > MAX_USER_TAGS:
        problems.append(
            Problem(
                path=key("tags"),
                received=f"{len(tags)} tags",
                problem="too many tags",
                allowed=f"at most {MAX_USER_TAGS} (AWS allows 50 per resource; gpu-cluster adds "
                "its own)",
                fix="drop some tags",
            )
        )
    for tag, value in tags.items():
        if not IMDS_TAG_KEY.match(tag):
            problems.append(
                Problem(
                    path=key(f"tags.{tag}"),
                    received=tag,
                    problem="nodes expose their tags through instance metadata, where AWS allows "
                    "only letters, digits and + - = . , _ : @ in tag keys (no spaces or '/')",
                    allowed="a key such as cost-center or team:owner",
                    fix=f"rename the tag, e.g. {re.sub(r'[^A-Za-z0-9+=._:@,-]', '-', tag)}",
                )
            )
        elif tag.lower().startswith("aws:") or not 1 <= len(tag) <= 128 or len(value) > 256:
            problems.append(
                Problem(
                    path=key(f"tags.{tag}"),
                    received=value,
                    problem="not a valid AWS tag",
                    allowed="a key of 1-128 characters not starting with 'aws:', a value of at "
                    "most 256 characters",
                    fix=f"pulumi config rm --path tags.{tag}",
                )
            )
    return problems


def check_data_stack(spec: StackSpec) -> list[Problem]:
    """Compute keys set to anything but their default make no sense on a data stack."""
    set_fields = {
        StackSpec.model_fields[name].alias or name
        for name in spec.model_fields_set
        if getattr(spec, name)
        != StackSpec.model_fields[name].get_default(call_default_factory=True)
    }
    return [
        Problem(
            path=key(name),
            received=getattr(spec, _snake(name)),
            problem="a data stack has no compute; this key is not used",
            allowed="unset (role: data)",
            fix=f"pulumi config rm {name}",
        )
        for name in COMPUTE_KEYS
        if name in set_fields
    ]


def _snake(camel: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)


def resolve(
    spec: StackSpec, stack: str, catalog: Catalog | None = None
) -> tuple[ResolvedCluster | ResolvedData | None, list[Problem]]:
    """Every meaning check; a resolved stack only when there is no problem at all."""
    catalog = catalog or load_catalog()
    name, problems = check_name(spec, stack)
    problems += check_region(spec, catalog)
    problems += check_tags(spec.tags)
    problems += check_storage(spec.storage, spec.role)
    if spec.role == "data":
        problems += check_data_stack(spec)
        if problems:
            return None, problems
        return ResolvedData(stack, name, spec.region, spec.storage.bucket, dict(spec.tags)), []

    region_ok = not problems or spec.region in catalog.offerings
    zone_problems = check_zone(spec, catalog) if region_ok else []
    problems += zone_problems
    facts, found = pick_instance_type(spec, catalog, zone_ok=not zone_problems)
    if spec.region not in catalog.offerings:  # "not offered in <unknown region>" says nothing new
        found = [p for p in found if "not offered" not in p.problem]
    problems += found
    problems += check_root_volume(spec.root_volume)
    if facts is None:
        # One IP per node is a lower bound, so any network problem found here is real.
        return None, problems + check_network(spec.network, spec.nodes, 1, efa=False)[1]
    efa, found = check_efa(spec, facts, catalog)
    problems += found
    problems += check_purchase(spec, facts)
    problems += check_ami(spec.ami, facts)
    slots = nic_layout(facts, efa and facts.efa_supported)
    layout, found = check_network(spec.network, spec.nodes, ip_addresses_per_node(slots), efa)
    problems += found
    if problems or layout is None:
        return None, problems
    assert spec.availability_zone is not None
    return (
        ResolvedCluster(
            stack=stack,
            name=name,
            region=spec.region,
            availability_zone=spec.availability_zone,
            facts=facts,
            node_count=spec.nodes,
            efa=efa,
            purchase_option=spec.purchase_option,
            layout=layout,
            network=spec.network,
            root_volume=spec.root_volume,
            storage=spec.storage,
            ami=spec.ami,
            tags=dict(spec.tags),
            hourly_usd=on_demand_hourly(spec.region, facts.instance_type),
        ),
        [],
    )
