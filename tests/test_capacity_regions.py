"""Capacity Block offerings across regions (issue 32): one EC2 client per region through the
project's call() wrapper, each stubbed with botocore's Stubber and its request checked; ranked
by total upfront fee then start; one region's error reported beside the others' offerings; a
region the catalog says lacks the type refused before any call. No AWS endpoint is reached."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import Stubber

from gpu_cluster.infra.aws import capacity_blocks
from gpu_cluster.infra.aws.block_command import offerings_text, run_offerings
from gpu_cluster.infra.aws.capacity_blocks import offerings_across_regions
from gpu_cluster.infra.errors import AwsError
from gpu_cluster.infra.outcome import CommandError

KIND, COUNT, HOURS = "p4d.24xlarge", 4, 48
REQUEST = {"InstanceType": KIND, "InstanceCount": COUNT, "CapacityDurationHours": HOURS}


def offering(ident: str, zone: str, day: int, fee: str) -> dict:
    return {
        "CapacityBlockOfferingId": ident,
        "InstanceType": KIND,
        "AvailabilityZone": zone,
        "InstanceCount": COUNT,
        "StartDate": datetime(2026, 12, day, 11, 30, tzinfo=UTC),
        "EndDate": datetime(2026, 12, day + 2, 11, 30, tzinfo=UTC),
        "CapacityBlockDurationHours": HOURS,
        "UpfrontFee": fee,
        "CurrencyCode": "USD",
        "Tenancy": "default",
    }


EAST = [  # us-east-1: the dearest, and a block as cheap as the west's but starting later
    offering("cb-0eeeeeeeeeeeeeee1", "us-east-1a", 10, "2880.00"),
    offering("cb-0eeeeeeeeeeeeeee2", "us-east-1c", 12, "1920.00"),
]
WEST = [offering("cb-0wwwwwwwwwwwwwww1", "us-west-2b", 3, "1920.00")]


class Regions:
    """region -> a stubbed EC2 client of that region; records which regions were asked."""

    def __init__(self, answers: dict[str, list[dict] | str | None]):
        self.asked: list[str] = []
        self.stubs: dict[str, Stubber] = {}
        self.apis = {}
        for region, answer in answers.items():
            api = boto3.client("ec2", region_name=region)
            stub = Stubber(api)
            if isinstance(answer, str):
                stub.add_client_error(
                    "describe_capacity_block_offerings", answer, "no", expected_params=REQUEST
                )
            elif answer is not None:
                stub.add_response(
                    "describe_capacity_block_offerings",
                    {"CapacityBlockOfferings": answer},
                    REQUEST,
                )
            stub.activate()
            self.apis[region], self.stubs[region] = api, stub

    def __call__(self, region: str):
        self.asked.append(region)
        return self.apis[region]

    def all_answered(self) -> None:
        for stub in self.stubs.values():
            stub.assert_no_pending_responses()


def test_two_regions_ranked_by_total_fee_then_start():
    regions = Regions({"us-east-1": EAST, "us-west-2": WEST})
    found, none = offerings_across_regions(
        ["us-east-1", "us-west-2"], KIND, COUNT, HOURS, clients=regions
    )
    regions.all_answered()  # each region asked once, with the request checked
    assert sorted(regions.asked) == ["us-east-1", "us-west-2"]
    assert [(o.offering_id, o.region) for o in found] == [
        ("cb-0wwwwwwwwwwwwwww1", "us-west-2"),  # $1,920, 3 Dec
        ("cb-0eeeeeeeeeeeeeee2", "us-east-1"),  # $1,920, 12 Dec: same fee, later start
        ("cb-0eeeeeeeeeeeeeee1", "us-east-1"),  # $2,880
    ]
    assert none == {}
    assert found[0].instance_hourly == pytest.approx(1920 / (HOURS * COUNT))


def test_every_page_of_a_regions_offerings_is_ranked():
    """DescribeCapacityBlockOfferings answers in pages (NextToken): a cheaper block on the
    second page is still found."""
    api = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(api)
    first = {"CapacityBlockOfferings": EAST[:1], "NextToken": "page-2"}
    stub.add_response("describe_capacity_block_offerings", first, REQUEST)
    second = {"CapacityBlockOfferings": EAST[1:]}
    stub.add_response(
        "describe_capacity_block_offerings", second, REQUEST | {"NextToken": "page-2"}
    )
    with stub:
        found, _ = offerings_across_regions(
            ["us-east-1"], KIND, COUNT, HOURS, clients=lambda region: api
        )
    stub.assert_no_pending_responses()
    assert [o.offering_id for o in found] == ["cb-0eeeeeeeeeeeeeee2", "cb-0eeeeeeeeeeeeeee1"]


def test_one_regions_error_is_reported_while_the_other_ranks():
    regions = Regions({"us-east-1": "UnauthorizedOperation", "us-west-2": WEST})
    found, none = offerings_across_regions(
        ["us-east-1", "us-west-2"], KIND, COUNT, HOURS, clients=regions
    )
    regions.all_answered()
    assert [o.offering_id for o in found] == ["cb-0wwwwwwwwwwwwwww1"]
    assert set(none) == {"us-east-1"}
    assert "ec2:DescribeCapacityBlockOfferings failed: UnauthorizedOperation" in none["us-east-1"]
    assert "IAM permission 'ec2:DescribeCapacityBlockOfferings'" in none["us-east-1"]


def test_a_region_that_answers_none_says_so():
    regions = Regions({"us-east-1": [], "us-west-2": WEST})
    _, none = offerings_across_regions(
        ["us-east-1", "us-west-2"], KIND, COUNT, HOURS, clients=regions
    )
    assert none == {"us-east-1": f"no Capacity Block offering for {COUNT} x {KIND}, {HOURS} h"}


def untouchable(region: str):
    raise AssertionError(f"an EC2 client was made for {region}")


def test_a_region_without_the_type_is_refused_before_any_call():
    # the bundled catalog offers p5e.48xlarge in us-east-2 and us-west-2 only
    with pytest.raises(ValueError) as refused:
        offerings_across_regions(
            ["us-west-2", "us-east-1"], "p5e.48xlarge", 2, 24, clients=untouchable
        )
    message = str(refused.value)
    assert "p5e.48xlarge is not offered in us-east-1" in message
    assert "regions that offer it: us-east-2, us-west-2" in message
    assert "Drop us-east-1 from --regions" in message


@pytest.mark.parametrize(
    ("regions", "kind", "says"),
    [
        (["us-east-1"], "g5.xlarge", "g5.xlarge is not sold as Capacity Blocks"),
        (["us-est-1"], KIND, "--regions 'us-est-1' is not an AWS region"),
        ([], KIND, "--regions needs at least one region"),
        (["us-east-1"], "p9.fantasy", "not in the bundled catalog"),
    ],
)
def test_bad_inputs_are_refused_before_any_call(regions, kind, says):
    with pytest.raises(ValueError) as refused:
        offerings_across_regions(regions, kind, 1, 24, clients=untouchable)
    assert says in str(refused.value)


def test_the_table_names_region_zone_dates_size_total_and_hourly():
    regions = Regions({"us-east-1": "UnauthorizedOperation", "us-west-2": WEST})
    found, none = offerings_across_regions(
        ["us-east-1", "us-west-2"], KIND, COUNT, HOURS, clients=regions
    )
    lines = offerings_text(found, none, KIND, COUNT, HOURS)
    header, row = lines[1].split(), lines[2].split()
    assert header == [
        "offering", "region", "zone", "start", "(UTC)", "end", "(UTC)",
        "hours", "count", "total", "$", "$/inst-h",
    ]  # fmt: skip
    assert row == [
        "cb-0wwwwwwwwwwwwwww1", "us-west-2", "us-west-2b", "2026-12-03", "11:30",
        "2026-12-05", "11:30", "48", "4", "1,920.00", "10.000",
    ]  # fmt: skip
    assert lines[3].startswith("  us-east-1: ec2:DescribeCapacityBlockOfferings failed")


def use_regions(monkeypatch, regions: Regions) -> None:
    monkeypatch.setattr(
        capacity_blocks, "client", lambda _service, region, _s=None: regions(region)
    )


def test_the_command_searches_the_regions_it_is_given(monkeypatch, capsys):
    regions = Regions({"us-east-1": EAST, "us-west-2": WEST})
    use_regions(monkeypatch, regions)
    assert run_offerings("train", HOURS, None, True, ["us-east-1", "us-west-2"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["regions"] == ["us-east-1", "us-west-2"]
    assert [o["region"] for o in document["offerings"]] == ["us-west-2", "us-east-1", "us-east-1"]
    assert document["noOffering"] == {}


def test_the_command_names_the_offerings_region_to_buy_in(monkeypatch, capsys):
    regions = Regions({"us-east-1": [], "us-west-2": WEST})
    use_regions(monkeypatch, regions)
    assert run_offerings("train", HOURS, None, False, ["us-east-1", "us-west-2"]) == 0
    out = capsys.readouterr().out
    assert "gpuc capacity-block purchase OFFERING_ID --region us-west-2 --yes" in out
    assert "needs the stack moved to its region" in out


def test_when_no_region_answers_the_command_fails_never_an_empty_listing(monkeypatch):
    regions = Regions({"us-east-1": "RequestLimitExceeded", "us-west-2": "RequestLimitExceeded"})
    use_regions(monkeypatch, regions)
    with pytest.raises(AwsError, match="RequestLimitExceeded"):
        run_offerings("train", HOURS, None, False, ["us-east-1", "us-west-2"])


def test_the_command_refuses_a_region_without_the_type(monkeypatch):
    monkeypatch.setattr(capacity_blocks, "client", untouchable)
    with pytest.raises(CommandError, match="not offered in ap-southeast-1"):
        run_offerings("train", HOURS, None, False, ["us-east-1", "ap-southeast-1"])
