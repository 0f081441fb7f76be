"""Fixes found by reviewing the boot path against AWS and Deep Learning AMI documentation."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ROOT, TRAIN_LIKE, only, plan_config

from gpu_cluster.components.boot_bundle import boot_bundle
from gpu_cluster.components.cidr import AIR_GAPPED_ENDPOINTS, INTERFACE_ENDPOINTS
from gpu_cluster.components.dlami import dlami_supports
from gpu_cluster.components.user_data import decoded_user_data
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.stack_files import load_stack_config

LT = "aws:ec2/launchTemplate:LaunchTemplate"
GROUP = "aws:autoscaling/group:Group"


def user_data(plan) -> str:
    return decoded_user_data(only(plan, LT).inputs["userData"])


def test_efa_nodes_without_rdma_read_never_get_fi_efa_use_device_rdma():
    """g5 EFA devices have no RDMA read: FI_EFA_USE_DEVICE_RDMA=1 makes libfabric abort."""
    plan = plan_config(
        {**TRAIN_LIKE, "gpu-cluster:instanceType": "g5.12xlarge", "gpu-cluster:nodes": "2"},
        stack="g5efa",
    )
    assert plan.error is None, plan.error
    assert plan.outputs["efaInterfacesPerNode"] == 1
    script = user_data(plan)
    assert "EFA_INTERFACES=1" in script and 'echo "FI_PROVIDER=' not in script  # the plugin's
    assert 'echo "FI_EFA_USE_DEVICE_RDMA' not in script


def test_air_gapped_cluster_has_an_endpoint_for_every_api_boot_calls():
    config = {**TRAIN_LIKE, "gpu-cluster:network": json.dumps({"natGateway": False})}
    plan = plan_config(config, stack="airgap")
    assert plan.error is None, plan.error
    assert plan.of_type("aws:ec2/natGateway:NatGateway") == []
    services = {
        r.inputs["serviceName"].rsplit(".", 1)[1]
        for r in plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    }
    assert services == {"s3", *INTERFACE_ENDPOINTS, *AIR_GAPPED_ENDPOINTS}
    # the services boot actually calls (aws ec2 ..., aws autoscaling ...) all have one: the
    # user data's scripts and the boot bundle's (the jobs program, fetched from the bucket)
    scripts = user_data(plan) + boot_bundle()
    called = set(
        re.findall(r"^\s*(?:[A-Za-z_]+=\$\()?(?:if ! |\{ )?aws ([a-z0-9-]+) ", scripts, re.M)
    )
    # the AWS CLI calls of the boot scripts (ssm: the training jobs, gpu-cluster-jobs)
    # (sns: a partial gang's alert, gpu-cluster-nodes; s3: the bundle and a job's code;
    # ecr: a job's image, only from repositories the stack names, which bring their endpoints)
    assert called == {"ec2", "autoscaling", "cloudwatch", "ssm", "sns", "s3", "ecr"}
    called.remove("ecr")
    endpoint_of = {"ec2": "ec2", "autoscaling": "autoscaling", "cloudwatch": "monitoring"}
    endpoint_of |= {"ssm": "ssm", "sns": "sns", "s3": "s3"}
    # the CloudWatch agent ships the jobs' output to CloudWatch Logs
    assert "logs" in AIR_GAPPED_ENDPOINTS and "JOBS_LOG_GROUP" in user_data(plan)
    assert {endpoint_of[c] for c in called} <= {"s3", *AIR_GAPPED_ENDPOINTS, *INTERFACE_ENDPOINTS}
    with_nat = plan_config(TRAIN_LIKE, stack="nat")
    assert len(with_nat.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")) == 1 + len(INTERFACE_ENDPOINTS)


def test_nodes_launch_only_after_what_their_boot_needs(train_plan):
    group = only(train_plan, GROUP)
    needed = [
        "train-network-nodes-efa-in",
        "train-network-nodes-efa-out",
        "train-network-nodes-egress-443",
        "train-network-nat",
        "train-network-private-rta",
        "train-network-s3-endpoint",
        "train-network-ssm-endpoint",
        "train-network-ssmmessages-endpoint",
        "train-network-ec2messages-endpoint",
        "train-security-node-access",
        "train-security-node-ssm",
    ]
    for name in needed:
        assert train_plan.named(name).urn in group.dependencies, name
    dev = plan_config(load_stack_config("dev", ROOT), stack="dev")
    node = only(dev, "aws:ec2/instance:Instance")
    assert dev.named("dev-security-node-access").urn in node.dependencies


def test_login_shells_see_the_torchrun_environment(train_plan):
    script = user_data(train_plan)
    profile = script.split("cat > \"$R/etc/profile.d/gpu-cluster.sh\" <<'PROFILE'\n")[1]
    profile = profile.split("\nPROFILE\n")[0]
    assert ". /etc/gpu-cluster/torchrun.env" in profile and "set -a" in profile


@pytest.mark.parametrize(
    ("instance_type", "zone", "allowed"),
    [
        ("p3dn.24xlarge", "us-east-1c", "families it supports: g4dn, g5, g6, gr6, g6e, p4d"),
        ("g7e.12xlarge", "us-east-1a", "families it supports: g4dn, g5"),
        ("p6-b300.48xlarge", "us-east-1a", "families it supports: g4dn"),
        ("g6f.xlarge", "us-east-1a", "L4 types it supports: g6.12xlarge"),
    ],
)
def test_types_the_deep_learning_ami_does_not_support_are_rejected(instance_type, zone, allowed):
    config = {
        **TRAIN_LIKE,
        "gpu-cluster:instanceType": instance_type,
        "gpu-cluster:availabilityZone": zone,
        "gpu-cluster:nodes": "1",
    }
    with pytest.raises(ConfigError) as error:
        load_spec(config, "test")
    problems = [p for p in error.value.problems if "Deep Learning AMI" in p.problem]
    assert len(problems) == 1, error.value
    (problem,) = problems
    assert problem.path == "gpu-cluster:instanceType" and problem.received == instance_type
    assert problem.allowed.startswith(allowed)
    assert "ami.id" in problem.fix
    # an AMI of the user's own is the way to run it
    own = {
        **config,
        "gpu-cluster:ami": json.dumps({"id": "ami-0123456789abcdef0", "architecture": "x86_64"}),
    }
    try:
        load_spec(own, "test")
    except ConfigError as other:
        assert not any("Deep Learning AMI" in p.problem for p in other.problems)


def test_a_gpu_request_is_steered_to_a_type_the_ami_supports():
    """A cheaper type the default AMI cannot boot loses to a supported one."""
    from dataclasses import replace

    from gpu_cluster.components.catalog import Catalog, load_catalog
    from gpu_cluster.infra.config import parse_spec
    from gpu_cluster.infra.validation import ResolvedCluster, resolve

    real = load_catalog()
    unsupported = real.instance_types["g7e.2xlarge"]  # priced in the snapshot, not a DLAMI family
    supported = replace(unsupported, instance_type="g6e.unpriced")  # a DLAMI family, no price
    catalog = Catalog(
        instance_types={t.instance_type: t for t in (unsupported, supported)},
        offerings={"us-east-1": {"us-east-1a": frozenset({"g7e.2xlarge", "g6e.unpriced"})}},
    )
    config = {k: v for k, v in TRAIN_LIKE.items() if k != "gpu-cluster:instanceType"}
    config |= {"gpu-cluster:gpu": unsupported.gpu_model, "gpu-cluster:nodes": "1"}
    spec, problems, _ = parse_spec(config)
    assert not problems and spec is not None
    resolved, problems = resolve(spec, "test", catalog)
    assert problems == [] and isinstance(resolved, ResolvedCluster)
    assert resolved.facts.instance_type == "g6e.unpriced"
    assert not dlami_supports("g7e.2xlarge", "x86_64")


def test_two_stacks_sharing_a_cluster_name_get_distinct_account_wide_names(train_plan):
    other = plan_config({**TRAIN_LIKE, "gpu-cluster:clusterName": "train"}, stack="team2")
    assert other.error is None, other.error

    def names(plan) -> set[str]:
        return {
            plan.named("train-security-key-alias").inputs["name"],
            plan.named("train-network-flow-logs").inputs["name"],
            plan.named("train-nodes-events").inputs["name"],
            plan.named("train-nodes-events-policy").inputs["policyName"],
            plan.named("train-security-autoscaling-role").inputs["customSuffix"],
        }

    ours, theirs = names(train_plan), names(other)
    assert ours.isdisjoint(theirs)
    # a stack named like its cluster keeps the names it always had
    assert "alias/gpu-cluster/train-security" in ours
    # the other: the cluster, its stack's slug and a digest of the stack id (components/names.py)
    alias = r"^alias/gpu-cluster/train-team2-[0-9a-f]{8}-security$"
    assert re.search(alias, "\n".join(theirs), re.M)
    tags = {t["key"]: t["value"] for t in only(other, GROUP).inputs["tags"]}
    assert tags["gpu-cluster:name"] == "train" and tags["gpu-cluster:stack"] == "team2"


def test_the_root_volume_is_never_smaller_than_the_amis_snapshot():
    from gpu_cluster.infra.plan.mocks import MOCK_ROOT_SNAPSHOT_GIB

    def root_size(size: int) -> int:
        plan = plan_config({**TRAIN_LIKE, "gpu-cluster:rootVolume": json.dumps({"sizeGib": size})})
        assert plan.error is None, plan.error
        return only(plan, LT).inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"]

    assert root_size(50) == MOCK_ROOT_SNAPSHOT_GIB  # raised to the snapshot (with a warning)
    assert root_size(300) == 300


def test_root_snapshot_size_is_read_from_the_root_mapping():
    from gpu_cluster.components.ami import root_snapshot_gib

    mappings = [
        {"device_name": "/dev/sdb", "ebs": {"volume_size": "900"}},
        {"device_name": "/dev/sda1", "ebs": {"volume_size": "140"}},
    ]
    assert root_snapshot_gib(mappings, "/dev/sda1") == 140
    assert root_snapshot_gib([], "/dev/sda1") == 0
