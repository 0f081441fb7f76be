"""Future-dated On-Demand Capacity Reservations (issue 32): the start date and the rest of AWS's
rules checked before any call, the plan's request and cost, and CreateCapacityReservation's
parameters as botocore's model spells them (Stubber: no AWS endpoint is reached)."""

from __future__ import annotations

import inspect
from datetime import UTC, date, datetime, timedelta
from typing import Any

import boto3
import botocore.session
import pulumi_aws.ec2 as aws_ec2
import pytest
import yaml
from botocore.stub import Stubber
from conftest import ROOT
from moto import mock_aws

from gpu_cluster.components.naming import STACK_ID_TAG
from gpu_cluster.infra.aws import future_command
from gpu_cluster.infra.aws.future_command import run_future_reservation
from gpu_cluster.infra.aws.future_reservation import (
    create_future_reservation,
    future_reservation_problem,
    plan_future_reservation,
    plan_text,
    rules,
)
from gpu_cluster.infra.errors import AwsError
from gpu_cluster.infra.outcome import INPUT, CommandError, load_cluster_spec
from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly
from gpu_cluster.infra.validation.resolve import stack_identity

TODAY = date(2026, 12, 1)
NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
DAY = 86_400


@pytest.mark.parametrize(
    ("days", "ok"), [(4, False), (5, True), (60, True), (120, True), (121, False)]
)
def test_the_start_is_5_to_120_days_ahead(days, ok):
    problem = future_reservation_problem(TODAY + timedelta(days=days), TODAY)
    assert (problem is None) == ok
    if not ok:
        assert problem is not None
        assert f"is {days} days ahead" in problem
        assert "5 to 120 days in advance, a start from 2026-12-06 to 2027-03-31" in problem
        assert "Fix: " in problem


def test_too_soon_names_the_first_date_too_late_when_to_ask():
    soon = future_reservation_problem(date(2026, 12, 5), TODAY) or ""
    late = future_reservation_problem(date(2027, 4, 1), TODAY) or ""
    assert "Fix: --start 2026-12-06 or later" in soon
    assert "Fix: request it on or after 2026-12-02, or --start 2027-03-31" in late


@pytest.mark.parametrize(
    ("start", "says"),
    [
        (date(2026, 11, 30), "is in the past"),
        ("2026-13-01", "--start must be a date such as 2027-01-15 (UTC), got '2026-13-01'"),
        ("next tuesday", "got 'next tuesday'"),
    ],
)
def test_a_past_or_invalid_date_is_refused(start, says):
    assert says in (future_reservation_problem(start, TODAY) or "")


def test_at_the_moment_of_the_call_the_days_are_counted_to_the_second():
    five_days = NOW + timedelta(days=5)
    assert future_reservation_problem(five_days, NOW) is None
    assert future_reservation_problem(five_days - timedelta(minutes=1), NOW) is not None
    assert future_reservation_problem(NOW + timedelta(days=120, seconds=1), NOW) is not None
    # a naive datetime is UTC
    assert future_reservation_problem(five_days.replace(tzinfo=None), NOW) is None


def test_the_first_date_a_refusal_names_is_taken_at_the_moment_of_the_call():
    """A date means its midnight UTC: at 09:00, five days on is 4 days 15 hours ahead at
    midnight, so the first date to name is the next one, and that one is taken."""
    soon = future_reservation_problem((NOW + timedelta(days=5)).date(), NOW) or ""
    assert "Fix: --start 2026-12-07 or later" in soon
    assert future_reservation_problem(date(2026, 12, 7), NOW) is None
    at_midnight = datetime(2026, 12, 1, tzinfo=UTC)
    assert future_reservation_problem(date(2026, 12, 6), at_midnight) is None


def test_p_series_gpus_cannot_be_reserved_ahead_this_way():
    problem = future_reservation_problem(date(2027, 1, 15), TODAY, "p4d.24xlarge", 4, 14) or ""
    assert "p4d.24xlarge is in the P series" in problem
    assert "C, G, I, M, R, T, U, X series only" in problem
    assert "gpuc capacity-block offerings" in problem


def test_at_least_32_vcpus_in_all():
    problem = future_reservation_problem(date(2027, 1, 15), TODAY, "g5.xlarge", 4, 14) or ""
    assert "4 x g5.xlarge is 16 vCPUs" in problem and "reserve 8 or more" in problem
    assert future_reservation_problem(date(2027, 1, 15), TODAY, "g5.xlarge", 8, 14) is None


@pytest.mark.parametrize(("days", "ok"), [(13, False), (14, True), (2314, True), (2315, False)])
def test_the_commitment_is_at_least_14_days(days, ok):
    problem = future_reservation_problem(date(2027, 1, 15), TODAY, "g5.12xlarge", 1, days)
    assert (problem is None) == ok
    if not ok:
        assert "14 to 2314 days" in (problem or "")


def test_every_problem_is_named_at_once():
    problem = future_reservation_problem(date(2026, 12, 2), TODAY, "g5.xlarge", 1, 7) or ""
    assert len(problem.splitlines()) == 3  # too soon, too few vCPUs, too short a commitment


