"""Warnings: settings that are valid but probably not what the user meant. They never stop a
plan; `gpuc plan` prints them and the Pulumi program logs them (`pulumi up` shows them)."""

from __future__ import annotations

import ipaddress

from components.quotas import on_demand_quota
from infra.cost.unit_prices import hours_per_month
from infra.suggest import suggest

LARGE_GPUS = 512  # more than any stage of this project; AWS default GPU quotas are far lower
SHARED_ADDRESS_SPACE = ipaddress.IPv4Network("100.64.0.0/10")  # AWS allows it for VPCs


def data_stack_warning(stack_ref: str, known_stacks: list[str]) -> str | None:
    """A storage.stack naming a stack without a stack file here (a backend may still have it)."""
    name = stack_ref.rsplit("/", 1)[-1]
    if not known_stacks or name in known_stacks:
        return None
    hint = suggest(name, known_stacks).strip()
    return (
        f"storage.stack names '{stack_ref}', and stacks/ has no Pulumi.{name}.yaml"
        + (f"; {hint}" if hint else "")
        + " (fine if your Pulumi backend has that stack)"
    )


def size_warning(
    instance_type: str, nodes: int, gpus: int, vcpus: int, hourly_usd: float | None
) -> str | None:
    if gpus <= LARGE_GPUS:
        return None
    cost = f", about ${hourly_usd * hours_per_month():,.0f}/month on-demand" if hourly_usd else ""
    return (
        f"nodes: {nodes} is {gpus:,} GPUs and {vcpus:,} vCPUs of '{on_demand_quota(instance_type)}'"
        f"{cost}; default quotas are far smaller (Service Quotas) - is {nodes} meant?"
    )


def vpc_warning(vpc: ipaddress.IPv4Network) -> str | None:
    if (vpc.is_private and not vpc.is_loopback) or vpc.subnet_of(SHARED_ADDRESS_SPACE):
        return None
    return (
        f"network.vpcCidr {vpc} is public address space: hosts that really own it become "
        "unreachable from the cluster; use 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"
    )


def air_gapped_install_warning(nat_gateway: bool, fsx: bool) -> str | None:
    """FSx for Lustre without a NAT gateway: its client comes from outside the VPC."""
    if nat_gateway or not fsx:
        return None
    return (
        "fsx with network.natGateway false: nodes install the Lustre client from the FSx apt "
        "repository and the Ubuntu archive, outside the VPC; unless the AMI has the client, "
        "every node fails its health check (lustre) and is replaced. Keep the NAT gateway, or "
        "use an AMI with the Lustre client (ami.id)"
    )
