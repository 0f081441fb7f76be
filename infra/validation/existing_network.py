"""A network the user already has (network.vpcId, network.subnetIds): the config's own checks,
offline (what AWS says about it: infra/validation/network_facts.py)."""

from __future__ import annotations

import re

from gpu_cluster.components.cidr import AIR_GAPPED_ENDPOINTS, ECR_ENDPOINTS, INTERFACE_ENDPOINTS
from gpu_cluster.components.network import ExistingNetwork
from gpu_cluster.infra.problems import NOT_SET, Problem
from gpu_cluster.infra.spec import NetworkSpec
from gpu_cluster.infra.validation.common import key

# EC2 resource ids: the prefix, then 8 (older) or 17 hex digits (EC2 User Guide, "Resource IDs")
VPC_ID = re.compile(r"^vpc-[0-9a-f]{8}([0-9a-f]{9})?\Z")
SUBNET_ID = re.compile(r"^subnet-[0-9a-f]{8}([0-9a-f]{9})?\Z")
SECURITY_GROUP_ID = re.compile(r"^sg-[0-9a-f]{8}([0-9a-f]{9})?\Z")
# Amazon VPC quotas: 5 security groups per network interface (adjustable to 16); the cluster's
# own node group takes one.
SECURITY_GROUPS_PER_INTERFACE = 5
# The interface endpoints a node's boot steps may need (components/cidr.py says why each), and
# those gpu-cluster may create (also ECR's, for job images: jobs.repositories)
ENDPOINT_SERVICES = INTERFACE_ENDPOINTS + AIR_GAPPED_ENDPOINTS
CREATABLE_ENDPOINTS = ENDPOINT_SERVICES + ECR_ENDPOINTS
# Keys that shape a VPC gpu-cluster creates: meaningless for one the user brings.
CREATED_VPC_KEYS = {
    "vpc_cidr": "vpcCidr",
    "private_subnet_cidr": "privateSubnetCidr",
    "public_subnet_cidr": "publicSubnetCidr",
    "avoid_cidrs": "avoidCidrs",
}
EXISTING_KEYS = (
    "vpc_id",
    "subnet_ids",
    "load_balancer_subnet_ids",
    "security_group_ids",
    "create_endpoints",
)


def uses_existing_network(network: NetworkSpec) -> bool:
    return any(name in network.model_fields_set for name in EXISTING_KEYS)


def ignored_keys_warning(network: NetworkSpec) -> str | None:
    """The keys that shape a created VPC, which an existing one leaves unused (avoidCidrs is
    still checked against the subnets, in network_facts)."""
    unused = [
        path
        for name, path in CREATED_VPC_KEYS.items()
        if name in network.model_fields_set and name != "avoid_cidrs"
    ]
    if not unused or not uses_existing_network(network):
        return None
    return (
        f"network.{', network.'.join(unused)}: not used with network.vpcId (they shape a VPC "
        "gpu-cluster creates; yours is used as it is)"
    )


def _id_problems(ids: list[str], pattern: re.Pattern[str], path: str, kind: str) -> list[Problem]:
    problems = []
    for index, value in enumerate(ids):
        if not pattern.match(value):
            problems.append(
                Problem(
                    path=key(f"{path}[{index}]"),
                    received=value,
                    problem=f"not a {kind} id",
                    allowed=f"{pattern.pattern[1:-2].split('-')[0]}- and 8 or 17 hex digits",
                    fix=f"copy the id from `aws ec2 describe-{kind.replace(' ', '-')}s`",
                )
            )
        elif value in ids[:index]:
            problems.append(
                Problem(
                    path=key(f"{path}[{index}]"),
                    received=value,
                    problem=f"listed twice (also {path}[{ids.index(value)}])",
                    allowed=f"each {kind} once",
                    fix=f"pulumi config rm --path {path}[{index}]",
                )
            )
    return problems


