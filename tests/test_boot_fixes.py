"""Fixes found by reviewing the boot path against AWS and Deep Learning AMI documentation."""

from __future__ import annotations

import base64
import json
import re

from conftest import ROOT, TRAIN_LIKE, plan_config

from components.cidr import AIR_GAPPED_ENDPOINTS, INTERFACE_ENDPOINTS
from infra.stack_files import load_stack_config

LT = "aws:ec2/launchTemplate:LaunchTemplate"
GROUP = "aws:autoscaling/group:Group"


def only(plan, type_):
    (found,) = plan.of_type(type_)
    return found


def user_data(plan) -> str:
    return base64.b64decode(only(plan, LT).inputs["userData"]).decode()


def test_efa_nodes_without_rdma_read_never_get_fi_efa_use_device_rdma():
    """g5 EFA devices have no RDMA read: FI_EFA_USE_DEVICE_RDMA=1 makes libfabric abort."""
    plan = plan_config(
        {**TRAIN_LIKE, "gpu-cluster:instanceType": "g5.12xlarge", "gpu-cluster:nodes": "2"},
        stack="g5efa",
    )
    assert plan.error is None, plan.error
    assert plan.outputs["efaInterfacesPerNode"] == 1
    script = user_data(plan)
    assert "EFA_INTERFACES=1" in script and 'echo "FI_PROVIDER=efa"' in script
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
    # the services boot actually calls (aws ec2 ..., aws autoscaling ...) all have one
    called = set(re.findall(r"^\s*(?:[A-Za-z_]+=\$\()?aws ([a-z0-9-]+) ", user_data(plan), re.M))
    assert called == {"ec2", "autoscaling"}  # the AWS CLI calls of the boot scripts
    assert called <= set(AIR_GAPPED_ENDPOINTS) | {"s3", "ssm"}
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
    profile = script.split("cat > /etc/profile.d/gpu-cluster.sh <<'PROFILE'\n")[1]
    profile = profile.split("\nPROFILE\n")[0]
    assert ". /etc/gpu-cluster/torchrun.env" in profile and "set -a" in profile
