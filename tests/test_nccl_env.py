"""NCCL environment hygiene: no script or environment the project renders sets a variable the
aws-ofi-nccl plugin sets itself per instance type (components/data/aws_ofi_nccl_env.json, from
its src/platform-aws.cpp); the plugin's "found N nics" is held against the node's EFA interfaces
on every EFA type; the catalog's network figures against AWS's DescribeInstanceTypes data."""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import replace
from pathlib import Path

import moto
import pytest
from boot_harness import P5_48XL
from conftest import ROOT, TRAIN_LIKE, only, plan_config
from test_jobs import (
    EFA_LINES,
    ONE_NODE,
    TRAIN,
    TRAIN_IDS,
    booted,
    job_detail,
    job_spec,
    nccl_torchrun,
    reports,
)
from test_jobs import make_node as make_node  # the fixture

from gpu_cluster.components.boot_bundle import boot_bundle
from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.components.names import jobs_log_group
from gpu_cluster.components.nic_layout import (
    efa_interface_count,
    nic_layout,
    node_network_gbps,
    stated_network_gbps,
)
from gpu_cluster.components.user_data import decoded_user_data

PLUGIN_ENV = json.loads((ROOT / "components/data/aws_ofi_nccl_env.json").read_text())
OWNED = tuple(PLUGIN_ENV["plugin_sets"])
LT = "aws:ec2/launchTemplate:LaunchTemplate"
EFA_TYPES = sorted(t for t, f in load_catalog().instance_types.items() if f.efa_supported)


def assignments(text: str) -> set[str]:
    """The plugin's variables a text sets: NAME= in a script, an env file, `export`, `-e`."""
    return {name for name in OWNED if re.search(rf"(?<![A-Za-z0-9_]){name}=", text)}


def test_the_plugins_variables_are_data_with_their_source():
    assert "aws/aws-ofi-nccl" in PLUGIN_ENV["source"] and "platform-aws.cpp" in PLUGIN_ENV["source"]
    for name in ("NCCL_PROTO", "NCCL_BUFFSIZE", "FI_EFA_USE_DEVICE_RDMA", "FI_PROVIDER"):
        assert name in OWNED
    assert "NCCL_NVLSTREE_MAX_CHUNKSIZE" in OWNED and "NCCL_TUNER_PLUGIN" in OWNED
    assert "NCCL_SOCKET_IFNAME" not in OWNED  # NCCL's own bootstrap setting


