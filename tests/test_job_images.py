"""`gpuc run --image`, the stack side: the jobs.repositories key (accepted, refused with its
path, value and fix), the node role's pull rights on exactly the named repositories (and no ECR
right at all without the key), the ECR endpoints of an air-gapped stack, the security pack on
it, and the check `gpuc run` makes before anything is uploaded or started (moto's ECR)."""

from __future__ import annotations

import json
import re

import boto3
import pytest
from botocore.loaders import Loader
from botocore.stub import Stubber
from conftest import ROOT, STACKS, plan_config, plan_stack
from moto import mock_aws

from gpu_cluster.components.cidr import ECR_ENDPOINTS
from gpu_cluster.components.images import REPOSITORY_NAME_MAX, REPOSITORY_NAME_PATTERN
from gpu_cluster.components.policies import ecr_pull_policy
from gpu_cluster.infra.audit.command import audit_stack, plan_resources
from gpu_cluster.infra.aws.job_image import (
    ImageContext,
    ImageError,
    check_image,
    image_context,
    parse_image,
)
from gpu_cluster.infra.config import NESTED_KEYS, load_spec
from gpu_cluster.infra.cost.model import estimate_cluster
from gpu_cluster.infra.errors import ConfigError, Problem
from gpu_cluster.infra.fixes import actionable, apply_fix
from gpu_cluster.infra.overrides import apply_overrides
from gpu_cluster.infra.spec import CONFIG_KEYS, OBJECT_KEYS
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation import ResolvedCluster
from gpu_cluster.infra.validation.stage_keys import stages_using
from gpu_cluster.policy.pack import audit

ACCOUNT = "123456789012"  # moto's
REGION = "us-east-1"
HOST = f"{ACCOUNT}.dkr.ecr.{REGION}.amazonaws.com"
DLC = "arn:aws:ecr:us-east-1:763104351884:repository/pytorch-training"
PULL = {"ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer"}
POLICY_TYPES = ("aws:iam/rolePolicy:RolePolicy", "aws:iam/policy:Policy")


def cluster_spec(config: dict[str, str], stack: str) -> ResolvedCluster:
    """load_spec for a compute stack, typed as one."""
    spec = load_spec(config, stack)
    assert isinstance(spec, ResolvedCluster)
    return spec


def train(jobs: object | None = None, stack: str = "train", **network: object) -> dict[str, str]:
    """A stack file's config with gpu-cluster:jobs (and network fields) as Pulumi hands them."""
    config = load_stack_config(stack, ROOT)
    if jobs is not None:
        config["gpu-cluster:jobs"] = jobs if isinstance(jobs, str) else json.dumps(jobs)
    if network:
        current = json.loads(config.get("gpu-cluster:network", "{}"))
        config["gpu-cluster:network"] = json.dumps({**current, **network})
    return config


def problems(config: dict[str, str], stack: str = "train") -> dict[str, Problem]:
    with pytest.raises(ConfigError) as info:
        cluster_spec(config, stack)
    return {p.path: p for p in info.value.problems}


def repo(index: int) -> str:
    return f"gpu-cluster:jobs.repositories[{index}]"


# --- the key ------------------------------------------------------------------------------


def test_the_key_is_registered_everywhere_a_key_is():
    assert "jobs" in CONFIG_KEYS and "jobs" in OBJECT_KEYS
    assert stages_using("jobs") == ("dev box", "experiment", "train")
    assert NESTED_KEYS["jobs"] == frozenset({"repositories"})
    keys = (ROOT / "docs" / "concepts" / "configuration.md").read_text()
    (row,) = [line for line in keys.splitlines() if line.startswith("| `jobs` |")]
    assert "repositories" in row and "(../containers.md)" in row
    guide = (ROOT / "docs" / "containers.md").read_text()
    assert "jobs.repositories" in guide and "ecr:GetAuthorizationToken" in guide


