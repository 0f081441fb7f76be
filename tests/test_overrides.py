"""`--set` / `--set-path`: config changed as `pulumi config set` (and --path) would."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT, plan_config

from gpu_cluster.infra import cli
from gpu_cluster.infra.outcome import INPUT, OK, USAGE, CommandError
from gpu_cluster.infra.overrides import apply_overrides, parse_path, typed
from gpu_cluster.infra.stack_files import load_stack_config

TRAIN = load_stack_config("train", ROOT)


def test_set_nodes_8_on_train_plans_64_gpus(capsys):
    assert cli.main(["plan", "--stack", "train", "--set", "nodes=8"]) == OK
    assert "Nodes: 8 x p4d.24xlarge   GPUs: 64" in capsys.readouterr().out


def test_top_level_values_stay_strings_and_keys_get_the_project_namespace():
    config = apply_overrides({}, [("--set", "nodes=8"), ("--set", "aws:region=eu-west-1")])
    assert config == {"gpu-cluster:nodes": "8", "aws:region": "eu-west-1"}
    assert apply_overrides({}, [("--set-path", "nodes=8")]) == {"gpu-cluster:nodes": "8"}


def test_paths_type_booleans_and_integers_and_keep_the_rest():
    config = apply_overrides(
        TRAIN,
        [
            ("--set-path", "network.natGateway=false"),
            ("--set-path", "spot.onDemandBase=1"),
            ("--set-path", "spot.fallbackTypes[0]=p4de.24xlarge"),
            ("--set-path", 'tags["cost.center"]=42x'),
        ],
    )
    network = json.loads(config["gpu-cluster:network"])
    assert network == {
        "vpcCidr": "10.42.0.0/16",
        "avoidCidrs": ["10.0.0.0/16"],
        "natGateway": False,
    }
    assert json.loads(config["gpu-cluster:spot"]) == {
        "onDemandBase": 1,
        "fallbackTypes": ["p4de.24xlarge"],
    }
    assert json.loads(config["gpu-cluster:tags"])["cost.center"] == "42x"
    assert typed("007") == "007" and typed("-3") == -3 and typed("True") == "True"


def test_parse_path():
    assert parse_path("a.b[0].c") == ["a", "b", 0, "c"]
    assert parse_path('["x.y"].z') == ["x.y", "z"]
    assert parse_path("aws:assumeRole.roleArn") == ["aws:assumeRole", "roleArn"]


@pytest.mark.parametrize(
    ("flag", "text", "words"),
    [
        ("--set", "nodes", "expected KEY=VALUE"),
        ("--set", "=4", "expected KEY=VALUE"),
        ("--set-path", "spot..x=1", "cannot read the path"),
        ("--set-path", "[0]=1", "starts with a config key"),
        ("--set-path", "spot.fallbackTypes[3]=x", "past the end"),
        ("--set-path", "nodes.x=1", "not a map or list"),
        ("--set-path", "network[0]=x", "not one"),
    ],
)
def test_malformed_overrides_are_usage_errors_that_say_why(flag, text, words):
    config = {**TRAIN, "gpu-cluster:spot": json.dumps({"fallbackTypes": []})}
    with pytest.raises(CommandError) as error:
        apply_overrides(config, [(flag, text)])
    assert error.value.code == USAGE and words in str(error.value)


def test_overrides_meet_the_same_validation_and_messages_as_stack_files(capsys):
    assert cli.main(["plan", "--stack", "train", "--set", "nodes=abc"]) == INPUT
    from_flag = capsys.readouterr().err
    from_file = plan_config({**TRAIN, "gpu-cluster:nodes": "abc"}, stack="train").error
    assert from_file is not None and str(from_file) in from_flag
    assert cli.main(["plan", "--stack", "train", "--set-path", "rootVolume.sizeGib=1"]) == INPUT
    assert "gpu-cluster:rootVolume.sizeGib" in capsys.readouterr().err


def test_overrides_apply_in_command_line_order(capsys):
    argv = ["plan", "--stack", "train", "--set", "nodes=2", "--set-path", "nodes=3"]
    assert cli.main(argv) == OK
    assert "Nodes: 3 x p4d.24xlarge" in capsys.readouterr().out
