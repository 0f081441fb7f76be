"""Stack-config validation: good inputs resolve, bad inputs fail with one readable problem each.

Every bad-input test asserts the problem's path, the value received, and what is allowed or
how to fix it. Facts (offerings, prices, GPU counts, subnet capacity) are computed from the
bundled catalog, price table and CIDR helpers, never guessed."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, STACKS, TRAIN_LIKE, plan_config
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.components.cidr import (
    MAX_VPC_PREFIX,
    MIN_VPC_PREFIX,
    default_layout,
    interface_endpoints,
    max_nodes,
)
from gpu_cluster.components.nic_layout import ip_addresses_per_node, nic_layout
from gpu_cluster.components.user_data import decoded_user_data
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.errors import NOT_SET, ConfigError, Problem, render_problem
from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly
from gpu_cluster.infra.spec import CONFIG_KEYS
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation import ResolvedCluster, ResolvedData

CATALOG = load_catalog()
STACK = "test"


def key(name: str) -> str:
    return f"gpu-cluster:{name}"


def config(base: dict[str, str] | None = None, drop: tuple[str, ...] = (), **values) -> dict:
    """``base`` (default TRAIN_LIKE) without ``drop``, with ``gpu-cluster:<name>`` = value.

    Dict values are written as JSON, the way Pulumi hands object-valued config to a program."""
    result = {k: v for k, v in (TRAIN_LIKE if base is None else base).items() if k not in drop}
    for name, value in values.items():
        result[key(name)] = json.dumps(value) if isinstance(value, dict | list) else str(value)
    return result


def gpu_request(gpu: str, gpus_per_node: int | None = None, **values) -> dict[str, str]:
    extra = {"gpusPerNode": gpus_per_node} if gpus_per_node is not None else {}
    return config(drop=(key("instanceType"),), gpu=gpu, **extra, **values)


def problems_of(cfg: dict[str, str], stack: str = STACK) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        load_spec(cfg, stack)
    assert info.value.stack == stack
    return info.value.problems


def only_problem(cfg: dict[str, str], stack: str = STACK) -> Problem:
    problems = problems_of(cfg, stack)
    assert len(problems) == 1, "\n".join(render_problem(p) for p in problems)
    return problems[0]


def resolved(cfg: dict[str, str], stack: str = STACK) -> ResolvedCluster:
    spec = load_spec(cfg, stack)
    assert isinstance(spec, ResolvedCluster)
    return spec


# --------------------------------------------------------------------------- good inputs


def test_train_like_resolves_with_efa_on_by_default_for_a_multi_node_efa_type():
    spec = resolved(TRAIN_LIKE)
    assert isinstance(spec, ResolvedCluster)
    assert spec.facts.instance_type == "p4d.24xlarge"
    assert spec.facts.efa_supported
    assert spec.node_count == 4
    assert spec.total_gpus == 4 * spec.facts.gpu_count
    assert spec.availability_zone == "us-east-1a"
    assert spec.efa is True
    assert spec.hourly_usd == on_demand_hourly("us-east-1", "p4d.24xlarge")


def test_efa_defaults_off_for_a_single_node():
    spec = resolved(config(nodes=1))
    assert spec.facts.efa_supported
    assert spec.efa is False


def test_efa_defaults_off_for_a_type_without_efa_even_with_several_nodes():
    spec = resolved(config(instanceType="g5.xlarge", nodes=2))
    assert not spec.facts.efa_supported
    assert spec.efa is False


def test_efa_can_be_turned_off_explicitly_on_an_efa_type():
    assert resolved(config(efa="false")).efa is False


def test_gpu_request_a100_x8_resolves_to_the_cheapest_offered_type():
    region, zone = "us-east-1", "us-east-1b"
    candidates = [
        f.instance_type
        for f in CATALOG.types_for_gpu("A100", 8)
        if zone in CATALOG.zones_offering(region, f.instance_type)
    ]
    assert len(candidates) >= 2, "the comparison needs at least two A100 x 8 types in the zone"
    cheapest = min(candidates, key=lambda t: on_demand_hourly(region, t) or float("inf"))
    assert cheapest == "p4d.24xlarge"

    spec = resolved(gpu_request("A100", 8, availabilityZone=zone))
    assert spec.facts.instance_type == cheapest
    assert spec.facts.gpu_count == 8
    assert spec.hourly_usd == on_demand_hourly(region, cheapest)


def test_gpu_request_is_case_insensitive_and_defaults_to_the_smallest_count():
    spec = resolved(gpu_request("a10g", nodes=1))
    smallest = min(f.gpu_count for f in CATALOG.types_for_gpu("A10G"))
    assert spec.facts.gpu_model == "A10G"
    assert spec.facts.gpu_count == smallest


def test_gpu_request_fails_in_a_zone_offering_no_matching_type():
    region = "us-east-1"
    types = [f.instance_type for f in CATALOG.types_for_gpu("A100", 8)]
    offering = sorted({z for t in types for z in CATALOG.zones_offering(region, t)})
    zone = next(z for z in CATALOG.zones(region) if z not in offering)
    problem = only_problem(gpu_request("A100", 8, availabilityZone=zone))
    assert problem.path == "gpu-cluster:gpu"
    assert problem.received == "8 x A100"
    assert problem.problem == f"no type with 8 x A100 is offered in {zone}"
    assert problem.allowed == "zones offering it: " + ", ".join(offering)


@pytest.mark.parametrize("stack", STACKS)
def test_every_bundled_stack_file_is_valid(stack):
    spec = load_spec(load_stack_config(stack, ROOT), stack)
    assert isinstance(spec, ResolvedData if stack == "data" else ResolvedCluster)


def test_custom_ami_with_matching_architecture_is_accepted():
    spec = resolved(config(ami={"id": "ami-0123456789abcdef0", "architecture": "x86_64"}))
    assert spec.ami.id == "ami-0123456789abcdef0"


def test_arm64_ssm_parameter_is_accepted_on_an_arm64_type():
    arm = next(
        f
        for f in CATALOG.instance_types.values()
        if f.architectures == ("arm64",)
        and f.is_whole_gpu
        and "us-east-1a" in CATALOG.zones_offering("us-east-1", f.instance_type)
    )
    parameter = "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver/latest/ami-id"
    spec = resolved(
        config(instanceType=arm.instance_type, nodes=1, ami={"ssmParameter": parameter})
    )
    assert spec.facts.instance_type == arm.instance_type


def test_avoid_cidrs_that_do_not_overlap_are_accepted():
    spec = resolved(config(network={"vpcCidr": "10.42.0.0/16", "avoidCidrs": ["10.0.0.0/16"]}))
    assert spec.layout is not None
    assert str(spec.layout.vpc) == "10.42.0.0/16"


# ------------------------------------------------------------------------- unknown keys


def test_unknown_key_suggests_the_closest_known_key():
    problem = only_problem(config(nodez="3"))
    assert problem.path == "gpu-cluster:nodez"
    assert problem.received == "3"
    assert problem.problem == "unknown key 'nodez'"
    assert problem.allowed == ", ".join(sorted(CONFIG_KEYS))
    assert problem.fix.startswith("did you mean 'nodes'?")


def test_snake_case_key_suggests_the_camel_case_key():
    problem = only_problem(config(instance_type="p4d.24xlarge"))
    assert problem.path == "gpu-cluster:instance_type"
    assert problem.fix.startswith("did you mean 'instanceType'?")


def test_unknown_key_without_a_close_match_has_no_suggestion():
    problem = only_problem(config(qwertyuiop="1"))
    assert problem.path == "gpu-cluster:qwertyuiop"
    assert "did you mean" not in problem.fix
    assert problem.fix == "pulumi config rm qwertyuiop"


@pytest.mark.parametrize(
    ("object_key", "typo", "known", "value"),
    [
        ("network", "vpcCidrr", "vpcCidr", "10.42.0.0/16"),
        ("rootVolume", "sizeGB", "sizeGib", 200),
        ("storage", "buckett", "bucket", "my-bucket"),
        ("ami", "ssm_parameter", "ssmParameter", "/aws/x"),
    ],
)
def test_unknown_nested_key_names_its_full_path_and_suggests(object_key, typo, known, value):
    base = {"storage": {"source": "stack", "stack": "organization/gpu-cluster/data"}}
    fields = {**base.get(object_key, {}), typo: value}
    problem = only_problem(config(None, (), **{object_key: fields}))
    assert problem.path == f"gpu-cluster:{object_key}.{typo}"
    assert problem.received == value
    assert problem.problem == f"unknown key '{typo}'"
    assert known in problem.allowed.split(", ")
    assert problem.fix.startswith(f"did you mean '{known}'?")


def test_object_key_given_a_plain_string_is_explained():
    problem = only_problem(config(network="vpcCidr: 10.0.0.0/16"))
    assert problem.path == "gpu-cluster:network"
    assert problem.received == "vpcCidr: 10.0.0.0/16"
    assert "expected an object" in problem.problem
    assert "--path network.<field>" in problem.fix


def test_region_under_the_project_namespace_is_an_unknown_key():
    problem = only_problem(config(region="eu-west-1"))
    assert problem.path == "gpu-cluster:region"
    assert problem.received == "eu-west-1"
    assert "aws:region" in problem.fix


def test_region_under_the_project_namespace_does_not_stand_in_for_aws_region():
    cfg = config(drop=("aws:region",), region="us-east-1")
    assert {p.path for p in problems_of(cfg)} == {"aws:region", "gpu-cluster:region"}


# ----------------------------------------------------------------- GPU / instance type


def test_unknown_gpu_model_lists_the_catalog_models_and_suggests_one():
    problem = only_problem(gpu_request("H10O", 8))
    assert problem.path == "gpu-cluster:gpu"
    assert problem.received == "H10O"
    assert problem.problem == "unknown GPU model"
    assert problem.allowed == ", ".join(CATALOG.gpu_models)
    assert problem.fix.startswith("did you mean 'H100'?")


def test_gpu_typo_suggests_a_real_model():
    problem = only_problem(gpu_request("A10O", 8))
    assert problem.fix.startswith("did you mean '")
    suggested = problem.fix.split("'")[1]
    assert suggested in CATALOG.gpu_models
    assert suggested in ("A100", "A10G")


def test_unknown_instance_type_suggests_the_closest_catalog_type():
    problem = only_problem(config(instanceType="p4d.24xlarg"))
    assert problem.path == "gpu-cluster:instanceType"
    assert problem.received == "p4d.24xlarg"
    assert problem.problem == "not an NVIDIA GPU instance type in the catalog"
    assert "gpuc catalog list" in problem.allowed
    assert problem.fix.startswith("did you mean 'p4d.24xlarge'?")


def test_non_gpu_instance_type_is_rejected():
    problem = only_problem(config(instanceType="m5.large", nodes=1))
    assert problem.path == "gpu-cluster:instanceType"
    assert problem.received == "m5.large"
    assert "not an NVIDIA GPU instance type" in problem.problem


def _type_missing_from_a_region() -> tuple[str, str, list[str]]:
    """(type, region that does not offer it, regions that do), from the bundled catalog."""
    for name in sorted(CATALOG.instance_types):
        offering = [r for r in CATALOG.regions if CATALOG.zones_offering(r, name)]
        missing = [r for r in CATALOG.regions if r not in offering]
        if offering and missing and CATALOG.instance_types[name].is_whole_gpu:
            return name, missing[0], offering
    raise AssertionError("every catalog type is offered in every region")


def test_type_not_offered_in_the_region_names_the_regions_that_offer_it():
    name, region, offering = _type_missing_from_a_region()
    zone = CATALOG.zones(region)[0]
    cfg = config(instanceType=name, nodes=1, availabilityZone=zone)
    cfg["aws:region"] = region
    problem = only_problem(cfg)
    assert problem.path == "gpu-cluster:instanceType"
    assert problem.received == name
    assert problem.problem == f"not offered in {region}"
    assert problem.allowed == "regions offering it: " + ", ".join(offering)
    assert "aws:region" in problem.fix


def _type_missing_from_a_zone() -> tuple[str, str, str, list[str]]:
    """(type, region, zone of the region that does not offer it, zones that do)."""
    for region in CATALOG.regions:
        for name in sorted(CATALOG.instance_types):
            zones = CATALOG.zones_offering(region, name)
            missing = [z for z in CATALOG.zones(region) if z not in zones]
            if zones and missing and CATALOG.instance_types[name].is_whole_gpu:
                return name, region, missing[0], zones
    raise AssertionError("every catalog type is offered in every zone")


def test_type_not_offered_in_the_zone_names_the_zones_that_offer_it():
    name, region, zone, zones = _type_missing_from_a_zone()
    cfg = config(instanceType=name, nodes=1, availabilityZone=zone)
    cfg["aws:region"] = region
    problem = only_problem(cfg)
    assert problem.path == "gpu-cluster:availabilityZone"
    assert problem.received == zone
    assert problem.problem == f"{name} is not offered in this zone"
    assert problem.allowed == ", ".join(zones)
    assert problem.fix == f"pulumi config set availabilityZone {zones[0]}"


def test_zone_of_another_region_is_rejected_with_the_regions_zones():
    problem = only_problem(config(availabilityZone="us-west-2a"))
    assert problem.path == "gpu-cluster:availabilityZone"
    assert problem.received == "us-west-2a"
    assert problem.problem == "not an availability zone of us-east-1"
    assert problem.allowed == ", ".join(CATALOG.zones("us-east-1"))
    suggested = problem.fix.rsplit(" ", 1)[1]
    assert suggested in CATALOG.zones("us-east-1")


def test_missing_zone_is_required_for_a_cluster():
    problem = only_problem(config(drop=(key("availabilityZone"),)))
    assert problem.path == "gpu-cluster:availabilityZone"
    assert problem.received == NOT_SET
    assert problem.allowed == ", ".join(CATALOG.zones("us-east-1"))
    assert problem.fix == "pulumi config set availabilityZone <zone>"


def test_efa_requested_on_a_type_without_efa():
    facts = CATALOG.instance_types["g5.xlarge"]
    assert not facts.efa_supported
    problem = only_problem(config(instanceType="g5.xlarge", nodes=1, efa="true"))
    assert problem.path == "gpu-cluster:efa"
    assert problem.received is True
    assert problem.problem == "g5.xlarge does not support EFA"
    capable = [f.instance_type for f in CATALOG.types_for_gpu("A10G") if f.efa_supported]
    assert capable
    assert problem.allowed == "EFA-capable types with this GPU: " + ", ".join(capable)
    assert "efa false" in problem.fix


def test_both_instance_type_and_gpu_is_ambiguous():
    problem = only_problem(config(gpu="A100"))
    assert problem.path == "gpu-cluster:gpu"
    assert problem.received == "A100"
    assert "both instanceType and gpu are set" in problem.problem
    assert problem.allowed == "either instanceType, or gpu (+ gpusPerNode)"
    assert "pulumi config rm gpu" in problem.fix


def test_neither_instance_type_nor_gpu_asks_for_one():
    problem = only_problem(config(drop=(key("instanceType"),)))
    assert problem.path == "gpu-cluster:instanceType"
    assert problem.received == NOT_SET
    assert problem.problem == "no GPU requested"
    assert "instanceType" in problem.allowed
    assert "gpu" in problem.allowed
    assert problem.fix.startswith("pulumi config set instanceType")


def test_gpus_per_node_that_no_type_has():
    counts = sorted({f.gpu_count for f in CATALOG.types_for_gpu("A100")})
    wanted = next(n for n in range(1, 17) if n not in counts)
    problem = only_problem(gpu_request("A100", wanted))
    assert problem.path == "gpu-cluster:gpusPerNode"
    assert problem.received == wanted
    assert problem.problem == f"no instance type has {wanted} x A100"
    assert problem.allowed == ", ".join(str(c) for c in counts)
    assert problem.fix == f"pulumi config set gpusPerNode {counts[-1]}"


def test_gpus_per_node_with_an_instance_type_is_rejected():
    problem = only_problem(config(gpusPerNode=8))
    assert problem.path == "gpu-cluster:gpusPerNode"
    assert problem.received == 8
    assert problem.fix == "pulumi config rm gpusPerNode"


# ------------------------------------------------------------------------------ nodes


@pytest.mark.parametrize("nodes", ["0", "-3"])
def test_nodes_below_one(nodes):
    problem = only_problem(config(nodes=nodes))
    assert problem.path == "gpu-cluster:nodes"
    assert problem.received == nodes
    assert problem.allowed == "a whole number at least 1"
    assert problem.fix == "pulumi config set nodes 1"


@pytest.mark.parametrize(
    ("nodes", "meant"),
    [("four", 4), ("1.5", 2), ("", 1), ("4.0", 4), ("1_0", 1), (" 4 ", 4), ("+4", 4)],
)
def test_nodes_not_a_whole_number(nodes, meant):
    """The example is what was written where it reads as a number, else the default."""
    problem = only_problem(config(nodes=nodes))
    assert problem.path == "gpu-cluster:nodes"
    assert problem.received == nodes
    assert "expected a whole number" in problem.problem
    assert problem.allowed == f"a whole number written with digits, e.g. {meant}"
    assert problem.fix == f"pulumi config set nodes {meant}"


# ---------------------------------------------------------------------------- network


@pytest.mark.parametrize("cidr", ["10.42.0.0/33", "10.42.0.1/16", "banana", "fd00::/16"])
def test_invalid_vpc_cidr(cidr):
    problem = only_problem(config(network={"vpcCidr": cidr}))
    assert problem.path == "gpu-cluster:network.vpcCidr"
    assert problem.received == cidr
    assert problem.problem.startswith("not a valid IPv4 CIDR block")
    assert problem.allowed == "a network address with a prefix, e.g. 10.42.0.0/16"
    assert problem.fix == "pulumi config set --path network.vpcCidr 10.42.0.0/16"


@pytest.mark.parametrize("cidr", ["10.0.0.0/8", "10.42.0.0/15", "10.42.0.0/25", "10.42.0.0/28"])
def test_vpc_prefix_outside_the_supported_sizes(cidr):
    prefix = int(cidr.split("/")[1])
    problem = only_problem(config(network={"vpcCidr": cidr}))
    assert problem.path == "gpu-cluster:network.vpcCidr"
    assert problem.received == cidr
    assert problem.problem == f"a /{prefix} VPC is outside the supported sizes"
    assert problem.allowed == f"/{MIN_VPC_PREFIX} to /{MAX_VPC_PREFIX}"


@pytest.mark.parametrize("cidr", ["10.42.0.0/16", "10.42.0.0/24"])
def test_vpc_prefix_bounds_are_accepted(cidr):
    spec = resolved(config(nodes=1, network={"vpcCidr": cidr}))
    assert spec.layout is not None
    assert str(spec.layout.vpc) == cidr


@pytest.mark.parametrize("field", ["privateSubnetCidr", "publicSubnetCidr"])
def test_subnet_outside_the_vpc(field):
    problem = only_problem(config(network={"vpcCidr": "10.42.0.0/16", field: "10.43.0.0/24"}))
    assert problem.path == f"gpu-cluster:network.{field}"
    assert problem.received == "10.43.0.0/24"
    assert problem.problem == "not inside the VPC 10.42.0.0/16"
    assert problem.allowed == "a subnet of 10.42.0.0/16"


def test_invalid_subnet_cidr_names_the_subnet_field():
    problem = only_problem(config(network={"privateSubnetCidr": "10.42.0/20"}))
    assert problem.path == "gpu-cluster:network.privateSubnetCidr"
    assert problem.received == "10.42.0/20"
    assert problem.problem.startswith("not a valid IPv4 CIDR block")


def test_overlapping_private_and_public_subnets():
    network = {"privateSubnetCidr": "10.42.0.0/20", "publicSubnetCidr": "10.42.0.0/28"}
    problem = only_problem(config(network=network))
    assert problem.path == "gpu-cluster:network.publicSubnetCidr"
    assert problem.received == "10.42.0.0/28"
    assert problem.problem == "overlaps the private subnet 10.42.0.0/20"
    assert problem.allowed == "two disjoint subnets of the VPC"


def test_disjoint_custom_subnets_are_used():
    network = {"privateSubnetCidr": "10.42.0.0/20", "publicSubnetCidr": "10.42.16.0/28"}
    spec = resolved(config(network=network))
    assert spec.layout is not None
    assert str(spec.layout.private) == "10.42.0.0/20"
    assert str(spec.layout.public) == "10.42.16.0/28"


def test_vpc_overlapping_an_avoided_cidr():
    network = {"vpcCidr": "10.42.0.0/16", "avoidCidrs": ["10.0.0.0/16", "10.42.128.0/20"]}
    problem = only_problem(config(network=network))
    assert problem.path == "gpu-cluster:network.vpcCidr"
    assert problem.received == "10.42.0.0/16"
    assert problem.problem == "overlaps 10.42.128.0/20, listed in network.avoidCidrs"
    assert problem.allowed == "a block disjoint from every avoidCidrs entry"


def test_invalid_avoided_cidr_names_its_index():
    problem = only_problem(config(network={"avoidCidrs": ["10.0.0.0/16", "nope"]}))
    assert problem.path == "gpu-cluster:network.avoidCidrs[1]"
    assert problem.received == "nope"
    assert problem.problem.startswith("not a valid IPv4 CIDR block")


def test_vpc_too_small_for_the_node_count():
    vpc = "10.42.0.0/24"
    facts = CATALOG.instance_types["p5.48xlarge"]
    zone = CATALOG.zones_offering("us-east-1", facts.instance_type)[0]
    ips = ip_addresses_per_node(nic_layout(facts, efa=True))
    # the endpoints this stack creates (with its NAT gateway)
    limit = max_nodes(default_layout(vpc).private, ips, len(interface_endpoints(True)))
    assert limit >= 2

    def with_nodes(nodes: int) -> dict[str, str]:
        return config(
            instanceType=facts.instance_type,
            availabilityZone=zone,
            nodes=nodes,
            network={"vpcCidr": vpc},
        )

    assert resolved(with_nodes(limit)).node_count == limit  # the boundary itself fits
    problem = only_problem(with_nodes(limit + 1))
    assert problem.path == "gpu-cluster:network.vpcCidr"
    assert problem.received == vpc
    assert f"{limit + 1} nodes x {ips} IP(s)" in problem.problem
    assert problem.allowed == f"at most {limit} nodes in this subnet"
    assert "larger VPC" in problem.fix


def test_public_ip_with_efa_is_rejected():
    problem = only_problem(config(network={"publicIp": True}))
    assert problem.path == "gpu-cluster:network.publicIp"
    assert problem.received is True
    assert "several network interfaces" in problem.problem


# -------------------------------------------------------------------------------- AMI


def test_arm64_ami_on_an_x86_type():
    problem = only_problem(config(ami={"id": "ami-0123456789abcdef0", "architecture": "arm64"}))
    assert problem.path == "gpu-cluster:ami.architecture"
    assert problem.received == "arm64"
    assert problem.problem == "the AMI is arm64 but p4d.24xlarge runs x86_64"
    assert problem.allowed == "an AMI for x86_64"


def test_arm64_ssm_parameter_on_an_x86_type():
    parameter = "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver/latest/ami-id"
    problem = only_problem(config(ami={"ssmParameter": parameter}))
    assert problem.path == "gpu-cluster:ami.ssmParameter"
    assert problem.received == parameter
    assert problem.problem == "the AMI is arm64 but p4d.24xlarge runs x86_64"


def test_custom_ami_id_needs_its_architecture():
    problem = only_problem(config(ami={"id": "ami-0123456789abcdef0"}))
    assert problem.path == "gpu-cluster:ami.architecture"
    assert problem.received == NOT_SET
    assert problem.allowed == "x86_64, arm64"
    assert problem.fix == "pulumi config set --path ami.architecture x86_64"


def test_unknown_ami_architecture_is_a_shape_error_with_a_usable_fix():
    problem = only_problem(config(ami={"architecture": "amd64"}))
    assert problem.path == "gpu-cluster:ami.architecture"
    assert problem.received == "amd64"
    assert problem.allowed == "one of 'x86_64' or 'arm64'"
    assert problem.fix == "pulumi config set --path ami.architecture x86_64"


# ---------------------------------------------------------------------- purchase option

BLOCK_ID = "cr-0123456789abcdef0"


def test_each_purchase_option_resolves_to_its_settings():
    from gpu_cluster.components.purchase import CapacityBlock, CapacityReservation, OnDemand, Spot

    assert resolved(TRAIN_LIKE).purchase == OnDemand()
    spot = resolved(
        config(
            purchaseOption="spot",
            spot={"maxPrice": 12.5, "onDemandBase": 1, "fallbackTypes": ["p4de.24xlarge"]},
            availabilityZone="us-east-1b",  # p4de is offered in 1b and 1c only
        )
    ).purchase
    assert spot == Spot(max_price=12.5, on_demand_base=1, fallback_types=("p4de.24xlarge",))
    reservation = resolved(
        config(
            purchaseOption="capacity-reservation",
            capacityReservation={"create": True, "endDate": "2099-01-31T00:00:00Z"},
        )
    ).purchase
    assert reservation == CapacityReservation(create=True, end_date="2099-01-31T00:00:00Z")
    block = resolved(config(purchaseOption="capacity-block", capacityBlock={"id": BLOCK_ID}))
    assert block.purchase == CapacityBlock(reservation_id=BLOCK_ID)


def test_capacity_block_cannot_be_bought_for_g5():
    facts = CATALOG.instance_types["g5.xlarge"]
    assert "capacity-block" not in facts.usage_classes
    problem = only_problem(
        config(
            instanceType="g5.xlarge",
            nodes=1,
            purchaseOption="capacity-block",
            capacityBlock={"id": BLOCK_ID},
        )
    )
    assert problem.path == "gpu-cluster:purchaseOption"
    assert problem.received == "capacity-block"
    assert problem.problem == "g5.xlarge cannot be bought as capacity-block"
    assert problem.allowed == "on-demand, spot, capacity-reservation"


def test_unknown_purchase_option_lists_the_choices():
    problem = only_problem(config(purchaseOption="reserved"))
    assert problem.path == "gpu-cluster:purchaseOption"
    assert problem.received == "reserved"
    assert problem.allowed == (
        "one of 'on-demand', 'spot', 'capacity-reservation' or 'capacity-block'"
    )
    assert problem.fix == "pulumi config set purchaseOption on-demand"


def test_capacity_block_needs_its_id():
    problem = only_problem(config(purchaseOption="capacity-block"))
    assert problem.path == "gpu-cluster:capacityBlock.id"
    assert problem.received == NOT_SET
    assert "gpuc capacity-block offerings" in problem.fix


@pytest.mark.parametrize("bad", ["cr-123", "cb-0123456789abcdef0", "CR-0123456789ABCDEF0"])
def test_reservation_ids_are_checked(bad):
    problem = only_problem(config(purchaseOption="capacity-block", capacityBlock={"id": bad}))
    assert problem.path == "gpu-cluster:capacityBlock.id"
    assert problem.received == bad
    assert problem.allowed.startswith("cr- followed by 17 hex digits")


def test_spot_with_a_reservation_is_rejected():
    problem = only_problem(config(purchaseOption="spot", capacityReservation={"id": BLOCK_ID}))
    assert problem.path == "gpu-cluster:capacityReservation"
    assert problem.received == {"id": BLOCK_ID, "create": False}
    assert problem.problem == (
        "spot instances cannot launch into a capacity reservation or block; purchaseOption is spot"
    )
    assert problem.fix.startswith("pulumi config rm capacityReservation")


def test_settings_of_another_option_are_not_silently_ignored():
    problem = only_problem(config(spot={"maxPrice": 3}))
    assert problem.path == "gpu-cluster:spot"
    assert (
        problem.problem
        == "spot settings only apply to purchaseOption spot; purchaseOption is on-demand"
    )


@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"id": BLOCK_ID, "create": True},
        {
            "id": BLOCK_ID,
            "resourceGroupArn": "arn:aws:resource-groups:us-east-1:123456789012:group/gpus",
        },
    ],
)
def test_a_reservation_needs_exactly_one_source(settings):
    problem = only_problem(
        config(purchaseOption="capacity-reservation", capacityReservation=settings)
    )
    assert problem.path == "gpu-cluster:capacityReservation"
    assert problem.problem.startswith(
        "a capacity reservation needs exactly one of id, resourceGroupArn or create: true"
    )


def test_reservation_end_date_rules():
    past = only_problem(
        config(
            purchaseOption="capacity-reservation",
            capacityReservation={"create": True, "endDate": "2020-01-01T00:00:00Z"},
        )
    )
    assert past.path == "gpu-cluster:capacityReservation.endDate"
    assert past.problem == "the end date has passed"
    naive = only_problem(
        config(
            purchaseOption="capacity-reservation",
            capacityReservation={"create": True, "endDate": "2099-01-01"},
        )
    )
    assert naive.problem == "not a date and time with a time zone"
    stray = only_problem(
        config(
            purchaseOption="capacity-reservation",
            capacityReservation={"id": BLOCK_ID, "endDate": "2099-01-01T00:00:00Z"},
        )
    )
    assert stray.problem == "endDate only applies to a reservation this stack creates"


@pytest.mark.parametrize(
    ("fallback", "reason"),
    [
        ("p5.48xlarge", "has 8 x H100; the group runs 8 x A100"),
        ("p4d.24xlarge", "listed twice (the primary type is always used first)"),
        ("p4de.24xlarge", "is not offered in us-east-1a"),
        ("p4x.24xlarge", None),
    ],
)
def test_spot_fallback_types_must_match_the_group(fallback, reason):
    problem = only_problem(config(purchaseOption="spot", spot={"fallbackTypes": [fallback]}))
    assert problem.path == "gpu-cluster:spot.fallbackTypes[0]"
    assert problem.received == fallback
    if reason:
        assert problem.problem == f"fallback type {fallback} {reason}"
    else:
        assert problem.problem == "fallback type: not an NVIDIA GPU instance type in the catalog"
    assert problem.fix == "pulumi config rm --path spot.fallbackTypes[0]"


def test_spot_on_demand_base_cannot_exceed_the_nodes():
    problem = only_problem(config(purchaseOption="spot", spot={"onDemandBase": 5}))
    assert problem.path == "gpu-cluster:spot.onDemandBase"
    assert problem.received == 5
    assert problem.allowed == "0 to 4"


def test_spot_settings_shape_errors_name_the_field():
    problems = problems_of(config(purchaseOption="spot", spot={"maxPrice": -1, "bid": 3}))
    by_path = {p.path: p for p in problems}
    assert set(by_path) == {"gpu-cluster:spot.maxPrice", "gpu-cluster:spot.bid"}
    price = by_path["gpu-cluster:spot.maxPrice"]
    assert price.received == -1 and price.allowed == "a number greater than 0"
    assert price.fix == "pulumi config set --path spot.maxPrice 12.5"
    assert by_path["gpu-cluster:spot.bid"].allowed == "fallbackTypes, maxPrice, onDemandBase"


@pytest.mark.parametrize("name", ["spot", "capacityReservation", "capacityBlock"])
def test_purchase_settings_given_as_null_are_rejected(name):
    cfg = {**config(), key(name): "null"}
    problem = only_problem(cfg)
    assert problem.path == key(name)
    assert problem.problem == "expected a mapping of settings, got null"
    assert problem.allowed == "a mapping of fields"
    assert problem.fix.startswith(f"remove it (pulumi config rm {name})")


# ----------------------------------------------------------------------------- storage


def test_existing_storage_without_a_bucket():
    problem = only_problem(config(storage={"source": "existing"}))
    assert problem.path == "gpu-cluster:storage.bucket"
    assert problem.received == NOT_SET
    assert problem.problem == "storage.source is 'existing' but no bucket is named"
    assert problem.fix == "pulumi config set --path storage.bucket <bucket-name>"


@pytest.mark.parametrize("bucket", ["My_Bucket", "ab", "-leading-dash", "x" * 64])
def test_invalid_bucket_name(bucket):
    problem = only_problem(config(storage={"source": "existing", "bucket": bucket}))
    assert problem.path == "gpu-cluster:storage.bucket"
    assert problem.received == bucket
    assert problem.problem == "not a valid S3 bucket name"
    assert "3-63 lowercase letters" in problem.allowed


def test_valid_existing_bucket_is_accepted():
    spec = resolved(config(storage={"source": "existing", "bucket": "my-datasets.v2"}))
    assert spec.storage.bucket == "my-datasets.v2"


def test_a_minimal_stack_reads_the_projects_own_data_stack():
    """storage defaults to {source: stack}: without a name it is this project's data stack."""
    from gpu_cluster.infra.spec import DEFAULT_DATA_STACK

    spec = resolved(config(drop=(key("storage"),)))
    assert spec.storage.source == "stack" and spec.storage.stack is None
    plan = plan_config(config(drop=(key("storage"),)))
    assert plan.error is None, plan.error
    (reference,) = plan.of_type("pulumi:pulumi:StackReference")
    assert reference.inputs["name"] == DEFAULT_DATA_STACK == "organization/gpu-cluster/data"


