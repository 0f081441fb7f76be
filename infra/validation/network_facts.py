"""What AWS says about an existing network (NetworkFacts, read by infra/aws/network_facts.py for
the program and `gpuc preflight`), checked against what the stack asks of it."""

from __future__ import annotations

import ipaddress
import math
from dataclasses import dataclass, field

from gpu_cluster.components.cidr import ECR_ENDPOINTS
from gpu_cluster.components.network import ExistingNetwork
from gpu_cluster.infra.problems import NOT_SET, Problem
from gpu_cluster.infra.spec import NetworkSpec
from gpu_cluster.infra.validation.common import key
from gpu_cluster.infra.validation.existing_network import ENDPOINT_SERVICES

# A default route's target that carries the nodes' traffic out (NAT gateway, transit gateway,
# a NAT instance's interface, a virtual private gateway to an on-premises egress, a peering
# connection to an egress VPC, a Gateway Load Balancer endpoint in front of a firewall, a local
# gateway, a Cloud WAN core network's ARN). An internet gateway needs a public IP on the node.
EGRESS_TARGETS = ("nat-", "tgw-", "eni-", "i-", "vgw-", "pcx-", "vpce-", "lgw-", "arn:")


@dataclass(frozen=True)
class SubnetFacts:
    subnet_id: str
    vpc_id: str
    zone: str
    cidr: str
    free_addresses: int
    route_table_id: str  # its own, or the VPC's main table
    default_route: str | None  # the 0.0.0.0/0 target id, or None
    s3_gateway: bool  # its route table has an S3 gateway endpoint


@dataclass(frozen=True)
class Endpoint:
    endpoint_id: str
    service: str  # the short name: ssm, s3, ...
    kind: str  # Interface or Gateway
    private_dns: bool
    state: str
    route_tables: tuple[str, ...] = ()  # a gateway endpoint's


@dataclass(frozen=True)
class NetworkFacts:
    """What EC2 says about the VPC the config names. Ids EC2 does not know are absent."""

    region: str
    vpc_id: str
    vpc_found: bool
    dns_support: bool = True
    dns_hostnames: bool = True
    flow_logs: int = 0  # flow logs on the VPC or one of the named subnets
    subnets: dict[str, SubnetFacts] = field(default_factory=dict)
    endpoints: tuple[Endpoint, ...] = ()
    security_groups: dict[str, str] = field(default_factory=dict)  # id -> its VPC


@dataclass(frozen=True)
class NetworkNeeds:
    """What the stack asks of the network."""

    role: str
    zones: tuple[str, ...]
    addresses_per_subnet: int  # the nodes' interface addresses in each node subnet
    internet: bool  # network.natGateway: the node subnet reaches the internet
    public_ip: bool
    services: tuple[str, ...]  # interface endpoints the boot calls when there is no internet
    avoid_cidrs: tuple[str, ...] = ()  # network.avoidCidrs: blocks the nodes must not be in


def needs_for(
    role: str,
    zones: tuple[str, ...],
    nodes: int,
    ips_per_node: int,
    network: NetworkSpec,
    ecr: bool = False,
) -> NetworkNeeds:
    """``ecr``: the nodes pull job images from ECR (jobs.repositories)."""
    per_zone = math.ceil(nodes / max(len(zones), 1))
    return NetworkNeeds(
        role=role,
        zones=zones,
        addresses_per_subnet=per_zone * ips_per_node + len(network.create_endpoints),
        internet=network.nat_gateway,
        public_ip=network.public_ip,
        services=ENDPOINT_SERVICES + (ECR_ENDPOINTS if ecr else ()),
        avoid_cidrs=tuple(network.avoid_cidrs),
    )


def _usable(endpoint: Endpoint) -> bool:
    return endpoint.state.lower() == "available"


