"""role: inference - the zone list against the network it is laid out in: each further zone's
subnets take its zone letter's CIDRs (components/cidr.py zone_slots), so the letter needs a slot
in the VPC, appears once, and its CIDRs must stay clear of the first zone's subnets."""

from __future__ import annotations

import ipaddress

from gpu_cluster.components.cidr import (
    MAX_VPC_PREFIX,
    MIN_VPC_PREFIX,
    SubnetLayout,
    default_layout,
    service_layout,
    usable_addresses,
    zone_letter,
    zone_slots,
)
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import NetworkSpec
from gpu_cluster.infra.validation.common import key
from gpu_cluster.infra.validation.existing_network import uses_existing_network

# The largest VPC prefix whose free half holds a slot for every zone letter (zone_slots).
ALL_LETTERS_PREFIX = 20
# A zone's private subnet holds every node the group may put there: all of them when the other
# zones have no capacity (EC2 Auto Scaling launches in the zones that succeed), twice over while
# an instance refresh or rebalancing launches before it terminates (components/serving_group.py:
# a maximum healthy percentage of up to 200). One address each (one network interface a node).
NODE_SURGE = 2


def service_network_layout(network: NetworkSpec) -> SubnetLayout | None:
    """The layout the serving stack is built on (as validation/resolve.py makes it), or None
    when the network is the user's or its CIDRs are refused elsewhere (validation/network.py)."""
    if uses_existing_network(network):
        return None
    try:
        vpc = ipaddress.IPv4Network(network.vpc_cidr, strict=True)
        layout = default_layout(network.vpc_cidr)
        private = (
            ipaddress.IPv4Network(network.private_subnet_cidr, strict=True)
            if network.private_subnet_cidr
            else layout.private
        )
        public = (
            ipaddress.IPv4Network(network.public_subnet_cidr, strict=True)
            if network.public_subnet_cidr
            else layout.public
        )
    except ValueError:
        return None
    if not MIN_VPC_PREFIX <= vpc.prefixlen <= MAX_VPC_PREFIX:
        return None
    if not (private.subnet_of(vpc) and public.subnet_of(vpc)):
        return None
    return service_layout(SubnetLayout(vpc=vpc, private=private, public=public))


def check_service_zones(
    network: NetworkSpec, zones: tuple[str, ...], offered: set[str], max_nodes: int = 0
) -> list[Problem]:
    """Every further zone's letter has a CIDR slot in this VPC, no zone is listed twice, no
    further zone's subnet overlaps the first zone's (a network.*SubnetCidr set by hand), and
    each further zone's private subnet holds ``max_nodes`` (NODE_SURGE over).
    ``offered``: the region's zones that offer the instance type (for the fix)."""
    found: list[Problem] = []
    seen: dict[str, int] = {}
    for index, zone in enumerate(zones):
        if zone in seen and len(set(zones)) >= 2:
            found.append(
                Problem(
                    path=key(f"inference.availabilityZones[{index}]"),
                    received=zone,
                    problem=f"listed twice (also at [{seen[zone]}]): a zone holds one subnet of "
                    "each kind for the service",
                    allowed="each zone once",
                    fix=f"pulumi config set --path inference.availabilityZones[{index}] "
                    f"{_free_zone(zones, offered, None) or '<another zone>'}",
                )
            )
        seen.setdefault(zone, index)
    layout = service_network_layout(network)
    if layout is None or len(zones) < 2:
        return found
    slots = zone_slots(layout)
    tightest: tuple[str, ipaddress.IPv4Network] | None = None
    for index, zone in enumerate(zones[1:], start=1):
        letter = zone_letter(zone)
        if letter not in slots:
            found.append(_no_slot(layout, zones, index, slots, offered))
            continue
        private, public = slots[letter]
        if tightest is None or private.num_addresses < tightest[1].num_addresses:
            tightest = (zone, private)
        for field, first in (
            ("privateSubnetCidr", layout.private),
            ("publicSubnetCidr", layout.public),
        ):
            clash = next((s for s in (private, public) if s.overlaps(first)), None)
            if clash is not None:
                found.append(
                    Problem(
                        path=key(f"network.{field}"),
                        received=str(getattr(network, _attr(field)) or first),
                        problem=f"overlaps {clash}, which zone {zone} (availabilityZones[{index}]) "
                        f"takes: a further zone's subnets are addressed by its letter ({letter})",
                        allowed=f"a block of {layout.vpc} clear of "
                        + ", ".join(_taken(zones, slots)),
                        fix=f"pulumi config rm --path network.{field}",
                    )
                )
    if tightest is not None:
        found += _capacity(*tightest, max_nodes)
    return found


def _capacity(zone: str, private: ipaddress.IPv4Network, max_nodes: int) -> list[Problem]:
    usable = usable_addresses(private)
    if usable >= max_nodes * NODE_SURGE:
        return []
    return [
        Problem(
            path=key("inference.maxNodes"),
            received=max_nodes,
            problem=f"zone {zone}'s private subnet {private} has {usable} usable addresses; the "
            f"group may put every node there, twice over while it replaces them "
            f"({max_nodes * NODE_SURGE})",
            allowed=f"at most {usable // NODE_SURGE} nodes, or a larger network.vpcCidr",
            fix=f"pulumi config set --path inference.maxNodes {usable // NODE_SURGE}",
        )
    ]


def _attr(field: str) -> str:
    return "private_subnet_cidr" if field == "privateSubnetCidr" else "public_subnet_cidr"


def _taken(
    zones: tuple[str, ...], slots: dict[str, tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]]
) -> list[str]:
    return [
        str(cidr)
        for zone in zones[1:]
        if zone_letter(zone) in slots
        for cidr in slots[zone_letter(zone)]
    ]


def _free_zone(zones: tuple[str, ...], offered: set[str], letters: set[str] | None) -> str | None:
    """An offered zone the list does not hold (with a letter of ``letters``, when given)."""
    return next(
        (
            z
            for z in sorted(offered)
            if z not in zones and (letters is None or zone_letter(z) in letters)
        ),
        None,
    )


def _no_slot(
    layout: SubnetLayout,
    zones: tuple[str, ...],
    index: int,
    slots: dict,
    offered: set[str],
) -> Problem:
    zone = zones[index]
    letters = sorted(slots)
    other = _free_zone(zones, offered, set(letters))
    bigger = layout.vpc.supernet(new_prefix=min(ALL_LETTERS_PREFIX, layout.vpc.prefixlen))
    room = f"zones {', '.join(letters)}" if letters else "no further zone"
    return Problem(
        path=key(f"inference.availabilityZones[{index}]"),
        received=zone,
        problem=f"a further zone's subnets take its letter's CIDRs, and a /{layout.vpc.prefixlen} "
        f"VPC has room for {room}",
        allowed=(f"a zone whose letter is one of {', '.join(letters)}, or " if letters else "")
        + f"a /{ALL_LETTERS_PREFIX} or larger network.vpcCidr (room for zones a-f)",
        fix=f"pulumi config set --path inference.availabilityZones[{index}] {other}"
        if other
        else f"pulumi config set --path network.vpcCidr {bigger}",
    )
