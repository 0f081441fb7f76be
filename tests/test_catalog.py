"""The bundled catalog reproduces from EC2 (moto serves AWS's own DescribeInstanceTypes data)."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from gpu_cluster.components.catalog import CATALOG_PATH, Catalog, load_catalog
from gpu_cluster.infra.aws import AwsError
from gpu_cluster.infra.catalog_refresh import fetch_catalog
from gpu_cluster.infra.cli import main
from gpu_cluster.infra.outcome import AWS

REGIONS = ["us-east-1", "us-west-2"]
REQUIRED_FAMILIES = (
    "g4dn",
    "g5",
    "g6",
    "g6e",
    "p3dn",
    "p4d",
    "p4de",
    "p5",
    "p5e",
    "p5en",
    "p6-b200",
)


@pytest.fixture(scope="module")
def refreshed() -> Catalog:
    with mock_aws():
        return fetch_catalog(REGIONS)


def test_refresh_reproduces_bundled_facts(refreshed):
    bundled = load_catalog()
    assert set(refreshed.instance_types) == set(bundled.instance_types)
    for name, facts in refreshed.instance_types.items():
        assert facts == bundled.instance_types[name], name


def test_refresh_reproduces_bundled_offerings(refreshed):
    bundled = load_catalog()
    for region in REGIONS:
        assert refreshed.offerings[region] == bundled.offerings[region]


def test_catalog_covers_required_families():
    names = load_catalog().instance_types
    for family in REQUIRED_FAMILIES:
        assert any(n.split(".")[0] == family for n in names), family


def test_p4d_facts_match_aws():
    facts = load_catalog().instance_types["p4d.24xlarge"]
    assert (facts.gpu_model, facts.gpu_count, facts.gpu_memory_mib) == ("A100", 8, 40960)
    assert (facts.vcpus, facts.memory_mib, facts.architecture) == (96, 1179648, "x86_64")
    assert facts.max_efa_interfaces == 4 and len(facts.network_cards) == 4
    assert (facts.nvme_disk_count, facts.nvme_disk_size_gb) == (8, 1000)
    assert "cluster" in facts.placement_strategies
    assert set(facts.usage_classes) == {"capacity-block", "on-demand", "spot"}


def test_only_nvidia_types(refreshed):
    assert {f.gpu_model for f in refreshed.instance_types.values()} >= {"A100", "H100", "T4"}
    assert not any(name.startswith(("g4ad", "inf", "trn")) for name in refreshed.instance_types)


def test_cli_refresh_writes_a_loadable_catalog(tmp_path, capsys):
    out = tmp_path / "catalog.json"
    with mock_aws():
        assert main(["catalog", "refresh", "--region", "us-west-2", "--output", str(out)]) == 0
    written = Catalog.from_json(json.loads(out.read_text()))
    assert written.instance_types["p5.48xlarge"] == load_catalog().instance_types["p5.48xlarge"]
    assert "wrote" in capsys.readouterr().out
    assert CATALOG_PATH.read_text() != out.read_text()  # bundled file untouched (has 7 regions)


def test_access_denied_names_the_iam_action(monkeypatch):
    client = boto3.client("ec2", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_client_error(
        "describe_instance_types", service_error_code="UnauthorizedOperation", http_status_code=403
    )
    monkeypatch.setattr("gpu_cluster.infra.catalog_refresh.client", lambda *a, **k: client)
    with stubber, pytest.raises(AwsError, match="ec2:DescribeInstanceTypes"):
        fetch_catalog(["us-east-1"])


def test_cli_reports_aws_errors_without_traceback(monkeypatch, capsys):
    def denied(*_args, **_kwargs):
        raise AwsError("ec2:DescribeInstanceTypes failed: UnauthorizedOperation")

    monkeypatch.setattr("gpu_cluster.infra.catalog_refresh.fetch_catalog", denied)
    assert main(["catalog", "refresh"]) == AWS
    err = capsys.readouterr().err
    assert "ec2:DescribeInstanceTypes" in err and "Traceback" not in err


def test_a_missing_profile_or_a_bad_region_is_a_message(monkeypatch, capsys):
    from gpu_cluster.infra.outcome import INPUT

    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    assert main(["catalog", "refresh", "--region", "us-east-1"]) == AWS
    assert "no-such-profile" in capsys.readouterr().err
    monkeypatch.delenv("AWS_PROFILE")
    # an unknown region is the user's input, refused before any call (infra/regions.py)
    assert main(["catalog", "refresh", "--region", "bad region!"]) == INPUT
    assert "'bad region!'" in capsys.readouterr().err


def test_catalog_list_filters_sorts_by_price_and_aligns(capsys):
    from gpu_cluster.infra.outcome import INPUT
    from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly, price_table

    assert main(["catalog", "list", "--gpu", "a100"]) == 0
    *lines, footer = capsys.readouterr().out.splitlines()
    assert footer.startswith("Prices: ") and price_table().date in footer  # source and date
    assert [line.split()[0] for line in lines[1:]] == ["p4d.24xlarge", "p4de.24xlarge"]
    p4d = on_demand_hourly("us-east-1", "p4d.24xlarge")
    assert p4d is not None
    assert f"{p4d:,.3f}" in lines[1] and f"{p4d / 8:,.3f}" in lines[1]  # $/GPU-hour
    assert main(["catalog", "list", "--offered"]) == 0
    lines = capsys.readouterr().out.splitlines()[:-1]  # the prices' footer
    header = lines[0]
    column = header.index("$/h")
    assert all(len(line) > column for line in lines[1:])
    priced = [line for line in lines[1:] if "no price" not in line[column - 8 : column + 3]]
    prices = [float(line[column - 8 : column + 3].replace(",", "")) for line in priced]
    assert prices == sorted(prices)
    long_name = next(line for line in lines if "RTX PRO Server 6000" in line)
    assert long_name.index("RTX PRO Server 6000") < header.index("GiB/GPU")  # no overflow
    assert main(["catalog", "list", "--region", "us-east-9"]) == INPUT
    assert "did you mean 'us-east-2'?" in capsys.readouterr().err
    assert main(["catalog", "list", "--gpu", "A1000"]) == INPUT


def test_refreshing_one_region_keeps_every_other_region(tmp_path, capsys):
    out = tmp_path / "catalog.json"
    out.write_text(CATALOG_PATH.read_text())  # the bundled snapshot, as a refresh would find it
    with mock_aws():
        assert main(["catalog", "refresh", "--region", "us-west-2", "--output", str(out)]) == 0
    written = Catalog.from_json(json.loads(out.read_text()))
    bundled = load_catalog()
    assert set(written.offerings) == set(bundled.offerings)  # no region dropped
    assert written.offerings["us-east-1"] == bundled.offerings["us-east-1"]
    assert "us-east-1" in written.source and "earlier snapshot" in written.source
