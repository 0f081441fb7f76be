"""The `gpuc nccl-test` command: the stack's running nodes found, the bench run on all of them or
in pairs (infra/aws/nccl_test.py runs it, infra/nccl_pairs.py schedules the pairs and judges
them), each figure held against the model's pass line (components/bandwidth.py), as text or
--json. Exit 0 when every run passed; 5 (FINDINGS) when a run is under its line, a node is
named, a pair is inconclusive or a node was lost; 4 or 3 when it could not run at all."""

from __future__ import annotations

import json
import sys
import uuid
from dataclasses import dataclass, field
from typing import Any

from gpu_cluster.components.bandwidth import BusbwExpectation, expected_busbw
from gpu_cluster.components.catalog import InstanceFacts
from gpu_cluster.components.names import StackIdentity
from gpu_cluster.infra.aws import client
from gpu_cluster.infra.aws.nccl_test import (
    PORT_BASE,
    BenchNode,
    Group,
    GroupOutcome,
    NodeRun,
    Runner,
    SsmRunner,
    group_outcome,
    running_nodes,
    to_stderr,
)
from gpu_cluster.infra.nccl_pairs import PairResult, Verdict, judge, pair_rounds
from gpu_cluster.infra.outcome import AWS, FINDINGS, INPUT, OK, CommandError


@dataclass
class Lost:
    """Nodes that did not run the bench to its end, with what SSM said (the first time)."""

    nodes: dict[str, str] = field(default_factory=dict)

    def note(self, runs: dict[str, NodeRun]) -> None:
        for instance_id, run in sorted(runs.items()):
            if run.lost and instance_id not in self.nodes:
                self.nodes[instance_id] = run.summary()


def expectation_json(expectation: BusbwExpectation) -> dict[str, Any]:
    return {
        "nodes": expectation.nodes,
        "gbytesPerSecond": expectation.gbytes_per_s,
        "passGbytesPerSecond": expectation.pass_gbytes_per_s,
        "kind": expectation.kind,
        "basis": expectation.basis,
        "messageBytes": expectation.message_bytes,
    }


def line_text(expectation: BusbwExpectation) -> str:
    return (
        f"pass line {expectation.pass_gbytes_per_s:g} GB/s = {expectation.pass_fraction:.0%} of "
        f"{expectation.label}"
    )


# --- the whole cluster at once ------------------------------------------------------------


def cluster_run(
    runner: Runner, nodes: list[BenchNode], expectation: BusbwExpectation, run_id: str
) -> tuple[GroupOutcome, Lost]:
    group = Group(f"gpuc-nccl-{run_id}", PORT_BASE, tuple(nodes), expectation.pass_gbytes_per_s)
    runs = runner.run([group], f"all {len(nodes)} node(s)")
    lost = Lost()
    lost.note(runs)
    return group_outcome(group, runs), lost


def cluster_report(
    stack: str, outcome: GroupOutcome, lost: Lost, expectation: BusbwExpectation, as_json: bool
) -> int:
    busbw = outcome.busbw
    passed = busbw is not None and busbw >= expectation.pass_gbytes_per_s and not lost.nodes
    if as_json:
        dump(
            {
                "stack": stack,
                "mode": "cluster",
                "instanceType": expectation.instance_type,
                "nodes": list(outcome.group.ids),
                "busbw": busbw,
                "bytes": outcome.result.get("bytes") if outcome.result else None,
                "rank0": outcome.rank0 or None,
                "expected": expectation_json(expectation),
                "pass": passed,
                "lost": lost.nodes,
                "why": outcome.why,
            }
        )
        return OK if passed else FINDINGS
    count = len(outcome.group.nodes)
    print(f"NCCL all-reduce on {count} x {expectation.instance_type}, stack '{stack}':")
    if busbw is None:
        print(f"  no figure: {outcome.why}")
    else:
        size = int(outcome.result.get("bytes") or 0) if outcome.result else 0
        print(f"  busbw {busbw:g} GB/s at {size:,} bytes (rank 0 on {outcome.rank0})")
    print(f"  {line_text(expectation)}")
    for instance_id, why in lost.nodes.items():
        print(f"  lost: {instance_id}: {why}")
    if passed:
        print("PASS")
        return OK
    hint = (
        f"find the slow node: gpuc nccl-test --stack {stack} --pairwise"
        if busbw is not None and count >= 3
        else f"each node's health: gpuc status --stack {stack}"
    )
    print(f"FAIL: {hint}")
    return FINDINGS


