"""VPC and security-group controls: flow logs, the default group, world-open ports."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from gpu_cluster.policy import aws_types as t
from gpu_cluster.policy.control import control
from gpu_cluster.policy.resources import WORLD, Res, Stack, as_list

# EC2.19's list of high-risk ports (Security Hub, "Security groups should not allow
# unrestricted access to ports with high risk").
HIGH_RISK_PORTS = (
    20, 21, 22, 23, 25, 110, 135, 143, 445, 1433, 1434, 3000, 3306, 3389, 4333, 5000, 5432,
    5500, 5601, 8080, 8088, 8888, 9200, 9300,
)  # fmt: skip
# EC2.18's default authorizedTcpPorts: the only ports that may be open to the world.
AUTHORIZED_WORLD_PORTS = (80, 443)


@dataclass(frozen=True)
class Opening:
    """One ingress rule from the whole internet."""

    protocol: str
    from_port: int
    to_port: int

    def covers(self, port: int) -> bool:
        if self.protocol in ("-1", "all"):
            return True
        return self.protocol in ("tcp", "6") and self.from_port <= port <= self.to_port

    def ports(self) -> str:
        if self.protocol in ("-1", "all"):
            return "all ports"
        return (
            str(self.from_port)
            if self.from_port == self.to_port
            else (f"{self.from_port}-{self.to_port}")
        )


def world_openings(r: Res) -> Iterator[Opening]:
    if r.type in (t.INGRESS_RULE,):
        if {r.props.get("cidrIpv4"), r.props.get("cidrIpv6")} & set(WORLD):
            yield _opening(r.props, "ipProtocol")
    elif r.type == t.SG_RULE:
        cidrs = as_list(r.props.get("cidrBlocks")) + as_list(r.props.get("ipv6CidrBlocks"))
        if r.props.get("type") == "ingress" and set(cidrs) & set(WORLD):
            yield _opening(r.props, "protocol")
    elif r.type == t.SECURITY_GROUP:
        for rule in as_list(r.props.get("ingress")):
            cidrs = as_list(rule.get("cidrBlocks")) + as_list(rule.get("ipv6CidrBlocks"))
            if set(cidrs) & set(WORLD):
                yield _opening(rule, "protocol")


def _opening(rule, protocol_key: str) -> Opening:
    protocol = str(rule.get(protocol_key, "-1")).lower()
    return Opening(protocol, int(rule.get("fromPort") or 0), int(rule.get("toPort") or 65535))


INGRESS = (t.INGRESS_RULE, t.SG_RULE, t.SECURITY_GROUP)


def _open_ports(r: Res, ports: tuple[int, ...]) -> list[str]:
    return [
        f"port {port} open to the internet ({opening.protocol} {opening.ports()})"
        for opening in world_openings(r)
        for port in ports
        if opening.covers(port)
    ]


@control(
    "EC2.13",
    "ec2-13-no-world-ssh",
    "Security groups should not allow ingress from 0.0.0.0/0 or ::/0 to port 22",
    "high",
    "remove the rule: nodes are reached through SSM Session Manager, not SSH",
    INGRESS,
)
def world_ssh(r: Res, stack: Stack) -> list[str]:
    return _open_ports(r, (22,))


@control(
    "EC2.14",
    "ec2-14-no-world-rdp",
    "Security groups should not allow ingress from 0.0.0.0/0 or ::/0 to port 3389",
    "high",
    "remove the rule: use SSM Session Manager (port forwarding) instead",
    INGRESS,
)
def world_rdp(r: Res, stack: Stack) -> list[str]:
    return _open_ports(r, (3389,))


@control(
    "EC2.19",
    "ec2-19-no-world-high-risk-ports",
    "Security groups should not allow unrestricted access to ports with high risk",
    "critical",
    "remove the rule, or open the port to a known CIDR or security group only",
    INGRESS,
)
def world_high_risk(r: Res, stack: Stack) -> list[str]:
    return _open_ports(r, HIGH_RISK_PORTS)


@control(
    "EC2.18",
    "ec2-18-world-only-authorized-ports",
    "Security groups should only allow unrestricted incoming traffic for authorized ports "
    "(80 and 443)",
    "high",
    "open only 443 (and 80 for an HTTPS redirect) to the internet, on a load balancer",
    INGRESS,
)
def world_unauthorized(r: Res, stack: Stack) -> list[str]:
    return [
        f"{opening.protocol} {opening.ports()} open to the internet"
        for opening in world_openings(r)
        if not (
            opening.protocol in ("tcp", "6")
            and all(
                p in AUTHORIZED_WORLD_PORTS for p in range(opening.from_port, opening.to_port + 1)
            )
        )
    ]


@control(
    "EC2.2",
    "ec2-2-default-security-group-closed",
    "VPC default security groups should not allow inbound or outbound traffic",
    "high",
    "adopt the VPC's default security group with aws.ec2.DefaultSecurityGroup and no rules",
    t.VPC,
    uses_stack=True,
)
def default_group_closed(r: Res, stack: Stack) -> list[str]:
    adopted = stack.referring(r, t.DEFAULT_SG, "vpcId")
    if not adopted:
        return ["the default security group keeps AWS's allow-all rules (not adopted)"]
    return [
        f"{group.name}: {kind} rules present"
        for group in adopted
        for kind in ("ingress", "egress")
        if as_list(group.props.get(kind))
    ]


@control(
    "EC2.6",
    "ec2-6-vpc-flow-logs",
    "VPC flow logging should be enabled in all VPCs",
    "medium",
    "add an aws.ec2.FlowLog for the VPC (trafficType ALL or REJECT)",
    t.VPC,
    uses_stack=True,
)
def vpc_flow_logs(r: Res, stack: Stack) -> list[str]:
    logs = [
        log
        for log in stack.referring(r, t.FLOW_LOG, "vpcId")
        if log.props.get("trafficType") in ("ALL", "REJECT")
    ]
    return [] if logs else ["no flow log records this VPC's rejected traffic"]


CONTROLS = (
    default_group_closed,
    world_ssh,
    world_rdp,
    world_high_risk,
    world_unauthorized,
    vpc_flow_logs,
)
