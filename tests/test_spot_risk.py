"""Spot risk (issue 32): the Spot Instance Advisor's band for a type (fixture: a trimmed copy of
AWS's feed in its real format, values as published), the reclaim warning a training stage gets
at the upper bands, the advisor refresh (atomic; a failed fetch changes nothing), and spot
placement scores ranked over three regions through botocore's Stubber (requests checked against
the service model by tests/botocore_limits.py), bad regions refused before any call."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from conftest import TRAIN_LIKE

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.infra.aws import placement_scores as scores_module
from gpu_cluster.infra.aws import spot_advisor_refresh as refresh
from gpu_cluster.infra.aws.placement_scores import (
    RegionScore,
    checked_regions,
    placement_scores,
    placement_text,
)
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.prices.spot_advisor import (
    ADVISOR_PATH,
    Advisor,
    advisor_snapshot_date,
    band_text,
    read_advisor,
    reclaim_warning,
    resume_minutes,
    spot_band,
)
from gpu_cluster.infra.problems import CommandError
from gpu_cluster.infra.validation import ResolvedCluster

FIXTURES = Path(__file__).parent / "fixtures"
REAL_LABELS = ["<5%", "5-10%", "10-15%", "15-20%", ">20%"]  # the feed's ranges, in index order


@pytest.fixture
def advisor(tmp_path: Path) -> Advisor:
    meta = tmp_path / "meta.json"
    meta.write_text(json.dumps({"source": "test fixture", "date": "2025-06-28"}))
    found = read_advisor(FIXTURES / "spot_advisor.json", meta)
    assert found is not None
    return found


def stage(stack: str, instance_type: str, nodes: int, **extra: str) -> ResolvedCluster:
    spec = load_spec(
        {
            **TRAIN_LIKE,
            "gpu-cluster:instanceType": instance_type,
            "gpu-cluster:nodes": str(nodes),
            "gpu-cluster:purchaseOption": "spot",
            **extra,
        },
        stack,
    )
    assert isinstance(spec, ResolvedCluster)
    return spec


# --- the advisor's bands ---------------------------------------------------------------------


def test_a_type_gets_the_advisors_own_label_for_its_region(advisor):
    band = spot_band("us-east-1", "g5.12xlarge", advisor=advisor)
    assert band is not None
    assert (band.label, band.index, band.savings_percent, band.upper) == (">20%", 4, 58, True)
    assert band.date == "2025-06-28" and "advisory" in band.source
    lower = spot_band("us-east-1", "p4d.24xlarge", advisor=advisor)
    assert lower is not None and (lower.label, lower.upper) == ("10-15%", False)
    # the same type elsewhere is its own market
    west = spot_band("us-west-2", "p4d.24xlarge", advisor=advisor)
    assert west is not None and west.label == ">20%"
    edge = spot_band("eu-central-1", "g5.2xlarge", advisor=advisor)
    assert edge is not None and (edge.label, edge.upper) == ("15-20%", True)
    assert "interruption frequency >20% a month" in band_text(band)
    assert "advisory" in band_text(band)


def test_an_unknown_type_region_or_os_has_no_band(advisor):
    assert spot_band("us-east-1", "m5.large", advisor=advisor) is None
    assert spot_band("ap-south-2", "g5.12xlarge", advisor=advisor) is None
    assert spot_band("us-east-1", "g5.12xlarge", os="Windows", advisor=advisor) is None


def test_the_bundled_copy_is_the_feed_format_with_its_date():
    data = json.loads(ADVISOR_PATH.read_text())
    assert [r["label"] for r in sorted(data["ranges"], key=lambda r: r["index"])] == REAL_LABELS
    catalog = set(load_catalog().instance_types)
    for systems in data["spot_advisor"].values():
        assert set(systems) == {"Linux"} and set(systems["Linux"]) <= catalog
    assert advisor_snapshot_date() == "2025-06-28"
    band = spot_band("us-east-1", "p4d.24xlarge")  # the bundled data: as the feed published it
    assert band is not None and (band.label, band.savings_percent) == ("10-15%", 67)


# --- what a reclaim costs a training stage -----------------------------------------------------


def test_an_upper_band_warns_a_training_stage_with_its_checkpoint_interval(advisor):
    spec = stage("experiment", "g5.12xlarge", 2)
    warning = reclaim_warning(spec, checkpoint_minutes=30, advisor=advisor)
    assert warning is not None
    assert ">20% interruption band" in warning
    assert "checkpoint interval (30 min x 2 nodes = 1.0 node-hours)" in warning
    first, last = resume_minutes()
    assert (first, last) == (7, 15)  # the guide's "about 7-15 minutes" for p4d
    assert f"about {first}-{last} min until the cluster is back at 2 node(s)" in warning
    assert "more than 0.4 reclaims per 30 days for 2 spot node(s)" in warning
    assert "2-minute notice (SIGUSR1" in warning
    # without a known interval the warning still names it
    assert "up to its checkpoint interval" in str(reclaim_warning(spec, advisor=advisor))


def test_a_lower_band_or_a_stage_that_is_not_training_on_spot_does_not_warn(advisor):
    assert reclaim_warning(stage("train", "p4d.24xlarge", 4), advisor=advisor) is None  # 10-15%
    # one node outside the training stages: not a training stage
    assert reclaim_warning(stage("dev", "g5.xlarge", 1), advisor=advisor) is None
    assert reclaim_warning(stage("experiment", "g5.xlarge", 1), advisor=advisor) is not None
    on_demand = stage("train", "g5.12xlarge", 2, **{"gpu-cluster:purchaseOption": "on-demand"})
    assert reclaim_warning(on_demand, advisor=advisor) is None
    all_on_demand = stage("train", "g5.12xlarge", 2, **{"gpu-cluster:spot": '{"onDemandBase": 2}'})
    assert reclaim_warning(all_on_demand, advisor=advisor) is None


# --- refresh from the public feed --------------------------------------------------------------


def feed() -> bytes:
    """The fixture as AWS serves it: more types, more OSes than the project keeps."""
    data = json.loads((FIXTURES / "spot_advisor.json").read_text())
    data["instance_types"]["m5.large"] = {"emr": True, "cores": 2, "ram_gb": 8.0}
    data["spot_advisor"]["us-east-1"]["Linux"]["m5.large"] = {"s": 50, "r": 0}
    data["spot_advisor"]["us-east-1"]["Windows"] = {"g5.12xlarge": {"s": 40, "r": 1}}
    data["spot_advisor"]["us-east-1"]["Linux"]["p4d.24xlarge"] = {"s": 70, "r": 3}
    return json.dumps(data).encode()


@pytest.fixture
def bundled(tmp_path: Path) -> tuple[Path, Path]:
    path, meta = tmp_path / "spot_advisor.json", tmp_path / "spot_advisor.meta.json"
    path.write_text((FIXTURES / "spot_advisor.json").read_text())
    meta.write_text(json.dumps({"source": "before", "date": "2025-06-28"}))
    return path, meta


def test_a_refresh_replaces_the_copy_trimmed_with_its_date(bundled):
    path, meta = bundled
    asked = []

    def fetch(url: str) -> bytes:
        asked.append(url)
        return feed()

    refresh.refresh_spot_advisor(load_catalog().instance_types, fetch, path, meta, "2026-12-01")
    assert asked == ["https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"]
    data = json.loads(path.read_text())
    assert "m5.large" not in data["instance_types"]
    assert set(data["spot_advisor"]["us-east-1"]) == {"Linux"}
    assert "m5.large" not in data["spot_advisor"]["us-east-1"]["Linux"]
    fresh = read_advisor(path, meta)
    band = spot_band("us-east-1", "p4d.24xlarge", advisor=fresh)
    assert band is not None and (band.label, band.date) == ("15-20%", "2026-12-01")
    assert json.loads(meta.read_text())["date"] == "2026-12-01"


@pytest.mark.parametrize(
    "answer",
    [OSError("Name or service not known"), b"<html><body>Access Denied</body></html>", b"{}"],
)
def test_a_failed_or_foreign_fetch_leaves_the_copy_unchanged(bundled, answer):
    path, meta = bundled
    before, meta_before = path.read_bytes(), meta.read_bytes()

    def fetch(url: str) -> bytes:
        if isinstance(answer, Exception):
            raise answer
        return answer

    with pytest.raises(CommandError) as caught:
        refresh.refresh_spot_advisor(["p4d.24xlarge"], fetch, path, meta, "2026-12-01")
    assert "the bundled copy is unchanged" in str(caught.value)
    assert path.read_bytes() == before and meta.read_bytes() == meta_before


def test_the_write_is_a_rename_of_a_file_beside_it(bundled, monkeypatch):
    path, meta = bundled
    before = path.read_bytes()
    renames = []

    def crash(source: str, target: Path) -> None:  # the machine dies at the rename
        renames.append((Path(source).parent, target))
        raise OSError("disk gone")

    monkeypatch.setattr(refresh.os, "replace", crash)
    with pytest.raises(OSError):
        refresh.refresh_spot_advisor(["p4d.24xlarge"], lambda _: feed(), path, meta, "2026-12-01")
    assert renames == [(path.parent, path)]  # same directory: the rename is atomic
    assert path.read_bytes() == before


# --- placement scores over several regions ------------------------------------------------------

REGIONS = ["us-east-1", "us-west-2", "eu-west-1"]
TYPES = ["p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge"]


def test_placement_scores_over_three_regions_are_ranked_with_the_stacks_own_marked():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    own_zone = load_catalog().zone_id("us-east-1", "us-east-1a")
    assert own_zone == "use1-az6"
    first_page = [
        {"Region": "us-east-1", "AvailabilityZoneId": "use1-az6", "Score": 3},
        {"Region": "us-west-2", "AvailabilityZoneId": "usw2-az2", "Score": 9},
        {"Region": "eu-west-1", "AvailabilityZoneId": "euw1-az1", "Score": 3},
    ]
    request = {
        "InstanceTypes": TYPES,
        "TargetCapacity": 4,
        "SingleAvailabilityZone": True,
        "RegionNames": REGIONS,
    }
    with Stubber(ec2) as stub:
        stub.add_response(
            "get_spot_placement_scores",
            {"SpotPlacementScores": first_page, "NextToken": "page-2"},
            request,
        )
        stub.add_response(  # the answer is paginated: every page is read
            "get_spot_placement_scores",
            {
                "SpotPlacementScores": [
                    {"Region": "us-east-1", "AvailabilityZoneId": "use1-az1", "Score": 7}
                ]
            },
            {**request, "NextToken": "page-2"},
        )
        ranked = placement_scores(ec2, TYPES, 4, REGIONS, "us-east-1", own_zone)
        stub.assert_no_pending_responses()
    assert ranked == [
        RegionScore("us-west-2", "usw2-az2", 9, own=False),
        RegionScore("us-east-1", "use1-az1", 7, own=False),
        RegionScore("eu-west-1", "euw1-az1", 3, own=False),  # a tie: by region name
        RegionScore("us-east-1", "use1-az6", 3, own=True),
    ]
    text = placement_text(ranked, REGIONS, TYPES)
    assert text[0] == " 9/10  us-west-2 usw2-az2"
    assert text[3] == " 3/10  us-east-1 use1-az6  <- this stack"
    assert not any("no score for" in line or "fewer than" in line for line in text)


def test_region_scores_mark_the_own_region_and_name_regions_without_a_score():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    with Stubber(ec2) as stub:
        stub.add_response(
            "get_spot_placement_scores",
            {"SpotPlacementScores": [{"Region": "us-east-1", "Score": 5}]},
            {
                "InstanceTypes": ["g5.12xlarge"],
                "TargetCapacity": 2,
                "SingleAvailabilityZone": False,
                "RegionNames": ["us-east-1", "us-east-2"],
            },
        )
        ranked = placement_scores(
            ec2, ["g5.12xlarge"], 2, ["us-east-1", "us-east-2"], "us-east-1", None, False
        )
    assert ranked == [RegionScore("us-east-1", None, 5, own=True)]
    text = placement_text(ranked, ["us-east-1", "us-east-2"], ["g5.12xlarge"])
    assert text[0] == " 5/10  us-east-1  <- this stack"
    assert any(line.startswith("no score for us-east-2") for line in text)
    assert any("fewer than 3 types low" in line for line in text)


def test_the_stacks_zone_id_is_this_accounts():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    with Stubber(ec2) as stub:
        stub.add_response(
            "describe_availability_zones",
            {"AvailabilityZones": [{"ZoneName": "us-east-1a", "ZoneId": "use1-az4"}]},
            {"ZoneNames": ["us-east-1a"]},
        )
        assert scores_module.own_zone_id(ec2, "us-east-1a") == "use1-az4"  # not the catalog's


class NoCalls:
    def __getattr__(self, name: str):
        raise AssertionError(f"an AWS call was made: {name}")


@pytest.mark.parametrize(
    ("regions", "says"),
    [
        (["us-east-1", "us-est-2"], "'us-est-2' is not an AWS region"),
        (["ap-southeast-1"], "offers p4d.24xlarge in no zone of ap-southeast-1"),
        (["ca-central-1"], "in no zone of ca-central-1"),
        ([f"r{i}" for i in range(11)], "takes at most 10 (RegionNames)"),
        ([], "at least one region"),
    ],
)
def test_a_bad_region_is_refused_before_any_call(regions, says, monkeypatch):
    asked = []
    monkeypatch.setattr(scores_module, "paginate", lambda *a, **k: asked.append(a) or iter(()))
    with pytest.raises(ValueError, match="regions that offer") as caught:
        placement_scores(NoCalls(), TYPES, 4, regions, "us-east-1", "use1-az6")
    assert says in str(caught.value)
    assert "us-east-1" in str(caught.value)  # the allowed values are named
    assert asked == []


def test_checked_regions_keeps_order_and_drops_repeats():
    assert checked_regions(["us-west-2", "us-east-1", "us-west-2"], TYPES) == [
        "us-west-2",
        "us-east-1",
    ]
