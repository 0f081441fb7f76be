"""The components from a user's own Pulumi program: plain-value args checked like a stack file
(errors name the argument, nothing is created), Pulumi inputs for ids and names, the same URNs
as this project's program, and every example under examples/ planned with `gpuc plan
--program`."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, only

from gpu_cluster.infra.api import ArgumentError as ArgumentErrorType
from gpu_cluster.infra.cli import main as gpuc
from gpu_cluster.infra.outcome import INPUT
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.stack_files import load_stack_config, program_of

EXAMPLES = sorted(p.parent for p in (ROOT / "examples").glob("*/Pulumi.yaml"))


def program(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "__main__.py"
    path.write_text(
        "import pulumi\nimport pulumi_aws as aws\nfrom gpu_cluster import *\n"
        + textwrap.dedent(body)
    )
    return path


def plan_program(tmp_path: Path, body: str, stack: str = "dev", project: str = "mine"):
    return run_plan(
        stack, {"aws:region": "us-east-1"}, program=program(tmp_path, body), project=project
    )


def test_there_are_at_least_two_examples_each_a_pulumi_project():
    names = {path.name for path in EXAMPLES}
    assert {"training-in-existing-vpc", "datastore-and-inference"} <= names
    for folder in EXAMPLES:
        stacks = list(folder.glob("Pulumi.*.yaml"))
        assert stacks, f"{folder} has no stack file"


@pytest.mark.parametrize("folder", EXAMPLES, ids=lambda p: p.name)
def test_every_example_plans_with_gpuc_plan_program(folder, capsys):
    stack = next(folder.glob("Pulumi.*.yaml")).name.split(".")[1]
    assert gpuc(["plan", "--program", str(folder), "--stack", stack, "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    project = program_of(folder, stack)[0]
    assert steps and all(f"::{project}::" in s["urn"] for s in steps)
    types = {s["newState"]["type"] for s in steps}
    assert "aws:autoscaling/group:Group" in types


def test_the_training_example_lands_in_its_vpc_and_creates_no_network():
    folder = ROOT / "examples" / "training-in-existing-vpc"
    project, path, config = program_of(folder, "dev")
    plan = run_plan("dev", config, program=path, project=project)
    assert plan.error is None, plan.error
    assert not plan.of_type("aws:ec2/vpc:Vpc") and not plan.of_type("aws:ec2/subnet:Subnet")
    group = plan.state(only(plan, "aws:autoscaling/group:Group"))
    assert group["vpcZoneIdentifiers"] == [config[f"{project}:subnetId"]]
    assert plan.outputs["totalGpus"] == 32


def test_the_inference_example_serves_from_the_data_stores_bucket():
    folder = ROOT / "examples" / "datastore-and-inference"
    project, path, config = program_of(folder, "prod")
    plan = run_plan("prod", config, program=path, project=project)
    assert plan.error is None, plan.error
    bucket = plan.outputs["bucketName"]
    node_access = plan.state(plan.named("serve-security-node-access"))
    assert f"arn:aws:s3:::{bucket}" in node_access["policy"]
    # the store's key, passed as an Output, is one the nodes may use
    key = plan.state(plan.named("models-key"))
    assert key["arn"] in node_access["policy"]


def test_wrong_arguments_name_the_argument_and_create_nothing(tmp_path):
    plan = plan_program(
        tmp_path,
        """
        GpuCluster("train", GpuClusterArgs(
            instance_type="p4d.24xl", nodes="four", availability_zone="us-east-1a",
            network={"vpc_id": "vpc-0a1", "subnet_ids": ["subnet-0a1b2c3d4e5f60789"]},
            idel_stop={"minutes": 60},
        ))
        """,
    )
    assert isinstance(plan.error, ArgumentErrorType)
    paths = {p.path for p in plan.error.problems}
    assert {
        "GpuClusterArgs.instance_type",
        "GpuClusterArgs.nodes",
        "GpuClusterArgs.network.vpc_id",
        "GpuClusterArgs.idel_stop",
    } <= paths
    text = str(plan.error)
    assert (
        text.startswith(f"GpuCluster('train') (at {tmp_path / '__main__.py'}:")
        and " has 4 argument problems; nothing was created" in text.splitlines()[0]
    )
    assert "set instance_type=p4d.24xlarge" in text and "'idle_stop'" in text
    assert "pulumi config" not in text
    assert [r.type for r in plan.resources] == ["pulumi:pulumi:Stack"]


def test_an_output_where_a_plain_value_is_needed_is_a_message(tmp_path):
    plan = plan_program(
        tmp_path,
        """
        GpuCluster("train", GpuClusterArgs(
            instance_type=pulumi.Output.from_input("p4d.24xlarge"), availability_zone="us-east-1a",
        ))
        """,
    )
    problem = only_problem(plan)
    assert problem.path == "GpuClusterArgs.instance_type"
    assert "must be a plain value" in problem.problem


def only_problem(plan):
    assert isinstance(plan.error, ArgumentErrorType), plan.error
    assert len(plan.error.problems) == 1, plan.error
    return plan.error.problems[0]


def test_ids_from_other_resources_are_passed_on_as_inputs(tmp_path):
    plan = plan_program(
        tmp_path,
        """
        vpc = aws.ec2.Vpc("platform", cidr_block="10.9.0.0/16")
        subnet = aws.ec2.Subnet("gpus", vpc_id=vpc.id, cidr_block="10.9.0.0/20",
                                availability_zone="us-east-1a",
                                opts=pulumi.ResourceOptions(delete_before_replace=True))
        GpuCluster("train", GpuClusterArgs(
            instance_type="p4d.24xlarge", nodes=2, availability_zone="us-east-1a",
            network={"vpc_id": vpc.id, "subnet_ids": [subnet.id]},
            storage={"source": "create"},
        ))
        """,
    )
    assert plan.error is None, plan.error
    subnet = plan.state(plan.named("gpus"))
    group = plan.state(only(plan, "aws:autoscaling/group:Group"))
    assert group["vpcZoneIdentifiers"] == [subnet["id"]]
    nodes_sg = plan.state(plan.named("train-network-nodes-sg"))
    assert nodes_sg["vpcId"] == plan.state(plan.named("platform"))["id"]
    assert len(plan.of_type("aws:ec2/vpc:Vpc")) == 1  # the user's own, none of ours


def snake_keys(value):
    """A stack file's nested camelCase keys as the Args' snake_case ones."""
    if isinstance(value, dict):
        return {
            "".join(f"_{c.lower()}" if c.isupper() else c for c in k): snake_keys(v)
            for k, v in value.items()
        }
    return [snake_keys(v) for v in value] if isinstance(value, list) else value


def test_the_component_keeps_the_urns_of_this_projects_program(tmp_path):
    """A stack moved from `pulumi up -s train` here to a user's program keeps its resources."""
    config = load_stack_config("train", ROOT)
    settings = {}
    for key, value in config.items():
        if key.startswith("gpu-cluster:") and key != "gpu-cluster:role":  # the component's
            name = key.split(":", 1)[1]
            snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
            try:  # the Args take Python values: true, 4 and {...} typed, as Pulumi reads them
                loaded = json.loads(value)
            except json.JSONDecodeError:
                loaded = value
            settings[snake] = loaded if snake == "tags" else snake_keys(loaded)
    body = f"GpuCluster('train', GpuClusterArgs(**{settings!r}))"
    ours = run_plan("train", config)
    theirs = run_plan(
        "train",
        {"aws:region": config["aws:region"]},
        program=program(tmp_path, body),
        project="gpu-cluster",
    )
    assert ours.error is None and theirs.error is None, (ours.error, theirs.error)

    def cluster_urns(plan):
        return {r.urn for r in plan.resources if "GpuCluster" in r.urn}

    assert cluster_urns(ours) == cluster_urns(theirs)
    assert len(cluster_urns(ours)) > 40


