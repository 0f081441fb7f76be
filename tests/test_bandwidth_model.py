"""The all-reduce bandwidth model (components/bandwidth.py): 2-node runs apart from larger ones,
each figure measured (source, stack, size) or derived (its arithmetic); the bench's verdict run
for real through torchrun; every bandwidth the README and docs print held against the model."""

from __future__ import annotations

import csv
import json
import os
import re
import socket
import subprocess
import sys

import pytest
from docs_text import docs_text

from gpu_cluster.components.bandwidth import (
    REFERENCE_PATH,
    expected_busbw,
    node_count_tables,
    plateau_bytes,
    references,
)
from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.components.user_data import BOOT_DIR

GIB = 2**30
CATALOG = load_catalog()


def facts(instance_type: str):
    found = CATALOG.get(instance_type)
    assert found is not None, instance_type
    return found


def published(instance_type: str, nodes: int, size: int | None) -> dict[str, str]:
    """The row of the bundled CSV, read here without the model's code."""
    with REFERENCE_PATH.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if (
                row["instance_type"] == instance_type
                and int(row["nodes"]) == nodes
                and (row["message_bytes"] or None) == (str(size) if size else None)
                and row["kind"].startswith("measured")
            ):
                return row
    raise AssertionError(f"no published row for {nodes} x {instance_type} at {size}")


def test_two_p5_nodes_are_awss_16_gib_measurement():
    expectation = expected_busbw(facts("p5.48xlarge"), 2, efa=True)
    row = published("p5.48xlarge", 2, 16 * GIB)
    assert expectation.kind == "measured"
    assert expectation.gbytes_per_s == float(row["busbw_gbytes_per_s"]) == 487.1
    assert "awesome" not in expectation.basis  # the source's own spelling
    assert "awsome-distributed-training" in expectation.basis
    assert "16 GiB" in expectation.basis and "NCCL 2.30.4" in expectation.basis
    assert expectation.message_bytes == 16 * GIB  # the bench reaches the plateau


def test_two_p4d_nodes_are_the_published_peak_and_p4de_its_2_gib_run():
    p4d = expected_busbw(facts("p4d.24xlarge"), 2, efa=True)
    assert (p4d.kind, p4d.gbytes_per_s) == ("measured", 77.0)
    assert "skypilot" in p4d.basis and "peak" in p4d.basis
    p4de = expected_busbw(facts("p4de.24xlarge"), 2, efa=True)
    assert (p4de.kind, p4de.gbytes_per_s) == ("measured", 78.3)
    assert "2 GiB" in p4de.basis
    # above the network on 2 nodes: 4 x 100 Gbps = 50 GB/s (NVIDIA/nccl-tests issue 22)
    assert p4de.gbytes_per_s > 400 / 8


@pytest.mark.parametrize(("instance_type", "gbps"), [("p4d.24xlarge", 400), ("p5.48xlarge", 3200)])
def test_four_nodes_are_derived_from_the_network(instance_type, gbps):
    expectation = expected_busbw(facts(instance_type), 4, efa=True)
    assert expectation.kind == "derived"
    assert expectation.gbytes_per_s == gbps / 8
    assert f"{gbps} Gbps / 8 = {gbps / 8:g} GB/s" in expectation.basis
    assert expectation.pass_gbytes_per_s == pytest.approx(0.8 * gbps / 8)


def test_without_efa_the_bound_is_card_zero():
    expectation = expected_busbw(facts("p4d.24xlarge"), 4, efa=False)
    assert (
        expectation.gbytes_per_s
        == facts("p4d.24xlarge").network_cards[0].baseline_bandwidth_gbps / 8
    )
    assert "network card 0" in expectation.basis


def test_a_type_with_no_published_run_says_derived_on_two_nodes():
    expectation = expected_busbw(facts("p5en.48xlarge"), 2, efa=True)
    assert expectation.kind == "derived" and "a floor" in expectation.basis


def test_one_node_uses_the_nvlink_threshold_or_none():
    p5 = expected_busbw(facts("p5.48xlarge"), 1, efa=True)
    assert (p5.kind, p5.gbytes_per_s, p5.pass_gbytes_per_s) == ("threshold", 500.0, 500.0)
    g5 = expected_busbw(facts("g5.xlarge"), 1, efa=False)
    assert (g5.kind, g5.pass_gbytes_per_s) == ("none", 0.0)


def test_every_measured_row_names_its_source_and_stack():
    for row in references():
        assert row.source and row.stack, row
        assert row.kind.startswith(("measured", "threshold")), row


