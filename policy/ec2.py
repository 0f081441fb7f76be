"""EC2 controls: instance metadata, public addresses, disk encryption, network interfaces,
account-level EBS guards."""

from __future__ import annotations

import base64
import binascii
import gzip
import re

from gpu_cluster.policy import aws_types as t
from gpu_cluster.policy.control import control
from gpu_cluster.policy.resources import Res, Stack, as_list, has_efa, truthy

NODES = (t.INSTANCE, t.LAUNCH_TEMPLATE)


def _uses_template(r: Res) -> bool:
    """An instance launched from a template: the template carries its settings."""
    return r.type == t.INSTANCE and "launchTemplate" in r.props


@control(
    "EC2.8",
    "ec2-8-instance-imdsv2",
    "EC2 instances should use Instance Metadata Service Version 2 (IMDSv2)",
    "high",
    "set metadataOptions.httpTokens to 'required' (or launch from a template that does)",
    t.INSTANCE,
)
def instance_imdsv2(r: Res, stack: Stack) -> list[str] | None:
    if _uses_template(r):
        return None
    tokens = (r.props.get("metadataOptions") or {}).get("httpTokens")
    return [] if tokens == "required" else [f"httpTokens is {tokens!r}, not 'required'"]


@control(
    "EC2.170",
    "ec2-170-launch-template-imdsv2",
    "EC2 launch templates should use Instance Metadata Service Version 2 (IMDSv2)",
    "low",
    "set metadataOptions.httpTokens to 'required' in the launch template",
    t.LAUNCH_TEMPLATE,
)
def template_imdsv2(r: Res, stack: Stack) -> list[str] | None:
    tokens = (r.props.get("metadataOptions") or {}).get("httpTokens")
    return [] if tokens == "required" else [f"httpTokens is {tokens!r}, not 'required'"]


@control(
    "NIST.800-53.r5 SC-7",
    "imds-hop-limit-one",
    "Instance metadata answers the node only: PUT response hop limit 1 (Security Hub had this "
    "as AutoScaling.4, retired in 2024)",
    "medium",
    "leave containerNetwork at 'host' (hop limit 1); set it to 'bridge' only for bridge-network "
    "containers, which need hop limit 2",
    NODES,
)
def imds_hop_limit(r: Res, stack: Stack) -> list[str] | None:
    if _uses_template(r):
        return None
    options = r.props.get("metadataOptions") or {}
    hops = options.get("httpPutResponseHopLimit")
    return [] if hops == 1 else [f"httpPutResponseHopLimit is {hops!r}, not 1"]


def _interfaces(r: Res) -> list[dict]:
    return [dict(n) for n in as_list(r.props.get("networkInterfaces"))]


@control(
    "EC2.9",
    "ec2-9-instance-no-public-ipv4",
    "EC2 instances should not have a public IPv4 address",
    "high",
    "set associatePublicIpAddress false and reach nodes through SSM Session Manager",
    t.INSTANCE,
)
def instance_public_ip(r: Res, stack: Stack) -> list[str] | None:
    if _uses_template(r) and "associatePublicIpAddress" not in r.props:
        return None
    if truthy(r.props.get("associatePublicIpAddress")):
        return ["associatePublicIpAddress is true"]
    return []


@control(
    "EC2.15",
    "ec2-15-subnet-no-auto-public-ip",
    "EC2 subnets should not automatically assign public IP addresses",
    "medium",
    "set mapPublicIpOnLaunch false on the subnet",
    t.SUBNET,
)
def subnet_public_ip(r: Res, stack: Stack) -> list[str] | None:
    return ["mapPublicIpOnLaunch is true"] if truthy(r.props.get("mapPublicIpOnLaunch")) else []


@control(
    "EC2.25",
    "ec2-25-launch-template-no-public-ip",
    "EC2 launch templates should not assign public IPs to network interfaces",
    "high",
    "set associatePublicIpAddress 'false' on the template's interfaces (publicIp: false)",
    t.LAUNCH_TEMPLATE,
)
def template_public_ip(r: Res, stack: Stack) -> list[str] | None:
    return [
        f"interface {n.get('networkCardIndex', 0)}.{n.get('deviceIndex', 0)} gets a public IP"
        for n in _interfaces(r)
        if truthy(n.get("associatePublicIpAddress"))
    ]


@control(
    "EC2.17",
    "ec2-17-single-network-interface",
    "EC2 instances should not use multiple ENIs",
    "low",
    "use one network interface, or record why more are needed in policy/suppressions.py",
    t.LAUNCH_TEMPLATE,
)
def single_interface(r: Res, stack: Stack) -> list[str] | None:
    count = len(_interfaces(r))
    return [f"{count} network interfaces"] if count > 1 else []


def _unencrypted(ebs: dict, where: str) -> list[str]:
    if not truthy(ebs.get("encrypted")):
        return [f"{where}: not encrypted"]
    if not ebs.get("kmsKeyId"):
        return [f"{where}: encrypted with the AWS managed key, not a customer key"]
    return []


