"""Run every meaning check on a well-shaped StackSpec and resolve it against the catalog and
prices: a resolved stack, or every problem found (never the first one only)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from gpu_cluster.components.catalog import Catalog, InstanceFacts, load_catalog
from gpu_cluster.components.cidr import (
    LOAD_BALANCER_SUBNET_PREFIX,
    SubnetLayout,
    service_layout,
)
from gpu_cluster.components.cost_controls import CostControls
from gpu_cluster.components.names import StackIdentity
from gpu_cluster.components.network import ExistingNetwork
from gpu_cluster.components.nic_layout import ip_addresses_per_node, nic_layout
from gpu_cluster.components.purchase import Purchase, is_single_instance
from gpu_cluster.infra.prices.commitment import Commitment
from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly
from gpu_cluster.infra.prices.spot_advisor import reclaim_warning
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import (
    PROJECT,
    AmiSpec,
    FsxSpec,
    NetworkSpec,
    RootVolumeSpec,
    StackSpec,
    StorageSpec,
)
from gpu_cluster.infra.validation.commitment import check_commitment, commitment_warning
from gpu_cluster.infra.validation.common import key
from gpu_cluster.infra.validation.compute import (
    check_ami,
    check_dlami_support,
    check_efa,
    check_root_volume,
    check_whole_gpus,
    check_zone,
    gpu_choice_note,
    pick_instance_type,
)
from gpu_cluster.infra.validation.cost_controls import check_cost_controls
from gpu_cluster.infra.validation.existing_network import (
    check_existing_network,
    ignored_keys_warning,
    uses_existing_network,
)
from gpu_cluster.infra.validation.inference import ResolvedInference, check_inference
from gpu_cluster.infra.validation.jobs import check_jobs
from gpu_cluster.infra.validation.names import (
    check_name,
    check_region,
    check_tags,
)
from gpu_cluster.infra.validation.network import check_network, public_ip_problems
from gpu_cluster.infra.validation.purchase import check_purchase
from gpu_cluster.infra.validation.service_access import public_warning
from gpu_cluster.infra.validation.stage_keys import stage_problems
from gpu_cluster.infra.validation.storage import check_fsx, check_storage
from gpu_cluster.infra.validation.subnet_zone import stand_in_note, with_stand_in_zone
from gpu_cluster.infra.validation.warnings import (
    air_gapped_install_warning,
    cost_control_warnings,
    data_stack_warning,
    size_warning,
    timestamp_tag_warnings,
    vpc_warning,
)


@dataclass(frozen=True)
class ResolvedCluster:
    stack: str
    name: str
    region: str
    availability_zone: str
    facts: InstanceFacts
    node_count: int
    efa: bool
    purchase: Purchase
    layout: SubnetLayout | None  # None in an existing network
    network: NetworkSpec
    root_volume: RootVolumeSpec
    storage: StorageSpec
    ami: AmiSpec
    tags: dict[str, str]
    hourly_usd: float | None
    fsx: FsxSpec | None = None
    warnings: tuple[str, ...] = ()
    choice_note: str | None = None  # why a gpu request became this type
    container_network: str = "host"
    secrets: tuple[str, ...] = ()  # names of the Pulumi secrets the nodes get
    cost_controls: CostControls = field(default_factory=CostControls)
    inference: ResolvedInference | None = None  # role: inference
    existing_network: ExistingNetwork | None = None  # network.vpcId: the user's own VPC
    # jobs.repositories: the ECR repositories job images come from (names or ARNs, as set)
    image_repositories: tuple[str, ...] = ()
    # availabilityZone left out in your own subnet, and not read yet: the subnet whose zone
    # availability_zone stands in for (validation/subnet_zone.py)
    zone_from_subnet: str | None = None
    commitment: Commitment | None = None  # a Savings Plan or RIs the account holds

    @property
    def total_gpus(self) -> float:
        return self.facts.gpus * self.node_count

    @property
    def purchase_option(self) -> str:
        return self.purchase.kind


def stack_identity(spec: ResolvedCluster | ResolvedData, project: str = PROJECT) -> StackIdentity:
    """Whose physical names a resolved stack gets (components/names.py): the program passes
    the project it runs in (pulumi.get_project()), gpuc this project's."""
    return StackIdentity(project, spec.stack, spec.region, spec.name)