def test_a_malformed_data_stack_reference_is_rejected():
    problem = only_problem(config(storage={"source": "stack", "stack": "a/b/c/d"}))
    assert problem.path == "gpu-cluster:storage.stack" and problem.received == "a/b/c/d"
    assert "organization/gpu-cluster/data" in problem.fix


# -------------------------------------------------------------------------- data stack


def data_config(**values) -> dict[str, str]:
    return config(load_stack_config("data", ROOT), **values)


def test_data_stack_with_an_instance_type():
    problem = only_problem(data_config(instanceType="p4d.24xlarge"), "data")
    assert problem.path == "gpu-cluster:instanceType"
    assert problem.received == "p4d.24xlarge"
    assert problem.problem.startswith("the data stage (role: data")
    assert "ignores instanceType: a data stack has no nodes" in problem.problem
    assert problem.allowed.startswith("not set on this stage; the data stage uses role, ")
    assert problem.fix == "pulumi config rm instanceType"


def test_data_stack_must_create_its_bucket():
    problem = only_problem(data_config(storage={"source": "stack"}), "data")
    assert problem.path == "gpu-cluster:storage.source"
    assert problem.received == "stack"
    assert problem.allowed == "create"


def test_unknown_role_is_the_only_problem_reported():
    """Without a role, the meaning checks would guess (cluster) and invent problems."""
    problem = only_problem(data_config(role="dta"), "data")
    assert problem.path == "gpu-cluster:role"
    assert problem.received == "dta"
    assert problem.allowed == "one of 'cluster', 'data' or 'inference'"
    assert problem.fix == "pulumi config set role data"  # dta: the nearest choice


