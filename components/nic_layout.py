"""Network-interface layout for EFA, derived from an instance type's network-card facts.

AWS's recommended layout for EFA on instance types with one or more network cards
(EC2 User Guide, "Maximize network bandwidth on Amazon EC2 instances with multiple
network cards"):

* the primary interface (network card 0, device index 0) is an ENA interface - an
  EFA-only interface can never be primary;
* if network card 0 supports EFA, an EFA-only interface goes on card 0, device index 1;
* every further EFA-capable card gets an EFA-only interface at device index 0;
* never more EFA interfaces than the type's MaximumEfaInterfaces.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpu_cluster.components.catalog import InstanceFacts

NETWORK_PERFORMANCE_PATH = Path(__file__).parent / "data" / "network_performance.json"

ENA = "interface"
EFA_ONLY = "efa-only"


@dataclass(frozen=True, slots=True)
class NicSlot:
    """One network interface of a launch template."""

    network_card_index: int
    device_index: int
    interface_type: str

    @property
    def is_efa(self) -> bool:
        return self.interface_type in ("efa", EFA_ONLY)

    @property
    def has_ip_address(self) -> bool:
        """EFA-only interfaces carry no IP address; ENA and EFA (with ENA) interfaces do."""
        return self.interface_type != EFA_ONLY


def nic_layout(facts: InstanceFacts, efa: bool) -> tuple[NicSlot, ...]:
    """The interfaces to attach: one ENA primary, plus EFA-only on each EFA-capable card."""
    primary = NicSlot(network_card_index=0, device_index=0, interface_type=ENA)
    if not efa:
        return (primary,)
    if not facts.efa_supported:
        raise ValueError(f"{facts.instance_type} does not support EFA")
    slots = [primary]
    budget = facts.max_efa_interfaces
    for card in facts.network_cards:
        if budget == 0:
            break
        if not card.supports_efa:
            continue
        device_index = 1 if card.index == 0 else 0
        slots.append(NicSlot(card.index, device_index, EFA_ONLY))
        budget -= 1
    return tuple(slots)


def efa_interface_count(slots: tuple[NicSlot, ...]) -> int:
    return sum(slot.is_efa for slot in slots)


def ip_addresses_per_node(slots: tuple[NicSlot, ...]) -> int:
    return sum(slot.has_ip_address for slot in slots)


@cache
def stated_network_gbps() -> dict[str, float]:
    """The instance's own figure where its EFA cards' baselines do not add up to it."""
    return json.loads(NETWORK_PERFORMANCE_PATH.read_text())["gbps"]


def node_network_gbps(facts: InstanceFacts, efa: bool) -> float:
    """Inter-node bandwidth of one node: the EFA cards' baseline together (or the instance's
    stated figure where they disagree: data/network_performance.json), else card 0's."""
    slots = nic_layout(facts, efa and facts.efa_supported)
    cards = {s.network_card_index for s in slots if s.is_efa}
    by_index = {card.index: card for card in facts.network_cards}
    if cards:
        if len(cards) == len(facts.network_cards) and facts.instance_type in stated_network_gbps():
            return stated_network_gbps()[facts.instance_type]
        return sum(by_index[i].baseline_bandwidth_gbps for i in cards)
    return by_index[0].baseline_bandwidth_gbps if by_index else 0.0
