"""availabilityZone left out in your own subnet (issue 29, section 5): the offline plan says where
the zone comes from and never shows a zone it did not read; `gpuc preflight` reads it with
DescribeSubnets (moto) and checks the stack there; `pulumi up` (the program with its network
lookup) puts the nodes in it; a zone given that is not the subnet's is refused with both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from conftest import ROOT
from moto import mock_aws
from test_existing_network import network

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.infra.aws.network_facts import describe_network
from gpu_cluster.infra.aws.preflight import (
    FAIL,
    Clients,
    check_existing_network,
    check_offering,
    in_subnet_zone,
)
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.errors import AwsError, ConfigError
from gpu_cluster.infra.plan.engine import UNKNOWN_TEXT, run_plan
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation import ResolvedCluster

VPC, SUBNET = "vpc-0a1b2c3d4e5f60789", "subnet-0a1b2c3d4e5f60789"
ZONE = "gpu-cluster:availabilityZone"
# every compute stage of stacks/ that takes one subnet, and a reservation the stack creates
# (AWS's CreateCapacityReservation takes the zone too)
COMPUTE_STACKS = ("dev", "experiment", "train")
RESERVATION = {
    "gpu-cluster:purchaseOption": "capacity-reservation",
    "gpu-cluster:capacityReservation": json.dumps({"create": True}),
}


def in_own_subnet(stack: str, vpc: str = VPC, subnet: str = SUBNET, **extra: str) -> dict:
    """The stack file's config in your VPC, with no availabilityZone."""
    config = load_stack_config(stack, ROOT)
    current = json.loads(config.get("gpu-cluster:network", "{}"))
    config["gpu-cluster:network"] = json.dumps({**current, "vpcId": vpc, "subnetIds": [subnet]})
    config.pop(ZONE, None)
    if "gpu-cluster:purchaseOption" in extra:
        config.pop("gpu-cluster:spot", None)  # settings of the purchase option replaced
    return {**config, **extra}


