"""Every purchase option plans (mock engine) with the right market options, reservation
targets, allocation strategy and placement; switching needs only the option (and its id)."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime, timedelta

import pytest
from conftest import ROOT, TRAIN_LIKE, only, plan_config, stack_names

from gpu_cluster.components.names import autoscaling_role_suffix
from gpu_cluster.components.user_data import decoded_user_data
from gpu_cluster.infra.errors import AwsError, ConfigError
from gpu_cluster.infra.facts import ReservationFacts
from gpu_cluster.infra.plan.engine import Plan, run_plan
from gpu_cluster.infra.stack_files import load_stack_config

LT = "aws:ec2/launchTemplate:LaunchTemplate"
GROUP = "aws:autoscaling/group:Group"
PG = "aws:ec2/placementGroup:PlacementGroup"
RESERVATION = "aws:ec2/capacityReservation:CapacityReservation"
RULE = "aws:cloudwatch/eventRule:EventRule"
BLOCK_ID = "cr-0123456789abcdef0"


def train_with(**values: object) -> dict[str, str]:
    """The train stack file, changed only by ``values`` (as `pulumi config set` would)."""
    config = load_stack_config("train", ROOT)
    for name, value in values.items():
        config[f"gpu-cluster:{name}"] = json.dumps(value) if isinstance(value, dict) else str(value)
    return config


def planned(config: dict[str, str], stack: str = "train", **kwargs):
    plan = run_plan(stack, config, **kwargs) if kwargs else plan_config(config, stack)
    assert plan.error is None, plan.error
    return plan


def user_data(plan) -> str:
    return decoded_user_data(only(plan, LT).inputs["userData"])


def test_spot_group_mixed_instances_policy_and_interruption_handling():
    plan = planned(
        train_with(
            purchaseOption="spot",
            availabilityZone="us-east-1b",
            spot={"maxPrice": 12.5, "onDemandBase": 1, "fallbackTypes": ["p4de.24xlarge"]},
        )
    )
    group = only(plan, GROUP).inputs
    template = only(plan, LT)
    assert "launchTemplate" not in group  # the mixed instances policy names the template
    policy = group["mixedInstancesPolicy"]
    assert policy["instancesDistribution"] == {
        "onDemandBaseCapacity": 1,
        "onDemandPercentageAboveBaseCapacity": 0,
        "onDemandAllocationStrategy": "prioritized",
        "spotAllocationStrategy": "price-capacity-optimized",
        "spotMaxPrice": "12.5",
    }
    spec = policy["launchTemplate"]["launchTemplateSpecification"]
    assert spec == {"launchTemplateId": plan.state(template)["id"], "version": "1"}
    assert [o["instanceType"] for o in policy["launchTemplate"]["overrides"]] == [
        "p4d.24xlarge",
        "p4de.24xlarge",
    ]
    assert group["capacityRebalance"] is True
    assert group["placementGroup"] == plan.state(only(plan, PG))["name"]
    # a template that requested spot itself would be refused by the mixed instances policy
    assert "instanceMarketOptions" not in template.inputs
    assert "SPOT=true" in user_data(plan)
    rules = {r.name: json.loads(r.inputs["eventPattern"]) for r in plan.of_type(RULE)}
    assert rules["train-nodes-spot-events"]["detail-type"] == [
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
    ]
    group_name = plan.state(only(plan, GROUP))["name"]
    assert rules["train-nodes-group-events"]["detail"] == {"AutoScalingGroupName": [group_name]}
    log = plan.named("train-nodes-events")
    assert log.inputs["name"] == "/aws/events/gpu-cluster/train-nodes"
    targets = plan.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert {t.inputs["arn"] for t in targets} == {plan.state(log)["arn"]}
    policy_doc = json.loads(
        only(plan, "aws:cloudwatch/logResourcePolicy:LogResourcePolicy").inputs["policyDocument"]
    )
    (statement,) = policy_doc["Statement"]
    assert statement["Resource"] == plan.state(log)["arn"] + ":*"
    assert set(statement["Principal"]["Service"]) == {
        "events.amazonaws.com",
        "delivery.logs.amazonaws.com",
    }
    assert plan.outputs["vcpuQuotasNeeded"] == {
        "Running On-Demand P instances": 96,
        "All P Spot Instance Requests": 288,  # p4de has p4d's 96 vCPUs
    }
    experiment = planned(load_stack_config("experiment", ROOT), stack="experiment")
    # g5.12xlarge (48 vCPUs) may fall back to g5.24xlarge (96): count the larger
    assert experiment.outputs["vcpuQuotasNeeded"] == {"All G and VT Spot Instance Requests": 96}


def test_on_demand_group_records_node_events_but_no_spot_events(train_plan):
    names = {r.name for r in train_plan.of_type(RULE)}
    assert names == {"train-nodes-group-events"}
    assert "SPOT=false" in user_data(train_plan)


def test_created_capacity_reservation_is_targeted_inside_the_placement_group():
    plan = planned(
        train_with(
            purchaseOption="capacity-reservation",
            capacityReservation={"create": True, "endDate": "2099-01-31T00:00:00Z"},
        )
    )
    reservation = only(plan, RESERVATION)
    assert reservation.inputs == {
        **reservation.inputs,
        "instanceType": "p4d.24xlarge",
        "availabilityZone": "us-east-1a",
        "instanceCount": 4,
        "instanceMatchCriteria": "targeted",
        "instancePlatform": "Linux/UNIX",
        "placementGroupArn": plan.state(only(plan, PG))["arn"],
        "endDateType": "limited",
        "endDate": "2099-01-31T00:00:00Z",
    }
    assert reservation.delete_before_replace
    group = only(plan, GROUP).inputs
    assert group["capacityReservationSpecification"] == {
        "capacityReservationPreference": "capacity-reservations-only",
        "capacityReservationTarget": {"capacityReservationIds": [plan.state(reservation)["id"]]},
    }
    assert group["placementGroup"] == plan.state(only(plan, PG))["name"]
    assert "instanceMarketOptions" not in only(plan, LT).inputs
    assert any("bills 24 h/day" in note for note in plan.outputs["costNotes"])


@pytest.mark.parametrize(
    ("settings", "target"),
    [
        ({"id": BLOCK_ID}, {"capacityReservationIds": [BLOCK_ID]}),
        (
            {"resourceGroupArn": "arn:aws:resource-groups:us-east-1:123456789012:group/gpus"},
            {
                "capacityReservationResourceGroupArns": [
                    "arn:aws:resource-groups:us-east-1:123456789012:group/gpus"
                ]
            },
        ),
    ],
)
def test_existing_reservation_is_targeted_by_the_group(settings, target):
    plan = planned(train_with(purchaseOption="capacity-reservation", capacityReservation=settings))
    assert plan.of_type(RESERVATION) == []
    spec = only(plan, GROUP).inputs["capacityReservationSpecification"]
    assert spec["capacityReservationTarget"] == target


def test_capacity_block_targets_the_block_from_the_template_without_a_placement_group():
    plan = planned(train_with(purchaseOption="capacity-block", capacityBlock={"id": BLOCK_ID}))
    template = only(plan, LT).inputs
    assert template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": BLOCK_ID}
    }
    assert plan.of_type(PG) == [] and "groupName" not in template["placement"]
    group = only(plan, GROUP).inputs
    assert "placementGroup" not in group and "mixedInstancesPolicy" not in group
    assert group["waitForCapacityTimeout"] == "0"  # a block may start after `pulumi up`
    assert group["launchTemplate"]["version"] == "1"  # AWS asks for a pinned version
    assert plan.outputs["gpuUsdPerHour"] == 0  # prepaid, priced by the block's offering


@pytest.mark.parametrize(
    "extra",
    [
        {"purchaseOption": "spot"},
        {"purchaseOption": "capacity-block", "capacityBlock": {"id": BLOCK_ID}},
        {"purchaseOption": "capacity-reservation", "capacityReservation": {"create": True}},
    ],
)
def test_switching_purchase_option_changes_only_how_nodes_are_bought(train_plan, extra):
    """Same network, security, template essentials; the group is the one node mechanism."""
    plan = planned(train_with(**extra))
    base = {r.name for r in train_plan.resources}
    assert {"train-nodes-group", "train-nodes-launch-template"} <= {r.name for r in plan.resources}
    prepaid = extra["purchaseOption"] != "spot"  # paid whether the nodes run or not
    # the idle stop and the gang timeout: off by default on prepaid capacity (the alert topic
    # stays, for the nodes' own alerts)
    idle = {"train-cost-idle-scale-to-zero", "train-cost-idle-stop", "train-gang-stop-access"}
    untouched = [
        r
        for r in train_plan.resources
        if not r.name.startswith("train-nodes")
        and not (prepaid and r.name in idle)
        and r.name != "train-dashboard"
    ]
    for resource in untouched:
        assert plan.named(resource.name).inputs == resource.inputs, resource.name
    # the dashboard: only its burn rate moves, at the new way's price per node

    def without_burn(name: str, of: Plan) -> list[dict]:
        body = json.loads(of.named(name).inputs["dashboardBody"])
        return [w for w in body["widgets"] if "Burn rate" not in json.dumps(w)]

    assert without_burn("train-dashboard", plan) == without_burn("train-dashboard", train_plan)
    gone = base - {r.name for r in plan.resources}
    assert gone <= {"train-nodes-placement"} | (idle if prepaid else set())
    # stopping prepaid nodes saves nothing and gives up the nodes and their NVMe
    assert (gone >= idle) is prepaid


def test_new_template_versions_reach_nodes_launched_afterwards(monkeypatch):
    """The group follows the template's latest version (an Output, not a constant), with no
    ignore_changes: a new AMI or NIC layout is what the next node launches with."""
    from gpu_cluster.infra.plan.mocks import PlanMocks

    original = PlanMocks.new_resource

    def version_seven(self, args):
        physical, state = original(self, args)
        if args.typ == LT:
            state["latestVersion"] = 7
        return physical, state

    monkeypatch.setattr(PlanMocks, "new_resource", version_seven)
    config = {
        **load_stack_config("train", ROOT),
        "gpu-cluster:ami": json.dumps({"id": "ami-0123456789abcdef0", "architecture": "x86_64"}),
    }
    plan = planned(config)
    template, group = only(plan, LT), only(plan, GROUP)
    assert template.inputs["imageId"] == "ami-0123456789abcdef0"
    assert template.inputs["updateDefaultVersion"] is True
    assert group.inputs["launchTemplate"]["version"] == "7"
    assert template.urn in group.dependencies
    assert all(r.ignore_changes == () for r in plan.resources)


def references(plan, value: str) -> list[str]:
    return [r.name for r in plan.resources if value in json.dumps(r.inputs)]


def test_changing_the_zone_leaves_nothing_on_the_old_subnet(train_plan):
    old_subnet = train_plan.state(train_plan.named("train-network-private"))["id"]
    moved = planned(train_with(availabilityZone="us-east-1c"))
    new_subnet = moved.state(moved.named("train-network-private"))["id"]
    assert new_subnet != old_subnet  # the subnet's zone cannot change: a new subnet
    assert references(moved, old_subnet) == []
    group = only(moved, GROUP)
    assert group.inputs["vpcZoneIdentifiers"] == [new_subnet]
    assert new_subnet in group.replacement_trigger
    assert group.replacement_trigger != only(train_plan, GROUP).replacement_trigger
    assert group.delete_before_replace  # old nodes leave the old subnet before it is deleted


def test_p5_to_p4d_relaunches_with_the_p4d_layout():
    p5 = planned(train_with(instanceType="p5.48xlarge"))
    p4d = planned(train_with(instanceType="p4d.24xlarge"))
    cards = sorted(
        n["networkCardIndex"]
        for n in only(p4d, LT).inputs["networkInterfaces"]
        if n.get("interfaceType") == "efa-only"
    )
    assert cards == [0, 1, 2, 3]
    assert only(p5, GROUP).replacement_trigger != only(p4d, GROUP).replacement_trigger


def test_scaling_to_one_node_without_efa_drops_the_placement_group_and_replaces_the_group():
    two = planned(train_with(nodes=2, efa="false"))
    one = planned(train_with(nodes=1, efa="false", purchaseOption="spot"))
    placement = two.state(only(two, PG))["name"]
    assert one.of_type(PG) == [] and references(one, placement) == []
    assert only(two, GROUP).replacement_trigger != only(one, GROUP).replacement_trigger


# ---------------------------------------------------------------- live reservation checks


def facts(**changes) -> ReservationFacts:
    base = {
        "reservation_id": BLOCK_ID,
        "instance_type": "p4d.24xlarge",
        "availability_zone": "us-east-1a",
        "total_instances": 4,
        "available_instances": 4,
        "state": "active",
        "reservation_type": "capacity-block",
        "platform": "Linux/UNIX",
        # a block always has an end (EC2 API reference, CapacityReservation.EndDate)
        "end_date": datetime.now(UTC).replace(microsecond=0) + timedelta(days=2),
    }
    return ReservationFacts(**{**base, **changes})


BLOCK = {"purchaseOption": "capacity-block", "capacityBlock": {"id": BLOCK_ID}}


def test_a_matching_block_plans():
    planned(train_with(**BLOCK), reservation_lookup=lambda rid, region: facts())


def test_a_block_for_another_type_zone_or_size_is_rejected():
    def lookup(reservation_id, region):
        assert (reservation_id, region) == (BLOCK_ID, "us-east-1")
        return facts(instance_type="p5.48xlarge", availability_zone="us-east-1c", total_instances=2)

    plan = run_plan("train", train_with(**BLOCK), reservation_lookup=lookup)
    assert isinstance(plan.error, ConfigError) and plan.resources[1:] == []
    problems = {p.path: p for p in plan.error.problems}
    assert set(problems) == {"gpu-cluster:capacityBlock.id", "gpu-cluster:nodes"}
    messages = [p.problem for p in plan.error.problems]
    assert "the Capacity Block holds p5.48xlarge, the group runs p4d.24xlarge" in messages
    assert "the Capacity Block is in us-east-1c, the group in us-east-1a" in messages
    assert problems["gpu-cluster:nodes"].fix == "pulumi config set nodes 2"


def test_an_expired_block_or_a_plain_reservation_as_block_is_rejected():
    plan = run_plan(
        "train",
        train_with(**BLOCK),
        reservation_lookup=lambda *_: facts(state="expired", reservation_type="default"),
    )
    assert isinstance(plan.error, ConfigError)
    text = str(plan.error)
    assert "is not a block, but purchaseOption is capacity-block" in text
    assert "the Capacity Block is expired" in text


def test_a_missing_reservation_is_a_config_problem_and_no_access_is_a_warning():
    def missing(*_):
        raise AwsError("not found", "InvalidCapacityReservationId.NotFound")

    plan = run_plan("train", train_with(**BLOCK), reservation_lookup=missing)
    assert isinstance(plan.error, ConfigError)
    assert plan.error.problems[0].problem == "no such reservation in us-east-1 for this account"

    def denied(*_):
        raise AwsError("denied", "UnauthorizedOperation")

    reserved = {"purchaseOption": "capacity-reservation", "capacityReservation": {"id": BLOCK_ID}}
    assert run_plan("train", train_with(**reserved), reservation_lookup=denied).error is None
    # a block's end is its stop: unread, nothing is created (test_prepaid_capacity.py)
    blocked = run_plan("train", train_with(**BLOCK), reservation_lookup=denied).error
    assert blocked is not None
    assert blocked.problems[0].path == "gpu-cluster:capacityBlock.id"


def test_the_plan_engine_never_looks_up_reservations_by_itself(monkeypatch):
    import gpu_cluster.infra.program

    calls = []
    monkeypatch.setattr(
        gpu_cluster.infra.program, "live_lookup", lambda *args: calls.append(args) or facts()
    )
    planned(train_with(**BLOCK))  # offline: the engine switches the lookup off
    assert calls == []
    lookup = gpu_cluster.infra.program.live_lookup
    assert lookup is not None
    lookup(BLOCK_ID, "us-east-1")  # ... and restores the program's own afterwards
    assert calls == [(BLOCK_ID, "us-east-1")]


def test_train_like_conftest_config_still_plans_on_demand():
    plan = planned(TRAIN_LIKE, stack="test")
    assert plan.outputs["purchaseOption"] == "on-demand"


def test_invalid_option_combination_creates_nothing():
    plan = run_plan(
        "train", train_with(purchaseOption="spot", capacityReservation={"create": True})
    )
    assert isinstance(plan.error, ConfigError) and plan.resources[1:] == []


def test_the_group_launches_with_a_service_linked_role_the_key_trusts(train_plan):
    role = only(train_plan, "aws:iam/serviceLinkedRole:ServiceLinkedRole")
    assert role.inputs["awsServiceName"] == "autoscaling.amazonaws.com"
    # unique per stack and region in the account (components/names.py)
    assert role.inputs["customSuffix"] == autoscaling_role_suffix(stack_names("train"))
    role_arn = train_plan.state(role)["arn"]
    assert only(train_plan, GROUP).inputs["serviceLinkedRoleArn"] == role_arn
    key = train_plan.named("train-security-key")
    assert role.urn in key.dependencies  # the role exists before the policy names it
    statements = {s["Sid"]: s for s in json.loads(key.inputs["policy"])["Statement"]}
    encrypt = statements["AllowAutoScalingToEncryptNodeVolumes"]
    assert encrypt["Principal"] == {"AWS": role_arn}
    assert "kms:GenerateDataKey*" in encrypt["Action"]
    grant = statements["AllowAutoScalingToAttachNodeVolumes"]
    assert grant["Action"] == "kms:CreateGrant"
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}


def test_a_plain_instance_needs_no_autoscaling_role():
    plan = planned(load_stack_config("dev", ROOT), stack="dev")
    assert plan.of_type("aws:iam/serviceLinkedRole:ServiceLinkedRole") == []
    sids = {
        s["Sid"] for s in json.loads(plan.named("dev-security-key").inputs["policy"])["Statement"]
    }
    assert sids == {
        "EnableIamPolicies",
        "AllowCloudWatchLogsForThisStack",
        "AllowFsxLustreDataRepositories",
        "AllowAlertsToEncryptedTopic",  # dev has a budget: its topic is under this key
    }


def test_buying_nodes_another_way_replaces_them_but_spot_settings_apply_in_place(train_plan):
    """On-demand nodes would keep billing on-demand (and a block sit unused) if a switch left
    them running; spot price, base and fallbacks only shape later launches."""
    trigger = only(train_plan, GROUP).replacement_trigger
    assert trigger.endswith("/on-demand")
    spot = planned(train_with(purchaseOption="spot", availabilityZone="us-east-1b"))
    spot_trigger = only(spot, GROUP).replacement_trigger
    assert spot_trigger.endswith("/spot") and spot_trigger != trigger
    tuned = planned(
        train_with(
            purchaseOption="spot",
            availabilityZone="us-east-1b",
            spot={"maxPrice": 9, "onDemandBase": 2, "fallbackTypes": ["p4de.24xlarge"]},
        )
    )
    assert only(tuned, GROUP).replacement_trigger == spot_trigger
    block = planned(train_with(**BLOCK))
    assert only(block, GROUP).replacement_trigger.endswith(f"/capacity-block:{BLOCK_ID}")


def test_a_failed_launch_never_fails_pulumi_up_before_the_cost_controls(train_plan):
    """The provider waits for capacity (10 min by default) and fails the step on any failed
    scaling activity; the engine then never creates what follows (idle stop, schedules)."""
    (group,) = train_plan.of_type(GROUP)
    assert group.inputs["waitForCapacityTimeout"] == "0"


def test_prepaid_capacity_keeps_its_idle_stop_only_when_asked():
    asked = planned(
        train_with(
            purchaseOption="capacity-reservation",
            capacityReservation={"create": True},
            idleStop={"minutes": 30},
        )
    )
    assert "train-cost-idle-stop" in {r.name for r in asked.resources}


def test_the_group_has_time_to_drain_a_large_cluster(train_plan):
    """The provider's 10-minute update and delete timeouts can cut a replacement in half."""
    (group,) = train_plan.of_type(GROUP)
    assert group.custom_timeouts == {"create": "30m", "update": "45m", "delete": "45m"}


