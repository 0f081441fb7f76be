"""Secrets: Pulumi secrets in stack config become SSM SecureString parameters under the
cluster key, read by the nodes at boot; never in user data, a plan, its JSON or outputs."""

from __future__ import annotations

import json
import pwd
import stat

import pytest
from boot_fakes import FakeImds, write_executable
from boot_harness import BootNode
from conftest import ROOT

from gpu_cluster.components.user_data import (
    JOB_USER,
    BootConfig,
    decoded_user_data,
    render_user_data,
)
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.plan.render import masked_config, preview_json, text_tree
from gpu_cluster.infra.stack_files import load_stack_config

SECRET = "hunter2-wandb-0123456789abcdef"
KEY = "gpu-cluster:secrets"


def train_with(secrets: dict, secret_key: bool = True):
    config = {**load_stack_config("train", ROOT), KEY: json.dumps(secrets)}
    return run_plan("train", config, secret_keys=[KEY] if secret_key else [])


@pytest.fixture(scope="module")
def secret_plan():
    """As under `pulumi up`: the CLI decrypted the value and lists the key as secret."""
    plan = train_with({"WANDB_API_KEY": SECRET, "HF_TOKEN": "hf_abcdefghijklmnop"})
    assert plan.error is None
    return plan


def test_each_secret_is_a_secure_string_under_the_cluster_key(secret_plan):
    parameters = {
        r.inputs["name"]: r
        for r in secret_plan.of_type("aws:ssm/parameter:Parameter")
        if "/secrets/" in r.inputs["name"]
    }
    assert sorted(parameters) == [
        "/gpu-cluster/train/secrets/HF_TOKEN",
        "/gpu-cluster/train/secrets/WANDB_API_KEY",
    ]
    key = secret_plan.state(secret_plan.named("train-security-key"))["arn"]
    for parameter in parameters.values():
        assert parameter.inputs["type"] == "SecureString"
        assert parameter.inputs["keyId"] == key
        assert parameter.inputs["value"] == "[secret]"


def test_a_secret_value_is_nowhere_in_the_plan(secret_plan):
    document = json.dumps(preview_json(secret_plan), default=str)
    assert SECRET not in document and "hf_abcdefghijklmnop" not in document
    assert SECRET not in text_tree(secret_plan)
    assert SECRET not in json.dumps(secret_plan.outputs, default=str)
    assert SECRET not in json.dumps(secret_plan.states, default=str)
    (template,) = secret_plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    user_data = decoded_user_data(template.inputs["userData"])
    assert SECRET not in user_data
    assert "SECRETS_PATH=/gpu-cluster/train/secrets\n" in user_data


def test_offline_ciphertext_is_masked_in_the_plan_config():
    config = {KEY: json.dumps({"WANDB_API_KEY": {"secure": "v1:ciphertextABC"}}), "x": "1"}
    masked = masked_config(config)
    assert "ciphertextABC" not in json.dumps(masked)
    assert json.loads(masked[KEY]) == {"WANDB_API_KEY": "[secret]"} and masked["x"] == "1"
    plan = run_plan("train", {**load_stack_config("train", ROOT), KEY: config[KEY]})
    assert plan.error is None
    assert "ciphertextABC" not in json.dumps(preview_json(plan), default=str)


def test_nodes_may_read_only_their_clusters_secrets(secret_plan):
    access = json.loads(secret_plan.named("train-security-node-access").inputs["policy"])
    (statement,) = [s for s in access["Statement"] if s["Sid"] == "ReadClusterSecrets"]
    path = "arn:aws:ssm:us-east-1:123456789012:parameter/gpu-cluster/train/secrets"
    assert statement["Resource"] == [path, f"{path}/*"]
    assert set(statement["Action"]) == {
        "ssm:GetParametersByPath",
        "ssm:GetParameters",
        "ssm:GetParameter",
    }


def test_without_secrets_there_is_no_parameter_statement_or_boot_step(train_plan):
    names = sorted(r.inputs["name"] for r in train_plan.of_type("aws:ssm/parameter:Parameter"))
    # the gang stop's alert topic and the bucket gpuc run uploads code to: neither a secret
    assert names == ["/gpu-cluster/train/train/alerts-topic", "/gpu-cluster/train/train/bucket"]
    access = json.loads(train_plan.named("train-security-node-access").inputs["policy"])
    assert "ReadClusterSecrets" not in {s["Sid"] for s in access["Statement"]}
    (template,) = train_plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    assert "SECRETS_PATH=''\n" in decoded_user_data(template.inputs["userData"])


def test_a_plain_text_secret_is_rejected_without_showing_it():
    plan = train_with({"WANDB_API_KEY": SECRET}, secret_key=False)
    assert plan.error is not None
    (problem,) = plan.error.problems
    assert problem.path == "gpu-cluster:secrets.WANDB_API_KEY"
    assert "plain text" in problem.problem
    assert problem.fix.startswith("pulumi config set --secret --path secrets.WANDB_API_KEY")
    assert SECRET not in str(plan.error) and SECRET not in str(problem.received)


