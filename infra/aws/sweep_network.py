"""What a destroyed stack's network can leave: load balancers (with their listeners), the web
ACLs in front of them, target groups, subnets, route tables, internet gateways and VPCs. None of
them bills by itself except a load balancer and a web ACL, but each blocks deleting the VPC, and
a VPC counts against the region's quota of five."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gpu_cluster.components.names import StackIdentity
from gpu_cluster.infra.aws import call, paginate
from gpu_cluster.infra.aws.sweep_kinds import Leftover, has_tag, stack_filter
from gpu_cluster.infra.prices.unit_prices import unit_prices
from gpu_cluster.infra.problems import AwsError

WEB_ACL_SCOPE = "REGIONAL"  # a load balancer's (components/waf.py)
WAF_MISSING = "WAFNonexistentItemException"


class NetworkSweep:
    ec2: Any
    elbv2: Any
    wafv2: Any
    region: str
    stack: str

    if TYPE_CHECKING:  # the Sweeper's (sweep.py)

        @property
        def identity(self) -> StackIdentity: ...

    def load_balancers(self) -> Iterator[Leftover]:
        if self.elbv2 is None:
            return
        balancers = list(paginate(self.elbv2, "elbv2", "DescribeLoadBalancers", "LoadBalancers"))
        for tagged in self._elbv2_tagged([b["LoadBalancerArn"] for b in balancers]):
            balancer = next(b for b in balancers if b["LoadBalancerArn"] == tagged)
            hourly = unit_prices(self.region)["alb_hour"]
            yield Leftover("load balancer", tagged, balancer.get("LoadBalancerName", ""), hourly)

    def web_acls(self) -> Iterator[Leftover]:
        """The stack's REGIONAL web ACLs, by their stack-id tag (ListWebACLs pages by marker:
        botocore has no paginator for it). Priced at the web ACL's month; its rules are not
        listed here."""
        if self.wafv2 is None:
            return
        unit = unit_prices(self.region)
        marker: dict[str, str] = {}
        while True:
            page = call(
                self.wafv2, "wafv2", "ListWebACLs", Scope=WEB_ACL_SCOPE, Limit=100, **marker
            )
            for acl in page.get("WebACLs", []):
                info = call(self.wafv2, "wafv2", "ListTagsForResource", ResourceARN=acl["ARN"])
                tags = info.get("TagInfoForResource", {}).get("TagList", [])
                if has_tag(tags, self.identity):
                    hourly = unit["waf_web_acl_month"] / unit.hours_per_month
                    yield Leftover("web ACL", acl["ARN"], acl.get("Name", ""), hourly)
            if not page.get("NextMarker") or not page.get("WebACLs"):
                return
            marker = {"NextMarker": page["NextMarker"]}

    def _delete_web_acl(self, arn: str) -> None:
        """Its logging configuration first, then the web ACL (with the lock token WAF needs;
        the load balancers it protected are deleted before it, taking the associations)."""
        name, acl_id = arn.rsplit("/", 2)[-2:]
        try:
            call(self.wafv2, "wafv2", "DeleteLoggingConfiguration", ResourceArn=arn)
        except AwsError as error:
            if error.code != WAF_MISSING:
                raise
        found = call(self.wafv2, "wafv2", "GetWebACL", Name=name, Scope=WEB_ACL_SCOPE, Id=acl_id)
        call(
            self.wafv2,
            "wafv2",
            "DeleteWebACL",
            Name=name,
            Scope=WEB_ACL_SCOPE,
            Id=acl_id,
            LockToken=found["LockToken"],
        )

    def target_groups(self) -> Iterator[Leftover]:
        if self.elbv2 is None:
            return
        groups = list(paginate(self.elbv2, "elbv2", "DescribeTargetGroups", "TargetGroups"))
        for tagged in self._elbv2_tagged([g["TargetGroupArn"] for g in groups]):
            group = next(g for g in groups if g["TargetGroupArn"] == tagged)
            yield Leftover("target group", tagged, group.get("TargetGroupName", ""), 0.0)

    def _elbv2_tagged(self, arns: list[str]) -> Iterator[str]:
        for start in range(0, len(arns), 20):  # DescribeTags takes at most 20 ARNs
            described = call(
                self.elbv2, "elbv2", "DescribeTags", ResourceArns=arns[start : start + 20]
            )
            for entry in described.get("TagDescriptions", []):
                if has_tag(entry.get("Tags"), self.identity):
                    yield entry["ResourceArn"]

    def subnets(self) -> Iterator[Leftover]:
        for subnet in paginate(
            self.ec2, "ec2", "DescribeSubnets", "Subnets", Filters=stack_filter(self.identity)
        ):
            yield Leftover("subnet", subnet["SubnetId"], subnet.get("CidrBlock", ""), 0.0)

    def route_tables(self) -> Iterator[Leftover]:
        for table in paginate(
            self.ec2,
            "ec2",
            "DescribeRouteTables",
            "RouteTables",
            Filters=stack_filter(self.identity),
        ):
            if any(a.get("Main") for a in table.get("Associations", [])):
                continue  # the VPC's main table goes with the VPC
            yield Leftover("route table", table["RouteTableId"], "", 0.0)

    def internet_gateways(self) -> Iterator[Leftover]:
        for gateway in paginate(
            self.ec2,
            "ec2",
            "DescribeInternetGateways",
            "InternetGateways",
            Filters=stack_filter(self.identity),
        ):
            attached = ",".join(a["VpcId"] for a in gateway.get("Attachments", []))
            yield Leftover("internet gateway", gateway["InternetGatewayId"], attached, 0.0)

    def vpcs(self) -> Iterator[Leftover]:
        for vpc in paginate(
            self.ec2, "ec2", "DescribeVpcs", "Vpcs", Filters=stack_filter(self.identity)
        ):
            yield Leftover("VPC", vpc["VpcId"], vpc.get("CidrBlock", ""), 0.0)

    def revoke_group_references(self, group_ids: list[str]) -> None:
        """Security groups that name each other (load balancer -> nodes, nodes <- load
        balancer) cannot be deleted while the other's rule exists: revoke such rules first."""
        if not group_ids:
            return
        rules = paginate(
            self.ec2,
            "ec2",
            "DescribeSecurityGroupRules",
            "SecurityGroupRules",
            Filters=[{"Name": "group-id", "Values": group_ids}],
        )
        referencing: dict[tuple[str, bool], list[str]] = {}
        for rule in rules:
            if rule.get("ReferencedGroupInfo"):
                key = (rule["GroupId"], bool(rule.get("IsEgress")))
                referencing.setdefault(key, []).append(rule["SecurityGroupRuleId"])
        for (group, egress), ids in referencing.items():
            operation = "RevokeSecurityGroupEgress" if egress else "RevokeSecurityGroupIngress"
            call(self.ec2, "ec2", operation, GroupId=group, SecurityGroupRuleIds=ids)

    def delete_network(self, leftover: Leftover) -> bool:
        """Delete one network leftover; False when the kind is not a network kind."""
        ec2, elbv2, kind, key = self.ec2, self.elbv2, leftover.kind, leftover.resource_id
        if kind == "load balancer":  # its listeners go with it
            # a serving stack turns deletion protection on, and DeleteLoadBalancer refuses
            # a protected load balancer
            call(
                elbv2,
                "elbv2",
                "ModifyLoadBalancerAttributes",
                LoadBalancerArn=key,
                Attributes=[{"Key": "deletion_protection.enabled", "Value": "false"}],
            )
            call(elbv2, "elbv2", "DeleteLoadBalancer", LoadBalancerArn=key)
        elif kind == "web ACL":
            self._delete_web_acl(key)
        elif kind == "target group":
            call(elbv2, "elbv2", "DeleteTargetGroup", TargetGroupArn=key)
        elif kind == "subnet":
            call(ec2, "ec2", "DeleteSubnet", SubnetId=key)
        elif kind == "route table":
            table = call(ec2, "ec2", "DescribeRouteTables", RouteTableIds=[key])
            for association in table["RouteTables"][0].get("Associations", []):
                call(
                    ec2,
                    "ec2",
                    "DisassociateRouteTable",
                    AssociationId=association["RouteTableAssociationId"],
                )
            call(ec2, "ec2", "DeleteRouteTable", RouteTableId=key)
        elif kind == "internet gateway":
            for vpc in filter(None, leftover.detail.split(",")):
                call(ec2, "ec2", "DetachInternetGateway", InternetGatewayId=key, VpcId=vpc)
            call(ec2, "ec2", "DeleteInternetGateway", InternetGatewayId=key)
        elif kind == "VPC":
            call(ec2, "ec2", "DeleteVpc", VpcId=key)
        else:
            return False
        return True
