"""A secret's name becomes an environment variable of every job (boot/gpuc-torchrun.sh sources
the node's secrets.env under `set -a`): a name the shell cannot assign, or one the node sets
itself, is refused on both paths that create secrets - the stack config and a program giving
the library's GpuCluster its secrets (issue 25, 5a)."""

from __future__ import annotations

import json
import subprocess
import textwrap

import pytest
from conftest import ROOT

from gpu_cluster.components.names import DEFAULT_PROJECT, StackIdentity, secrets_path
from gpu_cluster.components.secrets import SecretNameError
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.stack_files import load_stack_config

KEY = "gpu-cluster:secrets"


def train_with(secrets: dict):
    config = {**load_stack_config("train", ROOT), KEY: json.dumps(secrets)}
    return run_plan("train", config, secret_keys=[KEY])


def test_why_a_dash_breaks_every_job(tmp_path):
    """What the node would do with such a name: the sourced line is a command, exit 127."""
    env = tmp_path / "secrets.env"
    env.write_text("HF-TOKEN='hf_x'\n")
    job = subprocess.run(
        ["bash", "-c", f'set -euo pipefail; set -a; . "{env}"; set +a; echo started'],
        capture_output=True,
        text=True,
    )
    assert job.returncode == 127 and "started" not in job.stdout


@pytest.mark.parametrize(
    ("name", "why", "fix"),
    [
        ("wandb_api_key", "not an environment variable name", "secrets.WANDB_API_KEY"),
        ("HF-TOKEN", "not an environment variable name", "secrets.HF_TOKEN"),
        ("PATH", "the node sets PATH itself", "secrets.JOB_PATH"),
        ("AWS_ACCESS_KEY_ID", "the node sets AWS_ACCESS_KEY_ID itself", "secrets.JOB_AWS_"),
        ("CLUSTER", "the node sets CLUSTER itself", "secrets.JOB_CLUSTER"),
    ],
)
def test_the_stack_config_refuses_a_name_no_job_could_use(name, why, fix):
    plan = train_with({name: "a-value", "HF_TOKEN": "hf_ok"})
    assert plan.error is not None
    (problem,) = plan.error.problems
    assert problem.path == f"{KEY}.{name}"
    assert problem.received == name
    assert why in problem.problem
    assert "upper-case letters, digits and _" in problem.allowed
    assert problem.fix.startswith(f"pulumi config rm --path secrets.{name}; ")
    assert fix in problem.fix
    assert "a-value" not in str(plan.error)  # a value is never shown


def test_upper_case_names_are_taken():
    plan = train_with({"WANDB_API_KEY": "k", "HF_TOKEN": "t", "_PRIVATE_2": "p"})
    assert plan.error is None, plan.error


def program(tmp_path, secrets: str):
    path = tmp_path / "__main__.py"
    path.write_text(
        textwrap.dedent(
            f"""
            import pulumi
            from gpu_cluster.components.names import runtime_identity, secrets_path
            from gpu_cluster.components.secrets import store_secrets

            store_secrets(
                "train",
                secrets_path(runtime_identity("train", "us-east-1")),
                {{{secrets}: pulumi.Output.secret("hf_abc")}},
                "arn:aws:kms:us-east-1:123456789012:key/1234",
                {{}},
                pulumi.ResourceOptions(),
            )
            """
        )
    )
    return path


def test_the_library_refuses_it_before_creating_anything(tmp_path):
    """GpuCluster(secrets=...) of the components (store_secrets) never passed the stack
    config's check: the parameter was created, and every job on the nodes exited 127."""
    with pytest.raises(SecretNameError) as refused:
        run_plan("dev", {"aws:region": "us-east-1"}, program=program(tmp_path, '"HF-TOKEN"'))
    error = refused.value
    assert (error.path, error.received) == ("secrets.HF-TOKEN", "HF-TOKEN")
    assert "upper-case letters" in error.allowed and error.fix == "name it HF_TOKEN"
    assert "not an environment variable name" in str(error)


def test_the_library_stores_a_good_name(tmp_path):
    plan = run_plan("dev", {"aws:region": "us-east-1"}, program=program(tmp_path, '"HF_TOKEN"'))
    assert plan.error is None, plan.error
    (parameter,) = plan.of_type("aws:ssm/parameter:Parameter")
    # stack dev, cluster train: the names room's path for that stack
    dev = StackIdentity(DEFAULT_PROJECT, "dev", "us-east-1", "train")
    assert parameter.inputs["name"] == f"{secrets_path(dev)}/HF_TOKEN"