@pytest.mark.parametrize(
    ("secrets", "path", "words"),
    [
        ({"1BAD": {"secure": "v1:x"}}, "gpu-cluster:secrets.1BAD", "not a usable secret name"),
        ({"WITH-DASH": {"secure": "v1:x"}}, "gpu-cluster:secrets.WITH-DASH", "environment"),
        (["WANDB_API_KEY"], "gpu-cluster:secrets", "expected a mapping"),
    ],
)
def test_bad_secret_config_is_a_clear_problem(secrets, path, words):
    plan = train_with(secrets, secret_key=False)
    assert plan.error is not None
    (problem,) = plan.error.problems
    assert problem.path == path and words in problem.problem and problem.fix


def test_a_data_stack_has_no_secrets():
    config = {**load_stack_config("data", ROOT), KEY: json.dumps({"A": {"secure": "v1:x"}})}
    plan = run_plan("data", config)
    assert plan.error is not None
    assert [p.path for p in plan.error.problems] == [KEY]


@pytest.fixture(scope="module")
def imds():
    with FakeImds() as server:
        yield server


def test_boot_step_writes_root_only_env_file_the_wrapper_exports(tmp_path, imds):
    """Only root and the job user read the file: 0640, owned by root, group of the job user."""
    boot = BootConfig("t", "us-east-1", 1, 0, 0, "b", secrets_path="/gpu-cluster/t/secrets")
    node = BootNode(tmp_path, render_user_data(boot), imds)
    assert node.install_only().returncode == 0
    cluster_env = node.file("/etc/gpu-cluster/cluster.env")
    assert node.env_file("/etc/gpu-cluster/cluster.env")["JOB_USER"] == JOB_USER
    # the node's job user (ubuntu on the AMI) may not exist here: a user who does
    cluster_env.write_text(
        cluster_env.read_text().replace(f"JOB_USER={JOB_USER}", "JOB_USER=nobody")
    )
    answer = {
        "Parameters": [
            {"Name": "/gpu-cluster/t/secrets/WANDB_API_KEY", "Value": "a b'c$HOME"},
            {"Name": "/gpu-cluster/t/secrets/HF_TOKEN", "Value": "hf_x"},
        ]
    }
    node.answer_aws([("ssm get-parameters-by-path", json.dumps(answer))])
    done = node.step("gpu-cluster-secrets")
    assert done.returncode == 0, done.stderr
    (args,) = node.aws_calls()
    assert args[:2] == ["ssm", "get-parameters-by-path"] and "--with-decryption" in args
    assert args[args.index("--path") + 1] == "/gpu-cluster/t/secrets"
    secrets = node.file("/run/gpu-cluster/secrets.env")
    mode = secrets.stat()
    assert stat.S_IMODE(mode.st_mode) == 0o640
    assert mode.st_uid == 0 and mode.st_gid == pwd.getpwnam("nobody").pw_gid
    assert "2 secret(s)" in done.stderr
    assert "a b" not in done.stdout + done.stderr  # values never printed
    assert list(secrets.parent.glob("secrets.env.*")) == []  # no temporary file left
    node.file("/etc/gpu-cluster/torchrun.env").write_text(
        "NNODES=1\nNPROC_PER_NODE=1\nRDZV_ID=t\nMASTER_ADDR=x\nMASTER_PORT=1\n"
    )
    write_executable(
        node.bin / "torchrun", '#!/bin/bash\necho "WANDB=$WANDB_API_KEY HF=$HF_TOKEN"\n'
    )
    job = node.step("gpuc-torchrun")
    assert job.returncode == 0, job.stderr
    assert job.stdout.strip() == "WANDB=a b'c$HOME HF=hf_x"


def test_user_data_runs_the_secrets_step_only_with_secrets(tmp_path, imds):
    with_secrets = render_user_data(
        BootConfig("t", "us-east-1", 1, 0, 0, "b", secrets_path="/gpu-cluster/t/secrets")
    )
    without = render_user_data(BootConfig("t", "us-east-1", 1, 0, 0, "b"))
    assert "SECRETS_PATH=/gpu-cluster/t/secrets\n" in with_secrets
    assert "SECRETS_PATH=''\n" in without
    units = {}
    for name, script in (("with", with_secrets), ("without", without)):
        node = BootNode(tmp_path / name, script, imds)
        assert node.install_only().returncode == 0
        units[name] = {p.name for p in node.file("/etc/systemd/system").iterdir()}
        assert node.file("/usr/local/sbin/gpu-cluster-secrets").exists() == (name == "with")
    assert units["with"] - units["without"] == {"gpu-cluster-secrets.service"}
    assert units["without"] <= units["with"]
    assert "gpu-cluster-secrets" not in without
