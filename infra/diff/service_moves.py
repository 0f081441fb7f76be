"""Where an inference service runs: what `gpuc diff` says of a change to its zones or its VPC.

A further zone swapped for another applies in one update: its subnets are named and addressed
by zone letter (components/cidr.py zone_slots), so the new zone's are created on free CIDRs, the
load balancer (SetSubnets) and the group (vpcZoneIdentifiers) move to them in place, and the
old zone's are deleted at the end of the update (infra/diff/collisions.py: removed resources
last). DeleteSubnet fails with DependencyViolation while an interface is in the subnet; the
provider retries it until the subnet's delete timeout (20 minutes by default:
hashicorp/terraform-provider-aws internal/service/ec2/vpc_subnet.go, resourceSubnetDelete ->
RetryWhenAWSErrCodeEquals(errCodeDependencyViolation); only Lambda, Comprehend and DMS
interfaces are removed for it, deleteLingeringENIs), while the group replaces the old zone's
nodes - new ones first, each through its launch hook (EC2 Auto Scaling User Guide, "Rebalancing
activities": launch before terminate) - and ELB takes its node out of the subnet.

The first zone, the VPC's CIDR, or a move into a VPC of your own cannot apply in one update:
the first zone's subnets are replaced delete-first (they carry the NAT gateway and the
endpoints) while the load balancer and the group, updated in place, still hold interfaces in
them; a load balancer stays in the VPC it was created in (ELB API SetSubnets and
SetSecurityGroups take its VPC's only: InvalidConfigurationRequest), and the target group's
fixed name is taken until the old one is deleted. `gpuc diff` refuses these with two steps
that each apply (docs/guides/serve-a-model.md, "Move the service").
"""

from __future__ import annotations

import re

from gpu_cluster.infra.diff.collision import Collision
from gpu_cluster.infra.diff.model import Change, cluster_name, role
from gpu_cluster.infra.plan.engine import Plan, PlannedResource

SUBNET = "aws:ec2/subnet:Subnet"
GROUP = "aws:autoscaling/group:Group"
LOAD_BALANCER = "aws:lb/loadBalancer:LoadBalancer"
TARGET_GROUP = "aws:lb/targetGroup:TargetGroup"

# terraform-provider-aws vpc_subnet.go: Timeouts.Delete, schema.DefaultTimeout(20 * time.Minute)
PROVIDER_SUBNET_DELETE_SECONDS = 20 * 60
# Besides the launch hook's heartbeat: the replacement's launch and boot before its hook starts,
# the target group's deregistration delay (components/inference.py: 60 s) and the old node's
# termination. An estimate, kept generous (components/network.py ZONE_SUBNET_TIMEOUTS).
NODE_REPLACEMENT_MARGIN_SECONDS = 15 * 60
# AWS's heartbeat default for a hook without one (PutLifecycleHook HeartbeatTimeout: 3600 s).
DEFAULT_HEARTBEAT_SECONDS = 3600

MOVE_FIX = (
    "the service cannot move in one update; do it in two steps, each of which applies (the "
    "data stack keeps the models; the endpoint is down in between): 1) `pulumi config set "
    "--path inference.deletionProtection false`, `pulumi up`, then `pulumi destroy`; 2) make "
    "this change, `pulumi config rm --path inference.deletionProtection`, and `pulumi up` "
    "(docs: Serve a model, 'Move the service')"
)
DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|m|s)")
UNITS = {"h": 3600, "m": 60, "s": 1}


def seconds(duration: str | None) -> int | None:
    """A Pulumi customTimeouts value (a Go duration: ``90m``, ``1h30m``) in seconds."""
    if not duration:
        return None
    parts = DURATION.findall(duration)
    return int(sum(float(n) * UNITS[unit] for n, unit in parts)) if parts else None


def heartbeat(group: PlannedResource) -> int:
    """The longest a launch hook holds a new node of the group before it is in service."""
    hooks = group.inputs.get("initialLifecycleHooks") or []
    launching = [
        h for h in hooks if isinstance(h, dict) and "LAUNCHING" in str(h.get("lifecycleTransition"))
    ]
    return max(
        (int(h.get("heartbeatTimeout") or DEFAULT_HEARTBEAT_SECONDS) for h in launching), default=0
    )


def removed_zone_subnets(before: Plan, after: Plan, changes: list[Change]) -> list[Collision]:
    """A subnet the update removes while a group the update keeps has nodes in it: the delete
    at the end of the update must outlast the group's replacing them."""
    cluster = cluster_name(before)
    kinds = {c.key: c.kind for c in changes}
    by_role = {(r.type, role(r, cluster)): r for r in before.resources if r.custom}
    groups = [
        r
        for key, r in by_role.items()
        if r.type == GROUP and kinds.get(key) not in ("remove", "replace")
    ]
    found = []
    for change in changes:
        subnet = by_role.get(change.key)
        if change.type != SUBNET or change.kind != "remove" or subnet is None:
            continue
        timeout = seconds(subnet.custom_timeouts.get("delete")) or PROVIDER_SUBNET_DELETE_SECONDS
        for group in (g for g in groups if subnet.urn in g.dependencies):
            need = heartbeat(group) + NODE_REPLACEMENT_MARGIN_SECONDS
            if need <= timeout:
                continue
            found.append(
                Collision(
                    SUBNET,
                    change.role,
                    f"DeleteSubnet is refused (DependencyViolation) while {role(group, cluster)}'s "
                    f"nodes are in it, and the provider retries it for {timeout // 60} minutes; "
                    f"the group replaces them new ones first, each through its launch hook (up "
                    f"to {heartbeat(group)} s): up to {need // 60} minutes",
                    "run `pulumi up` once without this change first (this version gives a "
                    "zone's subnets a longer delete timeout, and the stack's state must hold "
                    "it); then apply it",
                )
            )
    return found


def service_moves(
    before: Plan, after: Plan, changes: list[Change], found: list[Collision]
) -> list[Collision]:
    """An inference service moved to another first zone or VPC: the collisions that move makes
    (the load balancer or the group left in a subnet deleted first, the target group's fixed
    name, the load balancer's VPC) say the two steps that do it instead."""
    old = _service(before)
    if old is None or _service(after) is None:
        return found
    moved = []
    targets = next((c for c in changes if c.type == TARGET_GROUP), None)
    balancer = next((c for c in changes if c.type == LOAD_BALANCER), None)
    if (
        targets is not None
        and "vpcId" in targets.changed
        and (balancer is None or balancer.kind == "update")
    ):
        moved.append(
            Collision(
                LOAD_BALANCER,
                role(old, cluster_name(before)),
                "a load balancer stays in the VPC it was created in: SetSubnets and "
                "SetSecurityGroups take subnets and groups of its own VPC only "
                "(InvalidConfigurationRequest), and it is updated, not replaced",
                MOVE_FIX,
            )
        )
    service_types = (LOAD_BALANCER, TARGET_GROUP, GROUP)
    if not moved and not any(
        c.type in service_types and c.fix.startswith("report it") for c in found
    ):
        return found
    # the service moves: what it leaves behind (its first zone's subnets too) goes with step 1
    return moved + [
        Collision(c.type, c.role, c.why, MOVE_FIX) if c.type in (*service_types, SUBNET) else c
        for c in found
    ]


def _service(plan: Plan) -> PlannedResource | None:
    return next((r for r in plan.resources if r.type == LOAD_BALANCER and r.custom), None)
