"""Nodes go with the file system they mount, and the dev box keeps its root disk through a new
type: `gpuc diff` through the plan engine, against the engine's and the provider's semantics
(components/node_group.py template_trigger, infra/diff/model.py, infra/plan/update_rules.py)."""

from __future__ import annotations

import json

import pytest
from conftest import TRAIN_LIKE, plan_config

import gpu_cluster.components.node_group
from gpu_cluster.infra import cli
from gpu_cluster.infra.diff.model import diff_plans, running_jobs
from gpu_cluster.infra.outcome import OK
from gpu_cluster.infra.plan.update_rules import UpdateHazard

GROUP = "aws:autoscaling/group:Group"
INSTANCE = "aws:ec2/instance:Instance"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def fsx(size: int) -> str:
    return json.dumps({"storageCapacityGib": size, "throughputPerTib": 250})


FSX_ON = {**TRAIN_LIKE, "gpu-cluster:fsx": fsx(4800)}


def changes_between(before: dict, after: dict, stack: str = "train"):
    old, new = plan_config(before, stack), plan_config(after, stack)
    assert old.error is None and new.error is None, (old.error, new.error)
    return {c.key: c for c in diff_plans(old, new)}


def one(changes, type_):
    (change,) = [c for c in changes.values() if c.type == type_]
    return change


def test_a_new_file_system_replaces_the_nodes_first_and_says_what_a_job_loses():
    changes = changes_between(FSX_ON, {**FSX_ON, "gpu-cluster:fsx": fsx(2400)})
    lustre, template, group = one(changes, FSX), one(changes, TEMPLATE), one(changes, GROUP)
    assert lustre.kind == "replace" and not lustre.delete_before_replace  # old one lives on
    assert template.kind == "replace"
    assert "its replacementTrigger takes lustre-fs's id, which is replaced" in template.reasons
    # the group replaces delete-first in the middle of the update; the old file system is
    # deleted only at its end (deployment_executor.go performPostSteps): nodes go first
    assert group.kind == "replace" and group.delete_before_replace
    assert "a running job stops" in group.impact[0]
    assert "/fsx/datasets (import only)" in lustre.impact[0]
    assert "/fsx/checkpoints, /fsx/outputs not yet exported" in lustre.impact[0]
    interrupted, lost = running_jobs(list(changes.values()))
    assert interrupted
    assert "what is on the Lustre file system and not exported to the bucket" in lost


def test_the_text_says_running_jobs_are_interrupted_and_what_they_lose(capsys, monkeypatch):
    import gpu_cluster.infra.diff.command as command

    real = command.stack_config  # the train stack with FSx, then the override
    monkeypatch.setattr(
        command,
        "stack_config",
        lambda stack, overrides: {"gpu-cluster:fsx": fsx(4800), **real(stack, overrides)},
    )
    code = cli.main(["diff", "--stack", "train", "--set", f"fsx={fsx(2400)}"])
    out = capsys.readouterr().out
    assert code == OK, out
    assert "Running jobs: interrupted by this change (see ! lines)" in out
    assert "Lost: what is on the Lustre file system and not exported to the bucket" in out
    assert "Running jobs: not interrupted" not in out


@pytest.mark.parametrize(
    ("before", "after"),
    [(TRAIN_LIKE, FSX_ON), (FSX_ON, TRAIN_LIKE)],
    ids=["fsx-added", "fsx-removed"],
)
def test_adding_or_removing_the_file_system_replaces_the_nodes(before, after):
    """Running nodes never get a new template version: without a replacement they would keep
    no mount, or one of a file system deleted at the end of the update."""
    changes = changes_between(before, after)
    group = one(changes, GROUP)
    assert group.kind == "replace" and group.delete_before_replace


def test_a_larger_file_system_grows_in_place_and_leaves_the_nodes():
    changes = changes_between(FSX_ON, {**FSX_ON, "gpu-cluster:fsx": fsx(7200)})
    assert one(changes, FSX).kind == "update"
    assert not [c for c in changes.values() if c.kind == "replace"]
    assert running_jobs(list(changes.values())) == (False, [])


def test_the_dev_box_goes_with_its_file_system_and_says_so():
    dev = {
        **TRAIN_LIKE,
        "gpu-cluster:nodes": "1",
        "gpu-cluster:instanceType": "g5.xlarge",
        "gpu-cluster:fsx": fsx(2400),
    }
    changes = changes_between(dev, {**dev, "gpu-cluster:fsx": fsx(1200)}, "dev")
    box = one(changes, INSTANCE)
    assert box.kind == "replace" and box.delete_before_replace
    assert (
        "launchTemplate comes from nodes-launch-template (LaunchTemplate), which is replaced"
        in (box.reasons)
    )
    assert "root disk and NVMe are lost" in box.impact[0]
    assert "the dev box's root disk" in running_jobs(list(changes.values()))[1]


def test_a_group_that_would_keep_its_nodes_on_a_replaced_template_is_refused(monkeypatch):
    monkeypatch.setattr(
        gpu_cluster.components.node_group,
        "GROUP_REPLACE_ON_CHANGES",
        ["vpcZoneIdentifiers", "capacityReservationSpecification"],
    )
    plan = plan_config(FSX_ON, "train")
    assert isinstance(plan.error, UpdateHazard)
    assert "keep mounting a file system deleted at the end" in str(plan.error)


def test_a_dev_box_replaced_for_its_type_is_refused(monkeypatch):
    """The old registration: the type in the box's replacementTrigger."""
    original = gpu_cluster.components.node_group.GpuNodeGroup._single_instance

    def with_type_trigger(self, name, args, template, opts):
        import pulumi

        trigger = pulumi.ResourceOptions(replacement_trigger=f"{args.facts.instance_type}/x")
        return original(self, name, args, template, pulumi.ResourceOptions.merge(opts, trigger))

    monkeypatch.setattr(
        gpu_cluster.components.node_group.GpuNodeGroup, "_single_instance", with_type_trigger
    )
    plan = plan_config({**TRAIN_LIKE, "gpu-cluster:nodes": "1"}, "dev")
    assert isinstance(plan.error, UpdateHazard)
    assert "ModifyInstanceAttribute" in str(plan.error)
