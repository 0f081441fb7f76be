"""`gpuc nccl-test [--pairwise]`: the pair schedule (property tests), a simulated cluster with a
planted slow node (a fake runner where a pair's busbw is the slower node's speed), a node lost
mid-test, the SSM requests checked against botocore's model through the Stubber, the node's
script run by sh, and the CLI against moto."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from pathlib import Path

import boto3
import pytest
from botocore.stub import ANY, Stubber
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws

from gpu_cluster.components.bandwidth import expected_busbw
from gpu_cluster.components.catalog import InstanceFacts, load_catalog
from gpu_cluster.components.names import DEFAULT_PROJECT, StackIdentity
from gpu_cluster.infra import cli
from gpu_cluster.infra.aws import nccl_command
from gpu_cluster.infra.aws.nccl_command import command_nccl_test, pairwise_run
from gpu_cluster.infra.aws.nccl_test import (
    DELIVERY_TIMEOUT_SECONDS,
    EXECUTION_TIMEOUT_SECONDS,
    NO_ANSWER,
    PORT_BASE,
    BenchNode,
    Group,
    NodeRun,
    SsmRunner,
    node_script,
    parse_result,
)
from gpu_cluster.infra.nccl_pairs import PairResult, judge, pair_rounds, rounds_needed
from gpu_cluster.infra.outcome import AWS, FINDINGS, INPUT, OK, from_exception
from gpu_cluster.infra.problems import AwsError

REGION = "us-east-1"
TRAIN = StackIdentity(DEFAULT_PROJECT, "train", REGION, "train")


def catalog_facts(kind: str) -> InstanceFacts:
    facts = load_catalog().get(kind)
    assert facts is not None, kind
    return facts


P4D = catalog_facts("p4d.24xlarge")
LINE_2 = expected_busbw(P4D, 2, True).pass_gbytes_per_s  # the pairs' pass line
HEALTHY, SLOW = 80.0, 40.0  # node speeds (GB/s) either side of it
assert SLOW < LINE_2 <= HEALTHY
COMMAND_ID = "0b5b1e2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b"


def ids(count: int) -> list[str]:
    """Instance ids SSM's model takes (i- and 17 word characters)."""
    return [f"i-{index:017x}" for index in range(1, count + 1)]


def bench_nodes(count: int) -> list[BenchNode]:
    return [BenchNode(i, f"10.0.0.{n}", "p4d.24xlarge") for n, i in enumerate(ids(count), start=10)]


# --- the schedule -------------------------------------------------------------------------


@settings(deadline=None, max_examples=80)
@given(st.integers(min_value=2, max_value=64))
def test_every_node_is_measured_at_least_twice_with_different_partners(count):
    nodes = [f"n{i}" for i in range(count)]
    schedule = pair_rounds(nodes)
    assert len(schedule) == rounds_needed(count) <= 3
    partners: dict[str, list[str]] = {n: [] for n in nodes}
    for pairs in schedule:
        seen = [n for pair in pairs for n in pair]
        assert len(seen) == len(set(seen)), "a node twice in one round"
        assert len(pairs) == count // 2  # all but one node (N odd) run every round
        for a, b in pairs:
            assert a != b
            partners[a].append(b)
            partners[b].append(a)
    for node, theirs in partners.items():
        assert len(theirs) >= 2, node
        if count >= 3:
            assert len(set(theirs)) == len(theirs), (node, theirs)  # never the same partner


def test_three_nodes_pair_each_with_both_others_and_two_run_their_pair_twice():
    schedule = pair_rounds(["a", "b", "c"])
    assert sorted(tuple(sorted(p)) for pairs in schedule for p in pairs) == [
        ("a", "b"),
        ("a", "c"),
        ("b", "c"),
    ]
    assert pair_rounds(["a", "b"]) == [[("a", "b")], [("a", "b")]]
    for refused in ([], ["a"], ["a", "a"]):
        with pytest.raises(ValueError):
            pair_rounds(refused)


