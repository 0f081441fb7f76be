"""CIDR math for the cluster network: subnet layout and address capacity."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

AWS_RESERVED_PER_SUBNET = 5  # network, VPC router, DNS, future use, broadcast
INTERFACE_ENDPOINTS = ("ssm", "ssmmessages", "ec2messages")
# What a node's boot calls besides SSM and S3 (node discovery: EC2 and Auto Scaling; the
# health check: EC2 tags, Auto Scaling instance health, CloudWatch metrics; the CloudWatch
# agent: the jobs' output to CloudWatch Logs; a partial gang's stop: its alert to SNS). With a
# NAT gateway these go out through it; without one they need their own endpoints.
AIR_GAPPED_ENDPOINTS = ("ec2", "autoscaling", "monitoring", "logs", "sns")
# A job image from ECR (`gpuc run --image`, jobs.repositories) without a NAT gateway: the ECR
# API (the authorization token) and the Docker registry; the layers come from S3 through the
# gateway endpoint (Amazon ECR User Guide, "Amazon ECR interface VPC endpoints").
ECR_ENDPOINTS = ("ecr.api", "ecr.dkr")
MAX_ENDPOINT_ADDRESSES = len(INTERFACE_ENDPOINTS) + len(AIR_GAPPED_ENDPOINTS) + len(ECR_ENDPOINTS)


def interface_endpoints(nat_gateway: bool, ecr: bool = False) -> tuple[str, ...]:
    """The interface endpoints of the cluster VPC (one ENI each in the node subnet); ``ecr``:
    the nodes pull job images from ECR."""
    if nat_gateway:
        return INTERFACE_ENDPOINTS
    return INTERFACE_ENDPOINTS + AIR_GAPPED_ENDPOINTS + (ECR_ENDPOINTS if ecr else ())


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


def addresses_needed(nodes: int, ips_per_node: int, endpoints: int = MAX_ENDPOINT_ADDRESSES) -> int:
    """Node-subnet addresses: every IP-bearing interface of every node + one per endpoint ENI
    (``endpoints``: the stack's own, interface_endpoints; by default every air-gapped one)."""
    return nodes * ips_per_node + endpoints


def max_nodes(
    subnet: ipaddress.IPv4Network, ips_per_node: int, endpoints: int = MAX_ENDPOINT_ADDRESSES
) -> int:
    return max((usable_addresses(subnet) - endpoints) // max(ips_per_node, 1), 0)


MAX_SERVICE_ZONES = 4


def service_zone_subnets(
    layout: SubnetLayout, extra_zones: int
) -> list[tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]]:
    """(private, public) subnets for a service's further zones, from the second half of the VPC
    that the first zone's layout leaves free: the first eighth of the VPC past its middle holds
    every zone's /28 public subnet (the first zone's is already there), the next three eighths
    one private subnet each. Training clusters (no further zones) are unchanged."""
    if extra_zones > MAX_SERVICE_ZONES - 1:
        raise ValueError(f"at most {MAX_SERVICE_ZONES} zones")
    second_half = list(layout.vpc.subnets(prefixlen_diff=1))[1]
    blocks = list(second_half.subnets(prefixlen_diff=2))
    publics = list(blocks[0].subnets(new_prefix=layout.public.prefixlen))
    return [(blocks[k], publics[k]) for k in range(1, extra_zones + 1)]


# An Application Load Balancer needs a /27 or larger subnet in each zone (ELB docs).
LOAD_BALANCER_SUBNET_PREFIX = 27


def service_layout(layout: SubnetLayout) -> SubnetLayout:
    """A service's layout: the public subnet widened to a /27 for the load balancer."""
    if layout.public.prefixlen <= LOAD_BALANCER_SUBNET_PREFIX:
        return layout
    wider = layout.public.supernet(new_prefix=LOAD_BALANCER_SUBNET_PREFIX)
    return SubnetLayout(vpc=layout.vpc, private=layout.private, public=wider)