def test_the_group_scales_in_30_minutes_before_its_capacity_block_ends():
    """AWS terminates a block's instances at its end and asks Auto Scaling users to scale in
    30 minutes before; after the end the group would retry launches forever."""
    from datetime import UTC, datetime, timedelta

    end = datetime.now(UTC).replace(microsecond=0) + timedelta(days=2)
    plan = run_plan("train", train_with(**BLOCK), reservation_lookup=lambda *_: facts(end_date=end))
    assert plan.error is None, plan.error
    schedules = {s.name: s.inputs for s in plan.of_type("aws:scheduler/schedule:Schedule")}
    stop = end - timedelta(minutes=30)
    expiry = schedules["train-cost-expiry-stop"]
    assert expiry["scheduleExpression"] == f"at({stop:%Y-%m-%dT%H:%M:%S})"
    assert json.loads(expiry["target"]["input"])["DesiredCapacity"] == 0
    warning = schedules["train-cost-expiry-warning"]
    assert warning["scheduleExpression"] == f"at({stop - timedelta(hours=1):%Y-%m-%dT%H:%M:%S})"
    assert "Capacity Block" in json.loads(warning["target"]["input"])["message"]
    # the jobs get "checkpoint now" 15 minutes before the scale-in (45 before the block ends)
    checkpoint = schedules["train-cost-expiry-checkpoint"]
    at = stop - timedelta(minutes=15)
    assert checkpoint["scheduleExpression"] == f"at({at:%Y-%m-%dT%H:%M:%S})"
    (command,) = json.loads(checkpoint["target"]["input"])["Parameters"]["commands"]
    notice = json.loads(shlex.split(command)[2])
    assert notice["action"] == "stop" and "Capacity Block" in notice["reason"]
    assert notice["time"] == f"{stop:%Y-%m-%dT%H:%M:%SZ}"
    # an earlier expiresAt stays the stop
    soon = (datetime.now(UTC) + timedelta(days=1)).replace(second=0, microsecond=0)
    config = {**train_with(**BLOCK), "gpu-cluster:expiresAt": f"{soon:%Y-%m-%dT%H:%M:%SZ}"}
    earlier = run_plan("train", config, reservation_lookup=lambda *_: facts(end_date=end))
    (stop_at,) = [
        s.inputs["scheduleExpression"]
        for s in earlier.of_type("aws:scheduler/schedule:Schedule")
        if s.name.endswith("expiry-stop")
    ]
    assert stop_at == f"at({soon:%Y-%m-%dT%H:%M:%S})"


def test_a_scheduled_future_dated_reservation_says_when_it_starts_not_that_it_is_empty():
    """A future-dated reservation holds 0 instances until its start (EC2 User Guide): the plan
    names the start instead of asking for 0 nodes, and creates nothing."""
    start = datetime(2027, 2, 1, tzinfo=UTC)
    config = train_with(purchaseOption="capacity-reservation", capacityReservation={"id": BLOCK_ID})
    plan = run_plan(
        "train",
        config,
        reservation_lookup=lambda *_: facts(
            reservation_type="default", state="scheduled", total_instances=0, start_date=start
        ),
    )
    assert isinstance(plan.error, ConfigError) and plan.resources[1:] == []
    (problem,) = plan.error.problems
    assert "is scheduled: it holds no instance until it starts on 2027-02-01 00:00 UTC" in (
        problem.problem
    )
    assert "nodes" not in problem.path
    active = run_plan(
        "train",
        config,
        reservation_lookup=lambda *_: facts(reservation_type="default", start_date=start),
    )
    assert active.error is None, active.error