def simulated(nodes: Sequence[str], speeds: dict[str, float]) -> list[PairResult]:
    return [
        PairResult(number, pair, min(speeds[pair[0]], speeds[pair[1]]))
        for number, pairs in enumerate(pair_rounds(nodes), start=1)
        for pair in pairs
    ]


@settings(deadline=None, max_examples=60)
@given(st.integers(min_value=3, max_value=40), st.data())
def test_judging_names_exactly_the_planted_slow_node(count, data):
    nodes = [f"n{i}" for i in range(count)]
    slow = data.draw(st.sampled_from(nodes))
    verdict = judge(simulated(nodes, {n: SLOW if n == slow else HEALTHY for n in nodes}), LINE_2)
    assert verdict.stragglers == (slow,)
    assert verdict.inconclusive == () and not verdict.shared


def test_a_node_slow_in_one_pair_only_is_inconclusive_not_named():
    nodes = ids(5)
    results = simulated(nodes, dict.fromkeys(nodes, HEALTHY))
    first = results[0]
    results[0] = PairResult(first.round, first.nodes, SLOW)  # a one-off
    verdict = judge(results, LINE_2)
    assert verdict.stragglers == () and verdict.inconclusive == tuple(sorted(first.nodes))


def test_two_nodes_slow_together_cannot_say_which_and_all_slow_is_shared():
    two = judge(simulated(["a", "b"], {"a": SLOW, "b": HEALTHY}), LINE_2)
    assert two.stragglers == () and two.inconclusive == ("a", "b") and not two.shared
    nodes = ids(6)
    every = judge(simulated(nodes, dict.fromkeys(nodes, SLOW)), LINE_2)
    assert every.stragglers == () and every.shared


# --- a simulated run through the command --------------------------------------------------


class FakeCluster:
    """The SSM layer faked: each group's rank 0 (its last node, not the host: c10d may put it on
    any node) prints a result line whose busbw is the slowest member's speed; ``lost`` nodes
    stop answering from the given round on (SSM: Undeliverable), and their partners wait out
    the rendezvous and fail."""

    def __init__(self, speeds: dict[str, float], lost: dict[str, int] | None = None) -> None:
        self.speeds = speeds
        self.lost = lost or {}
        self.rounds: list[list[Group]] = []

    def run(self, groups: Sequence[Group], label: str) -> dict[str, NodeRun]:
        self.rounds.append(list(groups))
        number = len(self.rounds)
        runs = {}
        for group in groups:
            gone = [i for i in group.ids if self.lost.get(i, 99) <= number]
            if gone:
                for i in group.ids:
                    runs[i] = (
                        NodeRun(i, "Failed", "Undeliverable")
                        if i in gone
                        else NodeRun(i, "Failed", "Failed", "DistNetworkError: join timed out")
                    )
                continue
            busbw = min(self.speeds[i] for i in group.ids)
            result = {"ranks": 8 * len(group.nodes), "nodes": len(group.nodes), "bytes": 2**31}
            result |= {"busbw": busbw, "threshold": group.threshold}
            result["pass"] = busbw >= group.threshold
            status = "Success" if result["pass"] else "Failed"
            for node in group.nodes:
                output = f"all-reduce over {8 * len(group.nodes)} GPUs\n"
                if node is group.nodes[-1]:
                    output += f"GPUC_NCCL_RESULT {json.dumps(result)}\n"
                runs[node.instance_id] = NodeRun(node.instance_id, status, status, output)
        return runs


def fake_command(
    monkeypatch, nodes: list[BenchNode], cluster: FakeCluster, pairwise: bool, as_json=True
) -> int:
    monkeypatch.setattr(nccl_command, "running_nodes", lambda *_: (nodes, []))
    return command_nccl_test(
        "train", TRAIN, REGION, P4D, True, pairwise, as_json, ec2=object(), ssm=object(),
        runner=cluster,
    )  # fmt: skip


