"""A second `pulumi up`: replacements that AWS can apply in the engine's order, no-op updates that
stay no-ops, and `gpuc diff` saying when a change cannot be applied as is (infra/diff/
collisions.py, infra/plan/update_rules.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import TRAIN_LIKE, only, plan_config, plan_stack

import gpu_cluster.components.network
import gpu_cluster.components.node_group
from gpu_cluster.infra import cli
from gpu_cluster.infra.diff.collisions import collisions, dependent_replacements
from gpu_cluster.infra.diff.model import diff_plans
from gpu_cluster.infra.outcome import FINDINGS, OK
from gpu_cluster.infra.plan.engine import Plan
from gpu_cluster.infra.plan.update_rules import UpdateHazard, hazards

GROUP = "aws:autoscaling/group:Group"
INSTANCE = "aws:ec2/instance:Instance"
SUBNET = "aws:ec2/subnet:Subnet"
RESERVATION = "aws:ec2/capacityReservation:CapacityReservation"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
RESERVED = {"gpu-cluster:purchaseOption": "capacity-reservation"}


def diff_json(capsys, *argv: str) -> tuple[int, dict]:
    code = cli.main(["diff", *argv, "--json"])
    return code, json.loads(capsys.readouterr().out)


def by_role(document: dict) -> dict[str, dict]:
    return {c["role"]: c for c in document["changes"]}


def with_resources(plan: Plan, change) -> Plan:
    """The plan with each resource passed through ``change`` (a state the program did not make)."""
    return dataclasses.replace(plan, resources=[change(r) for r in plan.resources])


# --- moving to another zone ----------------------------------------------------------------


def test_moving_the_training_stack_to_another_zone_plans_a_change_that_applies(capsys):
    code, document = diff_json(capsys, "--stack", "train", "--set", "availabilityZone=us-east-1b")
    assert code == OK and document["applies"] is True and document["cannotApply"] == []
    changes = by_role(document)
    for subnet in ("network-private", "network-public"):
        assert changes[subnet]["change"] == "replace"
        assert changes[subnet]["deleteBeforeReplace"] is True  # CIDR reused: never create-first
    # whatever holds an interface in the old subnet is replaced with it, so it goes first
    for holder in ("nodes-group", "network-nat", "network-ssm-endpoint"):
        assert changes[holder]["change"] == "replace", holder


def test_the_zone_move_text_says_it_applies(capsys):
    assert cli.main(["diff", "--stack", "train", "--set", "availabilityZone=us-east-1b"]) == OK
    assert "The change applies as planned." in capsys.readouterr().out


def test_the_engine_deletes_every_interface_holder_before_the_old_subnet():
    plan = plan_stack("train")
    subnet = plan.named("train-network-private")
    deleted_first = {
        r.name for r in plan.resources if r.urn in dependent_replacements(plan, subnet.urn)
    }
    assert {
        "train-nodes-group",
        "train-network-ssm-endpoint",
        "train-network-ssmmessages-endpoint",
        "train-network-ec2messages-endpoint",
        "train-network-private-rta",
    } <= deleted_first
    # the route table only updates its route: it is not deleted with the subnet
    assert "train-network-private-rt" not in deleted_first


def test_the_dev_box_is_deleted_before_its_subnet():
    plan = plan_stack("dev")
    subnet = plan.named("dev-network-private")
    box = only(plan, INSTANCE)
    assert box.urn in dependent_replacements(plan, subnet.urn)


def test_a_create_first_subnet_replacement_is_reported_as_a_cidr_conflict():
    before = plan_stack("train")
    moved = plan_config({**before.config, "gpu-cluster:availabilityZone": "us-east-1b"}, "train")
    create_first = with_resources(
        moved,
        lambda r: dataclasses.replace(r, delete_before_replace=False) if r.type == SUBNET else r,
    )
    found = collisions(before, create_first, diff_plans(before, create_first))
    conflicts = [c for c in found if c.type == SUBNET]
    assert conflicts and "InvalidSubnet.Conflict" in conflicts[0].why
    cidr = before.named("train-network-private").inputs["cidrBlock"]
    assert f"CreateSubnet {cidr} overlaps {cidr}" in conflicts[0].why


def test_a_program_that_replaces_subnets_create_first_is_refused(monkeypatch):
    monkeypatch.setattr(gpu_cluster.components.network, "subnet_options", lambda child: child)
    plan = plan_stack("train")
    assert isinstance(plan.error, UpdateHazard)
    assert "InvalidSubnet.Conflict" in str(plan.error)
    assert "train-network-private (aws:ec2/subnet:Subnet)" in str(plan.error)


def test_a_state_without_this_versions_replace_rules_says_to_up_once_first(capsys, tmp_path):
    """A stack last deployed by an older gpu-cluster: its state holds no replaceOnChanges, and
    the engine reads the dependents' rules from the state."""
    assert cli.main(["plan", "--stack", "train", "--json"]) == OK
    document = json.loads(capsys.readouterr().out)
    for step in document["steps"]:
        step["newState"]["replaceOnChanges"] = []
    saved = tmp_path / "old.json"
    saved.write_text(json.dumps(document))
    code, result = diff_json(
        capsys, "--from", str(saved), "--stack", "train", "--set", "availabilityZone=us-east-1b"
    )
    assert code == FINDINGS and result["applies"] is False
    stuck = {c["role"]: c for c in result["cannotApply"]}
    assert "nodes-group" in stuck and "DependencyViolation" in stuck["nodes-group"]["why"]
    assert stuck["nodes-group"]["fix"].startswith("run `pulumi up` once without this change")