@pytest.mark.parametrize("kind", ["p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "g5.12xlarge"])
def test_no_rendered_user_data_sets_a_variable_the_plugin_sets(kind):
    plan = plan_config(
        {**TRAIN_LIKE, "gpu-cluster:instanceType": kind, "gpu-cluster:nodes": "2"}, stack="hyg"
    )
    assert plan.error is None, plan.error
    script = decoded_user_data(only(plan, LT).inputs["userData"])
    assert "EFA_INTERFACES=0" not in script  # an EFA node: where the variables were set
    assert assignments(script) == set()


def test_no_boot_script_job_code_or_doc_sets_a_variable_the_plugin_sets():
    texts = {"boot bundle": boot_bundle()}
    for folder, pattern in (
        ("components", "*.py"),
        ("components/boot", "*"),
        ("infra", "**/*.py"),
        ("docs", "**/*.md"),
    ):
        for path in (ROOT / folder).glob(pattern):
            if path.is_file() and path.suffix in (".py", ".sh", ".md", ""):
                texts[str(path.relative_to(ROOT))] = path.read_text()
    found = {where: sorted(assignments(text)) for where, text in texts.items() if assignments(text)}
    assert found == {}


def test_the_check_finds_a_variable_that_is_set():
    assert assignments('echo "FI_PROVIDER=efa"\nexport NCCL_PROTO=simple') == {
        "FI_PROVIDER",
        "NCCL_PROTO",
    }


# --- "found N nics": one per EFA device, one device per EFA interface ----------------------------


@pytest.mark.parametrize("kind", EFA_TYPES)
def test_the_nics_nccl_finds_are_the_efa_interfaces_the_node_gets(kind):
    """The launch template attaches one EFA interface per EFA card, up to MaximumEfaInterfaces
    (components/nic_layout.py); each is one EFA device and the plugin counts one NIC per device
    (aws-ofi-nccl src/nccl_ofi_net.cpp: "found %d nics" is the number of fi_info entries of the
    provider). EFA_INTERFACES on the node is that count: what the job's check expects."""
    facts = load_catalog().instance_types[kind]
    expected = efa_interface_count(nic_layout(facts, True))
    efa_cards = sum(card.supports_efa for card in facts.network_cards)
    assert expected == min(efa_cards, facts.max_efa_interfaces) == facts.max_efa_interfaces
    figures = {"p4d.24xlarge": 4, "p5.48xlarge": 32, "p5en.48xlarge": 16, "p6-b200.48xlarge": 8}
    figures |= {"p6-b300.48xlarge": 16, "g6e.48xlarge": 4, "p5.4xlarge": 1}
    assert figures.get(kind, expected) == expected


@pytest.mark.parametrize(("found", "stopped"), [(16, True), (32, False)])
def test_a_p5_job_is_held_to_32_efa_nics(make_node, found, stopped):
    """p5.48xlarge: the plugin finds 32 NICs (32 EFA devices); 16 stops the job, saying so."""
    node = make_node(
        replace(TRAIN, efa_interfaces=32, jobs_log_group=jobs_log_group(TRAIN_IDS)),
        aws=[
            (
                "get-parameters-by-path",
                "/gpu-cluster/train/jobs/pretrain\t/gpu-cluster/train/jobs/pretrain/nodes/i-0aaa",
            ),
            ("ssm get-parameter", job_spec()),
            ("put-parameter", ""),
            *ONE_NODE,
        ],
        hardware=P5_48XL,
    )
    node.install_only()
    nccl_torchrun(node, [line.format(nics=found) for line in EFA_LINES])
    (node.harness / "bin/torchrun").chmod(0o755)
    booted(node)
    log = node.read("/var/log/gpu-cluster/jobs/pretrain.log")
    if stopped:
        assert job_detail(node) == "slow network: NCCL found 16 of 32 EFA NICs"
        assert "gpu-cluster: stopped: slow network: NCCL found 16 of 32 EFA NICs" in log
        assert reports(node) == ["running", "failed"]
    else:
        assert "slow network" not in log and "step 12 loss 2.5" in log
        assert reports(node) == ["running", "done"]


# --- the catalog against AWS's DescribeInstanceTypes data (moto ships it) ---------------------


def describe_instance_types() -> dict:
    path = Path(moto.__file__).parent / "ec2/resources/instance_types.json.gz"
    return json.loads(gzip.open(path).read())


@pytest.mark.parametrize("kind", EFA_TYPES)
def test_the_catalogs_network_figures_are_aws_own(kind):
    """Network cards, their bandwidth, interfaces and kinds, and MaximumEfaInterfaces, as
    DescribeInstanceTypes gives them (p6-b200.48xlarge and g6e.48xlarge re-checked: equal)."""
    network = describe_instance_types()[kind]["NetworkInfo"]
    facts = load_catalog().instance_types[kind]
    assert facts.efa_supported is network["EfaSupported"] is True
    assert facts.max_efa_interfaces == network["EfaInfo"]["MaximumEfaInterfaces"]
    cards = [
        (
            c["NetworkCardIndex"],
            c["BaselineBandwidthInGbps"],
            c["PeakBandwidthInGbps"],
            c["MaximumNetworkInterfaces"],
            tuple(c["InterfaceTypes"]),
        )
        for c in network["NetworkCards"]
    ]
    ours = [
        (
            c.index,
            c.baseline_bandwidth_gbps,
            c.peak_bandwidth_gbps,
            c.max_interfaces,
            tuple(c.interface_types),
        )
        for c in facts.network_cards
    ]
    assert ours == cards
    assert len(facts.network_cards) == network["MaximumNetworkCards"]


def test_where_the_cards_do_not_add_up_to_the_instances_figure():
    """DescribeInstanceTypes' per-card baselines do not always sum to the instance's
    NetworkPerformance: g6e.48xlarge 4 x 400 for "400 Gigabit", g6e.24xlarge 2 x 200 for "200
    Gigabit", p6-b200.48xlarge 8 x 200 for "3200 Gigabit". A bandwidth summed over the cards
    (nic_layout.node_network_gbps) is wrong for exactly these EFA types."""
    data = describe_instance_types()
    odd = {}
    for kind in EFA_TYPES:
        network = data[kind]["NetworkInfo"]
        stated = re.match(r"(?:Up to )?([\d.]+) Gigabit", network["NetworkPerformance"])
        cards = sum(
            c["BaselineBandwidthInGbps"]
            for c in network["NetworkCards"]
            if "efa" in c["InterfaceTypes"]
        )
        if stated and float(stated.group(1)) != cards:
            odd[kind] = (float(stated.group(1)), cards)
    assert odd == {
        "g6e.24xlarge": (200.0, 400.0),
        "g6e.48xlarge": (400.0, 1600.0),
        "p6-b200.48xlarge": (3200.0, 1600.0),
    }
    # the node's network figure takes the instance's own there (components/nic_layout.py)
    assert stated_network_gbps() == {kind: figures[0] for kind, figures in odd.items()}
    for kind, (stated, _) in odd.items():
        facts = load_catalog().get(kind)
        assert facts is not None and node_network_gbps(facts, efa=True) == stated