@dataclass(frozen=True)
class ResolvedData:
    stack: str
    name: str
    region: str
    bucket: str | None
    tags: dict[str, str]
    audit_trail: bool = False
    ebs_encryption_by_default: bool = False
    snapshot_block_public_access: bool = False
    warnings: tuple[str, ...] = ()  # valid, perhaps not what was meant (the stack file's 010)


def serving_view(spec: StackSpec) -> StackSpec:
    """An inference stack checked as a cluster: its first zone, and its largest size."""
    settings = spec.inference
    if settings is None:
        return spec
    update: dict = {"nodes": max(settings.max_nodes, 1)}
    if spec.availability_zone is None and settings.availability_zones:
        update["availability_zone"] = settings.availability_zones[0]
    return spec.model_copy(update=update)


def resolve(
    spec: StackSpec,
    stack: str,
    catalog: Catalog | None = None,
    known_stacks: list[str] | None = None,
) -> tuple[ResolvedCluster | ResolvedData | None, list[Problem]]:
    """Every meaning check; a resolved stack only when there is no problem at all. A key the
    stack's stage ignores is refused first (validation/stage_keys.py), and the other checks
    judge the rest."""
    ignored, spec = stage_problems(spec)
    resolved, problems = resolve_used(spec, stack, catalog, known_stacks)
    return (None, ignored + problems) if ignored else (resolved, problems)


