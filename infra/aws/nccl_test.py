"""`gpuc nccl-test`: the all-reduce bench (components/boot/allreduce_bench.py) on a stack's
running nodes through SSM Run Command, on all of them at once or, with --pairwise, in pairs
(infra/nccl_pairs.py), and each run's `GPUC_NCCL_RESULT` line read back.

How the nodes run it: one AWS-RunShellScript command per round (per SEND_COMMAND_INSTANCE_IDS
nodes), the same script on each node; the script finds its own part (its group's rendezvous)
in a table keyed by instance id, read from AWS_SSM_INSTANCE_ID, which the SSM agent sets for
every command it runs (aws/amazon-ssm-agent agent/executers/executers.go, envVarInstanceId).
Each group (the whole cluster, or a pair) gets its own c10d rendezvous through gpuc-torchrun's
overrides (GPUC_NNODES, GPUC_RDZV_ENDPOINT on the group's first node, GPUC_RDZV_ID, its own
port, GPUC_RDZV_HOST, GPUC_LOCAL_ADDR) and the pass line in GPUC_BUSBW_THRESHOLD_GBPS.

AWS behaviour relied on (Systems Manager API reference): GetCommandInvocation's
StandardOutputContent holds at most 24,000 characters and is cut at the end, so each node prints
a bounded tail of the bench's output and the result line last; a command not delivered within
TimeoutSeconds + executionTimeout ends Delivery Timed Out ("Understanding command statuses")."""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from gpu_cluster.components.names import StackIdentity
from gpu_cluster.components.user_data import (
    ALLREDUCE_BENCH_PATH,
    JOB_USER,
    TORCHRUN_WRAPPER,
    bench_install_command,
)
from gpu_cluster.infra.aws import call, emulator_lacks, paginate
from gpu_cluster.infra.aws.batches import SEND_COMMAND_INSTANCE_IDS, chunks
from gpu_cluster.infra.aws.jobs import FINISHED, stack_nodes, unreachable
from gpu_cluster.infra.problems import AwsError

# Rendezvous ports: below the jobs' 29500-29999 (infra/aws/jobs.py), so a pair's c10d store never
# meets a running job's, and below Linux's ephemeral ports (32768-60999, ip_local_port_range);
# the nodes' security group allows all traffic between members. One port per group of a round.
PORT_BASE = 28500
# torch's c10d rendezvous waits join_timeout (600 s by default) for the group's other nodes
# (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py, create_handler): a pair whose
# partner is lost fails in 5 minutes instead.
JOIN_TIMEOUT_SECONDS = 300
EXECUTION_TIMEOUT_SECONDS = 900  # AWS-RunShellScript's executionTimeout: the bench itself
DELIVERY_TIMEOUT_SECONDS = 300  # SendCommand TimeoutSeconds: a busy agent still gets it
POLL_SECONDS = 10
# the bench's output kept per node: the result line and this tail fit the 24,000 characters
# GetCommandInvocation returns (its StandardOutputContent max, botocore's ssm model)
OUTPUT_TAIL_CHARS = 16000
RESULT = re.compile(r"GPUC_NCCL_RESULT (\{.*\})\s*$")
NOT_SENT = "NotSent"  # our own statuses beside SSM's: the SendCommand for the node failed
NO_ANSWER = "NoAnswer"  # it did not finish before gpuc stopped waiting (then cancelled)
# invocation details that mean the node itself is gone or its agent never ran the command
LOST_DETAILS = {"Undeliverable", "Terminated", "DeliveryTimedOut", "Delivery Timed Out"}


@dataclass(frozen=True)
class BenchNode:
    instance_id: str
    private_ip: str
    instance_type: str = ""


@dataclass(frozen=True)
class Group:
    """Nodes that run one all-reduce together (the cluster, or a pair); the first hosts it."""

    rdzv_id: str
    port: int
    nodes: tuple[BenchNode, ...]
    threshold: float  # GB/s: the bench's pass line (GPUC_BUSBW_THRESHOLD_GBPS)

    @property
    def endpoint(self) -> str:
        return f"{self.nodes[0].private_ip}:{self.port}"

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(n.instance_id for n in self.nodes)


@dataclass(frozen=True)
class NodeRun:
    """How the command ended on one node: SSM's status (or NOT_SENT / NO_ANSWER), its detail,
    and the output it printed."""

    instance_id: str
    status: str
    detail: str = ""
    output: str = ""

    @property
    def lost(self) -> bool:
        """The node did not run the command to its end (gone, agent offline, no answer)."""
        return self.status not in ("Success", "Failed") or self.detail in LOST_DETAILS

    def summary(self) -> str:
        last = next((line for line in reversed(self.output.splitlines()) if line.strip()), "")
        what = self.status + (
            f" ({self.detail})" if self.detail and self.detail != self.status else ""
        )
        return what + (f": {last.strip()[:200]}" if last else "")