def check_network_facts(
    existing: ExistingNetwork, needs: NetworkNeeds, facts: NetworkFacts
) -> tuple[list[Problem], list[str]]:
    """Problems (the stack cannot work in this network) and warnings (it works, but ...)."""
    vpc = existing.vpc_id
    if not facts.vpc_found:
        return [
            Problem(
                path=key("network.vpcId"),
                received=vpc,
                problem=f"no such VPC in {facts.region} for this account",
                allowed="the id of a VPC in the stack's region",
                fix=f"check the id with `aws ec2 describe-vpcs --region {facts.region}`",
            )
        ], []
    problems: list[Problem] = []
    warnings: list[str] = []
    node_subnets = _subnet_problems(existing.subnet_ids, "network.subnetIds", facts, needs)
    problems += node_subnets[0]
    balancer = _subnet_problems(
        existing.load_balancer_subnet_ids, "network.loadBalancerSubnetIds", facts, needs
    )
    problems += balancer[0]
    for index, subnet in enumerate(node_subnets[1]):
        if subnet is None:
            continue
        path = key(f"network.subnetIds[{index}]")
        if subnet.free_addresses < needs.addresses_per_subnet:
            problems.append(
                Problem(
                    path=path,
                    received=subnet.subnet_id,
                    problem=f"{subnet.free_addresses} free addresses in {subnet.cidr}; the "
                    f"nodes' interfaces (and the endpoints created there) need "
                    f"{needs.addresses_per_subnet}",
                    allowed=f"a subnet with {needs.addresses_per_subnet} or more free addresses",
                    fix="pick a larger subnet, or use fewer nodes",
                )
            )
        problems += _route_problems(existing, needs, facts, subnet, path)
        problems += _avoided(subnet, needs, path)
        if needs.internet and not subnet.s3_gateway and not _has(facts, "s3"):
            warnings.append(
                f"{path}: {subnet.subnet_id} reaches S3 through its default route "
                f"({subnet.default_route}), billed per GB by a NAT gateway: "
                + _s3_endpoint_command(facts, subnet)
            )
    for subnet in (s for s in balancer[1] if s is not None):
        if not (subnet.default_route or "").startswith("igw-"):
            problems.append(
                Problem(
                    path=key("network.loadBalancerSubnetIds"),
                    received=subnet.subnet_id,
                    problem=f"{subnet.subnet_id}'s route table {subnet.route_table_id} has no "
                    "default route to an internet gateway: an internet-facing load balancer "
                    "there cannot be reached",
                    allowed="public subnets (0.0.0.0/0 to an igw-)",
                    fix="list public subnets in network.loadBalancerSubnetIds",
                )
            )
    problems += _dns_problems(existing, needs, facts)
    problems += _endpoint_problems(existing, facts)
    for index, group in enumerate(existing.security_group_ids):
        owner = facts.security_groups.get(group)
        if owner != vpc:
            problems.append(
                Problem(
                    path=key(f"network.securityGroupIds[{index}]"),
                    received=group,
                    problem="no such security group"
                    if owner is None
                    else f"belongs to {owner}, not {vpc}",
                    allowed=f"a security group of {vpc}",
                    fix=f"check it with `aws ec2 describe-security-groups --filters "
                    f"Name=vpc-id,Values={vpc}`",
                )
            )
    if not facts.flow_logs:
        warnings.append(
            f"network.vpcId: {vpc} has no flow logs, and gpu-cluster adds none to a VPC it did "
            "not create (Security Hub EC2.6 asks for them): `aws ec2 create-flow-logs "
            f"--resource-type VPC --resource-ids {vpc} --traffic-type ALL ...`"
        )
    return problems, warnings


def _subnet_problems(
    ids: tuple[str, ...], path: str, facts: NetworkFacts, needs: NetworkNeeds
) -> tuple[list[Problem], list[SubnetFacts | None]]:
    problems, found = [], []
    for index, subnet_id in enumerate(ids):
        subnet = facts.subnets.get(subnet_id)
        found.append(subnet if subnet is not None and subnet.vpc_id == facts.vpc_id else None)
        where = key(f"{path}[{index}]")
        zone = needs.zones[index] if index < len(needs.zones) else None
        if subnet is None or subnet.vpc_id != facts.vpc_id:
            problems.append(
                Problem(
                    path=where,
                    received=subnet_id,
                    problem=f"no such subnet in {facts.region} for this account"
                    if subnet is None
                    else f"belongs to {subnet.vpc_id}, not network.vpcId {facts.vpc_id}",
                    allowed=f"a subnet of {facts.vpc_id}",
                    fix=f"list them with `aws ec2 describe-subnets --filters "
                    f"Name=vpc-id,Values={facts.vpc_id}`",
                )
            )
        elif zone is not None and subnet.zone != zone:
            single = needs.role != "inference"
            problems.append(
                Problem(
                    path=where,
                    received=subnet_id,
                    problem=f"is in {subnet.zone}, but the "
                    + ("cluster's availabilityZone is" if single else f"service's zone {index} is")
                    + f" {zone}",
                    allowed=f"a subnet in {zone}",
                    fix=f"pulumi config set availabilityZone {subnet.zone}"
                    if single
                    else "order the subnets as inference.availabilityZones, or pick subnets "
                    "in those zones",
                )
            )
    return problems, found


def _avoided(subnet: SubnetFacts, needs: NetworkNeeds, path: str) -> list[Problem]:
    cidr = ipaddress.IPv4Network(subnet.cidr)
    for text in needs.avoid_cidrs:
        try:
            other = ipaddress.IPv4Network(text, strict=False)
        except ValueError:
            continue  # the config check names it
        if other.overlaps(cidr):
            return [
                Problem(
                    path=path,
                    received=subnet.subnet_id,
                    problem=f"its block {cidr} overlaps {other}, listed in network.avoidCidrs",
                    allowed="a subnet outside every avoidCidrs block",
                    fix="pick another subnet, or pulumi config rm --path network.avoidCidrs",
                )
            ]
    return []