def experiment():
    spec = load_cluster_spec("experiment")  # 1 x g5.12xlarge (48 vCPUs) in us-east-1b
    assert (spec.facts.instance_type, spec.node_count) == ("g5.12xlarge", 1)
    return spec


def test_the_plan_holds_the_request_and_its_cost():
    spec = experiment()
    plan = plan_future_reservation(spec, date(2027, 1, 15), 14, today=TODAY)
    start = datetime(2027, 1, 15, tzinfo=UTC)
    request = dict(plan.request)
    tags = {t["Key"]: t["Value"] for t in request.pop("TagSpecifications")[0]["Tags"]}
    assert len(request.pop("ClientToken")) <= 64
    assert request == {
        "InstanceType": "g5.12xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-east-1b",
        "Tenancy": "default",
        "InstanceCount": 1,
        "InstanceMatchCriteria": "targeted",
        "StartDate": start,
        "CommitmentDuration": 14 * DAY,
        "DeliveryPreference": "incremental",
        "EndDateType": "limited",
        "EndDate": start + timedelta(days=14, hours=1),  # EC2 refuses an end within it
    }  # no PlacementGroupArn: not supported for future-dated reservations
    assert tags[STACK_ID_TAG] == stack_identity(spec).stack_id
    assert tags["team"] == "ml-platform"
    rate = on_demand_hourly("us-east-1", "g5.12xlarge")
    assert rate
    assert plan.usd_per_hour == pytest.approx(rate)
    assert plan.total_usd == pytest.approx(1 * rate * (24 * 14 + 1))  # to its end
    text = "\n".join(plan_text(plan))
    assert f"${rate * (24 * 14 + 1):,.2f}" in text and "billed from the start" in text


def test_the_same_plan_asks_with_the_same_token_a_different_one_with_another():
    spec = experiment()
    one = plan_future_reservation(spec, date(2027, 1, 15), 14, today=TODAY)
    again = plan_future_reservation(spec, date(2027, 1, 15), 14, today=TODAY)
    other = plan_future_reservation(spec, date(2027, 1, 16), 14, today=TODAY)
    assert one.request["ClientToken"] == again.request["ClientToken"]
    assert one.request["ClientToken"] != other.request["ClientToken"]


def test_the_plan_refuses_what_aws_would():
    with pytest.raises(ValueError, match="P series"):
        plan_future_reservation(load_cluster_spec("train"), date(2027, 1, 15), 14, today=TODAY)
    with pytest.raises(ValueError, match=r"1 x g5\.xlarge is 4 vCPUs"):
        plan_future_reservation(load_cluster_spec("dev"), date(2027, 1, 15), 14, today=TODAY)
    with pytest.raises(ValueError, match="is 4 days ahead"):
        plan_future_reservation(experiment(), date(2026, 12, 5), 14, today=TODAY)
    dev = plan_future_reservation(
        load_cluster_spec("dev"), date(2027, 1, 15), 14, today=TODAY, instance_count=8
    )
    assert dev.request["InstanceCount"] == 8


def test_create_sends_the_request_as_the_model_spells_it():
    plan = plan_future_reservation(experiment(), date(2027, 1, 15), 30, today=TODAY)
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(ec2)
    stub.add_response(
        "create_capacity_reservation",
        {"CapacityReservation": {"CapacityReservationId": "cr-0123456789abcdef0"}},
        plan.request,
    )
    with stub:
        assert create_future_reservation(plan, ec2, now=NOW) == "cr-0123456789abcdef0"
    stub.assert_no_pending_responses()
    assert plan.request["CommitmentDuration"] == 30 * DAY
    assert plan.request["StartDate"] == datetime(2027, 1, 15, tzinfo=UTC)


def test_create_errors_name_the_iam_action():
    plan = plan_future_reservation(experiment(), date(2027, 1, 15), 14, today=TODAY)
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(ec2)
    stub.add_client_error("create_capacity_reservation", "UnauthorizedOperation", "no")
    with stub, pytest.raises(AwsError, match="'ec2:CreateCapacityReservation'"):
        create_future_reservation(plan, ec2, now=NOW)


class Untouchable:
    def __getattr__(self, name: str):
        raise AssertionError(f"EC2 was called: {name}")


def test_a_stale_plan_is_refused_at_the_call_and_nothing_is_called():
    plan = plan_future_reservation(experiment(), date(2026, 12, 10), 14, today=TODAY)
    days_later = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)  # 3.5 days before the start now
    with pytest.raises(ValueError, match="days ahead"):
        create_future_reservation(plan, Untouchable(), now=days_later)


def test_a_botocore_without_the_future_parameters_is_refused_before_the_call(monkeypatch):
    """The project's floor (botocore 1.34) predates future-dated reservations: its own
    validation would refuse StartDate; the command says to upgrade and calls nothing."""
    from gpu_cluster.infra.aws import future_reservation

    plan = plan_future_reservation(experiment(), date(2027, 1, 15), 14, today=TODAY)
    ec2 = boto3.client("ec2", region_name="us-east-1")
    assert future_reservation.future_parameters_missing(ec2) == []  # this botocore has them
    monkeypatch.setattr(future_reservation, "FUTURE_PARAMETERS", ("StartDate", "NotYetAParameter"))
    with Stubber(ec2) as stub, pytest.raises(ValueError, match="pip install --upgrade boto3"):
        create_future_reservation(plan, ec2, now=NOW)
    stub.assert_no_pending_responses()


