"""Mock engine responses: realistic ids, ARNs, addresses and invoke results, no AWS calls."""

from __future__ import annotations

import hashlib
import ipaddress
from typing import Any

import pulumi
from pulumi.runtime import rpc

from gpu_cluster.components.aws_limits import DASHBOARD, inbound_rules_violation, violations
from gpu_cluster.components.waf_limits import WEB_ACL, revealed, web_acl_wcu
from gpu_cluster.infra.errors import ConfigError, Problem

MOCK_ACCOUNT = "123456789012"
MOCK_AMI = {"x86_64": "ami-0a1b2c3d4e5f60718", "arm64": "ami-0f1e2d3c4b5a69788"}
MOCK_ROOT_SNAPSHOT_GIB = 100  # stands in for the AMI's root snapshot size
FIRST_NODE_HOST = 10  # leave room for the endpoint ENIs at the start of the subnet

ID_PREFIX = {
    "aws:ec2/vpc:Vpc": "vpc",
    "aws:ec2/subnet:Subnet": "subnet",
    "aws:ec2/securityGroup:SecurityGroup": "sg",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": "sg",
    "aws:ec2/internetGateway:InternetGateway": "igw",
    "aws:ec2/natGateway:NatGateway": "nat",
    "aws:ec2/eip:Eip": "eipalloc",
    "aws:ec2/routeTable:RouteTable": "rtb",
    "aws:ec2/routeTableAssociation:RouteTableAssociation": "rtbassoc",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "vpce",
    "aws:ec2/flowLog:FlowLog": "fl",
    "aws:ec2/launchTemplate:LaunchTemplate": "lt",
    "aws:ec2/placementGroup:PlacementGroup": "pg",
    "aws:ec2/instance:Instance": "i",
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": "sgr",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": "sgr",
}


INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"

# Inputs AWS cannot change in place: a different value means a new resource with a new id (so a
# plan of a changed stack shows what would point at a replaced subnet or placement group).
CREATE_ONLY = {
    "aws:ec2/subnet:Subnet": ("availabilityZone", "cidrBlock", "vpcId"),
    "aws:ec2/vpc:Vpc": ("cidrBlock",),
    "aws:ec2/placementGroup:PlacementGroup": ("strategy",),
}


def _uuid(name: str) -> str:
    digest = _digest(name, length=32)
    return f"{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:]}"


def _digest(*parts: str, length: int = 17) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:length]


class AwsRefusal(ConfigError):
    """What the AWS API would refuse at create time (components/aws_limits.py): the plan fails
    as `pulumi up` would, before anything is created."""

    @staticmethod
    def header(stack: str, count: int) -> str:
        return f"stack '{stack}': AWS would refuse what it creates; nothing was created:"


def refusals(resource_type: str, name: str, inputs: dict[str, Any]) -> list[Problem]:
    """What AWS would refuse in this resource's inputs (unknown values are not judged)."""
    known = {k: v for k, v in inputs.items() if not (isinstance(v, str) and v == rpc.UNKNOWN)}
    return [
        Problem(
            path=f"{name}.{v.input_name} ({resource_type})",
            received=f"{v.size:,} {v.unit}",
            problem=f"AWS would refuse this resource: {v.message()}",
            allowed=f"at most {v.maximum:,} {v.unit}",
            fix=v.fix,
        )
        for v in violations(resource_type, known)
    ]


