"""A cluster in the user's own VPC (network.vpcId, network.subnetIds): nothing of the network is
created, the nodes land in the named subnet, and what can go wrong is a message - offline from
the config, and from what EC2 says (moto) in the program and in `gpuc preflight`."""

from __future__ import annotations

import json

import boto3
import pytest
from conftest import ROOT, TRAIN_LIKE, only
from moto import mock_aws

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.components.network import ExistingNetwork
from gpu_cluster.components.nic_layout import ip_addresses_per_node, nic_layout
from gpu_cluster.infra.aws.network_facts import describe_network
from gpu_cluster.infra.aws.preflight import FAIL, PASS, WARN, Clients, check_existing_network
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.errors import ConfigError, Problem
from gpu_cluster.infra.fixes import apply_fix
from gpu_cluster.infra.network_check import with_subnet_zone
from gpu_cluster.infra.overrides import apply_overrides
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.spec import NetworkSpec
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation import ResolvedCluster
from gpu_cluster.infra.validation.network_facts import (
    Endpoint,
    NetworkFacts,
    SubnetFacts,
    check_network_facts,
    needs_for,
)

VPC, SUBNET = "vpc-0a1b2c3d4e5f60789", "subnet-0a1b2c3d4e5f60789"
NETWORK_TYPES = (
    "aws:ec2/vpc:Vpc",
    "aws:ec2/subnet:Subnet",
    "aws:ec2/internetGateway:InternetGateway",
    "aws:ec2/natGateway:NatGateway",
    "aws:ec2/eip:Eip",
    "aws:ec2/routeTable:RouteTable",
    "aws:ec2/routeTableAssociation:RouteTableAssociation",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
    "aws:ec2/flowLog:FlowLog",
    "aws:ec2/vpcEndpoint:VpcEndpoint",
)


def cluster_spec(config: dict[str, str], stack: str) -> ResolvedCluster:
    """load_spec for a compute stack, typed as one."""
    spec = load_spec(config, stack)
    assert isinstance(spec, ResolvedCluster)
    return spec


def train_in(vpc: str, *subnets: str, **network: object) -> dict[str, str]:
    """The train stack, as the acceptance command sets it: vpcId and subnetIds by --set-path."""
    config = load_stack_config("train", ROOT)
    pairs = [("--set-path", f"network.vpcId={vpc}")]
    pairs += [("--set-path", f"network.subnetIds[{i}]={s}") for i, s in enumerate(subnets)]
    current = json.loads(apply_overrides(config, pairs)["gpu-cluster:network"])
    return {**config, "gpu-cluster:network": json.dumps({**current, **network})}


def problems_of(plan) -> dict[str, Problem]:
    assert isinstance(plan.error, ConfigError), plan.error
    assert not plan.resources or all(r.type.startswith("pulumi:") for r in plan.resources)
    return {p.path.split(":", 1)[1]: p for p in plan.error.problems}


def test_the_acceptance_command_creates_no_network_and_launches_into_the_subnet():
    plan = run_plan("train", train_in(VPC, SUBNET))
    assert plan.error is None, plan.error
    for network_type in NETWORK_TYPES:
        assert not plan.of_type(network_type), network_type
    group = plan.state(only(plan, "aws:autoscaling/group:Group"))
    assert group["vpcZoneIdentifiers"] == [SUBNET]
    nodes_sg = plan.state(only(plan, "aws:ec2/securityGroup:SecurityGroup"))
    assert nodes_sg["vpcId"] == VPC
    warnings = plan.outputs["configWarnings"]
    assert any("offline plan does not read your VPC" in w for w in warnings)
    assert any("network.vpcCidr: not used with network.vpcId" in w for w in warnings)
    # the estimate has no NAT gateway and no endpoints of ours
    costed = run_plan("train", load_stack_config("train", ROOT)).outputs["estimatedUsdPerHour"]
    assert plan.outputs["estimatedUsdPerHour"] < costed


