"""The names room (components/names.py): over generated (project, stack, region, cluster)
identities, with stack names of every character Pulumi allows, no two stacks share a name
where AWS needs it unique, and every name is within its AWS limits and characters. Then the
program's names, planned, for the cases that broke: two stacks sharing a clusterName, a stack
name with '_', '.', upper case and 100 characters, one stack in two regions."""

from __future__ import annotations

import json
import re

import pytest
from conftest import TRAIN_LIKE
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpu_cluster.components.aws_limits import LIMITS, SLR_SUFFIX_MAX, violations
from gpu_cluster.components.names import (
    DEFAULT_PROJECT,
    NAME_KINDS,
    StackIdentity,
    autoscaling_role_suffix,
    jobs_log_group,
    jobs_path,
    key_alias,
    parameter_root,
    secrets_path,
)
from gpu_cluster.components.user_data import user_data_text
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.validation.names import CLUSTER_NAME

# pulumi/pulumi sdk/go/common/tokens/stack_name.go: "may only contain alphanumeric, hyphens,
# underscores, or periods", at most 100; project names (tokens/project.go) likewise.
PULUMI_NAME = st.from_regex(r"\A[A-Za-z0-9_.\-]{1,100}\Z", fullmatch=True)
CLUSTER = st.from_regex(CLUSTER_NAME, fullmatch=True)
# the longest region names there are, and the common ones
REGIONS = st.sampled_from(
    ["us-east-1", "eu-west-1", "ap-southeast-4", "us-gov-west-1", "eusc-de-east-1"]
)


@st.composite
def identities(draw: st.DrawFn) -> StackIdentity:
    project = draw(st.one_of(st.just(DEFAULT_PROJECT), PULUMI_NAME))
    cluster = draw(CLUSTER)
    # often the default stack (stack name = cluster name), often a look-alike of another
    stack = draw(st.one_of(st.just(cluster), PULUMI_NAME, st.just(cluster.upper())))
    return StackIdentity(project, stack, draw(REGIONS), cluster)


def names_of(identity: StackIdentity) -> dict[str, str]:
    return {kind: spec.make(identity) for kind, spec in NAME_KINDS.items()}


def limited(resource_type: str, input_name: str) -> bool:
    return any(
        (limit.resource_type, limit.input_name) == (resource_type, input_name) for limit in LIMITS
    )


def test_every_kind_of_name_has_its_aws_limit_in_the_table():
    unlimited = {
        kind
        for kind, spec in NAME_KINDS.items()
        if not limited(spec.resource_type, spec.input_name)
    }
    # CloudWatch Logs' model and docs give a resource policy's name no bounds
    assert unlimited == {"node events policy"}


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(identities())
def test_every_name_is_within_its_aws_limits(identity):
    for kind, name in names_of(identity).items():
        spec = NAME_KINDS[kind]
        found = violations(spec.resource_type, {spec.input_name: name})
        assert not found, (kind, name, [v.message() for v in found])
    suffix = autoscaling_role_suffix(identity)
    assert "_" not in suffix and len(suffix) <= SLR_SUFFIX_MAX
    # SSM: at most 15 levels in a hierarchy
    assert jobs_path(identity).count("/") <= 15


def shared(a: StackIdentity, b: StackIdentity) -> list[tuple[str, str]]:
    """(namespace, name) pairs both stacks would create where AWS needs them unique."""
    same_region = a.region == b.region
    mine: dict[tuple[str, str], str] = {}
    for kind, name in names_of(a).items():
        spec = NAME_KINDS[kind]
        if spec.scope != "regional" or same_region:
            mine[(spec.namespace, name)] = kind
    return [
        key
        for kind, name in names_of(b).items()
        if (key := (NAME_KINDS[kind].namespace, name)) in mine
    ]


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(identities(), identities(), st.booleans(), st.booleans())
def test_distinct_stacks_never_share_a_name(a, b, same_cluster, same_region):
    # the hard cases on purpose: the same cluster name, the same region
    b = StackIdentity(
        b.project,
        b.stack,
        a.region if same_region else b.region,
        a.cluster if same_cluster else b.cluster,
    )
    assume(a != b)
    assert shared(a, b) == []


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(identities(), identities())
def test_no_stacks_parameters_lie_inside_another_stacks_hierarchy(a, b):
    """The nodes may read `<root>/*` (jobs, secrets): another stack's must not be there."""
    b = StackIdentity(b.project, b.stack, a.region, a.cluster)
    assume(a != b)
    theirs = [jobs_path(b), secrets_path(b), f"{parameter_root(b)}/{b.stack}/bucket"]
    assert not any(name.startswith(parameter_root(a) + "/") for name in theirs)


def test_the_default_stack_keeps_the_names_it_had():
    """Stack `train`, cluster `train`, this project: an upgrade replaces none of them."""
    train = StackIdentity(DEFAULT_PROJECT, "train", "us-east-1", "train")
    assert key_alias(train) == "alias/gpu-cluster/train-security"
    assert jobs_log_group(train) == "/gpu-cluster/train-jobs"
    assert jobs_path(train) == "/gpu-cluster/train/jobs"
    assert secrets_path(train) == "/gpu-cluster/train/secrets"


def test_one_stack_in_two_regions_gets_two_account_wide_names():
    east = StackIdentity(DEFAULT_PROJECT, "train", "us-east-1", "train")
    west = StackIdentity(DEFAULT_PROJECT, "train", "eu-west-1", "train")
    assert autoscaling_role_suffix(east) != autoscaling_role_suffix(west)
    assert NAME_KINDS["budget"].make(east) != NAME_KINDS["budget"].make(west)


# --- the program's names, planned ---------------------------------------------------------

