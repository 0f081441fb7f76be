"""What NCCL all-reduce bus bandwidth a healthy cluster reaches, and where each figure comes from.

nccl-tests' busbw = algbw x 2(n-1)/n for n ranks (NVIDIA/nccl-tests doc/PERFORMANCE.md). Three
cases are kept apart (components/data/nccl_allreduce_reference.SOURCE.md):

- 2 nodes: NCCL's tree algorithm reports busbw above the network's bandwidth (NVIDIA/nccl-tests
  issue 22: "the reported BusBW can exceed the actual available peak BW, when running on just
  2 nodes"): 2 x p4de measured 78.3 GB/s over 4 x 100 Gbps of EFA (50 GB/s). A 2-node figure is
  AWS's measurement where one is published, else the network bound, labelled derived.
- 4 or more nodes: NCCL uses ring for large messages, and busbw stays at or below one node's
  network bandwidth (the EFA cards' sum / 8): derived, with its arithmetic.
- 1 node: NVLink only; the threshold awsome-distributed-training's health check uses.

Every figure is `measured` (source, stack and message size), `derived` (its arithmetic) or
`threshold` (another project's pass line, with its source). The pass line is a fraction of it."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpu_cluster.components.catalog import InstanceFacts
from gpu_cluster.components.nic_layout import node_network_gbps

REFERENCE_PATH = Path(__file__).parent / "data" / "nccl_allreduce_reference.csv"
# A run passes at 80 % of the expected figure: an assumption (no public pass line for multi-node
# EFA runs), wide enough for run-to-run noise, narrow enough that a node with one EFA device
# down (p4d: 3 of 4 cards, 75 %) fails.
PASS_FRACTION = 0.8
# nccl-tests' default largest size in AWS's runs is 2 GiB; p5 still climbs there (437 GB/s at
# 1 GiB, 487 GB/s at 16 GiB), so a type's own largest measured size wins.
DEFAULT_PLATEAU_BYTES = 2 * 2**30
# the bench allocates one buffer of the message size per GPU; NCCL and PyTorch need room beside it
GPU_MEMORY_SHARE = 4
GIB = 2**30


@dataclass(frozen=True)
class Reference:
    """One row of the published figures (components/data/nccl_allreduce_reference.csv)."""

    instance_type: str
    nodes: int
    message_bytes: int | None
    busbw_gbytes_per_s: float
    kind: str
    stack: str
    source: str


@cache
def references() -> tuple[Reference, ...]:
    with REFERENCE_PATH.open(newline="") as handle:
        return tuple(
            Reference(
                instance_type=row["instance_type"],
                nodes=int(row["nodes"]),
                message_bytes=int(row["message_bytes"]) if row["message_bytes"] else None,
                busbw_gbytes_per_s=float(row["busbw_gbytes_per_s"]),
                kind=row["kind"],
                stack=row["stack"],
                source=row["source"],
            )
            for row in csv.DictReader(handle)
        )


@dataclass(frozen=True)
class BusbwExpectation:
    """The busbw a healthy run of `nodes` x `instance_type` reaches at its plateau size."""

    instance_type: str
    nodes: int
    gbytes_per_s: float
    kind: str  # "measured" | "derived" | "threshold" | "none"
    basis: str
    message_bytes: int  # the largest message the bench runs (the plateau)
    pass_fraction: float = PASS_FRACTION

    @property
    def pass_gbytes_per_s(self) -> float:
        return round(self.gbytes_per_s * self.pass_fraction, 1)

    @property
    def label(self) -> str:
        return f"{self.gbytes_per_s:g} GB/s {self.kind} ({self.basis})"


def size_text(size: int | None) -> str:
    if size is None:
        return "peak, size not published"
    return f"{size // GIB} GiB" if size >= GIB else f"{size // 2**20} MiB"


def measured(instance_type: str, nodes: int) -> Reference | None:
    """The published plateau: the largest message measured, else a peak without a size."""
    rows = [
        r
        for r in references()
        if r.instance_type == instance_type and r.nodes == nodes and r.kind.startswith("measured")
    ]
    sized = [r for r in rows if r.message_bytes is not None]
    if sized:
        return max(sized, key=lambda r: (r.message_bytes or 0, r.busbw_gbytes_per_s))
    return rows[0] if rows else None


def nvlink_threshold(instance_type: str) -> Reference | None:
    rows = [
        r for r in references() if r.instance_type == instance_type and r.kind.startswith("thresh")
    ]
    return rows[0] if rows else None


def plateau_bytes(facts: InstanceFacts) -> int:
    """The largest message the bench runs: the type's largest measured size (2 GiB where none
    is published), at most a quarter of one GPU's memory, a power of two."""
    sizes = [
        r.message_bytes
        for r in references()
        if r.instance_type == facts.instance_type and r.message_bytes
    ]
    wanted = max(sizes, default=DEFAULT_PLATEAU_BYTES)
    room = facts.gpu_memory_mib * 2**20 // GPU_MEMORY_SHARE
    size = 2**20
    while size * 2 <= min(wanted, room):
        size *= 2
    return size