def check_existing_network(
    network: NetworkSpec, role: str, zones: tuple[str, ...]
) -> tuple[ExistingNetwork | None, list[Problem]]:
    """The existing network the config names, or its problems (ids, counts, keys that only a
    created VPC takes). ``zones``: the cluster's zone, or an inference service's zones."""
    problems: list[Problem] = []
    if network.vpc_id is None:
        problems.append(
            Problem(
                path=key("network.vpcId"),
                received=NOT_SET,
                problem="network.subnetIds and the other existing-network keys need the VPC "
                "they belong to",
                allowed="the id of your VPC, e.g. vpc-0a1b2c3d4e5f60789",
                fix="pulumi config set --path network.vpcId <vpc-id>",
            )
        )
    elif not VPC_ID.match(network.vpc_id):
        problems.append(
            Problem(
                path=key("network.vpcId"),
                received=network.vpc_id,
                problem="not a VPC id",
                allowed="vpc- and 8 or 17 hex digits, e.g. vpc-0a1b2c3d4e5f60789",
                fix="copy the id from `aws ec2 describe-vpcs`",
            )
        )
    wanted = 1 if role != "inference" else len(zones)
    subnets = network.subnet_ids
    if len(subnets) != wanted:
        problems.append(
            Problem(
                path=key("network.subnetIds"),
                received=subnets or NOT_SET,
                problem=(
                    "a training cluster takes exactly one subnet (a cluster placement group "
                    "and EFA stay in one zone)"
                    if role != "inference"
                    else f"an inference service takes one subnet per zone ({', '.join(zones)})"
                ),
                allowed=f"{wanted} subnet id(s)",
                fix=(
                    "pulumi config set --path network.subnetIds[0] <subnet-id>"
                    if not subnets
                    else "list the subnet(s) in network.subnetIds, one per zone in order"
                ),
            )
        )
    problems += _id_problems(subnets, SUBNET_ID, "network.subnetIds", "subnet")
    balancer = network.load_balancer_subnet_ids
    if role != "inference" and balancer:
        problems.append(
            Problem(
                path=key("network.loadBalancerSubnetIds"),
                received=balancer,
                problem="only an inference service has a load balancer",
                allowed="not set for this role",
                fix="pulumi config rm --path network.loadBalancerSubnetIds",
            )
        )
    elif role == "inference" and len(balancer) != len(zones):
        problems.append(
            Problem(
                path=key("network.loadBalancerSubnetIds"),
                received=balancer or NOT_SET,
                problem="the internet-facing load balancer needs one public subnet (a route "
                f"to an internet gateway) in each of the service's zones ({', '.join(zones)})",
                allowed=f"{len(zones)} subnet id(s), in the zones' order",
                fix="list one public subnet per zone in network.loadBalancerSubnetIds",
            )
        )
    problems += _id_problems(balancer, SUBNET_ID, "network.loadBalancerSubnetIds", "subnet")
    groups = network.security_group_ids
    if len(groups) > SECURITY_GROUPS_PER_INTERFACE - 1:
        problems.append(
            Problem(
                path=key("network.securityGroupIds"),
                received=groups,
                problem=f"a network interface takes at most {SECURITY_GROUPS_PER_INTERFACE} "
                "security groups (Amazon VPC quotas), one of them the cluster's own",
                allowed=f"at most {SECURITY_GROUPS_PER_INTERFACE - 1} groups",
                fix="merge rules into fewer groups, or raise the quota and the limit together",
            )
        )
    problems += _id_problems(
        groups, SECURITY_GROUP_ID, "network.securityGroupIds", "security group"
    )
    for index, service in enumerate(network.create_endpoints):
        if service not in CREATABLE_ENDPOINTS:
            problems.append(
                Problem(
                    path=key(f"network.createEndpoints[{index}]"),
                    received=service,
                    problem="not an endpoint the nodes use"
                    + (" (S3: a gateway endpoint on your route table)" if service == "s3" else ""),
                    allowed=", ".join(CREATABLE_ENDPOINTS),
                    fix=f"pulumi config rm --path network.createEndpoints[{index}]",
                )
            )
        elif service in network.create_endpoints[:index]:
            problems.append(
                Problem(
                    path=key(f"network.createEndpoints[{index}]"),
                    received=service,
                    problem="listed twice",
                    allowed="each service once",
                    fix=f"pulumi config rm --path network.createEndpoints[{index}]",
                )
            )
    if problems:
        return None, problems
    assert network.vpc_id is not None
    return (
        ExistingNetwork(
            vpc_id=network.vpc_id,
            subnet_ids=tuple(subnets),
            load_balancer_subnet_ids=tuple(balancer),
            security_group_ids=tuple(groups),
            create_endpoints=tuple(network.create_endpoints),
        ),
        [],
    )