class Runner(Protocol):
    """Runs one round's groups at once and says how it ended on each node."""

    def run(self, groups: Sequence[Group], label: str) -> dict[str, NodeRun]: ...


def node_script(
    groups: Mapping[str, Group], install: str | None = None, home: str = f"/home/{JOB_USER}"
) -> str:
    """The commands every node of a batch runs (sh: AWS-RunShellScript runs them with sh):
    its part from the table, the bench installed, gpuc-torchrun, a bounded tail of the output,
    the result line last, the bench's exit code. ``install``: what writes the bench (the
    default: user_data.bench_install_command, as ncclTestCommand does); ``home``: where the
    bench runs (the job user's home, as runOnEveryNodeCommand)."""
    table = []
    for instance_id, group in sorted(groups.items()):
        node = next(n for n in group.nodes if n.instance_id == instance_id)
        part = (
            len(group.nodes),
            group.endpoint,
            group.rdzv_id,
            1 if node is group.nodes[0] else 0,
            node.private_ip,
            f"{group.threshold:g}",
        )
        table.append(f"  {instance_id}) set -- {' '.join(shlex.quote(str(p)) for p in part)} ;;")
    install = bench_install_command() if install is None else install
    return "\n".join(
        [
            'me="${AWS_SSM_INSTANCE_ID:-}"',
            'case "$me" in',
            *table,
            '  *) echo "gpuc nccl-test: no part for this node (${me:-unknown})" >&2; exit 3 ;;',
            "esac",
            f'{install} || {{ echo "gpuc nccl-test: could not write the bench" >&2; exit 1; }}',
            "out=$(mktemp) || exit 1",
            f'cd {shlex.quote(home)} && sudo -u {JOB_USER} env GPUC_NNODES="$1" '
            'GPUC_RDZV_ENDPOINT="$2" GPUC_RDZV_ID="$3" GPUC_RDZV_HOST="$4" GPUC_LOCAL_ADDR="$5" '
            f'GPUC_BUSBW_THRESHOLD_GBPS="$6" GPUC_RDZV_CONF=join_timeout={JOIN_TIMEOUT_SECONDS} '
            f'{TORCHRUN_WRAPPER} {ALLREDUCE_BENCH_PATH} > "$out" 2>&1',
            "rc=$?",
            f"grep -v 'GPUC_NCCL_RESULT ' \"$out\" | tail -c {OUTPUT_TAIL_CHARS}",
            "grep 'GPUC_NCCL_RESULT ' \"$out\" | tail -n 1",
            'rm -f "$out"',
            'exit "$rc"',
        ]
    )


def parse_result(output: str) -> dict[str, Any] | None:
    """The last `GPUC_NCCL_RESULT {json}` line's document (None without one, or unreadable);
    a prefix torchrun may put before a worker's line is allowed."""
    for line in reversed(output.splitlines()):
        match = RESULT.search(line)
        if not match:
            continue
        try:
            document = json.loads(match.group(1))
        except json.JSONDecodeError:
            return None
        if isinstance(document, dict) and isinstance(document.get("busbw"), int | float):
            return document
        return None
    return None


@dataclass(frozen=True)
class GroupOutcome:
    group: Group
    result: dict[str, Any] | None  # rank 0's GPUC_NCCL_RESULT
    rank0: str  # the node whose output carried it ("" without one)
    why: str  # without a result: each node's status and last line

    @property
    def busbw(self) -> float | None:
        return float(self.result["busbw"]) if self.result is not None else None


def group_outcome(group: Group, runs: Mapping[str, NodeRun]) -> GroupOutcome:
    """Rank 0 runs on any node of the group (c10d assigns ranks): its line is in one output."""
    for instance_id in group.ids:
        run = runs.get(instance_id)
        if run is not None and (result := parse_result(run.output)) is not None:
            return GroupOutcome(group, result, instance_id, "")
    why = "; ".join(
        f"{i}: {runs[i].summary()}" if i in runs else f"{i}: not run" for i in group.ids
    )
    return GroupOutcome(group, None, "", f"no result line ({why})")


# --- the SSM side -------------------------------------------------------------------------


