"""`gpuc diff` pairs what an update removes with what it adds: the engine deletes removed
resources only at the end of the update, after every create (pulumi/pulumi
pkg/resource/deploy/deployment_executor.go performPostSteps -> step_generator.go
GenerateDeletes), so a new subnet with a removed one's CIDR, or a renamed resource with the same
physical name, is created while the old one still exists (infra/diff/collisions.py)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import plan_config, plan_stack

from gpu_cluster.infra import cli
from gpu_cluster.infra.diff.collisions import collisions
from gpu_cluster.infra.diff.model import diff_plans
from gpu_cluster.infra.outcome import OK
from gpu_cluster.infra.plan.engine import Plan

SUBNET = "aws:ec2/subnet:Subnet"


def serving_zones(*zones: str) -> tuple[Plan, Plan]:
    before = plan_stack("inference")
    inference = json.loads(before.config["gpu-cluster:inference"])
    inference["availabilityZones"] = list(zones)
    after = plan_config(
        {**before.config, "gpu-cluster:inference": json.dumps(inference)}, "inference"
    )
    assert before.error is None and after.error is None, (before.error, after.error)
    return before, after


def with_cidr(plan: Plan, name: str, cidr: str) -> Plan:
    return dataclasses.replace(
        plan,
        resources=[
            dataclasses.replace(r, inputs={**r.inputs, "cidrBlock": cidr}) if r.name == name else r
            for r in plan.resources
        ],
    )


def test_a_serving_zone_swapped_for_another_takes_its_letters_cidrs_and_applies():
    """[a, b] -> [a, c]: subnets private-b/public-b are removed, private-c/public-c added on c's
    CIDRs (a further zone's subnets are addressed by zone letter, components/cidr.py)."""
    before, after = serving_zones("us-east-1a", "us-east-1c")
    changes = diff_plans(before, after)
    subnets = {c.role: c.kind for c in changes if c.type == SUBNET}
    assert subnets == {
        "network-private-b": "remove",
        "network-public-b": "remove",
        "network-private-c": "add",
        "network-public-c": "add",
    }
    assert collisions(before, after, changes) == []


def test_an_added_subnet_on_a_removed_ones_cidr_collides_with_it():
    """The pairing itself: were c's subnet on the CIDR b holds, it would be created while b's
    still exists (deleted only at the end of the update)."""
    before, after = serving_zones("us-east-1a", "us-east-1c")
    cidr = before.named("inference-network-private-b").inputs["cidrBlock"]
    after = with_cidr(after, "inference-network-private-c", cidr)
    changes = diff_plans(before, after)
    (found,) = collisions(before, after, changes)
    assert found.role == "network-private-c"
    assert f"CreateSubnet {cidr} overlaps {cidr} (InvalidSubnet.Conflict)" in found.why
    assert "network-private-b, which this update removes" in found.why
    assert "deletes it only at the end of the update" in found.why


def test_the_cli_says_the_zone_swap_applies(capsys):
    inference = json.loads(plan_stack("inference").config["gpu-cluster:inference"])
    inference["availabilityZones"] = ["us-east-1a", "us-east-1c"]
    argv = ["diff", "--stack", "inference", "--set", f"inference={json.dumps(inference)}"]
    assert cli.main([*argv, "--json"]) == OK
    document = json.loads(capsys.readouterr().out)
    assert document["applies"] is True
    assert document["cannotApply"] == []


def test_a_zone_added_at_the_end_takes_free_cidrs_and_applies(capsys):
    before, after = serving_zones("us-east-1a", "us-east-1b", "us-east-1c")
    changes = diff_plans(before, after)
    assert {c.role for c in changes if c.kind == "add" and c.type == SUBNET} == {
        "network-private-c",
        "network-public-c",
    }
    assert collisions(before, after, changes) == []


def renamed(plan: Plan, name: str, new_name: str) -> Plan:
    """The plan with one resource's logical name changed (no alias): the engine sees one
    resource removed and another added."""

    def rename(r):
        if r.name != name:
            return r
        return dataclasses.replace(
            r, name=new_name, urn=r.urn.replace(f"::{name}", f"::{new_name}")
        )

    return dataclasses.replace(plan, resources=[rename(r) for r in plan.resources])


@pytest.mark.parametrize(
    ("name", "physical"),
    [("dev-jobs-log", "/gpu-cluster/dev-jobs"), ("dev-job-bucket", "/gpu-cluster/dev/dev/bucket")],
)
def test_a_renamed_resource_with_the_same_physical_name_collides(name, physical):
    before = plan_stack("dev")
    after = renamed(before, name, f"{name}-renamed")
    changes = diff_plans(before, after)
    kinds = {(c.role, c.kind) for c in changes}
    assert {
        (name.removeprefix("dev-"), "remove"),
        (f"{name}-renamed".removeprefix("dev-"), "add"),
    } <= kinds
    (found,) = collisions(before, after, changes)
    assert found.role == f"{name}-renamed".removeprefix("dev-")
    assert f"{physical!r} is still taken by {name.removeprefix('dev-')}" in found.why
    assert found.fix.startswith("report it:") and "alias" in found.fix


def test_a_renamed_resource_with_a_new_physical_name_applies():
    before = plan_stack("dev")
    after = renamed(before, "dev-jobs-log", "dev-jobs-log-renamed")
    after = dataclasses.replace(
        after,
        resources=[
            dataclasses.replace(r, inputs={**r.inputs, "name": "/gpu-cluster/dev-jobs-2"})
            if r.name == "dev-jobs-log-renamed"
            else r
            for r in after.resources
        ],
    )
    changes = diff_plans(before, after)
    assert collisions(before, after, changes) == []


def test_a_serving_type_change_removes_nothing_and_applies(capsys):
    """The inference group has no replacementTrigger: a new type is a new template version it
    takes in place (autoscaling/group.go: launch_template is not ForceNew)."""
    assert cli.main(["diff", "--stack", "inference", "--set", "instanceType=g5.xlarge"]) == OK
    out = capsys.readouterr().out
    assert " ~ aws:autoscaling/group:Group  service-group  update" in out
    assert "The change applies as planned." in out
