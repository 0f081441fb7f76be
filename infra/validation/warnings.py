"""Warnings: settings that are valid but probably not what the user meant. They never stop a
plan; `gpuc plan` prints them and the Pulumi program logs them (`pulumi up` shows them)."""

from __future__ import annotations

import ipaddress
from datetime import datetime

from gpu_cluster.components.cost_controls import WARNING_BEFORE_EXPIRY
from gpu_cluster.components.quotas import on_demand_quota
from gpu_cluster.infra.prices.gpu_prices import spot_by_zone
from gpu_cluster.infra.prices.unit_prices import hours_per_month
from gpu_cluster.infra.suggest import suggest
from gpu_cluster.infra.validation.common import GO_TIME, config_moment
from gpu_cluster.infra.validation.cost_controls import gang_timeout_minutes, prepaid

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


def timestamp_tag_warnings(tags: dict[str, str]) -> list[str]:
    """A tag value Pulumi read as a timestamp (unquoted 2026-12-01) reaches AWS in Go's form."""
    return [
        f"tags.{name}: an unquoted date or time reaches the program as {value!r} (Pulumi reads "
        f"it as a timestamp); quote it in the stack file to keep it as written"
        for name, value in sorted(tags.items())
        if GO_TIME.match(value)
    ]


def cost_control_warnings(
    spec, instance_type: str, zone_id: str | None, now: datetime
) -> list[str]:
    """Cost controls that are valid but probably not what was meant."""
    found = []
    if spec.budget is not None and not spec.alert_emails:
        found.append(
            "budget: no alertEmails, so its 80 % and 100 % alerts reach no one (pulumi config "
            "set --path alertEmails[0] you@example.com)"
        )
    # prepaid capacity keeps its topic for the nodes' own alerts (CostControls.alerts)
    gang = gang_timeout_minutes(spec) > 0 or (prepaid(spec) and spec.role == "cluster")
    if spec.alert_emails and spec.budget is None and spec.expires_at is None and not gang:
        found.append(
            "alertEmails: nothing sends alerts without a budget, expiresAt or a multi-node "
            "group's gangTimeoutMinutes, so no topic is created for them"
        )
    idle = spec.idle_stop
    if idle is not None and idle.below_percent is not None and idle.below_percent < 1:
        found.append(
            f"idleStop.belowPercent: {idle.below_percent:g} is {idle.below_percent:g} % GPU "
            f"utilization, not {idle.below_percent * 100:g} % (it is a percentage)"
        )
    if spec.expires_at is not None and (moment := config_moment(spec.expires_at)) is not None:
        minutes = (moment - now).total_seconds() / 60
        if 0 < minutes < WARNING_BEFORE_EXPIRY.total_seconds() / 60:
            found.append(
                f"expiresAt: the nodes stop in {minutes:.0f} minutes, inside the hour before "
                "it, so its warning (an hour ahead) is never sent"
            )
    spot = spec.spot
    if spec.purchase_option == "spot" and spot is not None and spot.max_price and zone_id:
        kind = instance_type
        current = spot_by_zone(spec.region, kind).get(zone_id)
        if current is not None and spot.max_price < current:
            found.append(
                f"spot.maxPrice: ${spot.max_price:g}/h is below the current spot price "
                f"${current:g}/h of {kind} in {spec.availability_zone} (the snapshot's): no node "
                "launches until the price falls"
            )
    return found