def _has(facts: NetworkFacts, service: str) -> bool:
    """An available interface endpoint for the service whose private DNS serves its names."""
    return any(
        e.service == service and _usable(e) and e.private_dns
        for e in facts.endpoints
        if e.kind == "Interface"
    )


def _s3_endpoint_command(facts: NetworkFacts, subnet: SubnetFacts) -> str:
    return (
        f"`aws ec2 create-vpc-endpoint --vpc-id {facts.vpc_id} --vpc-endpoint-type Gateway "
        f"--service-name com.amazonaws.{facts.region}.s3 --route-table-ids "
        f"{subnet.route_table_id}` adds the free S3 gateway endpoint"
    )


def _route_problems(
    existing: ExistingNetwork,
    needs: NetworkNeeds,
    facts: NetworkFacts,
    subnet: SubnetFacts,
    path: str,
) -> list[Problem]:
    problems = []
    target = subnet.default_route or ""
    egress = target.startswith(EGRESS_TARGETS) or (target.startswith("igw-") and needs.public_ip)
    if needs.internet and not egress:
        problems.append(
            Problem(
                path=key("network.natGateway"),
                received=True,
                problem=f"{subnet.subnet_id}'s route table {subnet.route_table_id} has "
                + (
                    "no default route (0.0.0.0/0)"
                    if not target
                    else f"its default route to {target}, which the nodes (no public IP) cannot use"
                )
                + ": the nodes cannot reach the internet (packages) or the AWS APIs",
                allowed="a node subnet with a NAT or transit gateway route, or natGateway false "
                "with the endpoints the boot calls",
                fix="pulumi config set --path network.natGateway false",
            )
        )
    # an S3 interface endpoint serves the usual S3 names only with private DNS
    if not egress and not subnet.s3_gateway and not _has(facts, "s3"):
        problems.append(
            Problem(
                path=path,
                received=subnet.subnet_id,
                problem=f"no route to S3: no S3 endpoint on its route table "
                f"{subnet.route_table_id} and no default route out (the nodes read the data "
                "bucket and the boot scripts from S3)",
                allowed="an S3 gateway endpoint on the subnet's route table, or egress",
                fix=_s3_endpoint_command(facts, subnet),
            )
        )
    if not egress:
        missing = [
            s for s in needs.services if not _has(facts, s) and s not in existing.create_endpoints
        ]
        if missing:
            start = len(existing.create_endpoints)
            problems.append(
                Problem(
                    path=key("network.createEndpoints"),
                    received=list(existing.create_endpoints) or NOT_SET,
                    problem=f"without egress the nodes reach AWS only through interface "
                    f"endpoints, and {facts.vpc_id} has none (with private DNS) for "
                    f"{', '.join(missing)}",
                    allowed="the endpoints the boot calls: present in the VPC, or created by "
                    "gpu-cluster",
                    fix=" && ".join(
                        f"pulumi config set --path network.createEndpoints[{start + i}] {s}"
                        for i, s in enumerate(missing)
                    ),
                )
            )
    return problems


def _dns_problems(
    existing: ExistingNetwork, needs: NetworkNeeds, facts: NetworkFacts
) -> list[Problem]:
    vpc = existing.vpc_id
    # The nodes resolve names through the Amazon DNS server only with DNS support; an
    # interface endpoint's private DNS name needs DNS hostnames too (PrivateLink guide, "DNS
    # attributes for your VPC"), which matters when the boot goes through endpoints.
    endpoints = bool(existing.create_endpoints) or not needs.internet
    for attribute, flag, on, why in (
        ("enableDnsSupport", "--enable-dns-support", facts.dns_support, "any AWS service name"),
        (
            "enableDnsHostnames",
            "--enable-dns-hostnames",
            facts.dns_hostnames or not endpoints,
            "an interface endpoint's private DNS name",
        ),
    ):
        if on:
            continue
        return [
            Problem(
                path=key("network.vpcId"),
                received=vpc,
                problem=f"{attribute} is off: the nodes cannot resolve {why}",
                allowed=f"a VPC with {attribute} on",
                fix=f"aws ec2 modify-vpc-attribute --vpc-id {vpc} {flag} '{{\"Value\":true}}'",
            )
        ]
    return []


def _endpoint_problems(existing: ExistingNetwork, facts: NetworkFacts) -> list[Problem]:
    problems = []
    for index, service in enumerate(existing.create_endpoints):
        present = [e for e in facts.endpoints if e.service == service and e.private_dns]
        if present:
            problems.append(
                Problem(
                    path=key(f"network.createEndpoints[{index}]"),
                    received=service,
                    problem=f"{facts.vpc_id} already has {present[0].endpoint_id} for {service} "
                    "with private DNS; a second one would be refused (its DNS name is taken)",
                    allowed="services the VPC has no endpoint for",
                    fix=f"pulumi config rm --path network.createEndpoints[{index}]",
                )
            )
    return problems