# --- in pairs -----------------------------------------------------------------------------


@dataclass
class Pairwise:
    rounds: list[list[PairResult]]
    lost: Lost
    verdict: Verdict


def pairwise_run(
    runner: Runner, nodes: list[BenchNode], expectation: BusbwExpectation, run_id: str
) -> Pairwise:
    """Each round's pairs at once (each its own rendezvous); a pair with a node lost in an
    earlier round is not run again (its partner would wait out the rendezvous)."""
    by_id = {n.instance_id: n for n in nodes}
    schedule = pair_rounds([n.instance_id for n in nodes])
    lost = Lost()
    rounds: list[list[PairResult]] = []
    for number, pairs in enumerate(schedule, start=1):
        groups, skipped = [], {}
        for index, (a, b) in enumerate(pairs):
            gone = [i for i in (a, b) if i in lost.nodes]
            if gone:
                skipped[(a, b)] = f"not run: {', '.join(gone)} lost earlier"
                continue
            groups.append(
                Group(
                    f"gpuc-nccl-{run_id}-r{number}p{index}",
                    PORT_BASE + index,
                    (by_id[a], by_id[b]),
                    expectation.pass_gbytes_per_s,
                )
            )
        runs = runner.run(groups, f"round {number}/{len(schedule)}") if groups else {}
        lost.note(runs)
        outcomes = {g.ids: group_outcome(g, runs) for g in groups}
        results = []
        for pair in pairs:
            if pair in skipped:
                results.append(PairResult(number, pair, None, skipped[pair]))
                continue
            outcome = outcomes[pair]
            results.append(PairResult(number, pair, outcome.busbw, outcome.why))
        rounds.append(results)
    flat = [r for results in rounds for r in results]
    return Pairwise(rounds, lost, judge(flat, expectation.pass_gbytes_per_s))


def pairwise_passed(run: Pairwise) -> bool:
    every = [r for results in run.rounds for r in results]
    return (
        run.verdict.clean
        and not run.lost.nodes
        and all(r.busbw is not None and r.busbw >= run.verdict.line for r in every)
    )


def per_node(run: Pairwise) -> dict[str, list[PairResult]]:
    found: dict[str, list[PairResult]] = {}
    for results in run.rounds:
        for result in results:
            for node in result.nodes:
                found.setdefault(node, []).append(result)
    return dict(sorted(found.items()))


def node_state(node: str, run: Pairwise) -> str:
    if node in run.verdict.stragglers:
        return "STRAGGLER"
    if node in run.lost.nodes:
        return "lost"
    if node in run.verdict.inconclusive:
        return "inconclusive"
    if all(r.busbw is None for r in per_node(run).get(node, [])):
        return "no figure"
    return "ok"


def figure(busbw: float | None) -> str:
    return f"{busbw:g} GB/s" if busbw is not None else "no figure"


def pairwise_report(stack: str, run: Pairwise, expectation: BusbwExpectation, as_json: bool) -> int:
    passed = pairwise_passed(run)
    line = run.verdict.line
    nodes = per_node(run)
    if as_json:
        dump(
            {
                "stack": stack,
                "mode": "pairwise",
                "instanceType": expectation.instance_type,
                "nodes": list(nodes),
                "expected": expectation_json(expectation),
                "rounds": [
                    [
                        {
                            "nodes": list(r.nodes),
                            "busbw": r.busbw,
                            "pass": None if r.busbw is None else r.busbw >= line,
                            "why": r.why,
                        }
                        for r in results
                    ]
                    for results in run.rounds
                ],
                "perNode": {
                    node: {
                        "state": node_state(node, run),
                        "pairs": [
                            {"round": r.round, "partner": r.partner(node), "busbw": r.busbw}
                            for r in results
                        ],
                    }
                    for node, results in nodes.items()
                },
                "stragglers": list(run.verdict.stragglers),
                "inconclusive": list(run.verdict.inconclusive),
                "shared": run.verdict.shared,
                "lost": run.lost.nodes,
                "pass": passed,
            }
        )
        return OK if passed else FINDINGS
    print(
        f"NCCL all-reduce in pairs on {len(nodes)} x {expectation.instance_type}, stack "
        f"'{stack}': {len(run.rounds)} rounds"
    )
    print(f"  {line_text(expectation)}")
    for results in run.rounds:
        for r in results:
            mark = "" if r.busbw is None else ("  pass" if r.busbw >= line else "  SLOW")
            why = f"  ({r.why})" if r.busbw is None else ""
            print(f"  round {r.round}  {r.nodes[0]} + {r.nodes[1]}  {figure(r.busbw)}{mark}{why}")
    print(f"  {'node':<20} {'state':<13} with (partner: busbw)")
    for node, results in nodes.items():
        pairs = ", ".join(f"{r.partner(node)}: {figure(r.busbw)}" for r in results)
        print(f"  {node:<20} {node_state(node, run):<13} {pairs}")
    for line_out in verdict_lines(stack, run):
        print(line_out)
    return OK if passed else FINDINGS


