"""The EFA NIC layout for every EFA-capable type in the catalog, checked against its card facts."""

from __future__ import annotations

import pytest

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.components.nic_layout import (
    EFA_ONLY,
    ENA,
    efa_interface_count,
    ip_addresses_per_node,
    nic_layout,
)

CATALOG = load_catalog()
EFA_TYPES = sorted(name for name, facts in CATALOG.instance_types.items() if facts.efa_supported)
NON_EFA_TYPES = sorted(name for name, f in CATALOG.instance_types.items() if not f.efa_supported)


def test_catalog_has_the_efa_families():
    for family in ("p4d.", "p4de.", "p5.", "p5e.", "p5en.", "p6-b200.", "p3dn.", "g5.", "g6e."):
        assert any(name.startswith(family) for name in EFA_TYPES), family


@pytest.mark.parametrize("instance_type", EFA_TYPES)
def test_layout_follows_aws_rules_and_card_facts(instance_type):
    facts = CATALOG.instance_types[instance_type]
    slots = nic_layout(facts, efa=True)
    cards = {card.index: card for card in facts.network_cards}

    primary = slots[0]
    assert (primary.network_card_index, primary.device_index, primary.interface_type) == (0, 0, ENA)
    efa_slots = [s for s in slots if s.is_efa]
    # One EFA interface per EFA-capable card, never more than the type allows.
    efa_cards = [c for c in facts.network_cards if c.supports_efa]
    assert len(efa_slots) == min(len(efa_cards), facts.max_efa_interfaces)
    assert len({s.network_card_index for s in efa_slots}) == len(efa_slots)
    for slot in efa_slots:
        card = cards[slot.network_card_index]
        assert slot.interface_type == EFA_ONLY
        assert EFA_ONLY in card.interface_types
        assert slot.device_index == (1 if slot.network_card_index == 0 else 0)
    # No card carries more interfaces than it supports, and (card, device) pairs are unique.
    for index, card in cards.items():
        assert sum(s.network_card_index == index for s in slots) <= card.max_interfaces
    assert len({(s.network_card_index, s.device_index) for s in slots}) == len(slots)


def test_p4d_has_four_efa_on_cards_0_to_3():
    slots = nic_layout(CATALOG.instance_types["p4d.24xlarge"], efa=True)
    assert [(s.network_card_index, s.device_index, s.interface_type) for s in slots] == [
        (0, 0, ENA),
        (0, 1, EFA_ONLY),
        (1, 0, EFA_ONLY),
        (2, 0, EFA_ONLY),
        (3, 0, EFA_ONLY),
    ]
    assert ip_addresses_per_node(slots) == 1


def test_p5_uses_all_32_cards():
    slots = nic_layout(CATALOG.instance_types["p5.48xlarge"], efa=True)
    assert efa_interface_count(slots) == 32
    assert sorted(s.network_card_index for s in slots if s.is_efa) == list(range(32))


def test_card_without_efa_is_skipped():
    """p6-b300's card 0 is ENA-only, so its 16 EFA interfaces sit on cards 1-16."""
    facts = CATALOG.instance_types["p6-b300.48xlarge"]
    assert not facts.network_cards[0].supports_efa
    slots = nic_layout(facts, efa=True)
    assert sorted(s.network_card_index for s in slots if s.is_efa) == list(range(1, 17))


@pytest.mark.parametrize("instance_type", NON_EFA_TYPES[:5] + EFA_TYPES[:3])
def test_no_efa_means_one_ena_interface(instance_type):
    slots = nic_layout(CATALOG.instance_types[instance_type], efa=False)
    assert [(s.network_card_index, s.device_index, s.interface_type) for s in slots] == [
        (0, 0, ENA)
    ]


def test_efa_on_unsupported_type_is_refused():
    with pytest.raises(ValueError, match="does not support EFA"):
        nic_layout(CATALOG.instance_types["g5.xlarge"], efa=True)