def zones_in(value: Any) -> Iterator[Any]:
    """Every availabilityZone input, at any depth (placement.availabilityZone, ...)."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "availabilityZone":
                yield item
            yield from zones_in(item)
    elif isinstance(value, list):
        for item in value:
            yield from zones_in(item)


def planned_zones(plan) -> list[Any]:
    return [z for r in plan.resources if r.urn in plan.states for z in zones_in(plan.state(r))]


# --- the offline plan ------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [{}, RESERVATION], ids=["as-filed", "created-reservation"])
@pytest.mark.parametrize("stack", COMPUTE_STACKS)
def test_the_offline_plan_names_the_subnet_and_shows_no_zone_it_did_not_read(stack, extra):
    plan = run_plan(stack, in_own_subnet(stack, **extra), preview=True)
    assert plan.error is None, plan.error
    notes = [w for w in plan.outputs["configWarnings"] if w.startswith("availabilityZone:")]
    assert len(notes) == 1 and f"the zone of {SUBNET}" in notes[0], notes
    assert "stand-in" in notes[0] and "gpuc preflight" in notes[0]
    zones = planned_zones(plan)
    assert zones, "no resource took a zone: the test would prove nothing"
    assert set(zones) == {UNKNOWN_TEXT}, zones  # as `pulumi preview` shows an unknown


@pytest.mark.parametrize("stack", COMPUTE_STACKS)
def test_the_stand_in_is_a_zone_that_offers_the_type(stack):
    """The offline checks (offering, spot price) hold for some zone of the region."""
    spec = load_spec(in_own_subnet(stack), stack)
    assert isinstance(spec, ResolvedCluster) and spec.zone_from_subnet == SUBNET
    catalog = load_catalog()
    assert spec.availability_zone in catalog.zones_offering(spec.region, spec.facts.instance_type)


def test_a_service_and_a_cluster_that_names_its_zone_have_no_stand_in():
    named = in_own_subnet("train", **{ZONE: "us-east-1b"})
    spec = load_spec(named, "train")
    assert isinstance(spec, ResolvedCluster)
    assert spec.zone_from_subnet is None and spec.availability_zone == "us-east-1b"
    assert not any(w.startswith("availabilityZone:") for w in spec.warnings)


def test_without_a_subnet_the_zone_is_still_required():
    config = load_stack_config("train", ROOT)
    config.pop(ZONE)
    with pytest.raises(ConfigError) as raised:
        load_spec(config, "train")
    assert [p.path for p in raised.value.problems] == [ZONE]


# --- `pulumi up`: the program reads the subnet's zone --------------------------------------


@mock_aws
@pytest.mark.parametrize("zone", load_catalog().zones_offering("us-east-1", "p4d.24xlarge"))
def test_up_puts_the_nodes_in_the_subnets_zone(zone):
    vpc, subnet, _ = network(zone=zone)
    plan = run_plan("train", in_own_subnet("train", vpc, subnet), network_lookup=describe_network)
    assert plan.error is None, plan.error
    assert set(planned_zones(plan)) == {zone}
    assert not any("stand-in" in w for w in plan.outputs["configWarnings"])


@mock_aws
def test_up_checks_the_type_in_the_subnets_zone():
    offered = load_catalog().zones_offering("us-east-1", "p4d.24xlarge")
    zone = next(z for z in load_catalog().zones("us-east-1") if z not in offered)
    vpc, subnet, _ = network(zone=zone)
    plan = run_plan("train", in_own_subnet("train", vpc, subnet), network_lookup=describe_network)
    assert isinstance(plan.error, ConfigError)
    (problem,) = plan.error.problems
    assert problem.path == ZONE and problem.received == zone
    assert f"{zone} is the zone of {subnet}: availabilityZone is not set" in problem.problem
    # the fix moves the subnet (availabilityZone would not move it), to a zone with the type
    assert f"name a subnet in {offered[0]} instead of {subnet}" in problem.fix
    assert "pulumi config set availabilityZone" not in problem.fix
    # and preflight says the same
    config = in_own_subnet("train", vpc, subnet)
    with pytest.raises(ConfigError) as raised:
        in_subnet_zone(load_spec(config, "train"), ec2_only(), config)  # type: ignore[arg-type]
    assert raised.value.problems == plan.error.problems


def test_up_never_creates_in_a_stand_in_zone_when_ec2_cannot_be_read():
    def unreadable(existing, region):
        raise AwsError("ec2:DescribeSubnets denied", code="UnauthorizedOperation")

    plan = run_plan("train", in_own_subnet("train"), network_lookup=unreadable)
    assert isinstance(plan.error, ConfigError), plan.error
    (problem,) = plan.error.problems
    assert problem.path == ZONE and SUBNET in problem.problem and "denied" in problem.problem
    assert "describe-subnets" in problem.fix and not plan.resources[1:]


# --- `gpuc preflight` ---------------------------------------------------------------------------


def ec2_only() -> Clients:
    return Clients(ec2=boto3.client("ec2", region_name="us-east-1"), sts=None, quotas=None, s3=None)


@mock_aws
@pytest.mark.parametrize("stack", COMPUTE_STACKS)
def test_preflight_reads_the_subnets_zone_and_checks_there(stack):
    vpc, subnet, _ = network(zone="us-east-1c")
    config = in_own_subnet(stack, vpc, subnet)
    stand_in = load_spec(config, stack)
    assert isinstance(stand_in, ResolvedCluster) and stand_in.zone_from_subnet == subnet
    spec = in_subnet_zone(stand_in, ec2_only(), config)
    assert spec.availability_zone == "us-east-1c" and spec.zone_from_subnet is None
    network_check = check_existing_network(spec, ec2_only())
    assert network_check is not None and network_check.status != FAIL, network_check
    offering = check_offering(spec, ec2_only())
    assert "us-east-1c" in offering.detail


@mock_aws
def test_preflight_refuses_a_subnet_ec2_does_not_know():
    config = in_own_subnet("train")
    with pytest.raises(ConfigError) as raised:
        in_subnet_zone(load_spec(config, "train"), ec2_only(), config)  # type: ignore[arg-type]
    (problem,) = raised.value.problems
    assert problem.path == "gpu-cluster:network.subnetIds[0]" and problem.received == SUBNET


@mock_aws
def test_a_zone_given_that_is_not_the_subnets_is_refused_with_both():
    vpc, subnet, _ = network(zone="us-east-1c")
    spec = load_spec(in_own_subnet("train", vpc, subnet, **{ZONE: "us-east-1a"}), "train")
    assert isinstance(spec, ResolvedCluster)
    check = check_existing_network(spec, ec2_only())
    assert check is not None and check.status == FAIL
    assert "us-east-1c" in check.detail and "us-east-1a" in check.detail
    assert check.fix == "pulumi config set availabilityZone us-east-1c"
    plan = run_plan(
        "train",
        in_own_subnet("train", vpc, subnet, **{ZONE: "us-east-1a"}),
        network_lookup=describe_network,
    )
    assert isinstance(plan.error, ConfigError)
    (problem,) = [p for p in plan.error.problems if "us-east-1c" in p.problem]
    assert "us-east-1a" in problem.problem


def test_gpuc_preflight_names_the_subnets_zone(moto_server, tmp_path):
    """`gpuc preflight` as a subprocess against a moto server: the header's zone is read."""
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": moto_server,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "PYTHONPATH": str(ROOT),
    }
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_server)
    vpc = ec2.create_vpc(CidrBlock="10.7.0.0/16")["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.7.0.0/24", AvailabilityZone="us-east-1d")[
        "Subnet"
    ]["SubnetId"]
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", project)
    train = (ROOT / "stacks" / "Pulumi.train.yaml").read_text()
    train = train.replace("  gpu-cluster:availabilityZone: us-east-1a\n", "")
    train = train.replace(
        "  gpu-cluster:network:\n",
        f"  gpu-cluster:network:\n    vpcId: {vpc}\n    subnetIds: [{subnet}]\n",
    )
    (project / "stacks" / "Pulumi.train.yaml").write_text(train)
    result = subprocess.run(
        [sys.executable, "-m", "gpu_cluster.infra.cli", "preflight", "--stack", "train"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Preflight for stack 'train' (us-east-1, us-east-1d):" in result.stdout, result.stderr
    assert "p4d.24xlarge is not offered in us-east-1d" in result.stdout or (
        "offered in us-east-1d" in result.stdout
    )


# --- a subnet another resource gives (the public component, infra/api.py) -------------------

SUBNET_FROM_A_RESOURCE = """
import pulumi_aws as aws
from gpu_cluster import GpuCluster, GpuClusterArgs
vpc = aws.ec2.Vpc("v", cidr_block="10.0.0.0/16")
subnet = aws.ec2.Subnet(
    "s", vpc_id=vpc.id, cidr_block="10.0.0.0/24", availability_zone="us-east-1c"
)
GpuCluster("train", GpuClusterArgs(instance_type="p4d.24xlarge", nodes=2,
    network={"vpc_id": vpc.id, "subnet_ids": [subnet.id]}, storage={"source": "create"}))
"""


def test_a_subnet_from_another_resource_takes_ec2s_zone_at_up(tmp_path, monkeypatch):
    """Its id is known only at `pulumi up`, so is its zone: the program asks EC2 then
    (aws.ec2.getSubnet); offline the zone is unknown."""
    from gpu_cluster.infra.plan import mocks

    asked: list[dict] = []
    answer = mocks.PlanMocks.call

    def call(self, args):
        if args.token == "aws:ec2/getSubnet:getSubnet":
            asked.append(dict(args.args))
            return {"id": args.args["id"], "availabilityZone": "us-east-1c"}, []
        return answer(self, args)

    monkeypatch.setattr(mocks.PlanMocks, "call", call)
    program = tmp_path / "__main__.py"
    program.write_text(SUBNET_FROM_A_RESOURCE)
    offline = run_plan("dev", {"aws:region": "us-east-1"}, program=program, preview=True)
    assert offline.error is None, offline.error
    assert set(planned_zones(offline)) - {"us-east-1c"} == {UNKNOWN_TEXT}  # the Subnet's own
    assert not asked

    def unused(existing, region):  # the ids are inputs: nothing to read before `up`
        raise AssertionError("read")

    up = run_plan("dev", {"aws:region": "us-east-1"}, program=program, network_lookup=unused)
    assert up.error is None, up.error
    assert len(asked) == 1 and asked[0]["id"]
    assert set(planned_zones(up)) == {"us-east-1c"}