def test_extra_security_groups_are_on_every_node_interface():
    group = "sg-0123456789abcdef0"
    plan = run_plan("train", train_in(VPC, SUBNET, securityGroupIds=[group]))
    assert plan.error is None, plan.error
    template = plan.state(only(plan, "aws:ec2/launchTemplate:LaunchTemplate"))
    interfaces = template["networkInterfaces"]
    assert len(interfaces) == 5  # the primary ENA interface and 4 EFA on p4d
    assert all(group in i["securityGroups"] and len(i["securityGroups"]) == 2 for i in interfaces)


@pytest.mark.parametrize(
    ("network", "path", "words"),
    [
        ({"vpcId": "vpc-123"}, "network.vpcId", "not a VPC id"),
        ({"subnetIds": ["subnet-nope"]}, "network.subnetIds[0]", "not a subnet id"),
        ({"vpcId": None}, "network.vpcId", "need the VPC"),
        ({"subnetIds": [SUBNET, "subnet-0a1b2c3d4e5f60780"]}, "network.subnetIds", "exactly one"),
        ({"subnetIds": []}, "network.subnetIds", "exactly one"),
        ({"loadBalancerSubnetIds": [SUBNET]}, "network.loadBalancerSubnetIds", "only an inference"),
        ({"createEndpoints": ["s3"]}, "network.createEndpoints[0]", "gateway endpoint"),
        ({"createEndpoints": ["ssm", "ssm"]}, "network.createEndpoints[1]", "listed twice"),
        ({"securityGroupIds": ["sg-1"]}, "network.securityGroupIds[0]", "not a security group"),
        (
            {"securityGroupIds": [f"sg-0123456789abcdef{i}" for i in range(5)]},
            "network.securityGroupIds",
            "at most 5",
        ),
    ],
)
def test_a_wrong_existing_network_is_a_message_and_nothing_is_planned(network, path, words):
    config = train_in(VPC, SUBNET)
    current = json.loads(config["gpu-cluster:network"])
    merged = {k: v for k, v in {**current, **network}.items() if v is not None}
    plan = run_plan("train", {**config, "gpu-cluster:network": json.dumps(merged)})
    problems = problems_of(plan)
    assert path in problems, problems
    assert words in problems[path].problem
    assert problems[path].fix


# --- against what EC2 says (moto) ------------------------------------------------------------


