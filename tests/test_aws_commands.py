"""boto3 code: price refresh (Pricing API through botocore's Stubber, which moto lacks; spot
history and zones through moto), Capacity Block offerings and purchase (Stubber), reservation
facts (Stubber). No test reaches a real AWS endpoint."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import boto3
import pytest
from botocore.stub import ANY, Stubber
from moto import mock_aws

from gpu_cluster.infra.aws import capacity_blocks, price_refresh, reservations
from gpu_cluster.infra.aws.capacity_blocks import duration_problem
from gpu_cluster.infra.cli import main
from gpu_cluster.infra.errors import AwsError
from gpu_cluster.infra.outcome import AWS, INPUT, USAGE
from gpu_cluster.infra.prices.gpu_prices import read_price_table

P4D_PRICE = "21.9576"


def product(kind: str, usd: str) -> str:
    return json.dumps(
        {
            "product": {"attributes": {"instanceType": kind, "regionCode": "us-east-1"}},
            "terms": {
                "OnDemand": {
                    "SKU.JRTCKXETXF": {
                        "priceDimensions": {
                            "SKU.JRTCKXETXF.6YS6EN2CT7": {"pricePerUnit": {"USD": usd}}
                        }
                    }
                }
            },
        }
    )


def stubbed(service: str, region: str = "us-east-1"):
    api = boto3.client(service, region_name=region)
    return api, Stubber(api)


def pricing_filters(region: str) -> list[dict[str, str]]:
    fields = {"regionCode": region, **price_refresh.LINUX_ON_DEMAND}
    return [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in fields.items()]


def test_price_refresh_builds_a_snapshot_from_pricing_and_spot_history(tmp_path):
    pricing, stub = stubbed("pricing")
    stub.add_response(
        "get_products",
        {"PriceList": [product("p4d.24xlarge", P4D_PRICE), product("m5.large", "0.096")]},
        {"ServiceCode": "AmazonEC2", "Filters": pricing_filters("us-east-1")},
    )
    with mock_aws(), stub:
        rows = price_refresh.fetch_prices(["us-east-1"], pricing=pricing)
    stub.assert_no_pending_responses()
    p4d = [r for r in rows if r["instance_type"] == "p4d.24xlarge"]
    assert {r["on_demand_usd_per_hour"] for r in p4d} == {P4D_PRICE}
    # moto serves spot history per AZ name; the snapshot keys it by AZ id
    assert {r["availability_zone_id"] for r in p4d} >= {"use1-az6"}  # us-east-1a
    assert all(r["spot_usd_per_hour"] for r in p4d)
    assert not any(r["instance_type"] == "m5.large" for r in rows)  # not a GPU type
    prices, meta = tmp_path / "prices.csv", tmp_path / "prices.meta.json"
    price_refresh.write_prices(rows, ["us-east-1"], prices, meta, today="2026-12-01")
    table = read_price_table(prices, meta)
    assert table.on_demand[("us-east-1", "p4d.24xlarge")] == float(P4D_PRICE)
    assert "use1-az6" in table.spot[("us-east-1", "p4d.24xlarge")]
    assert table.date == "2026-12-01" and "GetProducts" in table.source


def test_failed_refresh_keeps_the_snapshot(tmp_path, monkeypatch, capsys):
    pricing, stub = stubbed("pricing")
    stub.add_client_error("get_products", "AccessDeniedException", "not allowed")
    output = tmp_path / "prices.csv"
    output.write_text("the old snapshot\n")
    with mock_aws(), stub:
        real_client = price_refresh.client
        monkeypatch.setattr(
            price_refresh,
            "client",
            lambda service, region, session=None: (
                pricing if service == "pricing" else real_client(service, region, session)
            ),
        )
        code = main(["prices", "refresh", "--region", "us-east-1", "--output", str(output)])
    assert code == AWS
    err = capsys.readouterr().err
    assert "pricing:GetProducts failed: AccessDeniedException" in err
    assert "The price snapshot was kept unchanged." in err
    assert output.read_text() == "the old snapshot\n"
    assert not output.with_suffix(".meta.json").exists()


OFFERINGS = {
    "CapacityBlockOfferings": [
        {
            "CapacityBlockOfferingId": "cb-0aaaaaaaaaaaaaaaa",
            "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-east-1a",
            "InstanceCount": 4,
            "StartDate": datetime(2026, 12, 10, 11, 30, tzinfo=UTC),
            "EndDate": datetime(2026, 12, 12, 11, 30, tzinfo=UTC),
            "CapacityBlockDurationHours": 48,
            "UpfrontFee": "2880.00",
            "CurrencyCode": "USD",
            "Tenancy": "default",
        },
        {
            "CapacityBlockOfferingId": "cb-0bbbbbbbbbbbbbbbb",
            "InstanceType": "p4d.24xlarge",
            "AvailabilityZone": "us-east-1c",
            "InstanceCount": 4,
            "StartDate": datetime(2026, 12, 3, 11, 30, tzinfo=UTC),
            "EndDate": datetime(2026, 12, 5, 11, 30, tzinfo=UTC),
            "CapacityBlockDurationHours": 48,
            "UpfrontFee": "1920.00",
            "CurrencyCode": "USD",
            "Tenancy": "default",
        },
    ]
}


def use_client(monkeypatch, module, api) -> None:
    monkeypatch.setattr(module, "client", lambda *args, **kwargs: api)


def test_offerings_for_the_stack_cheapest_first(monkeypatch, capsys):
    ec2, stub = stubbed("ec2")
    stub.add_response(
        "describe_capacity_block_offerings",
        OFFERINGS,
        {"InstanceType": "p4d.24xlarge", "InstanceCount": 4, "CapacityDurationHours": 48},
    )
    use_client(monkeypatch, capacity_blocks, ec2)
    with stub:
        assert main(["capacity-block", "offerings", "--stack", "train", "--hours", "48"]) == 0
    out = capsys.readouterr().out
    cheap, dear = out.index("cb-0bbbbbbbbbbbbbbbb"), out.index("cb-0aaaaaaaaaaaaaaaa")
    assert cheap < dear
    assert f"{1920 / (48 * 4):.3f}" in out  # $/node-hour of the cheaper block
    assert "availabilityZone (us-east-1a)" in out


def test_offerings_with_a_start_date_send_a_date_range(monkeypatch):
    ec2, stub = stubbed("ec2")
    stub.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": []},
        {
            "InstanceType": "p4d.24xlarge",
            "InstanceCount": 4,
            "CapacityDurationHours": 24,
            "StartDateRange": datetime(2027, 1, 15, tzinfo=UTC),
            "EndDateRange": ANY,
        },
    )
    use_client(monkeypatch, capacity_blocks, ec2)
    with stub:
        code = main(
            [
                "capacity-block",
                "offerings",
                "--stack",
                "train",
                "--hours",
                "24",
                "--start",
                "2027-01-15",
            ]
        )
    assert code == 0
    stub.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("hours", "ok"),
    [
        (24, True),
        (14 * 24, True),
        (21 * 24, True),
        (15 * 24, False),
        (36, False),
        (189 * 24, False),
        (0, False),
    ],
)
def test_block_durations_follow_aws(hours, ok):
    assert (duration_problem(hours) is None) == ok


def test_offerings_for_a_type_without_blocks_is_a_message(capsys):
    assert main(["capacity-block", "offerings", "--stack", "dev", "--hours", "24"]) == INPUT
    assert "g5.xlarge is not sold as Capacity Blocks" in capsys.readouterr().err


def test_purchase_is_refused_without_yes(monkeypatch, capsys):
    ec2, stub = stubbed("ec2")  # no responses queued: any call would fail the test
    use_client(monkeypatch, capacity_blocks, ec2)
    with stub:
        assert main(["capacity-block", "purchase", "cb-0bbbbbbbbbbbbbbbb"]) == USAGE
    assert "cannot be cancelled" in capsys.readouterr().err
    stub.assert_no_pending_responses()


def test_purchase_with_yes_buys_linux_capacity(monkeypatch, capsys):
    ec2, stub = stubbed("ec2")
    stub.add_response(
        "purchase_capacity_block",
        {
            "CapacityReservation": {
                "CapacityReservationId": "cr-0123456789abcdef0",
                "InstanceType": "p4d.24xlarge",
                "AvailabilityZone": "us-east-1c",
            }
        },
        {"CapacityBlockOfferingId": "cb-0bbbbbbbbbbbbbbbb", "InstancePlatform": "Linux/UNIX"},
    )
    use_client(monkeypatch, capacity_blocks, ec2)
    with stub:
        assert main(["capacity-block", "purchase", "cb-0bbbbbbbbbbbbbbbb", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "bought Capacity Block cr-0123456789abcdef0" in out
    assert "pulumi config set --path capacityBlock.id cr-0123456789abcdef0" in out


def test_purchase_errors_name_the_iam_action(monkeypatch, capsys):
    ec2, stub = stubbed("ec2")
    stub.add_client_error("purchase_capacity_block", "UnauthorizedOperation", "no")
    use_client(monkeypatch, capacity_blocks, ec2)
    with stub:
        assert main(["capacity-block", "purchase", "cb-0bbbbbbbbbbbbbbbb", "--yes"]) == AWS
    assert "'ec2:PurchaseCapacityBlock'" in capsys.readouterr().err


def test_cost_quotes_a_block_from_live_offerings(monkeypatch, capsys):
    ec2, stub = stubbed("ec2")
    stub.add_response("describe_capacity_block_offerings", OFFERINGS, None)
    use_client(monkeypatch, capacity_blocks, ec2)
    with stub:
        assert main(["cost", "--stack", "train", "--json", "--quote-capacity-block"]) == 0
    rows = {r["option"]: r for r in json.loads(capsys.readouterr().out)["options"]}
    assert rows["capacity block"]["usdPerHour"] == pytest.approx(4 * 1920 / (48 * 4))
    assert "cb-0bbbbbbbbbbbbbbbb" in rows["capacity block"]["note"]


def test_reservation_facts_from_describe(monkeypatch):
    ec2, stub = stubbed("ec2")
    stub.add_response(
        "describe_capacity_reservations",
        {
            "CapacityReservations": [
                {
                    "CapacityReservationId": "cr-0123456789abcdef0",
                    "InstanceType": "p4d.24xlarge",
                    "AvailabilityZone": "us-east-1a",
                    "TotalInstanceCount": 4,
                    "AvailableInstanceCount": 4,
                    "State": "scheduled",
                    "ReservationType": "capacity-block",
                    "InstancePlatform": "Linux/UNIX",
                }
            ]
        },
        {"CapacityReservationIds": ["cr-0123456789abcdef0"]},
    )
    stub.add_client_error(
        "describe_capacity_reservations", "InvalidCapacityReservationId.NotFound", "gone"
    )
    use_client(monkeypatch, reservations, ec2)
    with stub:
        facts = reservations.describe_reservation("cr-0123456789abcdef0", "us-east-1")
        assert (facts.instance_type, facts.state, facts.reservation_type) == (
            "p4d.24xlarge",
            "scheduled",
            "capacity-block",
        )
        with pytest.raises(AwsError) as missing:
            reservations.describe_reservation("cr-0123456789abcdef1", "us-east-1")
    assert missing.value.code == "InvalidCapacityReservationId.NotFound"


@pytest.mark.parametrize(("days", "hours"), [(1, 24), (8, 192), (14, 336), (20, 336), (30, 672)])
def test_cost_quotes_a_block_length_aws_sells(days, hours):
    from gpu_cluster.infra.cost.command import block_hours

    assert block_hours(days) == hours
    assert duration_problem(block_hours(days)) is None


def test_a_bad_region_is_refused_before_any_call(capsys):
    assert main(["prices", "refresh", "--region", "bad region!"]) == INPUT
    err = capsys.readouterr().err
    assert "--region 'bad region!' is not an AWS region" in err


def test_refreshing_one_regions_prices_keeps_the_others(tmp_path):
    from gpu_cluster.infra.prices.gpu_prices import PRICES_PATH

    snapshot = tmp_path / "prices.csv"
    snapshot.write_text(PRICES_PATH.read_text())
    fresh = [
        {**row, "on_demand_usd_per_hour": "1.0"}
        for row in price_refresh.merged_price_rows(snapshot, [], [])[0]
        if row["region"] == "us-west-2"
    ]
    rows, kept = price_refresh.merged_price_rows(snapshot, fresh, ["us-west-2"])
    meta = tmp_path / "prices.meta.json"
    price_refresh.write_prices(rows, ["us-west-2"], snapshot, meta, kept_regions=kept)
    table = read_price_table(snapshot, meta)
    bundled = read_price_table()
    assert table.on_demand[("us-west-2", "p4d.24xlarge")] == 1.0
    assert (
        table.on_demand[("us-east-1", "p4d.24xlarge")]
        == bundled.on_demand[("us-east-1", "p4d.24xlarge")]
    )
    assert "us-east-1" in kept and "us-west-2" not in kept
    assert "earlier snapshot" in table.source
