"""Every stack file plans cleanly; the CLI prints the tree and the `pulumi preview --json` shape."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, STACKS, plan_stack

from gpu_cluster.components.user_data import decoded_user_data
from gpu_cluster.infra.stack_files import available_stacks


def test_every_stack_file_is_covered():
    assert set(available_stacks(ROOT)) == set(STACKS)


@pytest.mark.parametrize("stack", STACKS)
def test_stack_plans_cleanly(stack):
    plan = plan_stack(stack)
    assert plan.error is None, plan.error
    assert sum(r.custom for r in plan.resources) >= 9
    assert plan.resources[0].type == "pulumi:pulumi:Stack"


def test_stage_sizes():
    expected = {"dev": (1, 1), "experiment": (2, 4), "train": (32, 32)}
    for stack, (low, high) in expected.items():
        gpus = plan_stack(stack).outputs["totalGpus"]
        assert low <= gpus <= high, (stack, gpus)
    dev = plan_stack("dev").outputs["instanceType"]
    assert dev.split(".")[0] in ("g4dn", "g5", "g6")
    data = plan_stack("data")
    assert data.of_type("aws:ec2/instance:Instance") == []
    assert {"bucketName", "bucketArn", "kmsKeyArn"} <= set(data.outputs)
    assert all(
        r.protect for r in data.resources if r.type in ("aws:s3/bucket:Bucket", "aws:kms/key:Key")
    )


def gpuc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpu_cluster.infra.cli", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_json_has_preview_shape_and_train_acceptance():
    result = gpuc("plan", "--stack", "train", "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["changeSummary"] == {"create": len(doc["steps"]) - 1, "read": 1}
    for step in doc["steps"]:
        assert step["urn"] == step["newState"]["urn"]
        expected_op = (
            "read" if step["newState"]["type"] == "pulumi:pulumi:StackReference" else "create"
        )
        assert step["op"] == expected_op
        assert {"type", "urn", "custom", "parent", "inputs", "dependencies", "protect"} <= set(
            step["newState"]
        )
    by_type: dict[str, list] = {}
    for step in doc["steps"]:
        by_type.setdefault(step["newState"]["type"], []).append(step["newState"])
    (template,) = by_type["aws:ec2/launchTemplate:LaunchTemplate"]
    (group,) = by_type["aws:autoscaling/group:Group"]
    assert "aws:ec2/instance:Instance" not in by_type
    assert group["inputs"]["desiredCapacity"] == 4
    assert template["inputs"]["instanceType"] == "p4d.24xlarge"
    assert template["urn"] in group["dependencies"]
    efa_cards = sorted(
        n["networkCardIndex"]
        for n in template["inputs"]["networkInterfaces"]
        if n.get("interfaceType") in ("efa", "efa-only")
    )
    assert efa_cards == [0, 1, 2, 3]
    assert len(by_type["aws:ec2/placementGroup:PlacementGroup"]) == 1
    assert by_type["aws:ec2/placementGroup:PlacementGroup"][0]["inputs"]["strategy"] == "cluster"
    assert template["inputs"]["metadataOptions"]["httpTokens"] == "required"
    assert template["inputs"]["blockDeviceMappings"][0]["ebs"]["encrypted"] == "true"
    assert all(
        n.get("associatePublicIpAddress", "false") == "false"
        for n in template["inputs"]["networkInterfaces"]
    )
    script = decoded_user_data(template["inputs"]["userData"])
    assert script.startswith("#!/bin/bash")


def test_cli_text_tree_has_totals():
    result = gpuc("plan", "--stack", "train")
    assert result.returncode == 0, result.stderr
    assert "Nodes: 4 x p4d.24xlarge" in result.stdout and "GPUs: 32" in result.stdout
    assert "aws:ec2/launchTemplate:LaunchTemplate  train-nodes-launch-template" in result.stdout
    assert "/hour" in result.stdout
    assert "EC2 quota needed: 384 vCPUs of 'Running On-Demand P instances'" in result.stdout
    assert "Purchase option: on-demand" in result.stdout


def test_cli_unknown_stack_is_a_message():
    result = gpuc("plan", "--stack", "nope")
    assert result.returncode != 0
    assert "no stack 'nope'" in result.stderr and "Traceback" not in result.stderr
    assert "train" in result.stderr


def test_plan_document_is_reproducible():
    """The engine registers concurrently; the printed plan must not depend on arrival order."""
    from gpu_cluster.infra.plan.render import preview_json

    documents = {json.dumps(preview_json(plan_stack("train")), sort_keys=True) for _ in range(3)}
    assert len(documents) == 1
    doc = json.loads(documents.pop())
    order = [step["urn"] for step in doc["steps"]]
    for position, step in enumerate(doc["steps"]):
        for needed in (step["newState"]["parent"], *step["newState"]["dependencies"]):
            assert not needed or order.index(needed) < position
    assert doc["outputs"]["nodeGroupName"].startswith("train-nodes-group-")


def test_experiment_runs_on_spot_by_default():
    result = gpuc("plan", "--stack", "experiment")
    assert result.returncode == 0, result.stderr
    assert "Purchase option: spot" in result.stdout
    assert "GPU instances (spot): 1 x g5.12xlarge" in result.stdout
    plan = plan_stack("experiment")
    (group,) = plan.of_type("aws:autoscaling/group:Group")
    distribution = group.inputs["mixedInstancesPolicy"]["instancesDistribution"]
    assert distribution["spotAllocationStrategy"] == "price-capacity-optimized"
    assert distribution["onDemandBaseCapacity"] == 0


def test_train_plan_shows_what_each_node_gets():
    result = gpuc("plan", "--stack", "train")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "EFA interfaces per node: 4" in out
    assert "Per node: NVMe scratch 8 x 1000 GB NVMe (RAID0" in out
    assert "Data: s3://gpuc-data-123456789012-us-east-1 read-only at /mnt/data" in out
    assert "Health check at boot and every minute: instance tag gpu-cluster:health" in out
    assert "NCCL test: `pulumi stack output ncclTestCommand`" in out and "~50 GB/s" in out


def test_unreadable_stack_and_project_files_are_messages(tmp_path):
    import shutil as _shutil

    from gpu_cluster.infra.stack_files import StackFileError, load_stack_config

    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    _shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    (project / "stacks" / "Pulumi.junk.yaml").write_bytes(b"config:\n  aws:region: \xff\xfe\x00\n")
    with pytest.raises(StackFileError, match=r"is not UTF-8 text \(byte \d+: b'\\xff'\)"):
        load_stack_config("junk", project)
    (project / "Pulumi.yaml").write_text("name: gpu-cluster\nruntime: [python\n")
    with pytest.raises(StackFileError, match=r"Pulumi\.yaml is not valid YAML"):
        load_stack_config("junk", project)
    (project / "Pulumi.yaml").write_text("- just\n- a list\n")
    with pytest.raises(StackFileError, match="must be a mapping"):
        load_stack_config("junk", project)
    # and through the CLI: a message, no traceback
    result = subprocess.run(
        [sys.executable, "-m", "gpu_cluster.infra.cli", "plan", "--stack", "junk"],
        cwd=project,
        capture_output=True,
        text=True,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT)},
    )
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "must be a mapping" in result.stderr


def test_cli_basics_help_version_and_stack_did_you_mean():
    bare = gpuc()
    assert bare.returncode == 0 and "usage: gpuc" in bare.stdout and "plan" in bare.stdout
    version = gpuc("--version")
    assert version.returncode == 0 and version.stdout.startswith("gpuc 0.")
    typo = gpuc("plan", "--stack", "trian")
    assert typo.returncode != 0 and "did you mean 'train'?" in typo.stderr


def test_stack_file_keys_given_twice_or_outside_config_are_reported(tmp_path):
    import shutil as _shutil

    from gpu_cluster.infra.stack_files import StackFileError, load_stack_config

    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    _shutil.copy(ROOT / "Pulumi.yaml", project / "Pulumi.yaml")
    stack = project / "stacks" / "Pulumi.twice.yaml"
    stack.write_text(
        "config:\n  aws:region: us-east-1\n  gpu-cluster:nodes: 2\n  gpu-cluster:nodes: 8\n"
    )
    with pytest.raises(
        StackFileError, match=r"'gpu-cluster:nodes' is given twice \(lines 3 and 4\)"
    ):
        load_stack_config("twice", project)
    stack.write_text("config:\n  aws:region: us-east-1\ngpu-cluster:nodes: 8\n")
    with pytest.raises(StackFileError, match="gpu-cluster:nodes is outside 'config:'"):
        load_stack_config("twice", project)


@pytest.mark.parametrize(
    ("key", "problem", "fix"),
    [
        ("nodes", "a config key without a namespace", "write it as gpu-cluster:nodes"),
        ("gpu-clustr:nodes", "unknown namespace 'gpu-clustr'", "did you mean 'gpu-cluster:nodes'?"),
        ("aws:regoin", "pulumi-aws has no config key 'regoin'", "did you mean 'region'?"),
    ],
)
def test_keys_outside_the_project_namespace_are_not_silently_ignored(key, problem, fix):
    from conftest import TRAIN_LIKE

    from gpu_cluster.infra.config import load_spec
    from gpu_cluster.infra.errors import ConfigError

    with pytest.raises(ConfigError) as error:
        load_spec({**TRAIN_LIKE, key: "8"}, "train")
    (found,) = error.value.problems
    assert found.path == key and found.problem == problem and found.fix.startswith(fix)


def test_other_providers_keys_and_real_aws_keys_stay_allowed():
    from conftest import TRAIN_LIKE

    from gpu_cluster.infra.config import load_spec
    from gpu_cluster.infra.validation import ResolvedCluster

    config = {**TRAIN_LIKE, "aws:profile": "ml", "random:seed": "1", "kubernetes:context": "x"}
    spec = load_spec(config, "train")
    assert isinstance(spec, ResolvedCluster) and spec.node_count == 4


def test_a_gpu_request_says_why_it_became_its_type():
    plan = plan_stack("experiment")
    note = plan.outputs["instanceChoice"]
    from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly

    g5_12 = on_demand_hourly("us-east-1", "g5.12xlarge")
    g5_24 = on_demand_hourly("us-east-1", "g5.24xlarge")
    assert g5_12 is not None and g5_24 is not None
    assert g5_12 < g5_24
    assert note.startswith(f"gpu: A10G x 4 -> g5.12xlarge (${g5_12:,.2f}/h): the cheapest")
    assert f"runners-up: g5.24xlarge (${g5_24:,.2f}/h)" in note
    assert "instanceChoice" not in plan_stack("train").outputs  # asked by type: nothing to say


def test_gpuc_stacks_lists_every_stage():
    result = gpuc("stacks", "--json")
    assert result.returncode == 0, result.stderr
    rows = {row["stack"]: row for row in json.loads(result.stdout)}
    assert set(rows) == set(STACKS)
    assert rows["train"]["gpus"] == 32 and rows["train"]["instanceType"] == "p4d.24xlarge"
    assert rows["experiment"]["purchaseOption"] == "spot"
    assert rows["data"]["stage"] == "data"
    text = gpuc("stacks")
    assert "train" in text.stdout and "p4d.24xlarge" in text.stdout


def test_text_and_json_count_the_same_steps_and_json_carries_masked_config():
    import re

    from gpu_cluster.infra.plan.render import masked_config

    text = gpuc("plan", "--stack", "train").stdout
    doc = json.loads(gpuc("plan", "--stack", "train", "--json").stdout)
    match = re.search(r"Steps: (\d+) to create .*, (\d+) to read", text)
    assert match and doc["changeSummary"] == {
        "create": int(match.group(1)),
        "read": int(match.group(2)),
    }
    assert doc["config"]["gpu-cluster:instanceType"] == "p4d.24xlarge"
    assert masked_config({"a:b": '{"secure": "v1:abc"}', "a:c": "plain"}) == {
        "a:b": "[secret]",
        "a:c": "plain",
    }


def test_the_cli_plan_shows_values_known_only_after_up_as_placeholders():
    doc = json.loads(gpuc("plan", "--stack", "train", "--json").stdout)
    states = {s["newState"]["type"]: s["newState"] for s in doc["steps"]}
    group = states["aws:autoscaling/group:Group"]["inputs"]
    assert group["launchTemplate"] == {"id": "output<string>", "version": "output<string>"}
    assert group["vpcZoneIdentifiers"] == ["output<string>"]
    assert doc["outputs"]["nodeGroupName"] == "output<string>"
    # what the program knows before anything exists stays concrete
    assert states["aws:ec2/launchTemplate:LaunchTemplate"]["inputs"]["instanceType"] == (
        "p4d.24xlarge"
    )
    assert doc["outputs"]["estimatedUsdPerHour"] > 0
    assert not any(
        "pulumi.output.Unknown" in json.dumps(s["newState"]["inputs"]) for s in doc["steps"]
    )
