"""Rank order by EC2 topology: the node list step reads DescribeInstanceTopology and writes each
node's name (its network node set, then its id) in sorted order; a job gives torchrun that name
as --local_addr, and torch's real c10d rendezvous then ranks nodes under the same network node
next to each other. A failed call keeps today's order (addresses) and says so."""

from __future__ import annotations

import re
import subprocess
import threading
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import jmespath
import pytest
from conftest import ROOT
from test_boot_harness import GROUP, SELF, TRAIN
from test_boot_harness import make_node as make_node  # the fixture

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.components.ec2_topology import (
    gang_span,
    id_batches,
    network_node_levels,
    rank_name,
    supports_topology,
)

# 4 nodes in launch order, alternating between two network nodes at the bottom layer (nn-x under
# nn-top/nn-mid-1, nn-y under nn-top/nn-mid-2): launch order puts strangers side by side
A, B, C, D = SELF, "i-0bbb", "i-0ccc", "i-0ddd"
IPS = {A: "10.42.0.30", B: "10.42.0.31", C: "10.42.0.32", D: "10.42.0.33"}
SETS = {
    A: ["nn-top", "nn-mid-1", "nn-x"],
    B: ["nn-top", "nn-mid-2", "nn-y"],
    C: ["nn-top", "nn-mid-1", "nn-x"],
    D: ["nn-top", "nn-mid-2", "nn-y"],
}
LISTED = "".join(
    f"2026-12-01T08:0{n}:00+00:00\t{i}\t{IPS[i]}\tgpu-cluster/train/us-east-1\n"
    for n, i in enumerate((A, B, C, D))
)
# DescribeInstanceTopology's answer as botocore parses it (service model: Instances[].InstanceId,
# InstanceType, NetworkNodes, ...); a pending instance has no node set yet
RESPONSE = {
    "Instances": [
        {"InstanceId": i, "InstanceType": "p4d.24xlarge", "NetworkNodes": SETS[i]}
        for i in (A, B, C, D)
    ]
    + [{"InstanceId": "i-0eee", "InstanceType": "p4d.24xlarge", "NetworkNodes": []}]
}


def cli_text(query: str, response: dict) -> str:
    """What `aws --output text --query QUERY` prints for a response (rows of tab-separated
    values): the query is run with jmespath, as the CLI runs it."""
    rows = jmespath.search(query, response)
    return "".join("\t".join(map(str, row)) + "\n" for row in rows)


def topology_node(make_node, down=()):
    node = make_node(replace(TRAIN, stack="train", topology=True))
    node.install_only()
    node.answer_aws(
        [
            GROUP,
            ("describe-auto-scaling-groups", "4"),
            ("describe-instances", LISTED),
            ("describe-instance-topology", cli_text(QUERY, RESPONSE)),
        ],
        down=down,
    )
    return node


NODES_SCRIPT = (ROOT / "components/boot/gpu-cluster-nodes.sh").read_text()
QUERY = re.search(r'--query "(Instances\[[^"]*)"', NODES_SCRIPT).group(1)  # type: ignore[union-attr]
JOBS_SCRIPT = (ROOT / "components/boot/gpu-cluster-jobs.sh").read_text()


# --- facts ------------------------------------------------------------------------------------