@pytest.mark.parametrize(
    ("values", "path"),
    [
        ({"clusterName": "train\n"}, "gpu-cluster:clusterName"),
        (
            {"storage": {"source": "existing", "bucket": "my-bucket\n"}},
            "gpu-cluster:storage.bucket",
        ),
        (
            {"storage": {"source": "stack", "stack": "org/gpu-cluster/data\n"}},
            "gpu-cluster:storage.stack",
        ),
        ({"ami": {"id": "ami-01234567\n", "architecture": "x86_64"}}, "gpu-cluster:ami.id"),
        ({"tags": {"team\n": "ml"}}, "gpu-cluster:tags.team\n"),
    ],
)
def test_trailing_newline_is_not_a_valid_name(values, path):
    """A YAML block scalar can end a value with a newline; AWS would reject it at deploy time."""
    problem = only_problem(config(**values))
    assert problem.path == path


@pytest.mark.parametrize("tag", ["cost center", "team/owner"])
def test_tag_key_must_be_valid_in_instance_metadata(tag):
    problem = only_problem(config(tags={tag: "x"}))
    assert problem.path == f"gpu-cluster:tags.{tag}"
    assert problem.received == tag
    assert "instance metadata" in problem.problem
    assert problem.fix == f"rename the tag, e.g. {tag.replace(' ', '-').replace('/', '-')}"