def test_names_and_arns_are_accepted_as_configured():
    spec = cluster_spec(train({"repositories": ["train", "team/base", DLC]}), "train")
    assert spec.image_repositories == ("train", "team/base", DLC)
    assert cluster_spec(train(), "train").image_repositories == ()
    assert cluster_spec(train({"repositories": []}), "train").image_repositories == ()


def test_the_name_rule_is_botocores():
    shape = Loader().load_service_model("ecr", "service-2")["shapes"]["RepositoryName"]
    assert shape["pattern"] == REPOSITORY_NAME_PATTERN
    assert (shape["min"], shape["max"]) == (2, REPOSITORY_NAME_MAX)


@pytest.mark.parametrize(
    ("repositories", "index", "words", "fix"),
    [
        (["*"], 0, "wildcards are refused", "jobs.repositories[0] <name>"),
        (["team/*"], 0, "least privilege", "jobs.repositories[0] team/<name>"),
        ([f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/*"], 0, "wildcards", "<name>"),
        (["Train"], 0, "not an ECR repository name", "set --path jobs.repositories[0] train"),
        ([f"{HOST}/train:v3"], 0, "not an ECR repository name", "jobs.repositories[0] train"),
        (
            [f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/team/base:v1"],
            0,
            "not an ECR repository name",
            f"arn:aws:ecr:us-west-2:{ACCOUNT}:repository/team/base",
        ),
        (["a"], 0, "not an ECR repository name", "rm --path jobs.repositories[0]"),
        (["arn:aws:ecr:us-east-1:1234:repository/train"], 0, "not an ECR repository ARN", "copy"),
        ([f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/T"], 0, "repository name 'T'", "copy"),
        (
            [f"arn:aws-cn:ecr:cn-north-1:{ACCOUNT}:repository/train"],
            0,
            "partition aws-cn",
            "rm --path jobs.repositories[0]",
        ),
        (["train", "base", "train"], 2, "listed twice", "rm --path jobs.repositories[2]"),
    ],
)
def test_a_wrong_repository_is_refused_with_its_path_value_and_fix(repositories, index, words, fix):
    found = problems(train({"repositories": repositories}))
    problem = found[repo(index)]
    assert problem.received == repositories[index]
    assert words in problem.problem, problem.problem
    assert fix in problem.fix, problem.fix
    assert problem.allowed


def test_the_shape_of_the_key_is_checked():
    found = problems(train({"repositories": "train"}))["gpu-cluster:jobs.repositories"]
    assert found.received == "train" and found.allowed == "a list"
    assert "jobs.repositories[0] train" in found.fix
    typo = problems(train({"repos": ["train"]}))["gpu-cluster:jobs.repos"]
    assert "unknown key 'repos'" in typo.problem and typo.allowed == "repositories"
    plain = problems(train("train"))["gpu-cluster:jobs"]
    assert "expected an object" in plain.problem


def test_too_many_repositories_for_the_roles_inline_policies():
    names = [f"repo-{i:02d}" for i in range(22)]
    problem = problems(train({"repositories": names}))["gpu-cluster:jobs.repositories"]
    assert problem.received == "22 repositories" and "10,240" in problem.problem
    assert "at most 20" in problem.allowed


def test_only_training_stacks_take_the_key():
    data = problems(train({"repositories": ["train"]}, stack="data"), "data")["gpu-cluster:jobs"]
    assert "the data stage" in data.problem and data.fix == "pulumi config rm jobs"
    serving = train({"repositories": ["train"]}, stack="inference")
    found = problems(serving, "inference")["gpu-cluster:jobs"]
    assert "the inference stage" in found.problem and "cluster" in found.problem
    assert found.received == {"repositories": ["train"]} and found.fix == "pulumi config rm jobs"


def test_without_a_nat_gateway_a_repository_of_another_region_is_refused():
    other = f"arn:aws:ecr:us-west-2:{ACCOUNT}:repository/train"
    problem = problems(train({"repositories": [other]}, natGateway=False))[repo(0)]
    assert "VPC endpoints of us-east-1" in problem.problem
    assert problem.fix.startswith("pulumi config set --path network.natGateway true")
    assert cluster_spec(train({"repositories": [other]}), "train").image_repositories == (other,)


@pytest.mark.parametrize(
    "config",
    [
        train({"repositories": ["Train"]}),
        train({"repositories": [f"{HOST}/train:v3"]}),
        train({"repositories": ["train", "train"]}),
        train({"repositories": "train"}),
        train({"repositories": [f"r{i:02d}" for i in range(21)]}),
        train(
            {"repositories": [f"arn:aws:ecr:us-west-2:{ACCOUNT}:repository/x1"]}, natGateway=False
        ),
    ],
    ids=["case", "image uri", "twice", "string", "too many", "other region without nat"],
)
def test_the_fixes_work(config):
    (problem,) = problems(config).values()
    assert actionable(problem.fix), problem.fix
    cluster_spec(apply_fix(config, problem.fix), "train")  # no problem left


# --- the plan: pull rights on exactly the named repositories ----------------------------------


def policy_documents(plan) -> list[tuple[str, dict]]:
    return [
        (r.name, json.loads(plan.state(r)["policy"]))
        for type_ in POLICY_TYPES
        for r in plan.of_type(type_)
    ]


def ecr_statements(plan) -> list[tuple[str, dict]]:
    found = []
    for name, document in policy_documents(plan):
        for statement in document["Statement"]:
            actions = statement["Action"]
            actions = [actions] if isinstance(actions, str) else actions
            if any(a.lower().startswith("ecr:") for a in actions):
                found.append((name, statement))
    return found


@pytest.fixture(scope="module")
def pull_plan():
    plan = plan_config(train({"repositories": ["train", "team/base", DLC]}), stack="train")
    assert plan.error is None, plan.error
    return plan


def test_the_node_role_may_pull_from_exactly_the_named_repositories(pull_plan):
    policy = pull_plan.named("train-security-image-pull-access")
    assert policy.parent.endswith("::train-security")
    role = pull_plan.state(pull_plan.named("train-security-node-role"))
    assert pull_plan.state(policy)["role"] == role["id"]
    statements = ecr_statements(pull_plan)
    assert {name for name, _ in statements} == {"train-security-image-pull-access"}
    token = [s for _, s in statements if s["Resource"] == "*"]
    assert token == [
        {
            "Sid": "AuthenticateToEcr",
            "Effect": "Allow",
            "Action": "ecr:GetAuthorizationToken",
            "Resource": "*",
        }
    ]
    (pull,) = [s for _, s in statements if s["Resource"] != "*"]
    assert set(pull["Action"]) == PULL and "Condition" not in pull
    assert sorted(pull["Resource"]) == sorted(
        [
            f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/train",
            f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/team/base",
            DLC,
        ]
    )


def test_nodes_launch_after_their_pull_rights(pull_plan):
    policy = pull_plan.named("train-security-image-pull-access")
    (group,) = pull_plan.of_type("aws:autoscaling/group:Group")
    assert policy.urn in group.dependencies


@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_without_the_key_has_no_ecr_right_and_no_ecr_endpoint(stack):
    plan = plan_stack(stack)
    assert plan.error is None, plan.error
    assert ecr_statements(plan) == []
    every_policy = json.dumps([document for _, document in policy_documents(plan)]).lower()
    assert '"ecr:' not in every_policy
    endpoints = [r.inputs["serviceName"] for r in plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")]
    assert not [e for e in endpoints if ".ecr." in e]


def test_the_pull_policy_needs_a_repository():
    with pytest.raises(ValueError):
        ecr_pull_policy([])


def test_the_security_pack_passes_with_pull_rights(pull_plan):
    findings = audit(plan_resources(pull_plan))
    assert [(f.control.id, f.failures) for f in findings if f.failures] == []
    checked = {
        r for f in findings if f.control.name == "iam-21-no-service-wildcards" for r in f.checked
    }
    assert "train-security-image-pull-access" in checked


def test_gpuc_audit_passes_with_the_key_set_on_the_command_line():
    overrides = [
        ("--set-path", "jobs.repositories[0]=train"),
        ("--set-path", f"jobs.repositories[1]={DLC}"),
    ]
    findings = audit_stack("train", overrides)
    assert [(f.control.id, f.failures) for f in findings if f.failures] == []


def test_an_air_gapped_stack_gets_the_ecr_endpoints_only_with_repositories():
    def services(config):
        plan = plan_config(config, stack="dev")
        assert plan.error is None, plan.error
        names = [r.inputs["serviceName"] for r in plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")]
        return {n.removeprefix(f"com.amazonaws.{REGION}.") for n in names}, plan

    with_repos, _ = services(train({"repositories": ["train"]}, stack="dev", natGateway=False))
    without, _ = services(train(stack="dev", natGateway=False))
    assert with_repos - without == set(ECR_ENDPOINTS)
    spec = cluster_spec(train({"repositories": ["train"]}, stack="dev", natGateway=False), "dev")
    (line,) = [c for c in estimate_cluster(spec).lines if c.item == "VPC interface endpoints"]
    assert line.detail.startswith("10 endpoints") and "ecr.api, ecr.dkr" in line.detail
    with_nat, _ = services(train({"repositories": ["train"]}, stack="dev"))
    assert not with_nat & set(ECR_ENDPOINTS)  # through the NAT gateway


# --- gpuc run --image: the check before anything is uploaded or started --------------------

MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": 7023,
            "digest": "sha256:" + "a" * 64,
        },
        "layers": [
            {
                "mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                "size": 32654,
                "digest": "sha256:" + "b" * 64,
            }
        ],
    }
)


def context(*repositories: str, internet: bool = True, account: str = ACCOUNT) -> ImageContext:
    return ImageContext(REGION, account, repositories, internet, "train")


@pytest.fixture
def ecr():
    with mock_aws():
        client = boto3.client("ecr", region_name=REGION)
        client.create_repository(repositoryName="train")
        client.create_repository(repositoryName="team/base")
        pushed = client.put_image(repositoryName="train", imageManifest=MANIFEST, imageTag="v3")
        client.put_image(repositoryName="team/base", imageManifest=MANIFEST, imageTag="latest")
        setattr(client, "digest", pushed["image"]["imageId"]["imageDigest"])  # noqa: B010
        yield client


def refused(image: str, ctx: ImageContext, ecr=None) -> ImageError:
    with pytest.raises(ImageError) as info:
        check_image(image, ctx, ecr)
    return info.value


def test_a_pushed_image_of_a_named_repository_passes(ecr):
    ref = check_image(f"{HOST}/train:v3", context("train"), ecr)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (HOST, "train", "v3", "")
    assert (ref.ecr_account, ref.ecr_region, ref.is_ecr) == (ACCOUNT, REGION, True)
    by_digest = check_image(f"{HOST}/train@{ecr.digest}", context("train"), ecr)
    assert by_digest.digest == ecr.digest and by_digest.reference == ecr.digest
    latest = check_image(f"{HOST}/team/base", context("team/base", internet=False), ecr)
    assert latest.reference == "latest"
    arn = f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/train"
    assert check_image(f"{HOST}/train:v3", context(arn, account=""), ecr).repository == "train"


def test_an_unknown_tag_or_digest_is_an_unknown_image(ecr):
    error = refused(f"{HOST}/train:v4", context("train"), ecr)
    assert error.code == 3 and "unknown image" in str(error) and "tag 'v4'" in str(error)
    assert "docker push" in str(error)
    assert f"aws ecr list-images --region {REGION} --repository-name train" in str(error)
    digest = "sha256:" + "c" * 64
    error = refused(f"{HOST}/train@{digest}", context("train"), ecr)
    assert error.code == 3 and f"digest {digest}" in str(error)


def test_an_unknown_repository_is_an_unknown_image(ecr):
    error = refused(f"{HOST}/missing:v1", context("train", "missing"), ecr)
    assert error.code == 3 and "unknown image" in str(error)
    assert "no ECR repository 'missing'" in str(error)
    assert "aws ecr create-repository --region us-east-1 --repository-name missing" in str(error)


def test_a_repository_the_stack_does_not_name_is_refused_with_the_exact_fix(ecr):
    error = refused(f"{HOST}/train:v3", context("team/base"), ecr)
    assert error.code == 3
    message = str(error)
    assert (
        "does not name the ECR repository 'train'" in message and "(it names: team/base)" in message
    )
    assert "pull rights only for the repositories it names" in message
    assert "pulumi config set --path 'jobs.repositories[1]' train -s train" in message
    assert "then pulumi up -s train" in message
    # the fix, followed, lets the image through
    config = train({"repositories": ["team/base"]})
    fixed = apply_overrides(config, [("--set-path", "jobs.repositories[1]=train")])
    assert check_image(f"{HOST}/train:v3", image_context(fixed, REGION, ACCOUNT), ecr)


def test_a_name_means_the_stacks_own_account_and_region():
    other_account = "210987654321.dkr.ecr.us-east-1.amazonaws.com/train:v3"
    error = refused(other_account, context("train"))
    assert "arn:aws:ecr:us-east-1:210987654321:repository/train" in str(error)
    other_region = f"{ACCOUNT}.dkr.ecr.us-west-2.amazonaws.com/train:v3"
    error = refused(other_region, context("train"))
    assert f"arn:aws:ecr:us-west-2:{ACCOUNT}:repository/train" in str(error)
    named = f"arn:aws:ecr:us-west-2:{ACCOUNT}:repository/train"
    assert check_image(other_region, context(named)).ecr_region == "us-west-2"
    error = refused(other_region, context(named, internet=False))
    assert error.code == 3 and "no NAT gateway" in str(error) and "us-west-2" in str(error)


@pytest.mark.parametrize(
    "image",
    [
        "nvcr.io/nvidia/pytorch:24.07-py3",
        "python:3.11",
        "public.ecr.aws/deep-learning-containers/pytorch:2.11-cu130-amzn2023",
        "ghcr.io/org/train:v1",
    ],
)
def test_an_image_outside_ecr_needs_the_internet(image):
    error = refused(image, context("train", internet=False))
    assert error.code == 3 and "no NAT gateway" in str(error)
    assert f"push the image to ECR in {REGION}" in str(error) and "docker push" in str(error)
    assert "pulumi config set --path network.natGateway true -s train" in str(error)
    assert check_image(image, context(internet=True)).is_ecr is False


@pytest.mark.parametrize(
    ("image", "words"),
    [
        ("", "empty"),
        ("train v3", "spaces"),
        ("Train:v3", "lowercase"),
        ("nvcr.io/NVIDIA/pytorch", "lowercase"),
        ("train:.v3", "the tag '.v3'"),
        ("train:" + "x" * 129, "1-128"),
        ("train@sha256:1234", "64 lowercase hex"),
        ("train@md5:" + "a" * 32, "sha256:"),
        ("a//b", "repository"),
        ("-train", "repository"),
        ("bad_host.example.com/train", "registry host"),
        (f"{HOST}/t", "ECR repository name"),
    ],
)
def test_a_malformed_reference_is_a_usage_error_with_an_example(image, words):
    with pytest.raises(ImageError) as info:
        parse_image(image)
    assert info.value.code == 2
    message = str(info.value)
    assert repr(image) in message and words in message, message
    assert f"e.g. {HOST}/train:v3" in message


def test_references_parse_as_docker_reads_them():
    ref = parse_image("python")
    assert (ref.registry, ref.repository, ref.reference, ref.is_ecr) == (
        "docker.io",
        "library/python",
        "latest",
        False,
    )
    ref = parse_image("localhost:5000/team/train:v1")
    assert (ref.registry, ref.repository, ref.tag) == ("localhost:5000", "team/train", "v1")
    ref = parse_image(f"{ACCOUNT}.dkr.ecr.cn-north-1.amazonaws.com.cn/team/base:v1")
    assert (ref.ecr_account, ref.ecr_region) == (ACCOUNT, "cn-north-1")
    ref = parse_image(f"{ACCOUNT}.dkr-ecr.eu-west-1.on.aws/train:v1")
    assert ref.ecr_region == "eu-west-1"
    assert parse_image(
        "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312-cu126-ubuntu22.04-ec2"
    ).is_ecr


def test_a_denied_describe_images_names_the_action():
    client = boto3.client("ecr", region_name=REGION)
    with Stubber(client) as stub:
        stub.add_client_error(
            "describe_images", "AccessDeniedException", "User is not authorized", 400
        )
        error = refused(f"{HOST}/train:v3", context("train"), client)
    assert error.code == 4 and "ecr:DescribeImages" in str(error)
    assert f"arn:aws:ecr:{REGION}:{ACCOUNT}:repository/train" in str(error)


def test_the_describe_request_is_one_the_ecr_api_takes(ecr):
    """Checked against botocore's model (botocore and moto do not enforce patterns)."""
    shapes = Loader().load_service_model("ecr", "service-2")["shapes"]
    sent = []
    ecr.meta.events.register(
        "provide-client-params.ecr.DescribeImages", lambda params, **_: sent.append(params)
    )
    check_image(f"{HOST}/team/base@{ecr.digest}", context("team/base"), ecr)
    (params,) = sent
    assert re.fullmatch(shapes["RegistryId"]["pattern"], params["registryId"])
    assert re.fullmatch(shapes["RepositoryName"]["pattern"], params["repositoryName"])
    assert params["imageIds"] == [{"imageDigest": ecr.digest}]


def test_the_context_comes_from_the_stack_file():
    settings = load_stack_config("train", ROOT)
    assert image_context(settings, REGION, ACCOUNT, "train") == ImageContext(
        REGION, ACCOUNT, (), True, "train"
    )
    settings = apply_overrides(
        settings,
        [
            ("--set-path", "jobs.repositories[0]=train"),
            ("--set-path", "network.natGateway=false"),
        ],
    )
    ctx = image_context(settings, REGION, "")
    assert (ctx.repositories, ctx.internet, ctx.account) == (("train",), False, "")
    nested = {
        "gpu-cluster:jobs": {"repositories": ["a1"]},
        "gpu-cluster:network": {"publicIp": "true", "natGateway": False},
    }
    assert image_context(nested, REGION, ACCOUNT).repositories == ("a1",)
    assert image_context(nested, REGION, ACCOUNT).internet is True  # public IPs
    assert image_context({"gpu-cluster:jobs": "not json"}, REGION, "").repositories == ()


@mock_aws
def test_your_own_air_gapped_vpc_needs_the_ecr_endpoints_too():
    from test_existing_network import network, planned, train_in
    from test_existing_network import problems_of as plan_problems

    vpc, subnet, _ = network(nat=False)
    config = {
        **train_in(vpc, subnet, natGateway=False),
        "gpu-cluster:jobs": json.dumps({"repositories": ["train"]}),
    }
    problem = plan_problems(planned(config))["network.createEndpoints"]
    assert "ecr.api" in problem.problem and "ecr.dkr" in problem.problem
    plan = planned(apply_fix(config, problem.fix))
    assert plan.error is None, plan.error
    services = {r.inputs["serviceName"] for r in plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")}
    assert {f"com.amazonaws.{REGION}.{s}" for s in ECR_ENDPOINTS} <= services
    without = {k: v for k, v in config.items() if k != "gpu-cluster:jobs"}
    problem = plan_problems(planned(without))["network.createEndpoints"]
    assert "ecr." not in problem.problem  # not asked of a stack without images