def test_the_nat_gateway_is_replaced_delete_first(train_plan):
    nat = only(train_plan, "aws:ec2/natGateway:NatGateway")
    assert nat.delete_before_replace  # the Elastic IP is free before the new gateway takes it


def test_a_create_first_nat_replacement_is_reported():
    before = plan_stack("train")
    moved = plan_config({**before.config, "gpu-cluster:availabilityZone": "us-east-1b"}, "train")
    create_first = with_resources(
        moved,
        lambda r: (
            dataclasses.replace(r, delete_before_replace=False)
            if r.type == "aws:ec2/natGateway:NatGateway"
            else r
        ),
    )
    found = collisions(before, create_first, diff_plans(before, create_first))
    assert any("Resource.AlreadyAssociated" in c.why for c in found)


# --- the dev box after an in-place update -----------------------------------------------


def test_the_dev_box_survives_the_numeric_version_the_provider_reads_back():
    """After an in-place update the provider's Read stores e.g. "3" where the program says
    "$Default"; the ignored version keeps the next diff empty instead of replacing the box."""
    after = plan_stack("dev")
    assert after.error is None
    before = with_resources(
        after,
        lambda r: (
            dataclasses.replace(
                r,
                inputs={
                    **r.inputs,
                    "launchTemplate": {**r.inputs["launchTemplate"], "version": "3"},
                },
            )
            if r.type == INSTANCE
            else r
        ),
    )
    changes = {c.role: c for c in diff_plans(before, after)}
    assert "nodes-node-0" not in changes
    unguarded = with_resources(
        after, lambda r: dataclasses.replace(r, ignore_changes=()) if r.type == INSTANCE else r
    )
    box = {c.role: c for c in diff_plans(before, unguarded)}["nodes-node-0"]
    assert box.kind == "replace" and "root disk" in box.impact[0]


def test_a_dev_box_on_an_unignored_template_alias_is_refused(monkeypatch):
    monkeypatch.setattr(gpu_cluster.components.node_group, "DEV_BOX_IGNORED", "tags")
    plan = plan_stack("dev")
    assert isinstance(plan.error, UpdateHazard)
    assert "loses its root disk" in str(plan.error)


# --- created reservations ---------------------------------------------------------------


PLACEMENT = "aws:ec2/placementGroup:PlacementGroup"
CREATED = {**RESERVED, "gpu-cluster:capacityReservation": '{"create": true}'}