def resolve_used(
    spec: StackSpec,
    stack: str,
    catalog: Catalog | None = None,
    known_stacks: list[str] | None = None,
) -> tuple[ResolvedCluster | ResolvedData | None, list[Problem]]:
    """The meaning checks of the keys the stage uses."""
    catalog = catalog or load_catalog()
    if spec.role == "inference":
        spec = serving_view(spec)
    name, problems = check_name(spec, stack)
    problems += check_region(spec, catalog)
    problems += check_tags(spec.tags)
    problems += check_storage(spec.storage, spec.role)
    problems += check_fsx(spec.fsx) if spec.role == "cluster" else []
    # a key the stage ignores (compute keys on the data stack, the data stack's own keys
    # elsewhere, inference settings off a service) was refused by stage_problems
    if spec.role == "data":
        if problems:
            return None, problems
        return ResolvedData(
            stack,
            name,
            spec.region,
            spec.storage.bucket,
            dict(spec.tags),
            audit_trail=spec.audit_trail,
            ebs_encryption_by_default=spec.ebs_encryption_by_default,
            snapshot_block_public_access=spec.snapshot_block_public_access,
        ), []

    spec, zone_subnet = with_stand_in_zone(spec, catalog)
    region_ok = not problems or spec.region in catalog.offerings
    zone_problems = check_zone(spec, catalog) if region_ok else []
    problems += zone_problems
    facts, found = pick_instance_type(spec, catalog, zone_ok=not zone_problems)
    if spec.region not in catalog.offerings:  # "not offered in <unknown region>" says nothing new
        found = [p for p in found if "not offered" not in p.problem]
    problems += found
    problems += check_root_volume(spec.root_volume)
    repositories, found = check_jobs(spec)
    problems += found
    if facts is None:
        # One IP per node is a lower bound, so any network problem found here is real.
        if uses_existing_network(spec.network):
            zones = (spec.availability_zone or "",)
            return None, problems + check_existing_network(spec.network, spec.role, zones)[1]
        return None, problems + check_network(
            spec.network, spec.nodes, 1, efa=False, ecr=bool(repositories)
        )[1]
    efa, found = check_efa(spec, facts, catalog)
    problems += found
    purchase, found = check_purchase(spec, facts, catalog, efa)
    problems += found
    commitment, found = check_commitment(spec)
    problems += found
    controls, found = check_cost_controls(
        spec, purchase is not None and is_single_instance(purchase, spec.nodes)
    )
    problems += found
    serving = None
    if spec.role == "inference":
        serving, found = check_inference(spec, facts, catalog)
        problems += found
    problems += check_ami(spec.ami, facts)
    problems += check_dlami_support(spec, facts, catalog)
    problems += check_whole_gpus(spec, facts, efa, catalog)
    slots = nic_layout(facts, efa and facts.efa_supported)
    existing = layout = None
    if uses_existing_network(spec.network):
        zones = serving.zones if serving else (spec.availability_zone or "",)
        existing, found = check_existing_network(spec.network, spec.role, zones)
        problems += found + public_ip_problems(spec.network, efa)
    else:
        layout, found = check_network(
            spec.network, spec.nodes, ip_addresses_per_node(slots), efa, ecr=bool(repositories)
        )
        problems += found
    if spec.role == "inference" and layout is not None:
        if (
            spec.network.public_subnet_cidr
            and layout.public.prefixlen > LOAD_BALANCER_SUBNET_PREFIX
        ):
            problems.append(
                Problem(
                    path=key("network.publicSubnetCidr"),
                    received=spec.network.public_subnet_cidr,
                    problem="the load balancer needs a /27 or larger public subnet in each zone",
                    allowed=f"a /{LOAD_BALANCER_SUBNET_PREFIX} or larger inside the VPC",
                    fix="pulumi config rm --path network.publicSubnetCidr",
                )
            )
        layout = service_layout(layout)
    if problems or (layout is None and existing is None) or purchase is None:
        return None, problems
    assert spec.availability_zone is not None
    resolved = ResolvedCluster(
        stack=stack,
        name=name,
        region=spec.region,
        availability_zone=spec.availability_zone,
        facts=facts,
        node_count=spec.nodes,
        efa=efa,
        purchase=purchase,
        layout=layout,
        network=spec.network,
        existing_network=existing,
        root_volume=spec.root_volume,
        storage=spec.storage,
        ami=spec.ami,
        tags=dict(spec.tags),
        hourly_usd=on_demand_hourly(spec.region, facts.instance_type),
        fsx=spec.fsx,
        warnings=cluster_warnings(spec, facts, layout, known_stacks or [])
        + (
            (stand_in_note(zone_subnet, spec.availability_zone, spec.region),)
            if zone_subnet
            else ()
        ),
        choice_note=gpu_choice_note(spec, catalog),
        container_network=spec.container_network,
        secrets=tuple(spec.secrets),
        cost_controls=controls,
        inference=serving,
        image_repositories=repositories,
        zone_from_subnet=zone_subnet,
        commitment=commitment,
    )
    # a training stage on spot in an upper Spot Instance Advisor band: what a reclaim costs
    extra = [w for w in (reclaim_warning(resolved), commitment_warning(spec)) if w]
    if extra:
        resolved = replace(resolved, warnings=(*resolved.warnings, *extra))
    return resolved, []


def cluster_warnings(
    spec: StackSpec, facts: InstanceFacts, layout: SubnetLayout | None, known_stacks: list[str]
) -> tuple[str, ...]:
    hourly = on_demand_hourly(spec.region, facts.instance_type)
    found = [
        size_warning(
            facts.instance_type,
            spec.nodes,
            facts.gpu_count * spec.nodes,
            facts.vcpus * spec.nodes,
            hourly * spec.nodes if hourly else None,
        ),
        vpc_warning(layout.vpc) if layout else ignored_keys_warning(spec.network),
        air_gapped_install_warning(spec.network.nat_gateway, spec.fsx is not None),
    ]
    if spec.storage.source == "stack" and spec.storage.stack:
        found.append(data_stack_warning(spec.storage.stack, known_stacks))
    found += timestamp_tag_warnings(spec.tags)
    found.append(public_warning(spec.inference))
    zone_id = load_catalog().zone_id(spec.region, spec.availability_zone or "")
    found += cost_control_warnings(spec, facts.instance_type, zone_id, datetime.now(UTC))
    return tuple(w for w in found if w)
