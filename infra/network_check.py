"""The program's check of an existing network (network.vpcId): the subnet's zone when the stack
names none, and what EC2 says about the VPC against what the stack asks of it. Offline (the
plan engine sets no lookup) the plan says it did not look; `gpuc preflight` does."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping

import pulumi

from gpu_cluster.components.network import ExistingNetwork
from gpu_cluster.components.nic_layout import ip_addresses_per_node, nic_layout
from gpu_cluster.infra.errors import NOT_SET, AwsError, ConfigError, Problem
from gpu_cluster.infra.spec import PROJECT
from gpu_cluster.infra.validation import ResolvedCluster
from gpu_cluster.infra.validation.existing_network import SUBNET_ID, VPC_ID
from gpu_cluster.infra.validation.network_facts import (
    NetworkFacts,
    check_network_facts,
    needs_for,
)

NetworkLookup = Callable[[ExistingNetwork, str], NetworkFacts]
NOT_READ = (
    "network.vpcId {vpc}: the offline plan does not read your VPC; {checker} its subnets' "
    "zones, the routes to S3 and the AWS APIs, DNS, free addresses and flow logs"
)
PREFLIGHT = (
    "`gpuc preflight --stack {stack}` checks (and `pulumi up` checks again before it creates "
    "anything)"
)
AT_UP = "`pulumi up` checks, before it creates anything,"


def with_subnet_zone(config: Mapping[str, str], lookup: NetworkLookup | None) -> dict[str, str]:
    """A cluster in an existing subnet takes the subnet's zone when availabilityZone is unset."""
    result = dict(config)
    zone_key, region = f"{PROJECT}:availabilityZone", config.get("aws:region", "us-east-1")
    if lookup is None or zone_key in config or config.get(f"{PROJECT}:role") == "inference":
        return result
    try:
        network = json.loads(config.get(f"{PROJECT}:network", "{}"))
        vpc, subnet = network["vpcId"], network["subnetIds"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return result
    if not (isinstance(vpc, str) and VPC_ID.match(vpc) and SUBNET_ID.match(str(subnet))):
        return result  # the config checks say what is wrong
    try:
        facts = lookup(ExistingNetwork(vpc_id=vpc, subnet_ids=(subnet,)), region)
    except AwsError as error:
        pulumi.log.warn(f"could not read subnet {subnet}'s zone: {error}")
        return result
    if subnet in facts.subnets:
        result[zone_key] = facts.subnets[subnet].zone
    return result


def zone_not_read(subnet: str, why: str) -> Problem:
    """availabilityZone left out, and the subnet's zone could not be read where it must be."""
    return Problem(
        path=f"{PROJECT}:availabilityZone",
        received=NOT_SET,
        problem=f"the nodes go to the zone of {subnet}, which could not be read"
        + (f" ({why})" if why else ""),
        allowed="the zone of the subnet, read with ec2:DescribeSubnets, or set here",
        fix=f"aws ec2 describe-subnets --subnet-ids {subnet} --query "
        "'Subnets[0].AvailabilityZone', then pulumi config set availabilityZone <that zone>",
    )


def from_subnet_zone(
    error: ConfigError, config: Mapping[str, str], zoned: Mapping[str, str]
) -> ConfigError:
    """A stack checked in the zone read from its subnet (``zoned``, from with_subnet_zone):
    a problem with that zone says where it came from, and its fix is another subnet (setting
    availabilityZone to another zone would not move the subnet)."""
    zone_key = f"{PROJECT}:availabilityZone"
    zone = zoned.get(zone_key)
    if zone_key in config or zone is None:
        return error
    subnet = json.loads(config[f"{PROJECT}:network"])["subnetIds"][0]

    def moved(problem: Problem) -> Problem:
        if problem.path != zone_key or problem.received != zone:
            return problem
        return dataclasses.replace(
            problem,
            problem=f"{problem.problem} ({zone} is the zone of {subnet}: availabilityZone is "
            "not set)",
            fix=f"name a subnet in {problem.allowed.split(',')[0]} instead of {subnet} "
            f"(pulumi config set --path 'network.subnetIds[0]' <its id>), or pick an instance "
            f"type offered in {zone}",
        )

    return ConfigError(error.stack, [moved(p) for p in error.problems], dict(config))


def with_network_facts(
    spec: ResolvedCluster, lookup: NetworkLookup | None, stack_file: bool = True
) -> ResolvedCluster:
    """The spec, with the network's warnings; a ConfigError when the stack cannot work there.
    ``stack_file``: a stack of this project (which `gpuc preflight` can check)."""
    existing = spec.existing_network
    if existing is None:
        return spec
    if lookup is None:
        checker = PREFLIGHT.format(stack=spec.stack) if stack_file else AT_UP
        note = NOT_READ.format(vpc=existing.vpc_id, checker=checker)
        return dataclasses.replace(spec, warnings=(*spec.warnings, note))
    try:
        facts = lookup(existing, spec.region)
    except AwsError as error:
        if spec.zone_from_subnet is not None:  # never create in a stand-in zone
            problem = zone_not_read(spec.zone_from_subnet, str(error))
            raise ConfigError(spec.stack, [problem]) from None
        note = f"could not check network.vpcId {existing.vpc_id}: {error}"
        return dataclasses.replace(spec, warnings=(*spec.warnings, note))
    problems, warnings = check_network_facts(existing, network_needs(spec), facts)
    if spec.zone_from_subnet is not None and not problems:
        problems = [zone_not_read(spec.zone_from_subnet, "")]
    if problems:
        raise ConfigError(spec.stack, problems)
    return dataclasses.replace(spec, warnings=(*spec.warnings, *warnings))


def network_needs(spec: ResolvedCluster):
    if spec.inference is not None:
        zones, nodes, ips = tuple(spec.inference.zones), spec.inference.max_nodes, 1
    else:
        zones, nodes = (spec.availability_zone,), spec.node_count
        ips = ip_addresses_per_node(nic_layout(spec.facts, spec.efa and spec.facts.efa_supported))
    role = "cluster" if spec.inference is None else "inference"
    return needs_for(role, zones, nodes, ips, spec.network, ecr=bool(spec.image_repositories))