def test_switching_to_a_created_reservation_applies_in_one_up_nodes_drained_first(capsys):
    """CreateCapacityReservation needs capacity and quota for every node: the old nodes go
    first. The placement group is replaced delete-first, so the engine deletes the group (it
    replaces with its placement group) before it; the reservation, which takes the new placement
    group's ARN, is created after it, and the new group, which takes the reservation's id, last."""
    code, document = diff_json(
        capsys,
        "--stack",
        "train",
        "--set",
        "purchaseOption=capacity-reservation",
        "--set-path",
        "capacityReservation.create=true",
    )
    assert code == OK and document["applies"] is True, document.get("cannotApply")
    before = plan_config(TRAIN_LIKE, "train")
    after = plan_config({**TRAIN_LIKE, **CREATED}, "train")
    changes = {c.role: c for c in diff_plans(before, after)}
    placement = changes["nodes-placement"]
    assert placement.kind == "replace" and placement.delete_before_replace
    assert only(before, GROUP).urn in dependent_replacements(before, only(before, PLACEMENT).urn)
    reservation = only(after, RESERVATION)
    assert only(after, PLACEMENT).urn in reservation.property_dependencies["placementGroupArn"]
    assert reservation.urn in only(after, GROUP).dependencies
    assert changes["nodes-reservation"].kind == "add"
    assert collisions(before, after, list(changes.values())) == []
    # ... and back: the reservation and the nodes are deleted before the placement group
    back = {c.role: c for c in diff_plans(after, before)}
    assert back["nodes-placement"].kind == "replace"
    drained = dependent_replacements(after, only(after, PLACEMENT).urn)
    assert {only(after, GROUP).urn, reservation.urn} <= drained


def test_without_the_placement_groups_trigger_the_switch_would_need_capacity_twice():
    """A state from before these rules: the placement group stays, and the reservation would be
    created while the old nodes run; `gpuc diff` says so, and that one `up` first fixes it."""
    before = plan_config(TRAIN_LIKE, "train")
    after = plan_config({**TRAIN_LIKE, **CREATED}, "train")

    def older(r):
        if r.type == PLACEMENT:
            return dataclasses.replace(r, replacement_trigger=None, delete_before_replace=False)
        if r.type == GROUP:
            rules = tuple(p for p in r.replace_on_changes if p != "placementGroup")
            return dataclasses.replace(r, replace_on_changes=rules)
        return r

    old_state = with_resources(before, older)
    (collision,) = collisions(old_state, after, diff_plans(old_state, after))
    assert collision.type == RESERVATION and "On-Demand quota for both" in collision.why
    assert collision.fix.startswith("run `pulumi up` once without this change first")


def test_a_dev_box_switched_to_a_created_reservation_is_still_done_in_two_steps(capsys):
    """One node without EFA has no placement group to replace: the box runs until the end of
    the update, after the reservation is created."""
    code, document = diff_json(
        capsys,
        "--stack",
        "dev",
        "--set",
        "purchaseOption=capacity-reservation",
        "--set-path",
        "capacityReservation.create=true",
    )
    assert code == FINDINGS and document["applies"] is False
    (collision,) = [c for c in document["cannotApply"] if c["type"] == RESERVATION]
    assert "On-Demand quota for both" in collision["why"]
    assert "pulumi destroy --target" in collision["fix"]


def test_a_new_type_on_a_created_reservation_drains_the_nodes_before_the_new_reservation():
    config = {**TRAIN_LIKE, **RESERVED, "gpu-cluster:capacityReservation": '{"create": true}'}
    before = plan_config(config, "train")
    after = plan_config({**config, "gpu-cluster:instanceType": "p5.48xlarge"}, "train")
    assert before.error is None and after.error is None
    changes = {c.role: c for c in diff_plans(before, after)}
    assert changes["nodes-reservation"].kind == "replace"
    assert changes["nodes-reservation"].delete_before_replace
    reservation = only(before, RESERVATION)
    assert only(before, GROUP).urn in dependent_replacements(before, reservation.urn)
    assert collisions(before, after, list(changes.values())) == []


def test_without_the_groups_replace_rule_the_reservation_would_need_capacity_twice():
    config = {**TRAIN_LIKE, **RESERVED, "gpu-cluster:capacityReservation": '{"create": true}'}
    before = plan_config(config, "train")
    after = plan_config({**config, "gpu-cluster:instanceType": "p5.48xlarge"}, "train")
    old_state = with_resources(
        before, lambda r: dataclasses.replace(r, replace_on_changes=()) if r.type == GROUP else r
    )
    found = collisions(old_state, after, diff_plans(old_state, after))
    assert [c.type for c in found] == [RESERVATION]


# --- the first `up` -------------------------------------------------------------------


