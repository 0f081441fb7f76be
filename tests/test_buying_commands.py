"""The issue-32 commands as a user types them: `gpuc prices refresh --commitments /
--spot-advisor`, `gpuc preflight --regions`, `gpuc capacity-block offerings --regions` and
`gpuc capacity-reservation` - bad inputs refused with a message before any AWS call (a socket
guard fails any connection), the refreshes writing only where told."""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime, timedelta

import boto3
import pytest
from botocore.stub import Stubber
from test_commitment_prices import fixture_fetch

from gpu_cluster.infra.aws import price_list_files
from gpu_cluster.infra.cli import main, region_scores
from gpu_cluster.infra.outcome import load_stack_spec
from gpu_cluster.infra.prices.commitment_prices import (
    COMPUTE_SP,
    read_commitment_table,
)
from gpu_cluster.infra.validation import ResolvedCluster


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt fails the test: the command must refuse before calling AWS."""

    def refuse(*args, **kwargs):
        raise AssertionError(f"a network connection was attempted: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


def test_prices_refresh_commitments_writes_the_rates_where_told(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(price_list_files, "download", fixture_fetch())
    out = tmp_path / "rates.csv"
    args = ["prices", "refresh", "--commitments", "--region", "us-east-1", "--output", str(out)]
    assert main(args) == 0
    printed = capsys.readouterr()
    assert "commitmentRows: 11" in printed.out and "EC2 offer file us-east-1: done" in printed.err
    table = read_commitment_table(out)
    assert any(key[1] == "p4d.24xlarge" and key[2] == COMPUTE_SP for key in table)
    assert json.loads(out.with_suffix(".meta.json").read_text())


def test_a_failed_price_list_download_keeps_the_rates_and_exits_4(monkeypatch, tmp_path, capsys):
    def fail(url: str):
        raise OSError("connection reset")

    monkeypatch.setattr(price_list_files, "download", fail)
    out = tmp_path / "rates.csv"
    out.write_text("kept\n")
    args = ["prices", "refresh", "--commitments", "--region", "us-east-1", "--output", str(out)]
    assert main(args) == 4
    assert "kept unchanged" in capsys.readouterr().err
    assert out.read_text() == "kept\n"


@pytest.mark.parametrize(
    ("regions", "says"),
    [
        ("us-east-1,mars-north-1", "mars-north-1"),
        (",".join(f"us-east-{i}" for i in range(1, 13)), "at most 10"),
        ("us-east-1,ap-southeast-1", "offers p4d.24xlarge in no zone of ap-southeast-1"),
    ],
)
def test_preflight_regions_are_refused_before_any_call(no_network, capsys, regions, says):
    assert main(["preflight", "--stack", "train", "--regions", regions]) == 3
    assert says in capsys.readouterr().err


def test_preflight_scores_the_stacks_types_and_size_over_the_regions():
    spec = load_stack_spec("train")
    assert isinstance(spec, ResolvedCluster)
    ec2 = boto3.client("ec2", region_name="us-east-1")
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_availability_zones",
            {"AvailabilityZones": [{"ZoneName": "us-east-1a", "ZoneId": "use1-az6"}]},
            {"ZoneNames": ["us-east-1a"]},
        )
        stub.add_response(
            "get_spot_placement_scores",
            {
                "SpotPlacementScores": [
                    {"Region": "us-east-1", "AvailabilityZoneId": "use1-az6", "Score": 2},
                    {"Region": "us-west-2", "AvailabilityZoneId": "usw2-az1", "Score": 8},
                ]
            },
            {
                "InstanceTypes": ["p4d.24xlarge"],
                "TargetCapacity": 4,
                "SingleAvailabilityZone": True,
                "RegionNames": ["us-east-1", "us-west-2"],
            },
        )
        what, rows, *_ = region_scores(spec, ec2, ["us-east-1", "us-west-2"])
        stub.assert_no_pending_responses()
    assert what == "4 x p4d.24xlarge in one zone"
    assert [(r["region"], r["score"], r["own"]) for r in rows] == [
        ("us-west-2", 8, False),
        ("us-east-1", 2, True),
    ]


def test_capacity_block_regions_without_the_type_are_refused_before_any_call(no_network, capsys):
    args = ["capacity-block", "offerings", "--stack", "train", "--hours", "48"]
    assert main([*args, "--regions", "us-east-1,ap-southeast-1"]) == 3
    assert "not offered in ap-southeast-1" in capsys.readouterr().err


def test_a_future_reservation_is_planned_offline_and_its_dates_checked(no_network, capsys):
    soon = (datetime.now(UTC) + timedelta(days=4)).date().isoformat()
    args = ["capacity-reservation", "--stack", "experiment", "--commitment-days", "14"]
    assert main([*args, "--start", soon]) == 3
    assert "5 to 120 days in advance" in capsys.readouterr().err
    later = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()
    assert main([*args, "--start", later, "--json"]) == 0  # no --yes: a plan, no call
    plan = json.loads(capsys.readouterr().out)
    assert later in json.dumps(plan)
    assert main([*args, "--start", "2027-13-45"]) == 3
    assert "2027-13-45" in capsys.readouterr().err
    assert main(["capacity-reservation", "--stack", "train", "--start", later]) == 3
    assert "Capacity Block" in capsys.readouterr().err