# ------------------------------------------------------------------------------ region


def test_missing_region():
    problem = only_problem(config(drop=("aws:region",)))
    assert problem.path == "aws:region"
    assert problem.received == NOT_SET
    assert problem.problem == "the AWS region is not set"
    assert problem.fix == "pulumi config set aws:region us-east-1"


def test_unknown_region_suggests_a_known_one():
    cfg = config(nodes=4)
    cfg["aws:region"] = "us-est-1"
    problems = problems_of(cfg)
    region = next(p for p in problems if p.path == "aws:region")
    assert region.received == "us-est-1"
    assert region.problem == "no GPU offerings are known for this region"
    assert region.allowed == ", ".join(CATALOG.regions)
    assert region.fix.startswith("did you mean 'us-east-1'?")
    assert "gpuc catalog refresh" in region.fix


def test_unknown_region_adds_no_knock_on_offering_errors():
    cfg = config(nodes=4)
    cfg["aws:region"] = "us-est-1"
    paths = [p.path for p in problems_of(cfg)]
    assert "gpu-cluster:instanceType" not in paths


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("network", {"vpcCidr": "10.9.0.0/16"}),
        ("rootVolume", {"sizeGib": 300}),
        ("purchaseOption", "spot"),
        ("spot", {"maxPrice": 3}),
        ("capacityBlock", {"id": "cr-0123456789abcdef0"}),
        ("ami", {"ssmParameter": "/my/ami"}),
    ],
)
def test_data_stack_rejects_compute_settings(name, value):
    problem = only_problem(data_config(**{name: value}), "data")
    assert problem.path == f"gpu-cluster:{name}"
    assert problem.problem.startswith(
        f"the data stage (role: data, the bucket and its key) ignores {name}: "
    )
    assert problem.fix == f"pulumi config rm {name}"


