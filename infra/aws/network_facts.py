"""Read an existing network's facts from EC2 (read-only): the VPC's DNS attributes, the named
subnets with their route tables, the VPC's endpoints and flow logs, the named security groups.
An id EC2 does not know is left out of the facts (the checks say so), never an exception."""

from __future__ import annotations

from typing import Any

from gpu_cluster.components.network import ExistingNetwork
from gpu_cluster.infra.aws import call, client, paginate
from gpu_cluster.infra.problems import AwsError
from gpu_cluster.infra.validation.network_facts import Endpoint, NetworkFacts, SubnetFacts

# What EC2 answers for an id of the right form that does not exist (EC2 API error codes)
MISSING = {
    "InvalidVpcID.NotFound",
    "InvalidSubnetID.NotFound",
    "InvalidGroup.NotFound",
    "InvalidSecurityGroupID.NotFound",
    "InvalidGroupId.Malformed",
    "InvalidSubnetID.Malformed",
    "InvalidVpcID.Malformed",
}


def _found(ec2: Any, operation: str, key: str, **request: Any) -> list[dict[str, Any]]:
    """Describe by ids; a missing id makes EC2 fail the whole call, so ask one id at a time."""
    items = []
    ids_key = next(k for k in request if k.endswith("Ids"))
    for one in request.pop(ids_key):
        try:
            items += call(ec2, "ec2", operation, **{ids_key: [one]}, **request)[key]
        except AwsError as error:
            if error.code not in MISSING:
                raise
    return items


def _route_table(ec2: Any, vpc_id: str, subnet_id: str) -> dict[str, Any] | None:
    """The subnet's own route table, or else the VPC's main one (VPC User Guide: a subnet not
    explicitly associated uses the main route table)."""
    for filters in (
        [{"Name": "association.subnet-id", "Values": [subnet_id]}],
        [
            {"Name": "vpc-id", "Values": [vpc_id]},
            {"Name": "association.main", "Values": ["true"]},
        ],
    ):
        tables = call(ec2, "ec2", "DescribeRouteTables", Filters=filters)["RouteTables"]
        if tables:
            return tables[0]
    return None


def _default_route(table: dict[str, Any] | None) -> str | None:
    for route in (table or {}).get("Routes", []):
        if route.get("DestinationCidrBlock") != "0.0.0.0/0" or route.get("State") == "blackhole":
            continue
        for field in (
            "NatGatewayId",
            "TransitGatewayId",
            "GatewayId",  # igw-, vgw-, or a Gateway Load Balancer endpoint (vpce-)
            "NetworkInterfaceId",
            "InstanceId",
            "VpcPeeringConnectionId",
            "LocalGatewayId",
            "CoreNetworkArn",  # Cloud WAN
        ):
            if route.get(field):
                return route[field]
    return None


def _short_service(name: str, region: str) -> str:
    prefix = f"com.amazonaws.{region}."
    return name[len(prefix) :] if name.startswith(prefix) else name


def describe_network(existing: ExistingNetwork, region: str, ec2: Any = None) -> NetworkFacts:
    ec2 = ec2 or client("ec2", region)
    vpc_id = existing.vpc_id
    if not _found(ec2, "DescribeVpcs", "Vpcs", VpcIds=[vpc_id]):
        return NetworkFacts(region=region, vpc_id=vpc_id, vpc_found=False)
    attributes = {
        name: call(ec2, "ec2", "DescribeVpcAttribute", VpcId=vpc_id, Attribute=name)[
            name[0].upper() + name[1:]
        ]["Value"]
        for name in ("enableDnsSupport", "enableDnsHostnames")
    }
    endpoints = tuple(
        Endpoint(
            endpoint_id=e["VpcEndpointId"],
            service=_short_service(e["ServiceName"], region),
            kind=e.get("VpcEndpointType", "Interface"),
            private_dns=bool(e.get("PrivateDnsEnabled")),
            state=e.get("State", "available"),
            route_tables=tuple(e.get("RouteTableIds", [])),
        )
        for e in paginate(
            ec2,
            "ec2",
            "DescribeVpcEndpoints",
            "VpcEndpoints",
            Filters=[{"Name": "vpc-id", "Values": [vpc_id]}],
        )
    )
    subnet_ids = [*existing.subnet_ids, *existing.load_balancer_subnet_ids]
    subnets = {}
    for subnet in _found(ec2, "DescribeSubnets", "Subnets", SubnetIds=subnet_ids):
        table = _route_table(ec2, subnet["VpcId"], subnet["SubnetId"])
        table_id = (table or {}).get("RouteTableId", "")
        subnets[subnet["SubnetId"]] = SubnetFacts(
            subnet_id=subnet["SubnetId"],
            vpc_id=subnet["VpcId"],
            zone=subnet["AvailabilityZone"],
            cidr=subnet["CidrBlock"],
            free_addresses=subnet["AvailableIpAddressCount"],
            route_table_id=table_id,
            default_route=_default_route(table),
            s3_gateway=any(
                e.service == "s3"
                and e.kind == "Gateway"
                and table_id in e.route_tables
                and e.state.lower() == "available"
                for e in endpoints
            ),
        )
    flow_logs = call(
        ec2,
        "ec2",
        "DescribeFlowLogs",
        Filters=[{"Name": "resource-id", "Values": [vpc_id, *subnet_ids]}],
    )["FlowLogs"]
    groups = {
        g["GroupId"]: g["VpcId"]
        for g in _found(
            ec2,
            "DescribeSecurityGroups",
            "SecurityGroups",
            GroupIds=list(existing.security_group_ids),
        )
    }
    return NetworkFacts(
        region=region,
        vpc_id=vpc_id,
        vpc_found=True,
        dns_support=attributes["enableDnsSupport"],
        dns_hostnames=attributes["enableDnsHostnames"],
        flow_logs=len(flow_logs),
        subnets=subnets,
        endpoints=endpoints,
        security_groups=groups,
    )