def test_which_efa_types_ec2_describes_the_topology_of():
    """The issue assumed every EFA type of the catalog: the User Guide lists p3dn, p4d, p4de, p5,
    p5e, p5en, p6-b200, p6-b300 and g6e/g7e, not g4dn, g5, g6, g7, gr6 or p5.4xlarge."""
    efa = {t for t, f in load_catalog().instance_types.items() if f.efa_supported}
    unsupported = {t for t in efa if not supports_topology(t)}
    assert {t.split(".")[0] for t in unsupported} == {"g4dn", "g5", "g6", "g7", "gr6", "p5"}
    assert "p5.4xlarge" in unsupported and "p5.48xlarge" not in unsupported
    for kind in ("p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "g6e.48xlarge", "g7e.48xlarge"):
        assert network_node_levels(kind) == 3, kind
    assert network_node_levels("p6-b200.48xlarge") == network_node_levels("p6-b300.48xlarge") == 4


def test_requests_follow_the_service_model():
    """InstanceIds: at most 100 a request, and MaxResults never beside them (botocore's model)."""
    import botocore.session

    model = botocore.session.get_session().get_service_model("ec2")
    shape: Any = model.operation_model("DescribeInstanceTopology").input_shape
    members = shape.members
    assert "Maximum 100" in members["InstanceIds"].documentation
    assert "instance IDs parameter in the same request" in members["MaxResults"].documentation
    batches = id_batches([f"i-{n:017x}" for n in range(250)])
    assert [len(b) for b in batches] == [100, 100, 50]
    assert "xargs -n 100 aws ec2 describe-instance-topology" in NODES_SCRIPT
    assert "--max-items" not in NODES_SCRIPT.split("describe-instance-topology")[1].split("}")[0]
    reservations: Any = model.operation_model("DescribeCapacityReservationTopology").input_shape
    assert reservations.members["MaxResults"].metadata == {"min": 1, "max": 10}


def test_a_gang_under_two_network_nodes_is_said_with_where_they_meet():
    span = gang_span({i: tuple(s) for i, s in SETS.items()})
    assert span is not None
    assert span.groups == (("nn-x", (A, C)), ("nn-y", (B, D)))
    assert span.meeting == ("nn-top",)
    assert "spans 2 network nodes" in span.describe() and "under nn-top" in span.describe()
    assert gang_span({A: tuple(SETS[A]), C: tuple(SETS[C])}) is None  # one network node
    assert gang_span({A: tuple(SETS[A]), "i-pending": ()}) is None  # one known


# --- the node list step (boot harness) ----------------------------------------------------------


def test_nodes_under_the_same_network_node_are_listed_side_by_side(make_node):
    node = topology_node(make_node)
    assert node.step("gpu-cluster-nodes", "--wait").returncode == 0
    rows = [line.split() for line in node.read("/etc/gpu-cluster/topology").splitlines()]
    assert [r[2] for r in rows] == [A, C, B, D]  # launch order was A, B, C, D
    assert [r[0] for r in rows] == [rank_name(SETS[i], i) for i in (A, C, B, D)]
    assert all(IPS[r[2]] == r[1] for r in rows)
    hosts = node.read("/etc/hosts").splitlines()
    assert f"{IPS[B]} {rank_name(SETS[B], B)} # gpu-cluster" in hosts
    (call,) = [c for c in node.aws_calls() if "describe-instance-topology" in c]
    assert sorted(call[call.index("--instance-ids") + 1 :]) == sorted((A, B, C, D))
    assert "--max-results" not in call and "--region" in call
    # the launch-order list and the rendezvous address stay as they were
    assert node.env_file("/etc/gpu-cluster/torchrun.env")["MASTER_ADDR"] == IPS[A]
    # a refresh with the same nodes asks EC2 nothing more: a running node's set never changes
    assert node.step("gpu-cluster-nodes").returncode == 0
    assert len([c for c in node.aws_calls() if "describe-instance-topology" in c]) == 1
    assert node.read("/etc/hosts").count("# gpu-cluster") == 4  # the block replaced, not added


def test_the_topology_call_failing_keeps_todays_order_and_says_so(make_node):
    node = topology_node(make_node, down=("describe-instance-topology",))
    done = node.step("gpu-cluster-nodes", "--wait")
    assert done.returncode == 0, done.stderr
    assert "no EC2 topology (DescribeInstanceTopology): ranks follow the addresses" in done.stderr
    assert not node.file("/etc/gpu-cluster/topology").exists()
    assert node.env_file("/etc/gpu-cluster/torchrun.env")["NNODES"] == "4"


def test_a_type_without_topology_never_asks(make_node):
    node = topology_node(make_node)
    node.user_data.write_text(node.user_data.read_text().replace("TOPOLOGY=true", "TOPOLOGY=false"))
    node.install_only()
    assert node.step("gpu-cluster-nodes", "--wait").returncode == 0
    assert not [c for c in node.aws_calls() if "describe-instance-topology" in c]


# --- the job's --local_addr and torch's own rendezvous --------------------------------------------


def rank_addr(topology: Path, instance: str, address: str) -> tuple[str, str]:
    """gpu-cluster-jobs' rank_addr, run as bash on a topology file: (stdout, stderr)."""
    function = re.search(r"^rank_addr\(\) \{\n.*?^\}\n", JOBS_SCRIPT, re.S | re.M).group(0)  # type: ignore[union-attr]
    script = f'log() {{ echo "log: $*" >&2; }}\nETC={topology.parent}\n{function}rank_addr "$@"'
    done = subprocess.run(
        ["bash", "-c", script, "rank_addr", instance, address],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip(), done.stderr


def c10d_ranks(addresses: list[str]) -> dict[str, int]:
    """Each address's rank from torch's own c10d dynamic rendezvous (one agent per address, as
    torchrun runs them, against one TCPStore), with the TCP store not shared (gpuc-torchrun)."""
    import os

    # as gpuc-torchrun sets it; restored after, so no later test's node inherits it
    before = os.environ.get("TORCH_DISABLE_SHARE_RDZV_TCP_STORE")
    os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    try:
        return _c10d_ranks(addresses)
    finally:
        if before is None:
            os.environ.pop("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", None)
        else:
            os.environ["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = before


def _c10d_ranks(addresses: list[str]) -> dict[str, int]:
    from torch._C._distributed_c10d import TCPStore
    from torch.distributed.elastic.rendezvous import RendezvousParameters
    from torch.distributed.elastic.rendezvous.c10d_rendezvous_backend import (
        C10dRendezvousBackend,
    )
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import create_handler

    wait = timedelta(seconds=120)
    server = TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=wait)
    ranks: dict[str, int] = {}
    errors: list[BaseException] = []

    def join(address: str) -> None:
        try:  # each agent its own client, as each node's torchrun has
            store = TCPStore("127.0.0.1", server.port, is_master=False, timeout=wait)
            backend = C10dRendezvousBackend(store, "topology-test")
            params = RendezvousParameters(
                backend="c10d",
                endpoint="",
                run_id="topology-test",
                min_nodes=len(addresses),
                max_nodes=len(addresses),
                local_addr=address,
                join_timeout="60",
                last_call_timeout="1",
            )
            ranks[address] = create_handler(store, backend, params).next_rendezvous().rank
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=join, args=(a,)) for a in reversed(addresses)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)
    assert not errors, errors
    return ranks