def test_the_rules_match_botocores_model_of_the_api():
    """The bundled rules are the ones CreateCapacityReservation's model states."""
    model = botocore.session.get_session().get_service_model("ec2")
    shape: Any = model.operation_model("CreateCapacityReservation").input_shape
    members = shape.members
    facts = rules()
    assert members["CommitmentDuration"].metadata["max"] == facts["max_commitment_seconds"]
    low, high = facts["min_days_ahead"], facts["max_days_ahead"]
    assert f"between {low} and {high} days in advance" in members["StartDate"].documentation
    assert facts["delivery_preference"] in members["DeliveryPreference"].enum
    assert f"only supported value is <code>{facts['delivery_preference']}" in (
        members["DeliveryPreference"].documentation
    )
    assert facts["instance_match_criteria"] in members["InstanceMatchCriteria"].enum
    assert "32 vCPUs" in members["InstanceCount"].documentation
    assert "Not supported for future-dated" in members["PlacementGroupArn"].documentation


def test_pulumi_aws_cannot_express_a_start_date_yet():
    """Why gpuc creates the reservation (infra/aws/future_reservation.py): when pulumi-aws's
    CapacityReservation gains a start date, this fails and the program can create it."""
    inputs = set(inspect.signature(aws_ec2.CapacityReservationArgs.__init__).parameters)
    assert {"instance_type", "end_date"} <= inputs
    assert not {"start_date", "commitment_duration", "delivery_preference"} & inputs


def test_the_command_plans_without_yes_and_calls_nothing(monkeypatch, capsys):
    monkeypatch.setattr(future_command, "client", lambda *args: Untouchable())
    start = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()
    assert run_future_reservation("experiment", start, 14) == 0
    out = capsys.readouterr().out
    assert "1 x g5.12xlarge in us-east-1b" in out and "Nothing was created" in out


def test_the_command_creates_with_yes(monkeypatch, capsys):
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(ec2)
    stub.add_response(
        "create_capacity_reservation",
        {"CapacityReservation": {"CapacityReservationId": "cr-0123456789abcdef0"}},
        None,
    )
    monkeypatch.setattr(future_command, "client", lambda *args: ec2)
    start = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()
    with stub:
        assert run_future_reservation("experiment", start, 14, yes=True) == 0
    stub.assert_no_pending_responses()
    out = capsys.readouterr().out
    assert "created cr-0123456789abcdef0" in out
    assert "capacityReservation.id cr-0123456789abcdef0" in out


def test_the_command_refuses_a_bad_start_as_input(monkeypatch):
    monkeypatch.setattr(future_command, "client", lambda *args: Untouchable())
    with pytest.raises(CommandError) as refused:
        run_future_reservation("experiment", "2020-01-01", 14, yes=True)
    assert refused.value.code == INPUT and "in the past" in str(refused.value)


@mock_aws
def test_with_yes_a_zone_left_out_is_the_subnets_never_the_stand_in(monkeypatch, capsys, tmp_path):
    """availabilityZone left out in the user's own subnet: the plan says the zone stands in,
    and --yes reads the subnet's zone from EC2 (DescribeSubnets) and reserves there."""
    moto_ec2 = boto3.client("ec2", region_name="us-east-1")
    vpc = moto_ec2.create_vpc(CidrBlock="10.0.0.0/16")["Vpc"]["VpcId"]
    subnet = moto_ec2.create_subnet(
        VpcId=vpc, CidrBlock="10.0.1.0/24", AvailabilityZone="us-east-1d"
    )["Subnet"]["SubnetId"]
    stack = yaml.safe_load((ROOT / "stacks" / "Pulumi.experiment.yaml").read_text())
    del stack["config"]["gpu-cluster:availabilityZone"]
    stack["config"]["gpu-cluster:network"] = {"vpcId": vpc, "subnetIds": [subnet]}
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.experiment.yaml").write_text(yaml.safe_dump(stack))
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
    monkeypatch.chdir(tmp_path)
    start = (datetime.now(UTC) + timedelta(days=30)).date().isoformat()

    monkeypatch.setattr(future_command, "client", lambda *args: Untouchable())
    assert run_future_reservation("experiment", start, 14) == 0
    planned = capsys.readouterr().out
    assert f"stands in for subnet {subnet}'s zone" in planned and "Nothing was created" in planned

    ec2 = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(ec2)
    created = {"CapacityReservation": {"CapacityReservationId": "cr-0123456789abcdef0"}}
    stub.add_response("create_capacity_reservation", created, None)
    monkeypatch.setattr(future_command, "client", lambda *args: ec2)
    with stub:
        assert run_future_reservation("experiment", start, 14, yes=True) == 0
    stub.assert_no_pending_responses()
    assert "in us-east-1d" in capsys.readouterr().out