def test_secrets_reach_the_nodes_as_secure_strings(tmp_path):
    plan = plan_program(
        tmp_path,
        """
        GpuCluster("train", GpuClusterArgs(
            instance_type="g5.xlarge", availability_zone="us-east-1a",
            storage={"source": "create"},
            secrets={"HF_TOKEN": pulumi.Output.secret("hf_abc")},
        ))
        """,
    )
    assert plan.error is None, plan.error
    parameters = [
        plan.state(p)
        for p in plan.of_type("aws:ssm/parameter:Parameter")
        if plan.state(p).get("type") == "SecureString" and "HF_TOKEN" in plan.state(p)["name"]
    ]
    assert len(parameters) == 1


def test_the_data_store_alone(tmp_path):
    plan = plan_program(
        tmp_path,
        """
        store = DataStore("vault", DataStoreArgs(bucket="my-team-datasets-0042"))
        pulumi.export("bucket", store.bucket_name)
        """,
    )
    assert plan.error is None, plan.error
    assert plan.outputs["bucket"] == "my-team-datasets-0042"
    wrong = plan_program(tmp_path, 'DataStore("vault", DataStoreArgs(bucket="Not_A_Bucket"))')
    assert only_problem(wrong).path == "DataStoreArgs.storage.bucket"


def test_a_node_group_alone_in_the_callers_subnet(tmp_path):
    plan = plan_program(
        tmp_path,
        """
        group = GpuNodeGroup("workers", GpuNodeGroupArgs(
            subnet_id="subnet-0a1b2c3d4e5f60789", security_group_id="sg-0a1b2c3d4e5f60789",
            instance_profile_arn="arn:aws:iam::123456789012:instance-profile/gpu",
            kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            user_data="#!/bin/bash\\necho hello\\n",
            instance_type="p5.48xlarge", nodes=2, availability_zone="us-east-1a",
        ))
        pulumi.export("group", group.group_name)
        """,
    )
    assert plan.error is None, plan.error
    group = plan.state(only(plan, "aws:autoscaling/group:Group"))
    assert group["vpcZoneIdentifiers"] == ["subnet-0a1b2c3d4e5f60789"]
    template = plan.state(only(plan, "aws:ec2/launchTemplate:LaunchTemplate"))
    assert len(template["networkInterfaces"]) > 8  # p5: EFA on every one of its 32 cards
    assert all(
        i["securityGroups"] == ["sg-0a1b2c3d4e5f60789"] for i in template["networkInterfaces"]
    )
    assert not plan.of_type("aws:s3/bucket:Bucket") and not plan.of_type("aws:ec2/vpc:Vpc")
    wrong = plan_program(
        tmp_path,
        """
        GpuNodeGroup("workers", GpuNodeGroupArgs(
            subnet_id="subnet-0a1b2c3d4e5f60789", security_group_id="sg-0a1b2c3d4e5f60789",
            instance_profile_arn="arn:aws:iam::123456789012:instance-profile/gpu",
            kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab",
            instance_type="p5.48xlarge", nodes=2, availability_zone="us-east-1z",
        ))
        """,
    )
    assert only_problem(wrong).path == "GpuNodeGroupArgs.availability_zone"


@pytest.mark.parametrize(
    ("files", "stack", "words"),
    [
        ({}, "dev", "is not a Pulumi project: no Pulumi.yaml"),
        ({"Pulumi.yaml": "name: web\nruntime: nodejs\n"}, "dev", "runtime 'nodejs'"),
        ({"Pulumi.yaml": "name: web\nruntime: python\n"}, "dev", "no program at"),
        (
            {
                "Pulumi.yaml": "name: web\nruntime: python\n",
                "__main__.py": "",
                "Pulumi.prod.yaml": "",
            },
            "dev",
            "no stack 'dev'",
        ),
    ],
)
def test_gpuc_plan_program_refuses_what_is_not_a_python_project(
    tmp_path, capsys, files, stack, words
):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert gpuc(["plan", "--program", str(tmp_path), "--stack", stack]) == INPUT
    captured = capsys.readouterr()
    assert words in captured.err and "Traceback" not in captured.err
