"""Prepaid capacity (a Capacity Block, an On-Demand Capacity Reservation created or targeted):
stopping nodes there saves nothing, so neither the idle stop nor the gang timeout is on unless
the stack sets it; and a block's end always stops the nodes, even when EC2 cannot be read."""

from __future__ import annotations

import pytest
from conftest import TRAIN_LIKE, plan_config
from test_all_or_nothing import ROLE_POLICY, cluster_env

BLOCK_ID = "cr-0123456789abcdef0"
PREPAID = {
    "capacity block": {
        "gpu-cluster:purchaseOption": "capacity-block",
        "gpu-cluster:capacityBlock": f'{{"id": "{BLOCK_ID}"}}',
    },
    "created reservation": {
        "gpu-cluster:purchaseOption": "capacity-reservation",
        "gpu-cluster:capacityReservation": '{"create": true}',
    },
    "targeted reservation": {
        "gpu-cluster:purchaseOption": "capacity-reservation",
        "gpu-cluster:capacityReservation": f'{{"id": "{BLOCK_ID}"}}',
    },
    "reservation group": {
        "gpu-cluster:purchaseOption": "capacity-reservation",
        "gpu-cluster:capacityReservation": (
            '{"resourceGroupArn": "arn:aws:resource-groups:us-east-1:123456789012:group/gpus"}'
        ),
    },
}


def gang_stop_policies(plan) -> list:
    return [r for r in plan.of_type(ROLE_POLICY) if r.name.endswith("gang-stop-access")]


@pytest.mark.parametrize("option", sorted(PREPAID))
def test_prepaid_capacity_has_no_gang_timeout_unless_asked(option):
    plan = plan_config({**TRAIN_LIKE, **PREPAID[option]}, stack="train")
    assert plan.error is None, plan.error
    assert cluster_env(plan)["GANG_TIMEOUT"] == "0"
    assert gang_stop_policies(plan) == []
    controls = plan.outputs["costControls"]
    assert not [c for c in controls if c.startswith("all or nothing")]
    # the idle stop follows the same reasoning
    assert not [c for c in controls if c.startswith("idle stop")]


@pytest.mark.parametrize("option", sorted(PREPAID))
def test_an_explicit_gang_timeout_on_prepaid_capacity_is_kept_and_says_the_bill_stays(option):
    config = {**TRAIN_LIKE, **PREPAID[option], "gpu-cluster:gangTimeoutMinutes": "30"}
    plan = plan_config(config, stack="train")
    assert plan.error is None, plan.error
    assert cluster_env(plan)["GANG_TIMEOUT"] == "1800"
    assert len(gang_stop_policies(plan)) == 1
    (gang,) = [c for c in plan.outputs["costControls"] if c.startswith("all or nothing")]
    assert "bills anyway" in gang


def test_on_demand_and_spot_keep_the_default_gang_timeout():
    for extra in ({}, {"gpu-cluster:purchaseOption": "spot"}):
        plan = plan_config({**TRAIN_LIKE, **extra}, stack="train")
        assert plan.error is None, plan.error
        assert cluster_env(plan)["GANG_TIMEOUT"] == "1800"
        (gang,) = [c for c in plan.outputs["costControls"] if c.startswith("all or nothing")]
        assert "bills anyway" not in gang


@pytest.mark.parametrize("option", sorted(PREPAID))
def test_prepaid_capacity_keeps_its_alert_topic_for_the_nodes_own_alerts(option):
    """A failure that keeps replacing nodes or a full root disk wastes hours paid for: the
    nodes still reach the topic (and the e-mails on it) with both stops off."""
    config = {**TRAIN_LIKE, **PREPAID[option], "gpu-cluster:alertEmails": '["ml@example.com"]'}
    plan = plan_config(config, stack="train")
    assert plan.error is None, plan.error
    assert len(plan.of_type("aws:sns/topic:Topic")) == 1
    assert [r for r in plan.of_type(ROLE_POLICY) if r.name.endswith("node-alerts-access")]
    assert not [w for w in plan.outputs["configWarnings"] if w.startswith("alertEmails")]


# --- a Capacity Block whose end cannot be read at `pulumi up` ---------------------------

BLOCK = PREPAID["capacity block"]


def unreadable_ec2(monkeypatch, code: str = "UnauthorizedOperation"):
    """EC2 as `pulumi up` reaches it through the program's own lookup (describe_live), refusing
    DescribeCapacityReservations (botocore Stubber: the request is checked against the model)."""
    import boto3
    from botocore.stub import Stubber

    import gpu_cluster.infra.aws.reservations as reservations

    ec2 = boto3.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    ).client("ec2")
    stub = Stubber(ec2)
    stub.add_client_error(
        "describe_capacity_reservations",
        service_error_code=code,
        service_message="You are not authorized to perform this operation.",
        http_status_code=403,
        expected_params={"CapacityReservationIds": [BLOCK_ID]},
    )
    stub.activate()
    monkeypatch.setattr(reservations, "client", lambda service, region, session=None: ec2)
    return stub


def test_a_block_whose_end_cannot_be_read_stops_pulumi_up_before_anything_is_created(
    monkeypatch,
):
    from gpu_cluster.infra import program
    from gpu_cluster.infra.plan.engine import run_plan

    stub = unreadable_ec2(monkeypatch)
    plan = run_plan("train", {**TRAIN_LIKE, **BLOCK}, reservation_lookup=program.describe_live)
    stub.assert_no_pending_responses()
    assert plan.error is not None
    (problem,) = plan.error.problems
    assert problem.path == "gpu-cluster:capacityBlock.id" and problem.received == BLOCK_ID
    assert "UnauthorizedOperation" in problem.problem and "no stop" in problem.problem
    assert "expiresAt" in problem.allowed and "pulumi config set expiresAt" in problem.fix
    assert [r.type for r in plan.resources] == ["pulumi:pulumi:Stack"]  # nothing created


def test_with_expires_at_a_block_whose_end_cannot_be_read_still_stops_then(monkeypatch):
    import json
    from datetime import UTC, datetime, timedelta

    from gpu_cluster.infra import program
    from gpu_cluster.infra.plan.engine import run_plan

    unreadable_ec2(monkeypatch)
    stop = (datetime.now(UTC) + timedelta(days=2)).replace(second=0, microsecond=0)
    config = {**TRAIN_LIKE, **BLOCK, "gpu-cluster:expiresAt": f"{stop:%Y-%m-%dT%H:%M:%SZ}"}
    plan = run_plan("train", config, reservation_lookup=program.describe_live)
    assert plan.error is None, plan.error
    schedules = {s.name: s.inputs for s in plan.of_type("aws:scheduler/schedule:Schedule")}
    expiry = schedules["train-cost-expiry-stop"]
    assert expiry["scheduleExpression"] == f"at({stop:%Y-%m-%dT%H:%M:%S})"
    assert json.loads(expiry["target"]["input"])["DesiredCapacity"] == 0


def test_a_block_without_an_end_date_is_refused_too():
    from gpu_cluster.infra.facts import ReservationFacts
    from gpu_cluster.infra.plan.engine import run_plan

    facts = ReservationFacts(
        reservation_id=BLOCK_ID,
        instance_type="p4d.24xlarge",
        availability_zone="us-east-1a",
        total_instances=4,
        available_instances=4,
        state="active",
        reservation_type="capacity-block",
        platform="Linux/UNIX",
    )
    plan = run_plan("train", {**TRAIN_LIKE, **BLOCK}, reservation_lookup=lambda *_: facts)
    assert plan.error is not None
    (problem,) = plan.error.problems
    assert "no end date" in problem.problem