@pytest.mark.parametrize("count", [5, 8])
def test_a_planted_slow_node_is_named_with_its_figures(count, monkeypatch, capsys):
    nodes = bench_nodes(count)
    for slow in nodes:
        speeds = {n.instance_id: SLOW if n is slow else HEALTHY for n in nodes}
        cluster = FakeCluster(speeds)
        assert fake_command(monkeypatch, nodes, cluster, True) == FINDINGS
        report = json.loads(capsys.readouterr().out)
        assert report["stragglers"] == [slow.instance_id]
        assert report["inconclusive"] == [] and report["lost"] == {} and not report["pass"]
        mine = report["perNode"][slow.instance_id]
        assert mine["state"] == "STRAGGLER" and len(mine["pairs"]) >= 2
        assert all(pair["busbw"] == SLOW for pair in mine["pairs"])
        assert report["expected"]["passGbytesPerSecond"] == LINE_2
        assert report["expected"]["nodes"] == 2 and report["expected"]["kind"]
        # each pair its own rendezvous: 2 nodes, the host's address, a port and id of its own
        rdzv_ids = [g.rdzv_id for groups in cluster.rounds for g in groups]
        assert len(rdzv_ids) == len(set(rdzv_ids))
        for groups in cluster.rounds:
            ports = [g.port for g in groups]
            assert len(ports) == len(set(ports)) and min(ports) >= PORT_BASE
            for group in groups:
                assert len(group.nodes) == 2 and group.threshold == LINE_2
                assert group.endpoint == f"{group.nodes[0].private_ip}:{group.port}"


def test_the_text_report_names_the_node_and_each_nodes_pairs(monkeypatch, capsys):
    nodes = bench_nodes(5)
    slow = nodes[2].instance_id
    speeds = {n.instance_id: SLOW if n.instance_id == slow else HEALTHY for n in nodes}
    assert fake_command(monkeypatch, nodes, FakeCluster(speeds), True, as_json=False) == FINDINGS
    out = capsys.readouterr().out
    assert f"straggler: {slow}: under {LINE_2:g} GB/s with every partner" in out
    # the fix names the call that makes the group replace it (EC2 Auto Scaling SetInstanceHealth)
    assert f"set-instance-health --instance-id {slow} --health-status Unhealthy" in out
    assert f"pass line {LINE_2:g} GB/s = 80% of" in out
    line = next(row for row in out.splitlines() if row.strip().startswith(slow))
    assert "STRAGGLER" in line and f"{SLOW:g} GB/s" in line
    assert "Traceback" not in out


def test_a_healthy_cluster_passes_in_pairs_and_at_once(monkeypatch, capsys):
    nodes = bench_nodes(4)
    speeds = {n.instance_id: HEALTHY for n in nodes}
    assert fake_command(monkeypatch, nodes, FakeCluster(speeds), True) == OK
    assert json.loads(capsys.readouterr().out)["pass"] is True
    line_4 = expected_busbw(P4D, 4, True).pass_gbytes_per_s
    cluster = FakeCluster({n.instance_id: line_4 + 1 for n in nodes})
    assert fake_command(monkeypatch, nodes, cluster, False) == OK
    report = json.loads(capsys.readouterr().out)
    assert report["mode"] == "cluster" and report["busbw"] == line_4 + 1 and report["pass"]
    assert report["expected"]["nodes"] == 4 and report["rank0"] == nodes[-1].instance_id
    (groups,) = cluster.rounds
    (group,) = groups
    assert group.ids == tuple(n.instance_id for n in nodes) and group.threshold == line_4


def test_a_slow_cluster_at_once_fails_and_points_at_pairwise(monkeypatch, capsys):
    nodes = bench_nodes(4)
    cluster = FakeCluster({n.instance_id: SLOW / 2 for n in nodes})
    assert fake_command(monkeypatch, nodes, cluster, False, as_json=False) == FINDINGS
    out = capsys.readouterr().out
    assert f"busbw {SLOW / 2:g} GB/s" in out and "--pairwise" in out and "FAIL" in out


