"""CIDR math for the cluster network: subnet layout and address capacity."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

AWS_RESERVED_PER_SUBNET = 5  # network, VPC router, DNS, future use, broadcast
INTERFACE_ENDPOINTS = ("ssm", "ssmmessages", "ec2messages")
PUBLIC_SUBNET_PREFIX = 28
MIN_VPC_PREFIX, MAX_VPC_PREFIX = 16, 24  # AWS allows /16../28; /24 leaves room for both subnets


@dataclass(frozen=True, slots=True)
class SubnetLayout:
    vpc: ipaddress.IPv4Network
    private: ipaddress.IPv4Network
    public: ipaddress.IPv4Network


def default_layout(vpc_cidr: str) -> SubnetLayout:
    """Nodes get the first half of the VPC; the NAT gateway a /28 at the start of the second."""
    vpc = ipaddress.IPv4Network(vpc_cidr, strict=True)
    first_half, second_half = vpc.subnets(prefixlen_diff=1)
    public = next(second_half.subnets(new_prefix=PUBLIC_SUBNET_PREFIX))
    return SubnetLayout(vpc=vpc, private=first_half, public=public)


def usable_addresses(subnet: ipaddress.IPv4Network) -> int:
    return max(subnet.num_addresses - AWS_RESERVED_PER_SUBNET, 0)


def addresses_needed(nodes: int, ips_per_node: int) -> int:
    """Private-subnet addresses: every IP-bearing interface of every node + one per endpoint ENI."""
    return nodes * ips_per_node + len(INTERFACE_ENDPOINTS)


def max_nodes(subnet: ipaddress.IPv4Network, ips_per_node: int) -> int:
    return max((usable_addresses(subnet) - len(INTERFACE_ENDPOINTS)) // max(ips_per_node, 1), 0)