def expected_busbw(facts: InstanceFacts, nodes: int, efa: bool) -> BusbwExpectation:
    """The model: a measurement where AWS published one for this type and node count, else the
    network bound (derived), else, on one node, the NVLink threshold."""
    size = plateau_bytes(facts)
    kind = facts.instance_type
    if nodes <= 1:
        threshold = nvlink_threshold(kind)
        if threshold is None:
            return BusbwExpectation(kind, 1, 0.0, "none", "one node: no published threshold", size)
        return BusbwExpectation(
            kind,
            1,
            threshold.busbw_gbytes_per_s,
            "threshold",
            f"NVLink within one node: {threshold.source} ({threshold.stack})",
            size,
            pass_fraction=1.0,
        )
    if nodes == 2 and (row := measured(kind, 2)) is not None:
        return BusbwExpectation(
            kind,
            2,
            row.busbw_gbytes_per_s,
            "measured",
            f"2 x {kind}, {size_text(row.message_bytes)}, {row.stack}: {row.source}",
            size,
        )
    gbps = node_network_gbps(facts, efa)
    cards = "EFA" if efa and facts.efa_supported else "network card 0"
    why = (
        "2 nodes report more (tree algorithm, NVIDIA/nccl-tests issue 22): a floor"
        if nodes == 2
        else f"on {nodes} nodes ring busbw stays at or below one node's network"
    )
    return BusbwExpectation(
        kind,
        nodes,
        round(gbps / 8, 1),
        "derived",
        f"{cards} {gbps:g} Gbps / 8 = {gbps / 8:g} GB/s; {why}",
        size,
    )


def node_count_tables(facts: InstanceFacts, efa: bool) -> tuple[str, str]:
    """(expected, pass line) as "1:X,2:Y,3:Z": what a bench over that many nodes (3: three or
    more) is held to, whatever the group's size, so that scaling the group leaves the nodes'
    user data as it is (a node-count figure in it would be a new launch-template version)."""
    rows = [expected_busbw(facts, nodes, efa) for nodes in (1, 2, 3)]
    expected = ",".join(f"{r.nodes}:{r.gbytes_per_s:g}" for r in rows)
    passing = ",".join(f"{r.nodes}:{r.pass_gbytes_per_s:g}" for r in rows)
    return expected, passing


def bus_bandwidth_model(expectation: BusbwExpectation) -> dict[str, object]:
    """The expectation as a stack output (camelCase, as every output)."""
    return {
        "nodes": expectation.nodes,
        "gbytesPerSecond": expectation.gbytes_per_s,
        "passGbytesPerSecond": expectation.pass_gbytes_per_s,
        "kind": expectation.kind,
        "basis": expectation.basis,
        "messageBytes": expectation.message_bytes,
    }