def test_region_unknown_on_a_data_stack():
    cfg = load_stack_config("data", ROOT)
    cfg["aws:region"] = "mars-north-1"
    problem = only_problem(cfg, "data")
    assert problem.path == "aws:region"
    assert problem.received == "mars-north-1"


# ---------------------------------------------------------------- several problems at once


def test_every_problem_is_reported_at_once():
    cfg = config(
        nodez="3",
        nodes="0",
        efa="maybe",
        purchaseOption="reserved",
        network={"vpcCidr": "10.42.0.0/33"},
        storage={"source": "existing"},
    )
    problems = problems_of(cfg)
    paths = [p.path for p in problems]
    assert len(paths) == len(set(paths)), paths
    assert set(paths) == {
        "gpu-cluster:nodez",
        "gpu-cluster:nodes",
        "gpu-cluster:efa",
        "gpu-cluster:purchaseOption",
        "gpu-cluster:network.vpcCidr",
        "gpu-cluster:storage.bucket",
    }


def test_shape_errors_do_not_hide_meaning_errors_elsewhere():
    problems = problems_of(config(nodes="zero", instanceType="p4d.24xlarg", clusterName="Bad_Name"))
    assert {p.path for p in problems} == {
        "gpu-cluster:nodes",
        "gpu-cluster:instanceType",
        "gpu-cluster:clusterName",
    }


