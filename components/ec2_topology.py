"""EC2 topology: which instance types DescribeInstanceTopology answers for, how a node set reads,
and where a gang of nodes spans network nodes.

A node set is top-down: the first network node is the top layer, the last the one the instance
connects to (EC2 User Guide, "How Amazon EC2 topology works"). Two instances under the same last
node are the closest the network places them. The supported types and request limits are data
(data/ec2_topology.json, with their source)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TOPOLOGY_DATA = Path(__file__).parent / "data" / "ec2_topology.json"


@cache
def topology_facts() -> dict[str, Any]:
    return json.loads(TOPOLOGY_DATA.read_text())


def network_node_levels(instance_type: str) -> int:
    """How many network nodes DescribeInstanceTopology returns for the type (0: unsupported)."""
    for levels, types in topology_facts()["network_nodes"].items():
        if instance_type in types:
            return int(levels)
    return 0


def supports_topology(instance_type: str) -> bool:
    return network_node_levels(instance_type) > 0


def id_batches(ids: list[str]) -> list[list[str]]:
    """Instance ids in requests of at most the API's 100 (botocore's model: InstanceIds)."""
    size = int(topology_facts()["instance_ids_per_request"])
    return [ids[i : i + size] for i in range(0, len(ids), size)]


def rank_name(network_nodes: list[str] | tuple[str, ...], instance_id: str) -> str:
    """The name a node gives torchrun as --local_addr when its topology is known: its node set
    top-down, then its id. torch's c10d rendezvous ranks nodes in sorted order of this address
    (dynamic_rendezvous.py: _NodeDesc(addr, pid, local_id) is ordered; ranks are
    enumerate(sorted(participants))), and every string that starts with the same node set sorts
    together: nodes under the same network node become neighbours at every layer.
    boot/gpu-cluster-nodes.sh writes the same name (tests/test_topology_ranks.py holds both)."""
    return "gpuc-" + ".".join([*network_nodes, instance_id]).lower()


@dataclass(frozen=True)
class Span:
    """A gang under more than one network node at the layer closest to the instances."""

    meeting: tuple[str, ...]  # the network nodes they share, top-down ("" when none)
    groups: tuple[tuple[str, tuple[str, ...]], ...]  # (last network node, instance ids)

    def describe(self) -> str:
        parts = ", ".join(f"{node} ({', '.join(ids)})" for node, ids in self.groups)
        where = (
            f"they meet under {self.meeting[-1]} (layer {len(self.meeting)} of the node set)"
            if self.meeting
            else "they share no network node"
        )
        return (
            f"the gang spans {len(self.groups)} network nodes at the layer closest to the "
            f"instances: {parts}; {where}"
        )


def gang_span(node_sets: dict[str, tuple[str, ...]]) -> Span | None:
    """Where the instances (id -> node set) sit under more than one last network node; None when
    they share one (or fewer than two have a node set)."""
    known = {i: tuple(nodes) for i, nodes in node_sets.items() if nodes}
    if len(known) < 2:
        return None
    by_last: dict[str, list[str]] = {}
    for instance, nodes in sorted(known.items(), key=lambda kv: (kv[1], kv[0])):
        by_last.setdefault(nodes[-1], []).append(instance)
    if len(by_last) < 2:
        return None
    sets = list(known.values())
    shared: list[str] = []
    for layer in zip(*sets, strict=False):
        if len(set(layer)) > 1:
            break
        shared.append(layer[0])
    groups = tuple((node, tuple(ids)) for node, ids in by_last.items())
    return Span(tuple(shared), groups)
