"""`gpuc nccl-test --pairwise`, the pure part: which nodes run the all-reduce test together in
each round, and which node the pairs' figures name as the slow one.

Rounds come from the circle method of a round-robin tournament (one node fixed, the others
rotated one place a round; an odd count adds a stand-in, and whoever meets it sits the round
out): no pair repeats, so the first rounds give each node as many different partners.
- N even >= 4: 2 rounds, every node in 2 pairs with 2 different partners.
- N odd >= 3: 3 rounds; each node sits out at most one of them (a node meets the stand-in once
  in the whole tournament), so it is in 2 or 3 pairs, all with different partners. N = 3: each
  node pairs with both others.
- N = 2: the one pair, twice. A figure under the line then says the pair is slow, never which
  node: the report says so (inconclusive); a third node is needed to tell.
- N < 2: no pair; the command refuses before calling this.

A node is named (a straggler) when at least two of its pairs were measured, every one of them is
under the 2-node pass line, and a partner in one of them passed in another pair: that partner
is fine, so the pair was slow because of this node. Two slow nodes paired together are both
named through their other partners. A slow pair with no named node in it leaves its nodes
inconclusive (a one-off, or too few measurements to tell); when every measured pair is slow,
the cause is shared by all (NCCL not on EFA, a wrong pass line), not one node."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Pair = tuple[str, str]


def rounds_needed(nodes: int) -> int:
    """Rounds of the schedule for ``nodes`` nodes (0 under 2)."""
    if nodes < 2:
        return 0
    return 3 if nodes % 2 else 2


def pair_rounds(nodes: Sequence[str]) -> list[list[Pair]]:
    """The rounds: in each, disjoint pairs that run at once; each node measured at least twice,
    with different partners from 3 nodes up (see the module's docstring)."""
    names = list(dict.fromkeys(nodes))  # in the order given, each once
    if len(names) != len(nodes):
        raise ValueError("each node is listed once")
    if len(names) < 2:
        raise ValueError(f"pairs need at least 2 nodes, not {len(names)}")
    if len(names) == 2:
        return [[(names[0], names[1])], [(names[0], names[1])]]
    players: list[str | None] = [*names, None] if len(names) % 2 else list(names)
    fixed, rest = players[0], players[1:]
    size = len(players)
    schedule: list[list[Pair]] = []
    for turn in range(rounds_needed(len(names))):
        shift = turn % len(rest)
        seats = [fixed, *rest[len(rest) - shift :], *rest[: len(rest) - shift]]
        pairs = [(seats[i], seats[size - 1 - i]) for i in range(size // 2)]
        schedule.append([(a, b) for a, b in pairs if a is not None and b is not None])
    return schedule


@dataclass(frozen=True)
class PairResult:
    """One pair's run: its bus bandwidth (GB/s), or None when it gave no figure (``why``)."""

    round: int  # 1-based
    nodes: Pair
    busbw: float | None
    why: str = ""

    def partner(self, node: str) -> str:
        return self.nodes[1] if self.nodes[0] == node else self.nodes[0]


@dataclass(frozen=True)
class Verdict:
    stragglers: tuple[str, ...]  # named: slow in every pair, beside a partner fine elsewhere
    inconclusive: tuple[str, ...]  # in a slow pair nobody named explains
    shared: bool  # every measured pair (two or more) is slow: not one node's fault
    line: float  # the 2-node pass line the pairs were held against (GB/s)

    @property
    def clean(self) -> bool:
        return not self.stragglers and not self.inconclusive and not self.shared


def node_results(results: Sequence[PairResult], node: str) -> list[PairResult]:
    return [r for r in results if node in r.nodes]


def judge(results: Sequence[PairResult], line: float) -> Verdict:
    """Who the pairs' figures name (see the module's docstring)."""
    measured = [r for r in results if r.busbw is not None]
    slow = [r for r in measured if r.busbw is not None and r.busbw < line]
    nodes = sorted({n for r in results for n in r.nodes})

    def passes(node: str, besides: PairResult) -> bool:
        return any(r is not besides and r not in slow for r in node_results(measured, node))

    named = []
    for node in nodes:
        mine = node_results(measured, node)
        if len(mine) < 2 or any(r not in slow for r in mine):
            continue
        if any(passes(r.partner(node), r) for r in mine):
            named.append(node)
    explained = [r for r in slow if set(r.nodes) & set(named)]
    unsure = sorted({n for r in slow if r not in explained for n in r.nodes} - set(named))
    shared = len(nodes) >= 3 and len(measured) >= 2 and len(slow) == len(measured) and not named
    return Verdict(tuple(named), tuple(unsure), shared, line)