def test_message_renders_every_problem_with_received_allowed_and_fix():
    with pytest.raises(ConfigError) as info:
        load_spec(config(nodez="3", nodes="0"), STACK)
    text = str(info.value)
    assert text.startswith(
        f"stack '{STACK}' has 2 configuration problems; nothing was planned or created:"
    )
    for problem in info.value.problems:
        assert f"  - {problem.path}: {problem.problem}" in text
        assert f"      fix:      {problem.fix}" in text
    assert text.count("received:") == text.count("allowed:") == text.count("fix:") == 2


def test_the_most_tags_a_user_may_set_leave_room_for_a_nodes_own():
    """A node carries the user's tags, gpu-cluster's (stack id included), its Name and, once
    its health check ran, the health tag: 50 in all at most (EC2 tag restrictions)."""
    from gpu_cluster.components.naming import HEALTH_TAG
    from gpu_cluster.infra.plan.engine import run_plan
    from gpu_cluster.infra.validation.names import MAX_USER_TAGS

    tags = {f"k{i}": "v" for i in range(MAX_USER_TAGS)}
    resolved(config(tags=tags))  # accepted
    plan = run_plan("train", config(tags=tags))
    assert plan.error is None, plan.error
    (group,) = plan.of_type("aws:autoscaling/group:Group")
    node_tags = {t["key"] for t in group.inputs["tags"] if t["propagateAtLaunch"]}
    node_tags |= {"Name", HEALTH_TAG}  # the launch template's Name; the node's own report
    assert len(node_tags - {"aws:autoscaling:groupName"}) <= 50
    (problem,) = problems_of(config(tags={**tags, "one-more": "v"}))
    assert problem.path == "gpu-cluster:tags"