def test_the_group_waits_for_its_service_linked_role_to_propagate(train_plan):
    wait = only(train_plan, "time:index/sleep:Sleep")
    role = only(train_plan, "aws:iam/serviceLinkedRole:ServiceLinkedRole")
    group = only(train_plan, GROUP)
    assert wait.inputs["createDuration"] == "30s"
    assert role.urn in wait.property_dependencies["triggers"]
    # the group's role comes out of the wait, so the engine creates it after the wait ends
    assert wait.urn in group.property_dependencies["serviceLinkedRoleArn"]
    assert group.inputs["serviceLinkedRoleArn"] == train_plan.state(role)["arn"]


def test_a_group_that_waits_for_capacity_breaks_an_update_rule(train_plan):
    group = only(train_plan, GROUP)
    assert hazards(group) == []
    waiting = dataclasses.replace(group, inputs={**group.inputs, "waitForCapacityTimeout": "10m"})
    (problem,) = hazards(waiting)
    assert "waitForCapacityTimeout" in problem.problem and "cost controls" in problem.problem


# --- replace rules ----------------------------------------------------------------------

FSX_ON = {
    **TRAIN_LIKE,
    "gpu-cluster:fsx": json.dumps({"storageCapacityGib": 4800, "throughputPerTib": 250}),
}


@pytest.mark.parametrize(("size", "kind"), [(2400, "replace"), (7200, "update")])
def test_a_smaller_lustre_file_system_is_a_new_empty_one(size, kind):
    before = plan_config(FSX_ON, "train")
    bigger_or_smaller = json.dumps({"storageCapacityGib": size, "throughputPerTib": 250})
    after = plan_config({**FSX_ON, "gpu-cluster:fsx": bigger_or_smaller}, "train")
    assert before.error is None and after.error is None, (before.error, after.error)
    (lustre,) = [c for c in diff_plans(before, after) if c.type == FSX]
    assert lustre.kind == kind
    if kind == "replace":
        assert "files not exported to the bucket are lost" in lustre.impact[0]


def test_a_route53_record_type_change_updates_in_place():
    plan = plan_stack("inference")
    record = next(
        r for r in plan.of_type("aws:route53/record:Record") if r.inputs.get("type") == "A"
    )
    changed = with_resources(
        plan,
        lambda r: (
            dataclasses.replace(r, inputs={**r.inputs, "type": "AAAA"})
            if r.urn == record.urn
            else r
        ),
    )
    (change,) = diff_plans(plan, changed)
    assert change.kind == "update"


def test_the_urns_are_the_engines(train_plan):
    group = only(train_plan, GROUP)
    assert group.urn == (
        "urn:pulumi:train::gpu-cluster::gpu-cluster:index:GpuCluster$"
        "gpu-cluster:compute:GpuNodeGroup$aws:autoscaling/group:Group::train-nodes-group"
    )
    top = train_plan.named("train")
    assert top.urn == "urn:pulumi:train::gpu-cluster::gpu-cluster:index:GpuCluster::train"


@pytest.mark.parametrize("stack", ["dev", "experiment", "train", "inference", "data"])
def test_every_resource_type_a_stack_creates_has_replace_rules(stack):
    """A type with no rules would diff as "updates in place" whatever changes."""
    from gpu_cluster.infra.diff.replace_rules import REPLACE_ON_CHANGE

    plan = plan_stack(stack)
    assert plan.error is None, plan.error
    types = {r.type for r in plan.resources if r.custom and r.op != "read"}
    assert not types - set(REPLACE_ON_CHANGE), sorted(types - set(REPLACE_ON_CHANGE))


def test_the_budget_action_and_cost_allocation_tag_have_replace_rules():
    from gpu_cluster.infra.diff.replace_rules import REPLACE_ON_CHANGE
    from gpu_cluster.infra.stack_files import load_stack_config

    config = load_stack_config("dev")
    budget = {"monthlyUsd": 300, "stopAtLimit": True, "activateCostAllocationTag": True}
    plan = plan_config({**config, "gpu-cluster:budget": json.dumps(budget)}, "dev")
    assert plan.error is None, plan.error
    types = {r.type for r in plan.resources if r.custom and r.op != "read"}
    assert {
        "aws:budgets/budgetAction:BudgetAction",
        "aws:costexplorer/costAllocationTag:CostAllocationTag",
    } <= types
    assert not types - set(REPLACE_ON_CHANGE)