ALIAS = "aws:kms/alias:Alias"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
PARAMETER = "aws:ssm/parameter:Parameter"
SLR = "aws:iam/serviceLinkedRole:ServiceLinkedRole"
BUDGET = "aws:budgets/budget:Budget"
SPOT_TRAIN = {
    **TRAIN_LIKE,
    "gpu-cluster:instanceType": "g5.xlarge",
    "gpu-cluster:nodes": "2",
    "gpu-cluster:efa": "false",
    "gpu-cluster:secrets": json.dumps({"HF_TOKEN": "hf_x"}),
    "gpu-cluster:budget": json.dumps({"monthlyUsd": 500}),
}


def plan_config(config: dict[str, str], stack: str):
    return run_plan(stack, config, secret_keys=["gpu-cluster:secrets"])


def physical_names(plan) -> set[tuple[str, str]]:
    found = set()
    for resource in plan.resources:
        for key in ("name", "customSuffix", "policyName", "dashboardName"):
            value = resource.inputs.get(key)
            if isinstance(value, str) and resource.type != "pulumi:pulumi:StackReference":
                found.add((resource.type, value))
    return found


def boot_env(plan) -> dict[str, str]:
    (template,) = plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    text = user_data_text(template.inputs["userData"])
    return dict(re.findall(r"^([A-Z_]+)=(\S*)$", text, re.M))


@pytest.fixture(scope="module")
def two_stacks_one_cluster_name():
    config = {**SPOT_TRAIN, "gpu-cluster:clusterName": "shared"}
    first, second = plan_config(config, "team-a"), plan_config(config, "team-b")
    assert first.error is None and second.error is None, (first.error, second.error)
    return first, second


def test_two_stacks_sharing_a_cluster_name_share_no_physical_name(two_stacks_one_cluster_name):
    first, second = two_stacks_one_cluster_name
    assert physical_names(first) & physical_names(second) == set()


def test_two_stacks_sharing_a_cluster_name_see_nothing_of_each_other(
    two_stacks_one_cluster_name,
):
    """Each stack's nodes read their own jobs and secrets only, and find their own peers."""
    first, second = (boot_env(plan) for plan in two_stacks_one_cluster_name)
    for key in ("JOBS_PATH", "SECRETS_PATH", "JOBS_LOG_GROUP", "STACK_ID", "ALERTS_PARAMETER"):
        assert first[key] != second[key], key
    assert not second["JOBS_PATH"].strip("'").startswith(first["JOBS_PATH"].strip("'") + "/")


def test_gpuc_uses_the_alias_and_paths_the_program_created(tmp_path, monkeypatch):
    """`gpuc run`'s key alias and job paths are the program's, whatever clusterName is (it
    used alias/gpu-cluster/<clusterName>-security, which a stack named otherwise lacks)."""
    from gpu_cluster.infra.cli import job_target

    config = {**SPOT_TRAIN, "gpu-cluster:clusterName": "shared"}
    (tmp_path / "Pulumi.yaml").write_text("name: gpu-cluster\nruntime: python\n")
    (tmp_path / "Pulumi.team-a.yaml").write_text(
        "config:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in config.items())
    )
    monkeypatch.chdir(tmp_path)
    identity, _, _ = job_target("team-a", None)
    assert identity == StackIdentity(DEFAULT_PROJECT, "team-a", "us-east-1", "shared")
    plan = plan_config(config, "team-a")
    assert plan.error is None, plan.error
    assert key_alias(identity) in {r.inputs["name"] for r in plan.of_type(ALIAS)}
    assert jobs_log_group(identity) in {r.inputs["name"] for r in plan.of_type(LOG_GROUP)}
    assert boot_env(plan)["JOBS_PATH"] == jobs_path(identity)


@pytest.mark.parametrize(
    "stack",
    ["Team_A.prod", "x" * 100, "UPPER.case_and-dots", "a_b"],
    ids=["underscore-dot", "100-chars", "upper", "slr-underscore"],
)
def test_a_stack_name_with_every_character_pulumi_allows_plans(stack):
    """The mock engine refuses every name over AWS's limits (components/aws_limits.py)."""
    plan = plan_config({**SPOT_TRAIN, "gpu-cluster:clusterName": "train"}, stack)
    assert plan.error is None, plan.error
    (role,) = plan.of_type(SLR)
    suffix = role.inputs["customSuffix"]
    # DecodeServiceLinkedRoleID splits on '_': a suffix with one reads back as "" and every
    # later `pulumi up` would replace the role create-first, on the same name
    assert "_" not in suffix and len(suffix) <= SLR_SUFFIX_MAX
    (alias,) = [r for r in plan.of_type(ALIAS) if r.inputs["name"].endswith("-security")]
    assert re.fullmatch(r"alias/[a-zA-Z0-9/_-]+", alias.inputs["name"])


def test_the_same_stack_in_two_regions_creates_no_account_wide_name_twice():
    """IAM and Budgets are account-wide: `train` in us-east-1 and in eu-west-1 each need their
    own service-linked role and budget (the budget `gpu-cluster-<stack>` and the suffix
    `<cluster>-security` collided on create)."""
    west = {
        **SPOT_TRAIN,
        "aws:region": "eu-west-1",
        "gpu-cluster:availabilityZone": "eu-west-1a",
    }
    east, other = plan_config(SPOT_TRAIN, "train"), plan_config(west, "train")
    assert east.error is None and other.error is None, (east.error, other.error)
    for type_, key in ((SLR, "customSuffix"), (BUDGET, "name")):
        (mine,), (theirs,) = east.of_type(type_), other.of_type(type_)
        assert mine.inputs[key] != theirs.inputs[key], type_