def test_a_node_lost_mid_test_is_reported_not_a_traceback(monkeypatch, capsys):
    nodes = bench_nodes(5)
    gone = nodes[2].instance_id  # in a pair of every round (circle method, 5 nodes)
    cluster = FakeCluster({n.instance_id: HEALTHY for n in nodes}, lost={gone: 2})
    assert fake_command(monkeypatch, nodes, cluster, True) == FINDINGS
    report = json.loads(capsys.readouterr().out)
    assert list(report["lost"]) == [gone] and "Undeliverable" in report["lost"][gone]
    assert report["stragglers"] == [] and report["perNode"][gone]["state"] == "lost"
    # after it was lost, its pairs are not run again (the partner would wait out the rendezvous)
    later = [g for groups in cluster.rounds[2:] for g in groups]
    assert later and all(gone not in g.ids for g in later)
    skipped = [p for r in report["rounds"][2:] for p in r if gone in p["nodes"]]
    assert skipped and all(p["busbw"] is None and "lost earlier" in p["why"] for p in skipped)
    assert fake_command(monkeypatch, nodes, cluster, True, as_json=False) == FINDINGS
    assert f"lost: {gone}: Failed (Undeliverable)" in capsys.readouterr().out


def test_pairwise_refuses_one_node_and_no_node_is_a_message(monkeypatch, capsys):
    nodes = bench_nodes(1)
    cluster = FakeCluster({nodes[0].instance_id: HEALTHY})
    with pytest.raises(nccl_command.CommandError) as refused:
        fake_command(monkeypatch, nodes, cluster, True)
    assert refused.value.code == INPUT and "--pairwise needs at least 2" in str(refused.value)
    assert cluster.rounds == []
    with pytest.raises(nccl_command.CommandError) as none:
        fake_command(monkeypatch, [], cluster, False)
    assert none.value.code == AWS and "has no running node" in str(none.value)


def test_two_nodes_run_their_pair_twice_and_a_slow_pair_is_inconclusive(monkeypatch, capsys):
    nodes = bench_nodes(2)
    cluster = FakeCluster({nodes[0].instance_id: SLOW, nodes[1].instance_id: HEALTHY})
    run = pairwise_run(cluster, nodes, expected_busbw(P4D, 2, True), "t")
    assert len(cluster.rounds) == 2 and run.verdict.stragglers == ()
    assert run.verdict.inconclusive == tuple(n.instance_id for n in nodes)


# --- results, the node's script -----------------------------------------------------------


def test_the_result_line_is_read_from_the_end_of_any_output():
    line = 'GPUC_NCCL_RESULT {"ranks": 16, "nodes": 2, "bytes": 2147483648, "busbw": 71.5}'
    assert parse_result(f"table\n{line}\n")["busbw"] == 71.5  # type: ignore[index]
    assert parse_result(f"[default0]:{line}")["busbw"] == 71.5  # type: ignore[index]
    for bad in ("", "no line here", "GPUC_NCCL_RESULT {not json}", 'GPUC_NCCL_RESULT {"a": 1}'):
        assert parse_result(bad) is None


def stub_sudo(folder: Path) -> None:
    """sudo that records what it was asked and prints what rank 0 prints, the result line
    first, then noise (the script must put the line last)."""
    folder.mkdir()
    sudo = folder / "sudo"
    sudo.write_text(
        "#!/bin/sh\n"
        'printf "%s\\n" "$@" > "$SUDO_ARGS"\n'
        'case " $* " in *" GPUC_RDZV_HOST=0 "*) echo noise; exit 1 ;; esac\n'
        'echo \'GPUC_NCCL_RESULT {"busbw": 12.5, "pass": false}\'\n'
        'i=0; while [ $i -lt 3000 ]; do echo "torchrun log line $i"; i=$((i+1)); done\n'
        "exit 1\n"
    )
    sudo.chmod(0o755)