def test_too_many_tags_and_reserved_tag_prefix():
    tags = {f"k{i}": "v" for i in range(46)}
    tags["aws:owner"] = "me"
    problems = problems_of(config(tags=tags))
    assert {p.path for p in problems} == {"gpu-cluster:tags", "gpu-cluster:tags.aws:owner"}


def test_invalid_cluster_name_from_the_stack_name():
    problem = only_problem(TRAIN_LIKE, stack="Train_Stack")
    assert problem.path == "gpu-cluster:clusterName"
    assert problem.received == "Train_Stack"
    assert "defaults to the stack name" in problem.problem
    assert problem.fix == "pulumi config set clusterName train-stack"


# ------------------------------------------------------------------ end to end (engine)


def test_plan_of_an_invalid_config_creates_nothing():
    plan = plan_config(config(nodez="3", network={"vpcCidr": "10.42.0.0/8"}))
    assert isinstance(plan.error, ConfigError)
    assert {p.path for p in plan.error.problems} == {
        "gpu-cluster:nodez",
        "gpu-cluster:network.vpcCidr",
    }
    assert [r for r in plan.resources if r.type != "pulumi:pulumi:Stack"] == []
    assert plan.outputs == {}


def test_plan_of_a_gpu_request_deploys_the_resolved_type():
    plan = plan_config(gpu_request("A100", 8, nodes=2))
    assert plan.error is None, plan.error
    assert plan.outputs["instanceType"] == "p4d.24xlarge"
    assert plan.outputs["nodeCount"] == 2
    assert plan.outputs["totalGpus"] == 16
    assert plan.outputs["efaInterfacesPerNode"] > 0  # EFA defaults on for 2 EFA nodes


@pytest.mark.parametrize(
    ("ami", "path", "problem"),
    [
        ({"release": "2026-03-17"}, "ami.release", "not a Deep Learning AMI release"),
        ({"release": "newest"}, "ami.release", "not a Deep Learning AMI release"),
        (
            {"release": "20260317", "id": "ami-0123456789abcdef0", "architecture": "x86_64"},
            "ami.release",
            "ami.release picks a Deep Learning AMI release; ami.id or ami.ssmParameter names "
            "another AMI",
        ),
    ],
)
def test_ami_release_rules(ami, path, problem):
    found = only_problem(config(ami=ami))
    assert found.path == key(path) and found.problem == problem
    assert found.fix.startswith("pulumi config")


def test_a_lookalike_character_is_named_with_its_code_point():
    cyrillic_o = "\u043e"
    cfg = {k: v for k, v in config().items() if k != key("nodes")}
    cfg[key(f"n{cyrillic_o}des")] = "4"
    problem = only_problem(cfg)
    assert problem.fix.startswith("did you mean 'nodes'")
    assert "U+043E CYRILLIC SMALL LETTER O" in problem.fix


def test_validation_does_not_import_the_config_loader():
    """No import cycle: validation takes its did-you-mean helpers from infra.suggest."""
    import ast

    from conftest import ROOT

    for path in (ROOT / "infra" / "validation").glob("*.py"):
        tree = ast.parse(path.read_text())
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert "gpu_cluster.infra.config" not in imported, path.name