@pytest.mark.slow
def test_torchs_rendezvous_ranks_neighbours_next_to_each_other(tmp_path):
    rows = sorted((rank_name(SETS[i], i), IPS[i], i) for i in IPS)
    topology = tmp_path / "topology"
    topology.write_text("".join(" ".join(r) + "\n" for r in rows))
    chosen = {i: rank_addr(topology, i, IPS[i])[0] for i in IPS}
    assert chosen[A] == IPS[A]  # first in the list: its IP (rank 0's address is MASTER_ADDR)
    assert chosen[B] == rank_name(SETS[B], B)
    by_address = c10d_ranks(list(chosen.values()))
    ranks = {i: by_address[chosen[i]] for i in IPS}
    assert ranks[A] == 0
    assert abs(ranks[A] - ranks[C]) == 1 and abs(ranks[B] - ranks[D]) == 1
    assert sorted(ranks.values()) == [0, 1, 2, 3]


def test_a_node_missing_from_the_topology_keeps_its_address_and_says_so(tmp_path):
    topology = tmp_path / "topology"
    out, err = rank_addr(topology, "i-0new", "10.42.0.40")
    assert out == "10.42.0.40" and "no EC2 topology for i-0new" in err
    topology.write_text(f"{rank_name(SETS[A], A)} {IPS[A]} {A}\n")
    assert rank_addr(topology, "i-0new", "10.42.0.40")[0] == "10.42.0.40"


def test_the_node_role_may_read_the_topology():
    """ec2:DescribeInstanceTopology takes no resource scope (Service Authorization Reference)."""
    from gpu_cluster.components.policies import node_access_policy

    policy = node_access_policy("arn:aws:s3:::bucket-1", ["arn:aws:kms:us-east-1:1:key/k"])
    (statement,) = [s for s in policy["Statement"] if "ec2:DescribeInstanceTopology" in s["Action"]]
    assert statement["Resource"] == "*" and statement["Effect"] == "Allow"