def test_the_node_script_runs_its_own_part_and_prints_the_result_last(tmp_path):
    nodes = bench_nodes(4)
    groups = [
        Group("gpuc-nccl-x-r1p0", PORT_BASE, (nodes[0], nodes[3]), LINE_2),
        Group("gpuc-nccl-x-r1p1", PORT_BASE + 1, (nodes[1], nodes[2]), LINE_2),
    ]
    by_node = {n.instance_id: g for g in groups for n in g.nodes}
    script = node_script(by_node, install="true", home=str(tmp_path))
    stub_sudo(tmp_path / "bin")
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin", "SUDO_ARGS": str(tmp_path / "args")}
    host = subprocess.run(
        ["sh", "-c", script],
        env={**env, "AWS_SSM_INSTANCE_ID": nodes[1].instance_id},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert host.returncode == 1  # the bench's own exit code (under the line)
    assert host.stdout.splitlines()[-1].startswith("GPUC_NCCL_RESULT ")
    assert len(host.stdout) < 24000  # GetCommandInvocation's StandardOutputContent max
    assert parse_result(host.stdout) == {"busbw": 12.5, "pass": False}
    asked = (tmp_path / "args").read_text().splitlines()
    assert asked[:3] == ["-u", "ubuntu", "env"]
    assert "GPUC_NNODES=2" in asked and f"GPUC_RDZV_ENDPOINT=10.0.0.11:{PORT_BASE + 1}" in asked
    assert "GPUC_RDZV_ID=gpuc-nccl-x-r1p1" in asked and "GPUC_RDZV_HOST=1" in asked
    assert "GPUC_LOCAL_ADDR=10.0.0.11" in asked and f"GPUC_BUSBW_THRESHOLD_GBPS={LINE_2:g}" in asked
    assert asked[-2:] == ["gpuc-torchrun", "/usr/local/lib/gpu-cluster/allreduce_bench.py"]
    other = subprocess.run(
        ["sh", "-c", script],
        env={**env, "AWS_SSM_INSTANCE_ID": nodes[2].instance_id},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "GPUC_RDZV_HOST=0" in (tmp_path / "args").read_text().splitlines()
    assert other.returncode == 1 and parse_result(other.stdout) is None
    stranger = subprocess.run(
        ["sh", "-c", script],
        env={**env, "AWS_SSM_INSTANCE_ID": "i-0fffffffffffffff0"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert stranger.returncode == 3 and "no part for this node" in stranger.stderr


def test_the_script_installs_the_bench_as_the_nccl_test_command_does():
    from gpu_cluster.components.user_data import bench_install_command

    nodes = bench_nodes(2)
    group = Group("g", PORT_BASE, tuple(nodes), LINE_2)
    assert bench_install_command() in node_script({n.instance_id: group for n in nodes})


# --- the SSM requests (botocore's Stubber: every request checked against the model) --------


def ssm_client():
    return boto3.client("ssm", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")


def invocation(instance_id: str, status: str) -> dict:
    return {"CommandId": COMMAND_ID, "InstanceId": instance_id, "Status": status}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_the_ssm_runner_sends_polls_and_reads_each_node():
    nodes = bench_nodes(2)
    group = Group("gpuc-nccl-abc", PORT_BASE, tuple(nodes), LINE_2)
    ssm, clock, said = ssm_client(), Clock(), []
    stub = Stubber(ssm)
    stub.add_response(
        "send_command",
        {"Command": {"CommandId": COMMAND_ID}},
        {
            "InstanceIds": [n.instance_id for n in nodes],
            "DocumentName": "AWS-RunShellScript",
            "Comment": "gpuc nccl-test all 2 node(s)",
            "Parameters": {
                "commands": [node_script({n.instance_id: group for n in nodes})],
                "executionTimeout": [str(EXECUTION_TIMEOUT_SECONDS)],
            },
            "TimeoutSeconds": DELIVERY_TIMEOUT_SECONDS,
        },
    )
    first, second = (n.instance_id for n in nodes)
    stub.add_response(
        "list_command_invocations",
        {"CommandInvocations": [invocation(first, "Success"), invocation(second, "InProgress")]},
        {"CommandId": COMMAND_ID},
    )
    stub.add_response(
        "list_command_invocations",
        {"CommandInvocations": [invocation(first, "Success"), invocation(second, "Failed")]},
        {"CommandId": COMMAND_ID},
    )
    line = 'GPUC_NCCL_RESULT {"busbw": 70.1, "bytes": 2147483648}'
    for instance_id, status, output in ((first, "Success", line), (second, "Failed", "x")):
        stub.add_response(
            "get_command_invocation",
            {"Status": status, "StatusDetails": status, "StandardOutputContent": output},
            {"CommandId": COMMAND_ID, "InstanceId": instance_id},
        )
    runner = SsmRunner(ssm, progress=said.append, sleep=clock.sleep, clock=clock)
    with stub:
        runs = runner.run([group], "all 2 node(s)")
        stub.assert_no_pending_responses()
    assert parse_result(runs[first].output) == {"busbw": 70.1, "bytes": 2147483648}
    assert runs[second].status == "Failed" and not runs[second].lost
    assert said == ["all 2 node(s): 1 of 2 node(s) done", "all 2 node(s): 2 of 2 node(s) done"]


def test_a_node_that_never_answers_is_cancelled_after_a_bounded_wait():
    nodes = bench_nodes(2)
    group = Group("g", PORT_BASE, tuple(nodes), LINE_2)
    ssm, clock = ssm_client(), Clock()
    first, second = (n.instance_id for n in nodes)
    stub = Stubber(ssm)
    stub.add_response("send_command", {"Command": {"CommandId": COMMAND_ID}}, ANY_SEND)
    runner = SsmRunner(ssm, sleep=clock.sleep, clock=clock)
    polls = int(runner.wait_seconds // 10) + 1
    for _ in range(polls):
        stub.add_response(
            "list_command_invocations",
            {"CommandInvocations": [invocation(first, "Success"), invocation(second, "Pending")]},
            {"CommandId": COMMAND_ID},
        )
    stub.add_response("cancel_command", {}, {"CommandId": COMMAND_ID, "InstanceIds": [second]})
    stub.add_response(
        "get_command_invocation",
        {"Status": "Success", "StandardOutputContent": 'GPUC_NCCL_RESULT {"busbw": 1}'},
        {"CommandId": COMMAND_ID, "InstanceId": first},
    )
    with stub:
        runs = runner.run([group], "round 1/2")
        stub.assert_no_pending_responses()
    assert runs[second].status == NO_ANSWER and runs[second].lost
    assert "cancelled" in runs[second].detail and not runs[first].lost


ANY_SEND = {
    "InstanceIds": ANY,
    "DocumentName": "AWS-RunShellScript",
    "Comment": ANY,
    "Parameters": ANY,
    "TimeoutSeconds": DELIVERY_TIMEOUT_SECONDS,
}


def test_a_round_of_64_nodes_goes_in_batches_of_50_each_with_its_own_table():
    nodes = bench_nodes(64)
    (pairs, *_) = pair_rounds([n.instance_id for n in nodes])
    by_id = {n.instance_id: n for n in nodes}
    groups = [
        Group(f"g{i}", PORT_BASE + i, (by_id[a], by_id[b]), LINE_2)
        for i, (a, b) in enumerate(pairs)
    ]
    ssm, clock, sent = ssm_client(), Clock(), []
    ssm.meta.events.register(
        "provide-client-params.ssm.SendCommand", lambda params, **_: sent.append(params)
    )
    stub = Stubber(ssm)
    other = "1b5b1e2a-3c4d-4e5f-8a9b-0c1d2e3f4a5b"
    for command_id in (COMMAND_ID, other):
        stub.add_response("send_command", {"Command": {"CommandId": command_id}}, ANY_SEND)
    for command_id, batch in ((COMMAND_ID, nodes[:50]), (other, nodes[50:])):
        stub.add_response(
            "list_command_invocations",
            {"CommandInvocations": [invocation(n.instance_id, "Success") for n in batch]},
            {"CommandId": command_id},
        )
    for command_id, batch in ((COMMAND_ID, nodes[:50]), (other, nodes[50:])):
        for node in batch:
            stub.add_response(
                "get_command_invocation",
                {"Status": "Success", "StandardOutputContent": ""},
                {"CommandId": command_id, "InstanceId": node.instance_id},
            )
    with stub:
        runs = SsmRunner(ssm, sleep=clock.sleep, clock=clock).run(groups, "round 1/2")
        stub.assert_no_pending_responses()
    assert len(runs) == 64 and [len(s["InstanceIds"]) for s in sent] == [50, 14]
    for request in sent:
        (script,) = request["Parameters"]["commands"]
        listed = {line.split(")")[0].strip() for line in script.splitlines() if ") set -- " in line}
        assert listed == set(request["InstanceIds"])


def test_a_refused_send_is_the_aws_error_naming_the_action(monkeypatch):
    nodes = bench_nodes(2)
    ssm = ssm_client()
    stub = Stubber(ssm)
    stub.add_client_error("send_command", "AccessDeniedException", "not allowed")
    monkeypatch.setattr(nccl_command, "running_nodes", lambda *_: (nodes, []))
    with stub, pytest.raises(AwsError) as refused:
        command_nccl_test("train", TRAIN, REGION, P4D, True, False, True, ec2=object(), ssm=ssm)
    assert "ssm:SendCommand" in str(refused.value)
    assert from_exception(refused.value).code == AWS


# --- the CLI against moto -----------------------------------------------------------------


def tagged_nodes(stack: str, count: int) -> list[str]:
    ec2 = boto3.client("ec2", region_name=REGION)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    tags = [
        {"Key": "managed-by", "Value": "gpu-cluster"},
        {"Key": "gpu-cluster:stack", "Value": stack},
        {"Key": "gpu-cluster:name", "Value": stack},
    ]
    started = ec2.run_instances(
        ImageId=image,
        InstanceType="p4d.24xlarge",
        MinCount=count,
        MaxCount=count,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    return sorted(i["InstanceId"] for i in started["Instances"])


@mock_aws
def test_gpuc_nccl_test_with_no_running_node_says_so(capsys):
    tagged_nodes("inference", 1)
    assert cli.main(["nccl-test", "--stack", "train"]) == AWS
    err = capsys.readouterr().err
    assert "stack 'train' has no running node in us-east-1" in err and "Traceback" not in err


@mock_aws
def test_gpuc_nccl_test_pairwise_names_the_slow_node_of_the_stacks_nodes(capsys, monkeypatch):
    ours = tagged_nodes("train", 5)
    tagged_nodes("inference", 2)  # never part of the test
    slow = ours[3]
    fake = FakeCluster({i: SLOW if i == slow else HEALTHY for i in ours})
    monkeypatch.setattr(nccl_command, "SsmRunner", lambda *_, **__: fake)
    assert cli.main(["nccl-test", "--stack", "train", "--pairwise", "--json"]) == FINDINGS
    report = json.loads(capsys.readouterr().out)
    assert report["nodes"] == ours and report["stragglers"] == [slow]
    addresses = {n.instance_id: n.private_ip for g in fake.rounds[0] for n in g.nodes}
    described = boto3.client("ec2", region_name=REGION).describe_instances(InstanceIds=ours)
    for reservation in described["Reservations"]:
        for instance in reservation["Instances"]:
            if instance["InstanceId"] in addresses:
                assert addresses[instance["InstanceId"]] == instance["PrivateIpAddress"]


def test_gpuc_nccl_test_refuses_the_data_stack(capsys):
    assert cli.main(["nccl-test", "--stack", "data"]) == INPUT
    assert "data stack" in capsys.readouterr().err


def test_the_guides_example_output_is_what_the_command_prints(monkeypatch, capsys):
    """docs/guides/interconnect.md shows a pairwise run of 5 x p4d with one slow node (a plain
    block: the command needs AWS); the same run, simulated, prints it line for line."""
    from conftest import ROOT

    names = [f"i-0a1b2c3d4e5f6000{n}" for n in range(1, 6)]
    nodes = [BenchNode(i, f"10.0.1.{10 + n}", "p4d.24xlarge") for n, i in enumerate(names)]
    speeds = dict(zip(names, [76.4, 77.9, 41.3, 75.2, 78.0], strict=True))
    assert fake_command(monkeypatch, nodes, FakeCluster(speeds), True, as_json=False) == FINDINGS
    page = (ROOT / "docs" / "guides" / "interconnect.md").read_text()
    for line in capsys.readouterr().out.splitlines():
        assert f"\n{line}\n" in page, line