@control(
    "EC2.3",
    "ec2-3-volumes-encrypted",
    "Attached Amazon EBS volumes should be encrypted at-rest (with a customer managed key)",
    "medium",
    "set encrypted true and kmsKeyId to the cluster key on every volume and block device",
    (t.INSTANCE, t.VOLUME),
)
def volumes_encrypted(r: Res, stack: Stack) -> list[str] | None:
    if r.type == t.VOLUME:
        return _unencrypted(dict(r.props), "volume")
    devices = [("root", r.props.get("rootBlockDevice"))] + [
        (d.get("deviceName", "ebs"), d) for d in as_list(r.props.get("ebsBlockDevices"))
    ]
    present = [(where, dict(d)) for where, d in devices if d]
    if not present and _uses_template(r):
        return None
    problems = []
    for where, device in present:
        problems += _unencrypted(device, where)
    return problems


@control(
    "EC2.181",
    "ec2-181-launch-template-ebs-encrypted",
    "EC2 launch templates should enable encryption for attached EBS volumes",
    "medium",
    "set ebs.encrypted 'true' and ebs.kmsKeyId on every block device mapping of the template",
    t.LAUNCH_TEMPLATE,
)
def template_volumes_encrypted(r: Res, stack: Stack) -> list[str]:
    problems = []
    for mapping in as_list(r.props.get("blockDeviceMappings")):
        if mapping.get("virtualName") or mapping.get("noDevice"):
            continue  # instance-store NVMe: encrypted by the hardware, no EBS
        problems += _unencrypted(dict(mapping.get("ebs") or {}), mapping.get("deviceName", "?"))
    return problems


@control(
    "NIST.800-53.r5 SC-7",
    "efa-self-referencing-rules",
    "EFA interfaces sit in a security group that allows all traffic to and from itself only",
    "medium",
    "give the EFA security group one ingress and one egress rule, all protocols, referencing "
    "itself (EFA's OS-bypass traffic is refused otherwise)",
    t.LAUNCH_TEMPLATE,
    uses_stack=True,
)
def efa_self_rules(r: Res, stack: Stack) -> list[str] | None:
    if not has_efa(r):
        return None
    groups = stack.referred(r, "networkInterfaces", t.SECURITY_GROUP)
    if not groups:
        return ["the EFA interfaces' security group is not declared in this stack"]
    problems = []
    for group in groups:
        for kind, rule_type in (("ingress", t.INGRESS_RULE), ("egress", t.EGRESS_RULE)):
            own = [
                rule
                for rule in stack.referring(group, rule_type, "securityGroupId")
                if rule.refers_to("referencedSecurityGroupId", group)
                and str(rule.props.get("ipProtocol")) == "-1"
            ]
            if not own:
                problems.append(f"{group.name}: no all-traffic {kind} rule referencing itself")
    return problems


@control(
    "EC2.7",
    "ec2-7-ebs-default-encryption",
    "EBS default encryption should be enabled",
    "medium",
    "leave accountGuards.ebsEncryptionByDefault true (or enable it in the EC2 console)",
    t.EBS_DEFAULT_ENCRYPTION,
)
def ebs_default_encryption(r: Res, stack: Stack) -> list[str]:
    return [] if r.props.get("enabled", True) is True else ["enabled is false"]


@control(
    "EC2.182",
    "ec2-182-snapshot-block-public-access",
    "Block public access settings should be enabled for Amazon EBS snapshots",
    "high",
    "set the snapshot block public access state to 'block-all-sharing'",
    t.SNAPSHOT_BLOCK_PUBLIC_ACCESS,
)
def snapshot_block_public_access(r: Res, stack: Stack) -> list[str]:
    state = r.props.get("state")
    return [] if state == "block-all-sharing" else [f"state is {state!r}"]


# What a secret looks like in a boot script: AWS keys, private keys, token/password assignments.
SECRET_PATTERNS = {
    "an AWS access key id": re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"),
    "a private key": re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
    "a secret assigned a literal value": re.compile(
        r"(?i)\b[A-Z0-9_]*(SECRET|PASSWORD|PASSWD|API_?KEY|TOKEN)\s*[=:]\s*"
        r"['\"]?(?![$/])[^\s'\"$]{8,}"
    ),
}


def _script(r: Res) -> str:
    text = str(r.props.get("userData") or "")
    if r.type == t.LAUNCH_TEMPLATE or r.props.get("userDataBase64"):
        text = str(r.props.get("userDataBase64") or text)
        try:
            raw = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            return text
        if raw.startswith(b"\x1f\x8b"):  # gzip user data: cloud-init inflates it, so do we
            try:
                raw = gzip.decompress(raw)
            except (OSError, EOFError):
                return text
        return raw.decode(errors="replace")
    return text


@control(
    "NIST.800-53.r5 IA-5(7)",
    "no-secrets-in-user-data",
    "No passwords, tokens or keys in user data (ec2:DescribeInstanceAttribute shows it)",
    "high",
    "put the secret in stack config as a Pulumi secret (`pulumi config set --secret "
    "secrets.NAME ...`): it becomes an SSM SecureString that nodes read at boot",
    NODES,
)
def user_data_secrets(r: Res, stack: Stack) -> list[str] | None:
    script = _script(r)
    if not script:
        return None if _uses_template(r) else []
    return [
        f"user data holds {what}" for what, found in SECRET_PATTERNS.items() if found.search(script)
    ]


CONTROLS = (
    instance_imdsv2,
    template_imdsv2,
    imds_hop_limit,
    instance_public_ip,
    subnet_public_ip,
    template_public_ip,
    single_interface,
    volumes_encrypted,
    template_volumes_encrypted,
    efa_self_rules,
    ebs_default_encryption,
    snapshot_block_public_access,
    user_data_secrets,
)