def verdict_lines(stack: str, run: Pairwise) -> list[str]:
    verdict = run.verdict
    lines = [
        f"straggler: {node}: under {verdict.line:g} GB/s with every partner, while they pass with "
        f"others; check it (gpuc status --stack {stack}: its health) and replace it: "
        f"aws autoscaling set-instance-health --instance-id {node} --health-status Unhealthy "
        "(its group launches a new node; a running job resumes from its checkpoint)"
        for node in verdict.stragglers
    ]
    if verdict.shared:
        lines.append(
            "every pair is under the line: no node passes with any partner, so none can be "
            "named: a cause all nodes share (NCCL not on EFA: gpuc jobs says why; the placement "
            "group) or more than one slow node"
        )
    elif verdict.inconclusive:
        lines.append(
            f"inconclusive: {', '.join(verdict.inconclusive)}: slow in a pair the others do not "
            "explain (a one-off, or too few figures: with 2 nodes a slow pair cannot say which); "
            "run it again"
        )
    lines += [f"lost: {node}: {why}" for node, why in run.lost.nodes.items()]
    unmeasured = [r for results in run.rounds for r in results if r.busbw is None]
    if unmeasured:
        lines.append(
            f"no figure from {len(unmeasured)} pair(s): each says why above (each node's status "
            "and the last line it printed)"
        )
    lines.append(
        "PASS: every pair reached the line"
        if pairwise_passed(run)
        else f"FAIL: see above; each node's health: gpuc status --stack {stack}"
    )
    return lines


# --- the command --------------------------------------------------------------------------


def dump(document: Any) -> None:
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")


def command_nccl_test(
    stack: str,
    cluster: StackIdentity,
    region: str,
    facts: InstanceFacts,
    efa: bool,
    pairwise: bool,
    as_json: bool,
    *,
    ec2: Any = None,
    ssm: Any = None,
    runner: Runner | None = None,
) -> int:
    ec2 = ec2 if ec2 is not None else client("ec2", region)
    ssm = ssm if ssm is not None else client("ssm", region)
    nodes, missing = running_nodes(ec2, ssm, cluster)
    if not nodes:
        raise CommandError(
            AWS,
            f"stack '{stack}' has no running node in {region}: start it first (pulumi up, or gpuc "
            f"resume --stack {stack}); nothing was run",
        )
    if missing:
        raise CommandError(
            AWS,
            f"node(s) {', '.join(missing)} of stack '{stack}' are not reachable by SSM (agent not "
            "registered or offline, or a node still booting): wait, or check `systemctl status "
            "amazon-ssm-agent` through the console; nothing was run",
        )
    if pairwise and len(nodes) < 2:
        raise CommandError(
            INPUT,
            f"--pairwise needs at least 2 running nodes; stack '{stack}' has 1 "
            f"({nodes[0].instance_id}): measure it alone with gpuc nccl-test --stack {stack}, or "
            "scale the stack up first",
        )
    others = sorted({n.instance_type for n in nodes if n.instance_type != facts.instance_type})
    if others:
        to_stderr(
            f"warning: the stack file says {facts.instance_type}, nodes run {', '.join(others)}: "
            f"the pass line is {facts.instance_type}'s"
        )
    progress = (lambda _message: None) if as_json else to_stderr
    runner = runner or SsmRunner(ssm, progress=progress)
    run_id = uuid.uuid4().hex[:8]
    if pairwise:
        expectation = expected_busbw(facts, 2, efa)
        if not as_json:
            to_stderr(f"running the bench in pairs on {len(nodes)} node(s) (run {run_id})")
        run = pairwise_run(runner, nodes, expectation, run_id)
        return pairwise_report(stack, run, expectation, as_json)
    expectation = expected_busbw(facts, len(nodes), efa)
    if not as_json:
        to_stderr(f"running the bench on {len(nodes)} node(s) at once (run {run_id})")
    outcome, lost = cluster_run(runner, nodes, expectation, run_id)
    return cluster_report(stack, outcome, lost, expectation, as_json)