def to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class SsmRunner:
    """Runner through SSM Run Command: SendCommand per batch, ListCommandInvocations until all
    end (bounded), GetCommandInvocation for each node's output; what never ends is cancelled."""

    def __init__(
        self,
        ssm: Any,
        progress: Callable[[str], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ssm = ssm
        self.progress = progress or (lambda _message: None)
        self.sleep = sleep
        self.clock = clock
        # SSM's own limit, plus a margin for the last poll and the agent's report
        self.wait_seconds = DELIVERY_TIMEOUT_SECONDS + EXECUTION_TIMEOUT_SECONDS + 60

    def run(self, groups: Sequence[Group], label: str) -> dict[str, NodeRun]:
        by_node = {node.instance_id: group for group in groups for node in group.nodes}
        runs: dict[str, NodeRun] = {}
        sent: dict[str, list[str]] = {}  # command id -> its nodes
        for batch in chunks(sorted(by_node), SEND_COMMAND_INSTANCE_IDS):
            try:
                answer = call(
                    self.ssm,
                    "ssm",
                    "SendCommand",
                    InstanceIds=batch,
                    DocumentName="AWS-RunShellScript",
                    Comment=f"gpuc nccl-test {label}"[:100],
                    Parameters={
                        "commands": [node_script({i: by_node[i] for i in batch})],
                        "executionTimeout": [str(EXECUTION_TIMEOUT_SECONDS)],
                    },
                    TimeoutSeconds=DELIVERY_TIMEOUT_SECONDS,
                )
            except AwsError as error:
                if not sent:  # nothing runs: the refusal is the answer (permissions, ...)
                    raise
                runs |= {i: NodeRun(i, NOT_SENT, str(error)) for i in batch}
                continue
            sent[answer["Command"]["CommandId"]] = batch
        ended = self.wait(sent, label)
        for command_id, batch in sent.items():
            late = [i for i in batch if i not in ended]
            if late:
                self.cancel(command_id, late)
            for instance_id in batch:
                runs[instance_id] = (
                    self.read(command_id, instance_id)
                    if instance_id in ended
                    else NodeRun(
                        instance_id, NO_ANSWER, f"not done after {self.wait_seconds} s; cancelled"
                    )
                )
        return runs

    def wait(self, sent: Mapping[str, list[str]], label: str) -> set[str]:
        """The nodes whose invocation ended, polled until all have or the wait is over."""
        total = sum(len(batch) for batch in sent.values())
        deadline = self.clock() + self.wait_seconds
        ended: set[str] = set()
        said = -1
        while True:
            for command_id, batch in sent.items():
                states = self.states(command_id, [i for i in batch if i not in ended])
                ended |= {i for i, state in states.items() if state in FINISHED}
            if len(ended) != said:
                said = len(ended)
                self.progress(f"{label}: {said} of {total} node(s) done")
            if len(ended) >= total or self.clock() >= deadline:
                return ended
            self.sleep(POLL_SECONDS)

    def states(self, command_id: str, waiting: list[str]) -> dict[str, str]:
        """Each node's invocation status (those not listed yet: none)."""
        if not waiting:
            return {}
        try:
            return {
                i["InstanceId"]: str(i.get("Status") or "")
                for i in paginate(
                    self.ssm, "ssm", "ListCommandInvocations", "CommandInvocations",
                    CommandId=command_id,
                )
            }  # fmt: skip
        except NotImplementedError:  # moto's in-process mock has no such API
            pass
        except AwsError as error:
            if not emulator_lacks(error):
                raise
        # an endpoint without ListCommandInvocations: node by node
        return {i: self.read(command_id, i).status for i in waiting}

    def cancel(self, command_id: str, ids: list[str]) -> None:
        try:
            call(self.ssm, "ssm", "CancelCommand", CommandId=command_id, InstanceIds=ids)
        except AwsError as error:  # reported with the nodes: they still run the bench
            self.progress(f"could not cancel the bench on {', '.join(ids)}: {error}")

    def read(self, command_id: str, instance_id: str) -> NodeRun:
        try:
            answer = call(
                self.ssm,
                "ssm",
                "GetCommandInvocation",
                CommandId=command_id,
                InstanceId=instance_id,
            )
        except AwsError as error:
            return NodeRun(instance_id, NO_ANSWER, str(error))
        return NodeRun(
            instance_id,
            str(answer.get("Status") or ""),
            str(answer.get("StatusDetails") or ""),
            str(answer.get("StandardOutputContent") or ""),
        )


def running_nodes(ec2: Any, ssm: Any, cluster: StackIdentity) -> tuple[list[BenchNode], list[str]]:
    """The stack's running nodes with their private addresses (sorted by instance id), and
    those SSM cannot reach (agent offline or not registered)."""
    nodes = stack_nodes(ec2, cluster)
    ids = [n.instance_id for n in nodes]
    if not ids:
        return [], []
    address: dict[str, str] = {}
    for reservation in paginate(ec2, "ec2", "DescribeInstances", "Reservations", InstanceIds=ids):
        for instance in reservation.get("Instances", []):
            address[instance["InstanceId"]] = instance.get("PrivateIpAddress") or ""
    found = [
        BenchNode(n.instance_id, address.get(n.instance_id, ""), n.instance_type)
        for n in sorted(nodes, key=lambda n: n.instance_id)
        if address.get(n.instance_id)
    ]
    return found, unreachable(ssm, [n.instance_id for n in found]) or []
