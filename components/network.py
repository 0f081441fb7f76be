"""ClusterNetwork: VPC, node subnet, NAT egress, endpoints, EFA security group, flow logs - or,
in a network the user already has (ExistingNetwork), only the security groups and the endpoints
asked for."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.cidr import SubnetLayout, interface_endpoints
from gpu_cluster.components.names import StackIdentity, flow_logs_group, runtime_identity
from gpu_cluster.components.naming import child_name
from gpu_cluster.components.policies import assume_role_policy, flow_logs_delivery_policy

FLOW_LOG_RETENTION_DAYS = 365


# A subnet is replaced delete-first. Create-first (the engine's default) would call CreateSubnet
# with the same CIDR in the same VPC while the old subnet exists: InvalidSubnet.Conflict. For a
# delete-first replacement the engine deletes first every dependent that the replacement would
# replace (pkg/resource/deploy/step_generator.go, calculateDependentReplacements: a provider
# Diff with the replaced resource's outputs unknown, then the dependent's replaceOnChanges), so
# whatever has an interface in the subnet replaces on a subnet change: the route-table
# associations and the NAT gateway (subnetId is ForceNew), the interface endpoints and the node
# group (replaceOnChanges below and in node_group.py), the dev box (its availabilityZone comes
# from the subnet) and the Lustre file system (subnetIds is ForceNew). DeleteSubnet then finds
# no interface left (otherwise DependencyViolation).
def subnet_options(child: pulumi.ResourceOptions) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(delete_before_replace=True))


# A service's further zone is removed (a zone swapped for another) at the end of the update,
# after the load balancer and the group have moved to the new zone's subnets in place. The
# provider's subnet delete retries DependencyViolation until its delete timeout (20 minutes by
# default: hashicorp/terraform-provider-aws internal/service/ec2/vpc_subnet.go), while the
# group's rebalancing launches each removed-zone node's replacement first (EC2 Auto Scaling User
# Guide, "Rebalancing activities"; instance_maintenance_policy min 100%) - through the launch
# hook, up to inference.warmupSeconds (at most 3600 s) - then terminates it (deregistration
# delay 60 s), and ELB takes its node out of the subnet. 90 minutes covers the longest warmup;
# infra/diff/collisions.py checks a removed zone's subnets against it.
ZONE_SUBNET_TIMEOUTS = pulumi.CustomTimeouts(delete="90m")


# An interface endpoint with private DNS cannot be created while another one for the same
# service exists in the VPC (the private DNS name is taken), so it is replaced delete-first,
# and it replaces with its subnet (an update in place would leave its interface in the old one).
INTERFACE_ENDPOINT_OPTIONS = pulumi.ResourceOptions(
    delete_before_replace=True, replace_on_changes=["subnetIds"]
)
PACKAGE_EGRESS_PORTS = (80, 443)


@dataclass(frozen=True)
class ExistingNetwork:
    """A VPC and subnets the user already has. Nothing of it is created or changed: no VPC,
    subnet, route, NAT or internet gateway, and no flow log (the VPC's owner keeps those).

    ``subnet_ids``: the nodes' subnets, one per zone (a training cluster takes exactly one: a
    cluster placement group is zonal). ``load_balancer_subnet_ids``: an inference service's
    public subnets, one per zone. ``security_group_ids``: groups added to every node interface
    besides the cluster's own. ``create_endpoints``: interface endpoints the VPC lacks, created
    in the node subnets (a VPC holds one private-DNS endpoint per service)."""

    vpc_id: str
    subnet_ids: tuple[str, ...]
    load_balancer_subnet_ids: tuple[str, ...] = ()
    security_group_ids: tuple[str, ...] = ()
    create_endpoints: tuple[str, ...] = ()


@dataclass
class ClusterNetworkArgs:
    layout: SubnetLayout | None
    availability_zone: pulumi.Input[str]
    region: str
    account_id: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    nat_gateway: bool = True
    public_nodes: bool = False
    ecr_endpoints: bool = False  # without a NAT gateway: ECR endpoints for the job images
    identity: StackIdentity | None = None  # whose names (None: the running stack's)
    # a service's further zones: (zone, private subnet, public subnet); none for training
    extra_zones: tuple[tuple[str, Any, Any], ...] = ()
    existing: ExistingNetwork | None = None  # set: use it, create no VPC (layout unused)
    tags: dict[str, str] = field(default_factory=dict)


class ClusterNetwork(pulumi.ComponentResource):
    """Outputs: ``vpc_id``, ``node_subnet_id``, ``node_security_group`` (and the subnets of a
    service's zones, ``service_private_subnet_ids``/``service_public_subnet_ids``). ``vpc`` and
    ``node_subnet`` are the created resources, None in an existing network."""

    vpc: aws.ec2.Vpc | None
    node_subnet: aws.ec2.Subnet | None
    node_security_group: aws.ec2.SecurityGroup

    def __init__(
        self, name: str, args: ClusterNetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:network:ClusterNetwork", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # What a node's boot needs in place before it launches (rules, routes, endpoints).
        self.boot_dependencies: list[pulumi.Resource] = []
        if args.existing is not None:
            self._existing(name, args, args.existing, child)
        else:
            self._created(name, args, child)
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "nodeSubnetId": self.node_subnet_id,
                "nodeSecurityGroupId": self.node_security_group.id,
            }
        )

    def _existing(
        self,
        name: str,
        args: ClusterNetworkArgs,
        existing: ExistingNetwork,
        child: pulumi.ResourceOptions,
    ) -> None:
        self.vpc = self.node_subnet = None
        self.vpc_id = pulumi.Output.from_input(existing.vpc_id)
        self.node_subnet_id = pulumi.Output.from_input(existing.subnet_ids[0])
        self.service_private_subnet_ids: list[pulumi.Input[str]] = list(existing.subnet_ids)
        self.service_public_subnet_ids: list[pulumi.Input[str]] = list(
            existing.load_balancer_subnet_ids
        )
        self.node_security_group = self._node_security_group(name, args, child)
        if existing.create_endpoints:
            # HTTPS from the nodes only: the VPC's other addresses are not this stack's
            self._interface_endpoints(
                name,
                args,
                child,
                services=existing.create_endpoints,
                subnet_ids=list(existing.subnet_ids),
                https_from={"referenced_security_group_id": self.node_security_group.id},
                source="the cluster nodes",
            )

    def _created(self, name: str, args: ClusterNetworkArgs, child: pulumi.ResourceOptions) -> None:
        assert args.layout is not None
        tags = args.tags
        self.vpc = aws.ec2.Vpc(
            child_name(name, "vpc"),
            cidr_block=str(args.layout.vpc),
            enable_dns_support=True,
            enable_dns_hostnames=True,
            tags={**tags, "Name": child_name(name, "vpc")},
            opts=child,
        )
        aws.ec2.DefaultSecurityGroup(
            child_name(name, "default-sg-closed"),
            vpc_id=self.vpc.id,
            ingress=[],
            egress=[],
            tags={**tags, "Name": child_name(name, "default-closed")},
            opts=child,
        )
        self.private_subnet, self.public_subnet = (
            aws.ec2.Subnet(
                child_name(name, role),
                vpc_id=self.vpc.id,
                cidr_block=str(cidr),
                availability_zone=args.availability_zone,
                map_public_ip_on_launch=False,
                tags={**tags, "Name": child_name(name, role)},
                opts=subnet_options(child),
            )
            for role, cidr in (("private", args.layout.private), ("public", args.layout.public))
        )
        self.node_subnet = self.public_subnet if args.public_nodes else self.private_subnet
        self.vpc_id = self.vpc.id
        self.node_subnet_id = self.node_subnet.id
        self._routing(name, args, child)
        self.service_private_subnet_ids = [s.id for s in self.service_private_subnets]
        self.service_public_subnet_ids = [s.id for s in self.service_public_subnets]
        self.node_security_group = self._node_security_group(name, args, child)
        self._endpoints(name, args, child)
        self._flow_logs(name, args, child)

    def _routing(self, name: str, args: ClusterNetworkArgs, child: pulumi.ResourceOptions) -> None:
        tags = args.tags
        igw = aws.ec2.InternetGateway(
            child_name(name, "igw"), vpc_id=self.vpc_id, tags=tags, opts=child
        )
        public_routes = aws.ec2.RouteTable(
            child_name(name, "public-rt"),
            vpc_id=self.vpc_id,
            routes=[{"cidr_block": "0.0.0.0/0", "gateway_id": igw.id}],
            tags=tags,
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            child_name(name, "public-rta"),
            subnet_id=self.public_subnet.id,
            route_table_id=public_routes.id,
            opts=child,
        )
        private_route_list = []
        if args.nat_gateway:
            eip = aws.ec2.Eip(child_name(name, "nat-eip"), domain="vpc", tags=tags, opts=child)
            nat = aws.ec2.NatGateway(
                child_name(name, "nat"),
                subnet_id=self.public_subnet.id,
                allocation_id=eip.id,
                tags=tags,
                # The Elastic IP stays associated until the old gateway is deleted: a
                # create-first replacement fails (Resource.AlreadyAssociated).
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[igw], delete_before_replace=True)
                ),
            )
            private_route_list.append({"cidr_block": "0.0.0.0/0", "nat_gateway_id": nat.id})
            self.boot_dependencies.append(nat)
        self.private_route_table = aws.ec2.RouteTable(
            child_name(name, "private-rt"),
            vpc_id=self.vpc_id,
            routes=private_route_list,
            tags=tags,
            opts=child,
        )
        private_association = aws.ec2.RouteTableAssociation(
            child_name(name, "private-rta"),
            subnet_id=self.private_subnet.id,
            route_table_id=self.private_route_table.id,
            opts=child,
        )
        self.boot_dependencies.append(private_association)
        self.route_table_ids = [self.private_route_table.id, public_routes.id]
        self.service_private_subnets = [self.private_subnet]
        self.service_public_subnets = [self.public_subnet]
        for zone, private, public in args.extra_zones:
            suffix = zone[-1]
            for role, cidr, table, group in (
                ("private", private, self.private_route_table, self.service_private_subnets),
                ("public", public, public_routes, self.service_public_subnets),
            ):
                subnet = aws.ec2.Subnet(
                    child_name(name, f"{role}-{suffix}"),
                    vpc_id=self.vpc_id,
                    cidr_block=str(cidr),
                    availability_zone=zone,
                    map_public_ip_on_launch=False,
                    tags={**tags, "Name": child_name(name, f"{role}-{suffix}")},
                    opts=pulumi.ResourceOptions.merge(
                        subnet_options(child),
                        pulumi.ResourceOptions(custom_timeouts=ZONE_SUBNET_TIMEOUTS),
                    ),
                )
                association = aws.ec2.RouteTableAssociation(
                    child_name(name, f"{role}-{suffix}-rta"),
                    subnet_id=subnet.id,
                    route_table_id=table.id,
                    opts=child,
                )
                group.append(subnet)
                if role == "private":
                    self.boot_dependencies.append(association)

    def _node_security_group(
        self, name: str, args: ClusterNetworkArgs, child: pulumi.ResourceOptions
    ) -> aws.ec2.SecurityGroup:
        group = aws.ec2.SecurityGroup(
            child_name(name, "nodes-sg"),
            vpc_id=self.vpc_id,
            description="gpu-cluster nodes: all traffic between members (EFA), none from outside",
            tags={**args.tags, "Name": child_name(name, "nodes")},
            opts=child,
        )
        efa_in = aws.vpc.SecurityGroupIngressRule(
            child_name(name, "nodes-efa-in"),
            security_group_id=group.id,
            referenced_security_group_id=group.id,
            ip_protocol="-1",
            description="EFA/NCCL: all traffic from cluster members",
            opts=child,
        )
        efa_out = aws.vpc.SecurityGroupEgressRule(
            child_name(name, "nodes-efa-out"),
            security_group_id=group.id,
            referenced_security_group_id=group.id,
            ip_protocol="-1",
            description="EFA/NCCL: all traffic to cluster members",
            opts=child,
        )
        self.boot_dependencies += [efa_in, efa_out]
        for port in PACKAGE_EGRESS_PORTS:
            egress = aws.vpc.SecurityGroupEgressRule(
                child_name(name, f"nodes-egress-{port}"),
                security_group_id=group.id,
                cidr_ipv4="0.0.0.0/0",
                ip_protocol="tcp",
                from_port=port,
                to_port=port,
                description="package installs, AWS APIs and S3 (through NAT or endpoints)",
                opts=child,
            )
            self.boot_dependencies.append(egress)
        return group

    def _endpoints(
        self, name: str, args: ClusterNetworkArgs, child: pulumi.ResourceOptions
    ) -> None:
        s3 = aws.ec2.VpcEndpoint(
            child_name(name, "s3-endpoint"),
            vpc_id=self.vpc_id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=self.route_table_ids,
            tags=args.tags,
            opts=child,
        )
        self.boot_dependencies.append(s3)
        assert args.layout is not None
        self._interface_endpoints(
            name,
            args,
            child,
            services=interface_endpoints(args.nat_gateway, args.ecr_endpoints),
            subnet_ids=[self.private_subnet.id],
            https_from={"cidr_ipv4": str(args.layout.vpc)},
            source="the VPC",
        )

    def _interface_endpoints(
        self,
        name: str,
        args: ClusterNetworkArgs,
        child: pulumi.ResourceOptions,
        services: tuple[str, ...],
        subnet_ids: list[pulumi.Input[str]],
        https_from: dict[str, Any],
        source: str,
    ) -> None:
        endpoint_sg = aws.ec2.SecurityGroup(
            child_name(name, "endpoints-sg"),
            vpc_id=self.vpc_id,
            description=f"gpu-cluster interface endpoints: HTTPS from {source} only",
            tags=args.tags,
            opts=child,
        )
        https_in = aws.vpc.SecurityGroupIngressRule(
            child_name(name, "endpoints-https-in"),
            security_group_id=endpoint_sg.id,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            description="HTTPS from inside the VPC"
            if source == "the VPC"
            else f"HTTPS from {source}",
            opts=child,
            **https_from,
        )
        self.boot_dependencies.append(https_in)
        for service in services:
            endpoint = aws.ec2.VpcEndpoint(
                child_name(name, f"{service}-endpoint"),
                vpc_id=self.vpc_id,
                service_name=f"com.amazonaws.{args.region}.{service}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=subnet_ids,
                security_group_ids=[endpoint_sg.id],
                tags=args.tags,
                opts=pulumi.ResourceOptions.merge(child, INTERFACE_ENDPOINT_OPTIONS),
            )
            self.boot_dependencies.append(endpoint)

    def _flow_logs(
        self, name: str, args: ClusterNetworkArgs, child: pulumi.ResourceOptions
    ) -> None:
        log_group = aws.cloudwatch.LogGroup(
            child_name(name, "flow-logs"),
            name=flow_logs_group(
                args.identity or runtime_identity(name.removesuffix("-network"), args.region)
            ),
            retention_in_days=FLOW_LOG_RETENTION_DAYS,
            kms_key_id=args.kms_key_arn,
            tags=args.tags,
            opts=child,
        )
        role = aws.iam.Role(
            child_name(name, "flow-logs-role"),
            assume_role_policy=pulumi.Output.from_input(args.account_id).apply(
                lambda account: json.dumps(
                    assume_role_policy("vpc-flow-logs.amazonaws.com", account)
                )
            ),
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            child_name(name, "flow-logs-delivery"),
            role=role.id,
            policy=log_group.arn.apply(lambda arn: json.dumps(flow_logs_delivery_policy(arn))),
            opts=child,
        )
        aws.ec2.FlowLog(
            child_name(name, "flow-log"),
            vpc_id=self.vpc_id,
            traffic_type="ALL",
            log_destination_type="cloud-watch-logs",
            log_destination=log_group.arn,
            iam_role_arn=role.arn,
            tags=args.tags,
            opts=child,
        )