@pytest.mark.parametrize(
    ("instance_type", "size"),
    [
        ("p5.48xlarge", 16 * GIB),  # AWS's plateau; 80 GiB of HBM leave room
        ("p4de.24xlarge", 2 * GIB),
        ("p4d.24xlarge", 2 * GIB),  # no sized run of its own: nccl-tests' default top size
        ("g4dn.xlarge", 2 * GIB),  # 16 GiB T4: a quarter is 4 GiB
        ("g6f.xlarge", 512 * 2**20),  # an eighth of an L4: a quarter of 2.8 GiB
    ],
)
def test_the_bench_reaches_the_plateau_within_the_gpus_memory(instance_type, size):
    if CATALOG.get(instance_type) is None:
        pytest.skip(f"{instance_type} is not in the catalog")
    assert plateau_bytes(facts(instance_type)) == size


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_bench(threshold: str, tmp_path, **extra: str) -> tuple[int, dict]:
    """Two torchrun agents (two 'nodes' of one process each) rendezvous on this machine and
    all-reduce on the CPU (gloo): the same bench, the same verdict line as on a cluster."""
    port = free_port()
    env = {
        **os.environ,
        "GPUC_BENCH_BACKEND": "gloo",
        "GPUC_BENCH_MAX_BYTES": str(2 * 2**20),
        "GPUC_BUSBW_THRESHOLD_GBPS": threshold,
        "OMP_NUM_THREADS": "1",
        **extra,
    }
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nnodes=2",
        "--nproc_per_node=1",
        "--rdzv_backend=c10d",
        f"--rdzv_endpoint=127.0.0.1:{port}",
        "--rdzv_id=bench",
        str(BOOT_DIR / "allreduce_bench.py"),
    ]
    agents = [
        subprocess.Popen(
            command,
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [agent.communicate(timeout=300)[0] for agent in agents]
    lines = [
        line for out in outputs for line in out.splitlines() if line.startswith("GPUC_NCCL_RESULT ")
    ]
    assert len(lines) == 1, outputs  # rank 0 only
    return max(agent.returncode for agent in agents), json.loads(lines[0].split(" ", 1)[1])


def test_the_bench_fails_under_its_pass_line_and_passes_over_it(tmp_path):
    code, result = run_bench("1000000", tmp_path)  # no CPU reaches 1 PB/s
    assert code != 0
    assert result["pass"] is False and result["threshold"] == 1000000
    assert (result["ranks"], result["nodes"], result["bytes"]) == (2, 2, 2 * 2**20)
    code, result = run_bench("0.000001", tmp_path)
    assert code == 0 and result["pass"] is True and result["busbw"] > 0


def test_without_a_threshold_the_bench_takes_its_node_counts_line_from_the_table(tmp_path):
    """The node's torchrun.env carries a line per node count (1, 2, 3+): a 2-node run is held
    to the 2-node one, whatever the group's size."""
    table = "1:0.000001,2:1000000,3:0.000001"
    code, result = run_bench("", tmp_path, GPUC_BUSBW_PASS_TABLE=table)
    assert code != 0 and result["threshold"] == 1000000
    code, result = run_bench("", tmp_path, GPUC_BUSBW_PASS_TABLE="1:1000000,3:1000000")
    assert code == 0 and result["threshold"] is None  # no line for 2 nodes: it only reports


def test_the_nodes_tables_are_the_models_and_do_not_move_with_the_groups_size():
    from conftest import ROOT

    from gpu_cluster.infra.plan.engine import run_plan
    from gpu_cluster.infra.stack_files import load_stack_config

    p4d = load_catalog().instance_types["p4d.24xlarge"]
    expected, passing = node_count_tables(p4d, efa=True)
    assert passing.split(",")[1:] == [
        f"2:{expected_busbw(p4d, 2, True).pass_gbytes_per_s:g}",
        f"3:{expected_busbw(p4d, 4, True).pass_gbytes_per_s:g}",
    ]
    assert expected.split(",")[2] == f"3:{expected_busbw(p4d, 8, True).gbytes_per_s:g}"
    config = load_stack_config("train", ROOT)
    datas = {
        run_plan("train", config | {"gpu-cluster:nodes": n})
        .of_type("aws:ec2/launchTemplate:LaunchTemplate")[0]
        .inputs["userData"]
        for n in ("2", "4", "8")
    }
    assert len(datas) == 1


BANDWIDTH_CLAIM = re.compile(
    r"(?P<nodes>\d+) x `?(?P<type>[a-z][a-z0-9-]*\.\d*x?large)`?[^|\n]*?\|?\s*"
    r"(?P<gbytes>\d+(?:\.\d+)?) GB/s"
)


def test_every_bandwidth_the_docs_print_is_the_models():
    """README.md and every docs page: each 'N x <type> ... X GB/s' is the model's figure, and
    a table row's 'fails under' column its pass line."""
    claims = 0
    for line in docs_text().splitlines():
        for match in BANDWIDTH_CLAIM.finditer(line):
            instance_type = match["type"]
            if CATALOG.get(instance_type) is None or "Gbps" in match.group(0):
                continue
            expectation = expected_busbw(facts(instance_type), int(match["nodes"]), efa=True)
            assert float(match["gbytes"]) == expectation.gbytes_per_s, line
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if line.startswith("|") and len(cells) == 4:
                assert cells[3] == f"{expectation.pass_gbytes_per_s:g} GB/s", line
            claims += 1
    assert claims >= 6  # the README's two, the interconnect guide's table and text
