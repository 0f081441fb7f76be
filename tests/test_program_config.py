"""The program reads config the way the real Pulumi CLI hands it over (PULUMI_CONFIG)."""

from __future__ import annotations

import json

import pytest
from conftest import TRAIN_LIKE

from gpu_cluster.infra.config import current_config, load_spec
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.validation import ResolvedCluster


def test_current_config_reads_the_cli_environment(monkeypatch):
    from pulumi.runtime.config import set_all_config

    set_all_config({})  # nothing left over from an earlier in-process plan
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(TRAIN_LIKE))
    config = current_config()
    assert config["gpu-cluster:instanceType"] == "p4d.24xlarge"
    spec = load_spec(config, "train")
    assert isinstance(spec, ResolvedCluster)
    assert spec.node_count == 4 and spec.efa  # auto: multi-node on an EFA type


def test_config_error_is_a_pulumi_run_error():
    """Pulumi prints a RunError's message without a traceback."""
    import pulumi

    with pytest.raises(pulumi.RunError) as caught:
        load_spec({**TRAIN_LIKE, "gpu-cluster:tags": '{"cost center": "42"}'}, "train")
    assert isinstance(caught.value, ConfigError)
    (problem,) = caught.value.problems
    assert problem.path == "gpu-cluster:tags.cost center"
    assert "instance metadata" in problem.problem and "cost-center" in problem.fix


def test_pulumi_pip_toolchain_installs_the_project():
    """`pulumi install` creates .venv from requirements.txt only: it must name this project."""
    import tomllib

    import yaml
    from conftest import ROOT

    runtime = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["runtime"]
    assert runtime["options"] == {"toolchain": "pip", "virtualenv": ".venv"}
    lines = [
        line.strip()
        for line in (ROOT / "requirements.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines == ["-e ."]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == "gpu-cluster"
    assert {"pulumi", "pulumi-aws"} <= {
        d.split(">")[0].split("<")[0] for d in project["dependencies"]
    }
