"""`gpuc estimate` against hand computation (numbers written out here, not taken from the code)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.infra.estimate.model import (
    node_network_gbps,
    published_claims,
    ring_allreduce_seconds,
    transfer_seconds,
)


def gpuc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpu_cluster.infra.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


def test_ring_allreduce_and_transfer_arithmetic():
    assert ring_allreduce_seconds(14e9, 4, 400) == pytest.approx(2 * 3 / 4 * 14e9 * 8 / 400e9)
    assert ring_allreduce_seconds(14e9, 1, 400) == 0  # one node: nothing crosses the network
    assert transfer_seconds(1e12, 150e6) == pytest.approx(6666.67, rel=1e-4)


def test_node_bandwidth_comes_from_the_catalog_cards():
    catalog = load_catalog()
    facts = catalog.instance_types
    assert node_network_gbps(facts["p4d.24xlarge"], efa=True) == 400  # 4 x 100 Gbps EFA
    assert node_network_gbps(facts["p5.48xlarge"], efa=True) == 3200  # 32 x 100 Gbps
    assert node_network_gbps(facts["g5.xlarge"], efa=False) == 2.5  # ENA baseline


def test_published_claims_are_checked_and_the_wrong_ones_flagged():
    claims = {c.text: c for c in published_claims()}
    ten = claims["500 MB of gradients take 4 s on 10 Gbps"]
    assert ten.computed_seconds == pytest.approx(0.4) and not ten.holds
    hundred = claims["500 MB of gradients take 0.4 s on 100 Gbps"]
    assert hundred.computed_seconds == pytest.approx(0.04) and not hundred.holds
    hdd = claims["1 TB takes 1.8 h from a 150 MB/s HDD"]
    assert hdd.computed_seconds / 3600 == pytest.approx(1.85, abs=0.01) and hdd.holds
    nvme = claims["1 TB takes 5.6 min from a 3 GB/s NVMe SSD"]
    assert nvme.computed_seconds / 60 == pytest.approx(5.56, abs=0.01) and nvme.holds


def test_estimate_train_7b_acceptance():
    result = gpuc("estimate", "--stack", "train", "--model-params", "7e9", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["nodeNetworkGbps"] == 400
    bf16 = doc["allReduce"]["bf16"]
    assert bf16["gradientBytes"] == 14e9
    assert bf16["seconds"] == pytest.approx(0.42)  # 1.5 x 14 GB x 8 / 400 Gbps
    assert bf16["seconds10Gbps"] == pytest.approx(16.8)
    assert bf16["seconds100Gbps"] == pytest.approx(1.68)
    assert doc["allReduce"]["fp32"]["seconds"] == pytest.approx(0.84)
    # 6 x 7e9 x 4e6 tokens / (32 A100 x 312 TFLOPS x 0.4)
    assert doc["computeSeconds"] == pytest.approx(6 * 7e9 * 4e6 / (32 * 312e12 * 0.4))
    reads = doc["read"]
    assert reads["S3"]["bytesPerSecond"] == pytest.approx(4 * 100e9 / 8)  # 100 Gbps cap each
    assert reads["NVMe RAID"]["bytesPerSecond"] == pytest.approx(4 * 16e9)
    # the project's default file system: 1200 GiB PERSISTENT_2 at 250 MB/s per TiB
    assert reads["FSx for Lustre"]["bytesPerSecond"] == pytest.approx(1200 / 1024 * 250e6)
    assert doc["workload"]["stepsPerEpoch"] == 62_500  # 1000 GB / 4 B per token / 4e6
    epoch = doc["epoch"]["NVMe RAID"]
    assert epoch["boundBy"] == "compute"
    assert epoch["gpuHours"] == pytest.approx(epoch["hours"] * 32)
    assert epoch["usd"] == pytest.approx(epoch["hours"] * doc["usdPerHour"])
    text = gpuc("estimate", "--stack", "train", "--model-params", "7e9")
    assert text.returncode == 0, text.stderr
    assert "0.420 s" in text.stdout and "16.80 s" in text.stdout
    assert "off;" not in text.stdout  # the quoted figures come with --claims only


def test_big_gradients_and_small_steps_make_the_all_reduce_the_bound():
    result = gpuc(
        "estimate", "--stack", "experiment", "--model-params", "7e9", "--json"
    )  # one node: no all-reduce, so compute or data bounds it
    doc = json.loads(result.stdout)
    assert doc["allReduce"]["bf16"]["seconds"] == 0
    slow = gpuc(
        "estimate",
        "--stack",
        "train",
        "--model-params",
        "1e11",
        "--tokens-per-step",
        "1e4",
        "--json",
    )
    bound = json.loads(slow.stdout)["epoch"]["S3"]["boundBy"]
    assert bound == "all-reduce (bf16)"  # 200 GB of gradients, little compute per step


def test_estimate_mistakes_are_messages():
    result = gpuc("estimate", "--stack", "train", "--model-params", "seven")
    assert result.returncode != 0 and "--model-params must be a number" in result.stderr
    data = gpuc("estimate", "--stack", "data", "--model-params", "7e9")
    assert data.returncode == 3 and "has no GPU nodes" in data.stderr  # INPUT


def test_fsx_read_rate_is_size_times_the_throughput_tier():
    from conftest import TRAIN_LIKE

    from gpu_cluster.infra.config import load_spec
    from gpu_cluster.infra.estimate.command import report
    from gpu_cluster.infra.estimate.model import Workload
    from gpu_cluster.infra.validation import ResolvedCluster

    spec = load_spec(TRAIN_LIKE, "train")
    assert isinstance(spec, ResolvedCluster)
    work = Workload(7e9, 1000, 4e6, 4, 0.4, 2400 / 1024, "PERSISTENT_2_1000")
    doc = report(spec, work)
    assert doc["read"]["FSx for Lustre"]["bytesPerSecond"] == pytest.approx(2400 / 1024 * 1000e6)
    assert doc["workload"]["fsx"] == f"{2400 / 1024:g} TiB PERSISTENT_2_1000"


def test_estimate_shows_both_all_reduce_shapes_and_whether_the_model_fits(capsys):
    from gpu_cluster.infra import cli

    assert cli.main(["estimate", "--stack", "train", "--model-params", "7e9", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    bf16 = doc["allReduce"]["bf16"]
    nodes, gpus = 4, 32
    assert bf16["flatRingSeconds"] / bf16["seconds"] == pytest.approx(
        (2 * (gpus - 1) / gpus) / (2 * (nodes - 1) / nodes)
    )
    memory = doc["memory"]
    assert memory["perGpuGibReplicated"] == pytest.approx(7e9 * 16 / 2**30)
    assert memory["perGpuGibSharded"] == pytest.approx(7e9 * 16 / 2**30 / gpus)
    assert not memory["fitsReplicated"] and memory["fitsSharded"]  # 104 GiB vs 40 GiB A100s
    assert doc["claims"] == []  # the quoted figures only with --claims


def test_the_quoted_figures_come_with_a_flag_and_say_where_they_are_from(capsys):
    from gpu_cluster.infra import cli

    assert cli.main(["estimate", "--stack", "train", "--model-params", "7e9", "--claims"]) == 0
    assert "Figures quoted in the project's issue tracker" in capsys.readouterr().out
