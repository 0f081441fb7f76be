"""availabilityZone left out in your own subnet: the nodes go to the subnet's zone. `pulumi up`
and `gpuc preflight` read it from EC2 (infra/network_check.py with_subnet_zone,
infra/aws/preflight.py in_subnet_zone); the offline plan cannot, so it checks and prices the
stack in a stand-in zone it names, and the resources show the zone as unknown."""

from __future__ import annotations

from gpu_cluster.components.catalog import Catalog
from gpu_cluster.infra.spec import StackSpec
from gpu_cluster.infra.validation.existing_network import (
    SUBNET_ID,
    VPC_ID,
    uses_existing_network,
)


def zone_subnet(spec: StackSpec) -> str | None:
    """The subnet whose zone a cluster takes: a training or dev cluster in your own VPC with
    no availabilityZone (a service's zones are inference.availabilityZones)."""
    network = spec.network
    if spec.role != "cluster" or spec.availability_zone is not None:
        return None
    if not uses_existing_network(network) or not network.subnet_ids:
        return None
    subnet = network.subnet_ids[0]
    if not (network.vpc_id and VPC_ID.match(network.vpc_id) and SUBNET_ID.match(subnet)):
        return None  # the existing-network checks say what is wrong
    return subnet


def stand_in_zone(spec: StackSpec, catalog: Catalog) -> str | None:
    """The first zone of the region that offers what the stack asks for (the type, or a type
    of the GPU model): the offline checks and prices then hold for some zone of the region."""
    zones = catalog.zones(spec.region)
    if spec.instance_type:
        wanted = {spec.instance_type}
    elif spec.gpu:
        wanted = {f.instance_type for f in catalog.types_for_gpu(spec.gpu, spec.gpus_per_node)}
    else:
        wanted = set()
    offering = [z for z in zones if wanted & catalog.offerings[spec.region].get(z, frozenset())]
    return (offering or zones or [None])[0]


def with_stand_in_zone(spec: StackSpec, catalog: Catalog) -> tuple[StackSpec, str | None]:
    """The spec with a stand-in zone, and the subnet whose zone it stands in for (None: the
    spec as it was)."""
    subnet = zone_subnet(spec)
    zone = stand_in_zone(spec, catalog) if subnet else None
    if subnet is None or zone is None:
        return spec, None
    return spec.model_copy(update={"availability_zone": zone}), subnet


def stand_in_note(subnet: str, zone: str, region: str) -> str:
    """What the offline plan says about the zone it could not read."""
    return (
        f"availabilityZone: the zone of {subnet}, which the offline plan cannot read; it checked "
        f"and priced the stack in {zone} (the first zone of {region} offering the type) as a "
        "stand-in, and shows the zone as unknown. `pulumi up` reads the subnet's zone "
        "(ec2:DescribeSubnets) and checks the stack there, as `gpuc preflight` does for a stack "
        "of this project"
    )