class PlanMocks(pulumi.runtime.Mocks):
    """Answers the engine the way AWS would, deterministically."""

    def __init__(self, region: str, zones: list[str]) -> None:
        self.region = region
        self.zones = zones
        self._node_network: ipaddress.IPv4Network | None = None
        self.invokes: list[tuple[str, dict[str, Any]]] = []
        self.refused: list[Problem] = []
        self._inbound: dict[str, int] = {}  # security group id -> its inbound rules

    def arn(self, service: str, resource: str, regional: bool = True) -> str:
        region = self.region if regional else ""
        return f"arn:aws:{service}:{region}:{MOCK_ACCOUNT}:{resource}"

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        typ, name, inputs = args.typ, args.name, dict(args.inputs)
        self.refused += refusals(typ, name, inputs)  # run_plan turns them into the plan's error
        if typ == INGRESS_RULE:
            self.refused += self._inbound_rule(name, inputs.get("securityGroupId"))
        if typ == "pulumi:pulumi:StackReference":
            return self._stack_reference(inputs.get("name", name))
        identity = [str(inputs.get(field, "")) for field in CREATE_ONLY.get(typ, ())]
        physical = f"{ID_PREFIX.get(typ, name)}-{_digest(typ, name, *identity)}"
        state = {**inputs, "arn": inputs.get("arn", self.arn("ec2", physical))}
        if typ == "aws:ec2/subnet:Subnet" and name.endswith("-private"):
            self._node_network = ipaddress.IPv4Network(inputs["cidrBlock"])
        elif typ == "aws:ec2/instance:Instance":
            state["privateIp"] = self._node_address()
            state["instanceState"] = "running"
        elif typ == "aws:ec2/launchTemplate:LaunchTemplate":
            state["latestVersion"] = 1
        elif typ == "aws:ec2/placementGroup:PlacementGroup":
            state["name"] = inputs.get("name", f"{name}-{_digest(typ, name, length=7)}")
            state["arn"] = self.arn("ec2", f"placement-group/{state['name']}")
        elif typ == "aws:autoscaling/group:Group":
            physical = inputs.get("name") or f"{name}-{_digest(name, length=7)}"
            state.update(
                name=physical,
                arn=self.arn("autoscaling", f"autoScalingGroup:{_digest(name)}:{physical}"),
            )
        elif typ == "aws:ec2/capacityReservation:CapacityReservation":
            physical = f"cr-{_digest(typ, name)}"
            state["arn"] = self.arn("ec2", f"capacity-reservation/{physical}")
        elif typ == "aws:iam/serviceLinkedRole:ServiceLinkedRole":
            service = inputs["awsServiceName"]
            role = "AWSServiceRoleForAutoScaling" + (
                f"_{inputs['customSuffix']}" if inputs.get("customSuffix") else ""
            )
            physical = self.arn("iam", f"role/aws-service-role/{service}/{role}", regional=False)
            state.update(arn=physical, name=role)
        elif typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            physical = f"fs-{_digest(typ, name)}"
            state.update(
                dnsName=f"{physical}.fsx.{self.region}.amazonaws.com",
                mountName=_digest(name, length=8),
                arn=self.arn("fsx", f"file-system/{physical}"),
            )
        elif typ == "aws:cloudwatch/eventRule:EventRule":
            state.update(
                name=inputs.get("name") or physical, arn=self.arn("events", f"rule/{physical}")
            )
        elif typ == "aws:kms/key:Key":
            key_id = "-".join(
                (_digest(name, length=8), "1234", "5678", "9abc", _digest(name, length=12))
            )
            physical = key_id
            state.update(keyId=key_id, arn=self.arn("kms", f"key/{key_id}"))
        elif typ == "aws:s3/bucket:Bucket":
            bucket = inputs.get("bucket") or f"{name}-{_digest(name, length=8)}"
            physical = bucket
            state.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}")
        elif typ in ("aws:iam/role:Role", "aws:iam/instanceProfile:InstanceProfile"):
            kind = "role" if typ.endswith("Role") else "instance-profile"
            physical = f"{name}-{_digest(name, length=7)}"
            state.update(name=physical, arn=self.arn("iam", f"{kind}/{physical}", regional=False))
        elif typ == "aws:cloudwatch/logGroup:LogGroup":
            group = inputs.get("name", name)
            state["arn"] = self.arn("logs", f"log-group:{group}")
        elif typ == "aws:acm/certificate:Certificate":
            domain, token = inputs["domainName"], _digest(name, length=32)
            state.update(
                arn=self.arn("acm", f"certificate/{_uuid(name)}"),
                domainValidationOptions=[
                    {
                        "domainName": domain,
                        "resourceRecordName": f"_{token}.{domain}.",
                        "resourceRecordType": "CNAME",
                        "resourceRecordValue": f"_{_digest(token, length=32)}.acm-validations.aws.",
                    }
                ],
            )
        elif typ == "aws:acm/certificateValidation:CertificateValidation":
            state["certificateArn"] = inputs["certificateArn"]
        elif typ == "aws:route53/record:Record":
            state["fqdn"] = str(inputs.get("name", name)).rstrip(".")
        elif typ == "aws:lb/loadBalancer:LoadBalancer":
            suffix = f"app/{name[:32]}/{_digest(name, length=16)}"
            state.update(
                arn=self.arn("elasticloadbalancing", f"loadbalancer/{suffix}"),
                arnSuffix=suffix,
                dnsName=f"{name[:32]}-{_digest(name, length=10)}.{self.region}.elb.amazonaws.com",
                zoneId="Z35SXDOTRQ7X7K",
            )
        elif typ == "aws:lb/targetGroup:TargetGroup":
            suffix = f"targetgroup/{name[:32]}/{_digest(name, length=16)}"
            state.update(arn=self.arn("elasticloadbalancing", suffix), arnSuffix=suffix)
        elif typ == WEB_ACL:  # arn:aws:wafv2:<region>:<account>:regional/webacl/<name>/<id>
            acl = inputs.get("name") or name
            rules = [revealed(r) for r in revealed(inputs.get("rules")) or []]  # may be secret
            state.update(
                arn=self.arn("wafv2", f"regional/webacl/{acl}/{_uuid(name)}"),
                capacity=web_acl_wcu(rules)[0],
            )
        elif typ == DASHBOARD:  # global per account: arn:aws:cloudwatch::<account>:dashboard/<name>
            board = inputs.get("dashboardName") or name
            state["dashboardArn"] = self.arn("cloudwatch", f"dashboard/{board}", regional=False)
        elif typ == "aws:sns/topic:Topic":
            state["arn"] = self.arn("sns", f"{name}-{_digest(name, length=7)}")
        return physical, state

    def _inbound_rule(self, name: str, group: Any) -> list[Problem]:
        """One more inbound rule of ``group``: refused past the quota (once per group)."""
        if not isinstance(group, str) or group == rpc.UNKNOWN:
            return []
        self._inbound[group] = count = self._inbound.get(group, 0) + 1
        v = inbound_rules_violation(group, count)
        if v is None or count != v.maximum + 1:
            return []
        return [
            Problem(
                path=f"{name}.securityGroupId ({INGRESS_RULE})",
                received=f"{v.size:,} {v.unit}",
                problem=f"AWS would refuse this resource: {v.message()}",
                allowed=f"at most {v.maximum:,} {v.unit}",
                fix=v.fix,
            )
        ]

    def _node_address(self) -> str:
        """A single node gets the first address after the reserved start of the node subnet."""
        network = self._node_network or ipaddress.IPv4Network("10.0.0.0/24")
        return str(network[FIRST_NODE_HOST])

    def _stack_reference(self, ref: str) -> tuple[str, dict[str, Any]]:
        stack = ref.rsplit("/", 1)[-1]
        bucket = f"gpuc-{stack}-{MOCK_ACCOUNT}-{self.region}"
        key_id = f"{_digest(ref, length=8)}-1234-5678-9abc-{_digest(ref, length=12)}"
        outputs = {
            "bucketName": bucket,
            "bucketArn": f"arn:aws:s3:::{bucket}",
            "kmsKeyArn": self.arn("kms", f"key/{key_id}"),
        }
        return ref, {"name": ref, "outputs": outputs, "secretOutputNames": []}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list]:
        token, inputs = args.token, args.args
        self.invokes.append((token, dict(inputs)))
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            return {
                "accountId": MOCK_ACCOUNT,
                "arn": f"arn:aws:iam::{MOCK_ACCOUNT}:user/planner",
                "userId": "AIDAPLANNER000000000",
                "id": MOCK_ACCOUNT,
            }, []
        if token == "aws:index/getPartition:getPartition":
            return {
                "partition": "aws",
                "dnsSuffix": "amazonaws.com",
                "reverseDnsPrefix": "com.amazonaws",
                "id": "aws",
            }, []
        if token == "aws:index/getRegion:getRegion":
            return {"name": self.region, "region": self.region, "id": self.region}, []
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            return {"names": self.zones, "id": self.region, "state": "available"}, []
        if token == "aws:ssm/getParameter:getParameter":
            name = inputs.get("name", "")
            arch = "arm64" if "/arm64/" in name else "x86_64"
            return {
                "name": name,
                "value": MOCK_AMI[arch],
                "insecureValue": MOCK_AMI[arch],
                "type": "String",
                "arn": self.arn("ssm", f"parameter{name}"),
                "id": name,
                "version": 1,
                "withDecryption": True,
            }, []
        if token == "aws:ec2/getAmi:getAmi":
            filters = {f["name"]: f["values"][0] for f in inputs.get("filters", []) if f["values"]}
            if "name" in filters:  # a Deep Learning AMI release, by its image name
                name = filters["name"]
                arch = "arm64" if "ARM64" in name else "x86_64"
                image = MOCK_AMI[arch]
            else:
                image = filters.get("image-id", "")
                arch = "arm64" if image == MOCK_AMI["arm64"] else "x86_64"
                # the image behind the SSM parameter is known only at `pulumi up`: no made-up
                # release in the plan
                name = "(the newest Deep Learning AMI release, read at pulumi up)"
                if image not in MOCK_AMI.values():
                    name = f"custom {image}"
            return {
                "id": image,
                "imageId": image,
                "architecture": arch,
                # the Deep Learning AMIs are Ubuntu (/dev/sda1); others answer like Amazon Linux
                "rootDeviceName": "/dev/sda1" if image in MOCK_AMI.values() else "/dev/xvda",
                "rootDeviceType": "ebs",
                "blockDeviceMappings": [
                    {
                        "deviceName": "/dev/sda1" if image in MOCK_AMI.values() else "/dev/xvda",
                        "ebs": {"volume_size": str(MOCK_ROOT_SNAPSHOT_GIB)},
                    }
                ],
                "virtualizationType": "hvm",
                "name": name,
            }, []
        return {}, []
