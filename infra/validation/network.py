"""VPC and subnet CIDRs, overlaps, address capacity, public IPs."""

from __future__ import annotations

import ipaddress

from gpu_cluster.components.cidr import (
    MAX_VPC_PREFIX,
    MIN_VPC_PREFIX,
    SubnetLayout,
    addresses_needed,
    default_layout,
    interface_endpoints,
    max_nodes,
    usable_addresses,
)
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import (
    NetworkSpec,
)
from gpu_cluster.infra.validation.common import key


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


PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(cidr) for cidr in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)


def free_vpc_cidr(
    prefixlen: int, avoided: list[ipaddress.IPv4Network]
) -> ipaddress.IPv4Network | None:
    """The first private block of this size that overlaps nothing the user must avoid."""
    for private in PRIVATE_RANGES:
        if prefixlen < private.prefixlen:
            continue
        for candidate in private.subnets(new_prefix=prefixlen):
            if not any(candidate.overlaps(other) for other in avoided):
                return candidate
    return None


def public_ip_problems(network: NetworkSpec, efa: bool) -> list[Problem]:
    if not (network.public_ip and efa):
        return []
    return [
        Problem(
            path=key("network.publicIp"),
            received=True,
            problem="AWS cannot auto-assign a public IPv4 address to an instance with "
            "several network interfaces (EFA adds one per network card)",
            allowed="false (reach nodes with SSM Session Manager)",
            fix="pulumi config set --path network.publicIp false",
        )
    ]


def check_network(
    network: NetworkSpec, node_count: int, ips_per_node: int, efa: bool, ecr: bool = False
) -> tuple[SubnetLayout | None, list[Problem]]:
    """``ecr``: the stack names job image repositories (their endpoints without a NAT)."""
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
    avoided = []
    for index, text in enumerate(network.avoid_cidrs):
        other, found = _network(text, key(f"network.avoidCidrs[{index}]"), "192.168.0.0/16")
        problems += found
        if other is not None:
            avoided.append(other)
    for other in avoided:
        if other.overlaps(vpc):
            free = free_vpc_cidr(vpc.prefixlen, avoided)
            problems.append(
                Problem(
                    path=key("network.vpcCidr"),
                    received=network.vpc_cidr,
                    problem=f"overlaps {other}, listed in network.avoidCidrs",
                    allowed="a block disjoint from every avoidCidrs entry",
                    fix=f"pulumi config set --path network.vpcCidr {free}"
                    if free
                    else f"no /{vpc.prefixlen} private range is free of avoidCidrs: remove "
                    "an entry or use a smaller VPC",
                )
            )
    problems += public_ip_problems(network, efa)
    node_subnet = public if network.public_ip else private
    # the endpoints this stack creates; turning the NAT gateway off later is checked then
    endpoints = len(interface_endpoints(network.nat_gateway, ecr))
    needed = addresses_needed(node_count, ips_per_node, endpoints)
    if needed > usable_addresses(node_subnet):
        problems.append(
            Problem(
                path=key("network.vpcCidr"),
                received=network.vpc_cidr,
                problem=f"the node subnet {node_subnet} has {usable_addresses(node_subnet)} usable "
                f"addresses; {node_count} nodes x {ips_per_node} IP(s) + endpoints need {needed}",
                allowed=f"at most {max_nodes(node_subnet, ips_per_node, endpoints)} nodes in this "
                "subnet",
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
