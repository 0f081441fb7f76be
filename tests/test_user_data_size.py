"""EC2 takes at most 16 KB of user data before base64: every stack, and the largest variant a
user can configure, fits with room to grow; a plan over the limit is an error."""

from __future__ import annotations

import json
import random

import pytest
from conftest import STACKS, TRAIN_LIKE, plan_stack

import gpu_cluster.components.cluster as cluster_module
from gpu_cluster.components.aws_limits import (
    LIMITS,
    USER_DATA_BUDGET_BYTES,
    USER_DATA_MAX_BYTES,
    raw_user_data,
)
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.plan.mocks import AwsRefusal

LT = "aws:ec2/launchTemplate:LaunchTemplate"
LARGEST = {
    **TRAIN_LIKE,
    "gpu-cluster:clusterName": "a-twenty-char-name-1",
    "gpu-cluster:instanceType": "p5.48xlarge",
    "gpu-cluster:availabilityZone": "us-east-1a",
    "gpu-cluster:nodes": "8",
    "gpu-cluster:purchaseOption": "spot",
    "gpu-cluster:fsx": json.dumps({"storageCapacityGib": 4800, "throughputPerTib": 1000}),
    "gpu-cluster:network": json.dumps({"natGateway": False}),
    "gpu-cluster:secrets": json.dumps({"WANDB_API_KEY": "k" * 40, "HF_TOKEN": "t" * 37}),
}


def user_data_bytes(plan) -> int:
    (template,) = plan.of_type(LT)
    return len(raw_user_data(template.inputs["userData"], base64_encoded=True))


@pytest.mark.parametrize("stack", [s for s in STACKS if s != "data"])
def test_every_stacks_user_data_fits_with_room_to_grow(stack):
    size = user_data_bytes(plan_stack(stack))
    assert size <= USER_DATA_BUDGET_BYTES < USER_DATA_MAX_BYTES, size


def test_the_largest_variant_fits():
    plan = run_plan("largest", LARGEST, secret_keys=["gpu-cluster:secrets"])
    assert plan.error is None, plan.error
    assert user_data_bytes(plan) <= USER_DATA_BUDGET_BYTES


def test_a_plan_over_the_limit_is_an_error_naming_the_size_and_the_limit(monkeypatch):
    render = cluster_module.render_user_data
    rng = random.Random(7)  # random text: gzip cannot shrink it below the limit
    noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(30000))
    monkeypatch.setattr(
        cluster_module, "render_user_data", lambda boot: render(boot) + f"# {noise}\n"
    )
    plan = run_plan("train", {**TRAIN_LIKE})
    assert isinstance(plan.error, AwsRefusal)
    (problem,) = plan.error.problems
    assert "userData" in problem.path and "launch-template" in problem.path
    assert "16,384" in problem.problem and "bytes" in problem.received
    assert "Work with instance user data" in problem.problem
    assert not plan.outputs  # the program stopped there, as `pulumi up` would


def test_every_limit_names_its_source():
    assert LIMITS and all(limit.source and limit.maximum > 0 for limit in LIMITS)


def test_gpuc_plan_reports_the_refusal_as_an_input_error(monkeypatch, capsys):
    from gpu_cluster.infra import cli
    from gpu_cluster.infra.outcome import INPUT

    render = cluster_module.render_user_data
    rng = random.Random(11)
    noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(30000))
    monkeypatch.setattr(
        cluster_module, "render_user_data", lambda boot: render(boot) + f"# {noise}\n"
    )
    assert cli.main(["plan", "--stack", "train"]) == INPUT
    err = capsys.readouterr().err
    assert "AWS would refuse" in err and "16,384" in err and "Traceback" not in err


def test_the_same_stack_renders_the_same_bytes():
    """No time stamp in the gzip header: a second `pulumi up` sees no template change."""
    first, second = plan_stack("train"), plan_stack("train")
    (a,), (b,) = first.of_type(LT), second.of_type(LT)
    assert a.inputs["userData"] == b.inputs["userData"]
    assert raw_user_data(a.inputs["userData"], base64_encoded=True)[4:8] == b"\0\0\0\0"  # MTIME