@pytest.mark.parametrize("value", ["yes", "on", "1", "TRUE"])
def test_booleans_are_true_or_false_only(value):
    """As the Python SDK's get_bool: true/True and false/False only ("True" is accepted)."""
    problem = only_problem(config(efa=value))
    assert problem.path == key("efa") and problem.received == value
    assert problem.allowed == "true or false"
    assert problem.fix == "pulumi config set efa true"
    nested = only_problem(config(network={"natGateway": value}))
    assert nested.path == key("network.natGateway") and nested.allowed == "true or false"


def test_true_and_false_are_accepted_as_text_and_as_yaml_booleans():
    assert resolved(config(efa="true")).efa is True
    assert resolved(config(network={"natGateway": False})).network.nat_gateway is False


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("trâin🚀", "train"),
        ("My_Cluster", "my-cluster"),
        ("a-very-long-cluster-name-indeed", "a-very-long-cluster"),
        ("9lives", "lives"),
        ("x", "gpu-x"),
        ("🚀", "gpu-cluster"),
    ],
)
def test_suggested_cluster_names_are_valid_and_close(name, suggested):
    from gpu_cluster.infra.validation.names import CLUSTER_NAME, suggest_cluster_name

    assert suggest_cluster_name(name) == suggested
    assert CLUSTER_NAME.match(suggested)
    problem = only_problem(config(clusterName=name))
    assert problem.fix == f"pulumi config set clusterName {suggested}"


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=40))
def test_every_suggested_cluster_name_passes_validation(name):
    from gpu_cluster.infra.validation.names import CLUSTER_NAME, suggest_cluster_name

    assert CLUSTER_NAME.match(suggest_cluster_name(name))


def test_the_suggested_vpc_cidr_is_actually_free():
    avoid = ["10.0.0.0/9", "10.200.0.0/16", "10.128.0.0/9"]  # all of 10/8
    problem = only_problem(config(network={"vpcCidr": "10.42.0.0/16", "avoidCidrs": avoid}))
    assert problem.path == key("network.vpcCidr")
    assert problem.fix == "pulumi config set --path network.vpcCidr 172.16.0.0/16"
    fixed = resolved(config(network={"vpcCidr": "172.16.0.0/16", "avoidCidrs": avoid}))
    assert fixed.layout is not None
    assert str(fixed.layout.vpc) == "172.16.0.0/16"


def test_no_free_range_is_said_plainly():
    avoid = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]
    problem = only_problem(config(network={"vpcCidr": "10.42.0.0/16", "avoidCidrs": avoid}))
    assert problem.fix.startswith("no /16 private range is free of avoidCidrs")


def test_valid_but_suspicious_settings_are_warned_about():
    big = resolved(config(nodes="10000", network={"vpcCidr": "10.0.0.0/16"}))
    (size,) = [w for w in big.warnings if w.startswith("nodes: 10000")]
    assert "80,000 GPUs" in size and "960,000 vCPUs" in size
    hourly = on_demand_hourly("us-east-1", "p4d.24xlarge")
    assert hourly is not None
    monthly = hourly * 10000 * 730
    assert f"${monthly:,.0f}/month" in size
    public = resolved(config(network={"vpcCidr": "8.8.0.0/16"}))
    assert any("8.8.0.0/16 is public address space" in w for w in public.warnings)
    typo = resolved(config(storage={"source": "stack", "stack": "organization/gpu-cluster/dtaa"}))
    (stack,) = typo.warnings
    assert "no Pulumi.dtaa.yaml" in stack and "did you mean 'data'?" in stack
    assert resolved(config()).warnings == ()  # train-like: nothing to say
    fsx = {"storageCapacityGib": 1200, "throughputPerTib": 250}
    (airgap,) = resolved(config(fsx=fsx, network={"natGateway": False})).warnings
    assert "Lustre client" in airgap and "outside the VPC" in airgap
    assert resolved(config(fsx=fsx)).warnings == ()


def test_the_plan_prints_the_warnings():
    plan = plan_config(config(nodes="100"))
    assert plan.error is None, plan.error
    (warning,) = plan.outputs["configWarnings"]
    from gpu_cluster.infra.plan.render import text_tree

    assert f"warning: {warning}" in text_tree(plan)


OWN_AMI = {"id": "ami-0123456789abcdef0", "architecture": "x86_64"}


def test_a_gpu_slice_is_counted_as_its_fraction_and_runs_one_process():

    cfg = config(instanceType="g6f.xlarge", nodes="1", ami=OWN_AMI)
    spec = resolved(cfg)
    assert spec.total_gpus == 0.125 and spec.facts.gpu_memory_mib == 2861
    plan = plan_config(cfg)
    assert plan.error is None, plan.error
    assert plan.outputs["totalGpus"] == 0.125
    (template,) = plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert "GPUS_PER_NODE=1\n" in decoded_user_data(template.inputs["userData"])


def test_gpu_slices_are_refused_for_multi_node_training():
    problem = only_problem(config(instanceType="g6f.xlarge", nodes="2", ami=OWN_AMI))
    assert problem.path == key("instanceType") and problem.received == "g6f.xlarge"
    assert problem.problem == "g6f.xlarge has 0.125 of an L4 (2861 MiB); 2 nodes need whole GPUs"
    assert problem.allowed.startswith("whole-GPU L4 types: g6.12xlarge")


@pytest.mark.parametrize(
    ("fix", "yaml"),
    [
        ("pulumi config set efa true", "gpu-cluster:efa: true"),
        ("pulumi config set aws:region us-east-1", "aws:region: us-east-1"),
        (
            "pulumi config set --path network.vpcCidr 10.42.0.0/16",
            "gpu-cluster:network: {vpcCidr: 10.42.0.0/16}",
        ),
        ("pulumi config rm --path storage.stack", "delete gpu-cluster:storage.stack"),
        ("pulumi config set instanceType <type>", None),
        ("did you mean 'nodes'? remove it", None),
    ],
)
def test_fixes_also_say_what_to_write_in_the_stack_file(fix, yaml):
    from gpu_cluster.infra.errors import yaml_fix

    assert yaml_fix(fix) == yaml


def test_rendered_problems_carry_the_yaml_line_for_the_stack():
    with pytest.raises(ConfigError) as error:
        load_spec(config(efa="yes"), "mystack")
    assert "or in stacks/Pulumi.mystack.yaml: gpu-cluster:efa: true" in str(error.value)


def test_an_unknown_key_holding_a_quote_is_quoted_with_the_other_kind():
    problem = only_problem(config(None, (), **{"idleStop": {"it's": 5}}))
    assert problem.problem == 'unknown key "it\'s"'
