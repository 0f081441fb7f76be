"""`gpuc diff`: what a change adds, removes, updates or replaces, and what it does to nodes."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, plan_config

from gpu_cluster.infra import cli
from gpu_cluster.infra.diff.model import changed_inputs
from gpu_cluster.infra.outcome import INPUT, OK, USAGE
from gpu_cluster.infra.stack_files import load_stack_config

GROUP = "aws:autoscaling/group:Group"
TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def diff(capsys, *argv: str) -> dict:
    assert cli.main(["diff", *argv, "--json"]) == OK
    return json.loads(capsys.readouterr().out)


def by_role(document: dict) -> dict[str, dict]:
    return {c["role"]: c for c in document["changes"]}


def test_more_nodes_adds_nodes_and_replaces_nothing(capsys):
    document = diff(capsys, "--stack", "train", "--set", "nodes=8")
    assert document["summary"] == {"add": 0, "remove": 0, "update": 1, "replace": 0}
    (group,) = document["changes"]
    assert group["type"] == GROUP and group["change"] == "update"
    assert group["inputs"]["desiredCapacity"] == {"before": 4, "after": 8}
    assert group["impact"] == ["adds 4 node(s); running nodes are untouched"]
    assert document["before"]["gpus"] == 32 and document["after"]["gpus"] == 64
    assert document["after"]["usdPerHour"] > 1.9 * document["before"]["usdPerHour"]


def test_fewer_nodes_warns_that_nodes_are_terminated(capsys):
    (group,) = diff(capsys, "--stack", "train", "--set", "nodes=2")["changes"]
    assert group["impact"][0].startswith("terminates 2 node(s): a job running on them stops")


def test_a_new_instance_type_replaces_the_nodes_first(capsys):
    changes = by_role(diff(capsys, "--stack", "train", "--set", "instanceType=p5.48xlarge"))
    group = changes["nodes-group"]
    assert group["change"] == "replace" and group["deleteBeforeReplace"] is True
    assert "replacementTrigger" in " ".join(group["reasons"])
    assert "a running job stops" in group["impact"][0]
    assert changes["nodes-launch-template"]["change"] == "update"


def test_a_tag_changes_everything_in_place_and_interrupts_nothing(capsys):
    document = diff(capsys, "--stack", "train", "--set-path", "tags.team=research")
    assert document["summary"]["replace"] == 0 and document["summary"]["update"] > 10
    impacts = [i for c in document["changes"] for i in c["impact"]]
    assert not [i for i in impacts if "stops" in i or "terminated" in i]
    changed = [(path, v["after"]) for c in document["changes"] for path, v in c["inputs"].items()]
    assert all("tags" in path and after == "research" for path, after in changed)


def test_a_new_ami_reaches_new_nodes_only(capsys):
    changes = by_role(
        diff(
            capsys,
            "--stack",
            "train",
            "--set-path",
            "ami.id=ami-0123456789abcdef0",
            "--set-path",
            "ami.architecture=x86_64",
        )
    )
    assert set(changes) == {"nodes-launch-template", "nodes-group"}
    assert changes["nodes-launch-template"]["inputs"]["imageId"]["after"] == "ami-0123456789abcdef0"
    group = changes["nodes-group"]
    assert group["change"] == "update"
    assert "only nodes launched from now on" in group["impact"][0]


def test_another_zone_replaces_subnets_and_with_them_the_nodes(capsys):
    changes = by_role(diff(capsys, "--stack", "train", "--set", "availabilityZone=us-east-1b"))
    assert changes["network-private"]["change"] == "replace"
    assert changes["network-private"]["reasons"] == ["availabilityZone cannot change in place"]
    assert changes["network-nat"]["change"] == "replace"  # its subnetId comes from a new subnet
    assert changes["nodes-group"]["change"] == "replace"


def test_a_new_dev_box_type_is_a_stop_and_start_that_keeps_the_root_disk(capsys):
    """The provider changes instance_type in place: stop, ModifyInstanceAttribute, start
    (terraform-provider-aws ec2_instance.go resourceInstanceUpdate); nothing replaces the box."""
    document = diff(capsys, "--stack", "dev", "--set", "instanceType=g5.2xlarge")
    changes = by_role(document)
    box = changes["nodes-node-0"]
    assert box["change"] == "update" and box["inputs"]["instanceType"]["after"] == "g5.2xlarge"
    assert "stopped, changed (ModifyInstanceAttribute) and started" in box["impact"][0]
    assert "root disk and its files stay" in box["impact"][0]
    assert changes["nodes-launch-template"]["change"] == "update"
    assert document["summary"]["replace"] == 0
    assert document["runningJobs"] == {"interrupted": True, "lost": []}


def test_a_dev_box_type_of_another_architecture_replaces_the_box(capsys):
    """An arm64 type needs an arm64 AMI, which a stop and start cannot change: the template's
    replacementTrigger holds the architecture, and launchTemplate.id is ForceNew."""
    changes = by_role(diff(capsys, "--stack", "dev", "--set", "instanceType=g5g.xlarge"))
    assert changes["nodes-launch-template"]["change"] == "replace"
    box = changes["nodes-node-0"]
    assert box["change"] == "replace" and box["deleteBeforeReplace"] is True
    assert "root disk and NVMe are lost" in box["impact"][0]


def test_a_dev_box_deployed_with_its_type_in_a_trigger_is_not_replaced_by_the_upgrade(
    capsys, tmp_path
):
    """A state from before this version: the box's trigger held its type, the template had
    none. A null trigger on either side never replaces (step_generator.go
    shouldTriggerReplace), so upgrading replaces nothing."""
    assert cli.main(["plan", "--stack", "dev", "--json"]) == OK
    document = json.loads(capsys.readouterr().out)
    for step in document["steps"]:
        state = step["newState"]
        if state["type"] == "aws:ec2/instance:Instance":
            state["replacementTrigger"] = (
                "g5.xlarge/subnet-0123456789abcdef0//0.0:interface/on-demand"
            )
        if state["type"] == TEMPLATE:
            state.pop("replacementTrigger", None)
    saved = tmp_path / "old.json"
    saved.write_text(json.dumps(document))
    assert diff(capsys, "--from", str(saved), "--stack", "dev")["changes"] == []
    changes = by_role(
        diff(capsys, "--from", str(saved), "--stack", "dev", "--set", "instanceType=g5.2xlarge")
    )
    assert changes["nodes-node-0"]["change"] == "update"


def test_an_instance_stopped_and_started_in_place_is_called_out():
    from gpu_cluster.infra.diff.model import INSTANCE, Change, node_impact

    change = Change(INSTANCE, "box", "update", {"userData": ("a", "b")})
    assert "stopped, changed (ModifyInstanceAttribute) and started" in node_impact(change)[0]
    assert node_impact(Change(INSTANCE, "box", "update", {"tags.team": ("a", "b")})) == []


def test_dev_to_train_lists_adds_removes_and_the_cost_delta(capsys):
    document = diff(capsys, "dev", "train")
    changes = by_role(document)
    assert changes["nodes-node-0"]["change"] == "remove"
    added = {c["role"] for c in document["changes"] if c["change"] == "add"}
    assert {"nodes-group", "nodes-placement", "security-autoscaling-role"} <= added
    assert changes["nodes-launch-template"]["inputs"]["instanceType"] == {
        "before": "g5.xlarge",
        "after": "p4d.24xlarge",
    }
    assert "network-vpc" not in changes  # same network: the cluster name is abstracted
    assert document["before"]["gpus"] == 1 and document["after"]["gpus"] == 32
    assert document["before"]["usdPerHour"] < 2 < 80 < document["after"]["usdPerHour"]


def test_text_output_names_changes_and_costs(capsys):
    assert cli.main(["diff", "--stack", "train", "--set", "nodes=8"]) == OK
    out = capsys.readouterr().out
    assert " ~ aws:autoscaling/group:Group  nodes-group  update" in out
    assert "      desiredCapacity: 4 -> 8" in out
    assert "Resources: 0 to add, 0 to remove, 1 to update in place, 0 to replace" in out
    before = plan_config(load_stack_config("train", ROOT), "train").outputs
    after = plan_config({**load_stack_config("train", ROOT), "gpu-cluster:nodes": "8"}, "train")
    hourly = (before["estimatedUsdPerHour"], after.outputs["estimatedUsdPerHour"])
    assert f"Cost: ${hourly[0]:,.2f}/h -> ${hourly[1]:,.2f}/h" in out
    assert "Running jobs: not interrupted" in out


def test_against_a_saved_plan(capsys, tmp_path):
    assert cli.main(["plan", "--stack", "train", "--json"]) == OK
    saved = tmp_path / "plan.json"
    saved.write_text(capsys.readouterr().out)
    assert diff(capsys, "--from", str(saved), "--stack", "train")["changes"] == []
    document = diff(capsys, "--from", str(saved), "--stack", "train", "--set", "nodes=8")
    assert document["summary"] == {"add": 0, "remove": 0, "update": 1, "replace": 0}
    changes = by_role(
        diff(capsys, "--from", str(saved), "--stack", "train", "--set", "instanceType=p5.48xlarge")
    )
    assert changes["nodes-group"]["change"] == "replace"  # the template's type changed


@pytest.mark.parametrize(
    ("argv", "code", "words"),
    [
        ([], USAGE, "needs two stacks"),
        (["--stack", "train"], USAGE, "needs two stacks"),
        (["--from", "x.json"], USAGE, "add --stack NAME"),
        (["--from", "/nonexistent/plan.json", "--stack", "train"], INPUT, "no such file"),
        (["train", "nope"], INPUT, "no stack 'nope'"),
    ],
)
def test_bad_invocations_say_what_to_do(capsys, argv, code, words):
    assert cli.main(["diff", *argv]) == code
    assert words in capsys.readouterr().err


def test_a_file_that_is_not_a_plan(capsys, tmp_path):
    bad = tmp_path / "plan.json"
    bad.write_text('{"something": 1}')
    assert cli.main(["diff", "--from", str(bad), "--stack", "train"]) == INPUT
    assert "not a `gpuc plan --json` document" in capsys.readouterr().err


def test_changed_inputs_are_leaves_and_unknowns_are_not_compared():
    old = {"tags": {"a": "1", "b": "2"}, "list": [1, 2], "id": "output<string>"}
    new = {"tags": {"a": "1", "b": "3"}, "list": [1, 2, 3], "id": "sg-123"}
    assert changed_inputs(old, new) == {"tags.b": ("2", "3"), "list": ([1, 2], [1, 2, 3])}