def network(
    zone: str = "us-east-1a",
    cidr: str = "10.7.0.0/24",
    nat: bool = True,
    s3_endpoint: bool = True,
    dns_hostnames: bool = True,
    flow_log: bool = False,
) -> tuple[str, str, str]:
    """A VPC and one subnet in moto as a platform team might have them: (vpc, subnet, table)."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    vpc = ec2.create_vpc(CidrBlock="10.7.0.0/16")["Vpc"]["VpcId"]
    ec2.modify_vpc_attribute(VpcId=vpc, EnableDnsHostnames={"Value": dns_hostnames})
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock=cidr, AvailabilityZone=zone)["Subnet"]
    table = ec2.create_route_table(VpcId=vpc)["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=table, SubnetId=subnet["SubnetId"])
    if nat:
        public = ec2.create_subnet(VpcId=vpc, CidrBlock="10.7.200.0/24", AvailabilityZone=zone)
        eip = ec2.allocate_address(Domain="vpc")["AllocationId"]
        gateway = ec2.create_nat_gateway(SubnetId=public["Subnet"]["SubnetId"], AllocationId=eip)[
            "NatGateway"
        ]["NatGatewayId"]
        ec2.create_route(RouteTableId=table, DestinationCidrBlock="0.0.0.0/0", NatGatewayId=gateway)
    if s3_endpoint:
        ec2.create_vpc_endpoint(
            VpcId=vpc,
            ServiceName="com.amazonaws.us-east-1.s3",
            VpcEndpointType="Gateway",
            RouteTableIds=[table],
        )
    if flow_log:
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket="flow-log-bucket")
        ec2.create_flow_logs(
            ResourceIds=[vpc],
            ResourceType="VPC",
            TrafficType="ALL",
            LogDestinationType="s3",
            LogDestination="arn:aws:s3:::flow-log-bucket",
        )
    return vpc, subnet["SubnetId"], table


def planned(config: dict[str, str]):
    return run_plan("train", config, network_lookup=describe_network)


@mock_aws
def test_a_ready_network_plans_with_only_its_flow_log_warning():
    vpc, subnet, _ = network()
    plan = planned(train_in(vpc, subnet))
    assert plan.error is None, plan.error
    warnings = plan.outputs["configWarnings"]
    assert any(f"{vpc} has no flow logs" in w for w in warnings), warnings
    assert not any("offline plan" in w for w in warnings)


@mock_aws
def test_flow_logs_already_on_are_not_warned_about():
    vpc, subnet, _ = network(flow_log=True)
    plan = planned(train_in(vpc, subnet))
    assert plan.error is None, plan.error
    assert not any("flow logs" in w for w in plan.outputs["configWarnings"])


@mock_aws
def test_a_subnet_in_another_zone_is_a_message_whose_fix_works():
    vpc, subnet, _ = network(zone="us-east-1b")
    config = train_in(vpc, subnet)
    problems = problems_of(planned(config))
    problem = problems["network.subnetIds[0]"]
    assert "is in us-east-1b" in problem.problem and "us-east-1a" in problem.problem
    assert problem.fix == "pulumi config set availabilityZone us-east-1b"
    fixed = planned(apply_fix(config, problem.fix))
    assert fixed.error is None, fixed.error
    template = fixed.state(only(fixed, "aws:ec2/launchTemplate:LaunchTemplate"))
    assert template["placement"]["availabilityZone"] == "us-east-1b"


@mock_aws
def test_without_availability_zone_the_subnet_gives_it():
    vpc, subnet, _ = network(zone="us-east-1c")
    config = train_in(vpc, subnet)
    del config["gpu-cluster:availabilityZone"]
    assert with_subnet_zone(config, describe_network)["gpu-cluster:availabilityZone"] == (
        "us-east-1c"
    )
    # offline, there is nothing to read it from: the plan says where it comes from
    # (tests/test_subnet_zone.py)
    plan = run_plan("train", config)
    assert plan.error is None, plan.error
    assert any(f"the zone of {subnet}" in w for w in plan.outputs["configWarnings"])


@mock_aws
def test_a_vpc_without_a_route_to_s3_or_the_apis_is_refused():
    vpc, subnet, table = network(nat=False, s3_endpoint=False)
    problems = problems_of(planned(train_in(vpc, subnet)))
    s3 = problems["network.subnetIds[0]"]
    assert "no route to S3" in s3.problem
    assert f"--route-table-ids {table}" in s3.fix
    assert "no default route" in problems["network.natGateway"].problem


@mock_aws
def test_air_gapped_needs_every_endpoint_and_creates_the_ones_asked_for():
    vpc, subnet, _ = network(nat=False)
    config = train_in(vpc, subnet, natGateway=False)
    problem = problems_of(planned(config))["network.createEndpoints"]
    for service in ("ssm", "ssmmessages", "ec2messages", "ec2", "autoscaling", "logs", "sns"):
        assert service in problem.problem
    plan = planned(apply_fix(config, problem.fix))  # the fix lists each missing one
    assert plan.error is None, plan.error
    endpoints = plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    assert len(endpoints) == 8
    assert all(plan.state(e)["subnetIds"] == [subnet] for e in endpoints)
    https = plan.state(plan.named("train-network-endpoints-https-in"))
    nodes = plan.state(plan.named("train-network-nodes-sg"))
    assert https["fromPort"] == 443 and "cidrIpv4" not in https
    assert https["referencedSecurityGroupId"] == nodes["id"]


@mock_aws
def test_an_endpoint_the_vpc_already_has_is_not_created_again():
    vpc, subnet, _ = network()
    boto3.client("ec2", region_name="us-east-1").create_vpc_endpoint(
        VpcId=vpc,
        ServiceName="com.amazonaws.us-east-1.ssm",
        VpcEndpointType="Interface",
        SubnetIds=[subnet],
        PrivateDnsEnabled=True,
    )
    problems = problems_of(planned(train_in(vpc, subnet, createEndpoints=["ssm"])))
    assert "already has vpce-" in problems["network.createEndpoints[0]"].problem


@mock_aws
def test_too_few_free_addresses_for_the_nodes_interfaces():
    vpc, subnet, _ = network(cidr="10.7.0.0/28")  # 16 addresses, 11 usable
    slots = nic_layout(load_catalog().instance_types["p4d.24xlarge"], efa=True)
    needed = 12 * ip_addresses_per_node(slots)
    assert needed > 11
    config = {**train_in(vpc, subnet), "gpu-cluster:nodes": "12"}
    problem = problems_of(planned(config))["network.subnetIds[0]"]
    assert "11 free addresses" in problem.problem and f"need {needed}" in problem.problem


@mock_aws
def test_dns_hostnames_off_is_refused_with_the_command_that_turns_it_on():
    vpc, subnet, _ = network(dns_hostnames=False)
    assert planned(train_in(vpc, subnet)).error is None  # out through the NAT: no endpoints
    config = train_in(vpc, subnet, createEndpoints=["sns"])
    problem = problems_of(planned(config))["network.vpcId"]
    assert "enableDnsHostnames is off" in problem.problem
    assert f"modify-vpc-attribute --vpc-id {vpc} --enable-dns-hostnames" in problem.fix


@mock_aws
def test_ids_ec2_does_not_know_are_messages_not_tracebacks():
    vpc, subnet, _ = network()
    problems = problems_of(planned(train_in(VPC, subnet)))
    assert "no such VPC in us-east-1" in problems["network.vpcId"].problem
    problems = problems_of(planned(train_in(vpc, SUBNET, securityGroupIds=[VPC_SG])))
    assert "no such subnet" in problems["network.subnetIds[0]"].problem
    assert "no such security group" in problems["network.securityGroupIds[0]"].problem


VPC_SG = "sg-0a1b2c3d4e5f60789"


@mock_aws
def test_a_subnet_of_another_vpc_is_refused():
    _, subnet, _ = network()
    other, _, _ = network()
    problem = problems_of(planned(train_in(other, subnet)))["network.subnetIds[0]"]
    assert f"not network.vpcId {other}" in problem.problem


@mock_aws
def test_preflight_reports_the_network():
    vpc, subnet, _ = network()
    aws = Clients(ec2=boto3.client("ec2", region_name="us-east-1"), sts=None, quotas=None, s3=None)
    good = check_existing_network(cluster_spec(train_in(vpc, subnet), "train"), aws)
    assert good is not None
    assert good.status == WARN and f"{subnet} (us-east-1a" in good.detail
    bare, bare_subnet, _ = network(nat=False, s3_endpoint=False, flow_log=True)
    bad = check_existing_network(cluster_spec(train_in(bare, bare_subnet), "train"), aws)
    assert bad is not None
    assert bad.status == FAIL and "no route to S3" in bad.detail
    assert "create-vpc-endpoint" in bad.fix
    ready, ready_subnet, _ = network(flow_log=True)
    ready_spec = cluster_spec(train_in(ready, ready_subnet), "train")
    ready_check = check_existing_network(ready_spec, aws)
    assert ready_check is not None and ready_check.status == PASS
    created = cluster_spec({**TRAIN_LIKE}, "train")
    assert check_existing_network(created, aws) is None


def inference_in(vpc: str, nodes: list[str], balancer: list[str]) -> dict[str, str]:
    config = load_stack_config("inference", ROOT)
    return {
        **config,
        "gpu-cluster:network": json.dumps(
            {"vpcId": vpc, "subnetIds": nodes, "loadBalancerSubnetIds": balancer}
        ),
    }


def test_an_inference_service_uses_the_users_subnets_and_public_subnets():
    nodes = ["subnet-0a1b2c3d4e5f60781", "subnet-0a1b2c3d4e5f60782"]
    balancer = ["subnet-0a1b2c3d4e5f60783", "subnet-0a1b2c3d4e5f60784"]
    plan = run_plan("inference", inference_in(VPC, nodes, balancer))
    assert plan.error is None, plan.error
    for network_type in NETWORK_TYPES:
        assert not plan.of_type(network_type), network_type
    assert plan.state(only(plan, "aws:lb/loadBalancer:LoadBalancer"))["subnets"] == balancer
    assert plan.state(only(plan, "aws:autoscaling/group:Group"))["vpcZoneIdentifiers"] == nodes
    one_zone = problems_of(run_plan("inference", inference_in(VPC, nodes[:1], balancer[:1])))
    assert "one subnet per zone" in one_zone["network.subnetIds"].problem
    assert "network.loadBalancerSubnetIds" in one_zone


@mock_aws
def test_a_load_balancer_subnet_without_an_internet_gateway_route_is_refused():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    zones = json.loads(load_stack_config("inference", ROOT)["gpu-cluster:inference"])[
        "availabilityZones"
    ]
    vpc, first, _ = network(zone=zones[0])
    second = ec2.create_subnet(VpcId=vpc, CidrBlock="10.7.1.0/24", AvailabilityZone=zones[1])
    # public-looking subnets whose route table has no internet gateway (the main table)
    balancer = [
        ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.7.{10 + i}.0/24", AvailabilityZone=zone)[
            "Subnet"
        ]["SubnetId"]
        for i, zone in enumerate(zones)
    ]
    config = inference_in(vpc, [first, second["Subnet"]["SubnetId"]], balancer)
    plan = run_plan("inference", config, network_lookup=describe_network)
    problem = problems_of(plan)["network.loadBalancerSubnetIds"]
    assert "no default route to an internet gateway" in problem.problem


def facts_with(default_route: str | None, endpoints=()) -> NetworkFacts:
    subnet = SubnetFacts(
        SUBNET, VPC, "us-east-1a", "10.7.0.0/24", 250, "rtb-0a1b2c3d", default_route, False
    )
    return NetworkFacts(
        "us-east-1", VPC, True, flow_logs=1, subnets={SUBNET: subnet}, endpoints=tuple(endpoints)
    )


def routes_problems(default_route, endpoints=(), nat_gateway=True) -> dict[str, Problem]:
    existing = ExistingNetwork(vpc_id=VPC, subnet_ids=(SUBNET,))
    spec = NetworkSpec.model_validate(
        {"natGateway": nat_gateway, "vpcId": VPC, "subnetIds": [SUBNET]}
    )
    needs = needs_for("cluster", ("us-east-1a",), 4, 1, spec)
    found, _ = check_network_facts(existing, needs, facts_with(default_route, endpoints))
    return {p.path.split(":", 1)[1]: p for p in found}


@pytest.mark.parametrize(
    "target", ["nat-0a1b2c3d", "tgw-0a1b2c3d", "vpce-0a1b2c3d", "pcx-0a1b2c3d", "eni-0a1b2c3d"]
)
def test_every_kind_of_egress_route_counts(target):
    assert routes_problems(target) == {}


def test_an_internet_gateway_route_is_no_egress_for_nodes_without_public_ips():
    assert "cannot use" in routes_problems("igw-0a1b2c3d")["network.natGateway"].problem


def test_an_s3_interface_endpoint_counts_only_with_private_dns():
    def s3(private_dns: bool) -> Endpoint:
        return Endpoint("vpce-0s3", "s3", "Interface", private_dns, "available")

    assert "network.subnetIds[0]" in routes_problems(None, [s3(False)], nat_gateway=False)
    assert "network.subnetIds[0]" not in routes_problems(None, [s3(True)], nat_gateway=False)
