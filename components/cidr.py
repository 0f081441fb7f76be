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


# The zone letters a region has (us-east-1 has the most: a-f). A service's further zone is
# addressed by its letter, not its place in the list: a zone swapped for another then takes
# CIDRs nobody holds, so the engine creates the new zone's subnets first, moves the load
# balancer and the group to them in place, and deletes the old zone's at the end of the update
# (a subnet replaced delete-first under the same name would be deleted while they still hold
# interfaces in it: DependencyViolation; see infra/diff/collisions.py).
ZONE_LETTERS = "abcdef"
# Letters whose slot is the one the list's second, third and fourth places had before zones
# were addressed by letter (b at place 1, ...): a stack that listed them there keeps its CIDRs.
PLACE_LETTERS = "bcd"


def zone_letter(zone: str) -> str:
    """``us-east-1c`` -> ``c``."""
    return zone[-1:]


def zone_slots(
    layout: SubnetLayout,
) -> dict[str, tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]]:
    """(private, public) subnets per zone letter for a service's further zones, all inside the
    half of the VPC the first zone's layout leaves free. That half's first eighth-of-the-VPC
    block E0 holds the public subnets (the first zone's at its start), the next three blocks one
    private subnet each for b, c and d, with b, c and d's public subnets the 2nd-4th of E0. The
    letters a, e and f take the 5th-7th public subnets of E0's first half and a quarter of its
    second half each, where it has room (a /20 or larger VPC). A letter without room has no
    slot: validation (infra/validation/service_zones.py) says so."""
    second_half = list(layout.vpc.subnets(prefixlen_diff=1))[1]
    blocks = list(second_half.subnets(prefixlen_diff=2))
    size = layout.public.prefixlen
    if size < blocks[0].prefixlen:
        return {}
    publics = list(blocks[0].subnets(new_prefix=size))
    slots = {
        letter: (blocks[place], publics[place])
        for place, letter in enumerate(PLACE_LETTERS, start=1)
        if place < len(publics)
    }
    first_half, second = blocks[0].subnets(prefixlen_diff=1)
    others = [letter for letter in ZONE_LETTERS if letter not in PLACE_LETTERS]
    room = len(PLACE_LETTERS) + 1 + len(others)
    if size >= first_half.prefixlen and first_half.num_addresses >= room * publics[0].num_addresses:
        quarters = list(second.subnets(prefixlen_diff=2)) if second.prefixlen <= 26 else []
        for index, letter in enumerate(others):
            if index < len(quarters):
                slots[letter] = (quarters[index], publics[len(PLACE_LETTERS) + 1 + index])
    return dict(sorted(slots.items()))


def service_zone_subnets(
    layout: SubnetLayout, zones: tuple[str, ...] | list[str]
) -> list[tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]]:
    """(private, public) subnets for each of a service's further zones (``zones``: the zones
    after the first), by zone letter (zone_slots). Training clusters have none."""
    slots = zone_slots(layout)
    missing = [z for z in zones if zone_letter(z) not in slots]
    if missing:
        raise ValueError(f"no CIDR slot for zone {missing[0]} in a /{layout.vpc.prefixlen} VPC")
    return [slots[zone_letter(z)] for z in zones]


# An Application Load Balancer needs a /27 or larger subnet in each zone (ELB docs).
LOAD_BALANCER_SUBNET_PREFIX = 27


def service_layout(layout: SubnetLayout) -> SubnetLayout:
    """A service's layout: the public subnet widened to a /27 for the load balancer."""
    if layout.public.prefixlen <= LOAD_BALANCER_SUBNET_PREFIX:
        return layout
    wider = layout.public.supernet(new_prefix=LOAD_BALANCER_SUBNET_PREFIX)
    return SubnetLayout(vpc=layout.vpc, private=layout.private, public=wider)
