"""What a planned change collides with while the engine runs it: the checks behind "this change
cannot be applied as is".

Engine order relied on (pulumi/pulumi pkg/resource/deploy/step_generator.go and
step_executor.go): a replacement is create-first unless the resource is delete-before-replace,
and the old resource of a create-first replacement is deleted only at the end of the update,
after every create. For a delete-before-replace resource the engine first deletes each
dependent that would be replaced with it (calculateDependentReplacements: the dependent's
inputs taken from the replaced resource become unknown, then its provider Diff and its
replaceOnChanges decide); a dependent that would only be updated is left in place.

AWS behaviour relied on (EC2 API reference unless noted):
- CreateSubnet refuses a CIDR that overlaps a subnet of the VPC (InvalidSubnet.Conflict), and
  DeleteSubnet refuses a subnet that still holds a network interface (DependencyViolation);
- CreateNatGateway refuses an Elastic IP that is still associated (Resource.AlreadyAssociated);
- fixed names are unique per account and region: load balancers and target groups
  (DuplicateLoadBalancerName, DuplicateTargetGroupName), log groups
  (ResourceAlreadyExistsException), KMS aliases (AlreadyExistsException), budgets
  (DuplicateRecordException), service-linked role suffixes (InvalidInput);
- an S3 bucket has one configuration of each kind (policy, lifecycle, encryption, ...): a
  create-first replacement writes the new one, then deleting the old one removes it;
- CreateCapacityReservation needs capacity and On-Demand quota for every instance it reserves,
  whether or not instances run outside it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from gpu_cluster.infra.diff.model import Change, cluster_name, replaces_with, role
from gpu_cluster.infra.plan.engine import Plan, PlannedResource

SUBNET = "aws:ec2/subnet:Subnet"
VPC = "aws:ec2/vpc:Vpc"
NAT = "aws:ec2/natGateway:NatGateway"
GROUP = "aws:autoscaling/group:Group"
INSTANCE = "aws:ec2/instance:Instance"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
RESERVATION = "aws:ec2/capacityReservation:CapacityReservation"

# What puts network interfaces into a subnet (each holds them until it is deleted).
INTERFACE_HOLDERS = (
    GROUP,
    INSTANCE,
    NAT,
    "aws:ec2/vpcEndpoint:VpcEndpoint",
    "aws:fsx/lustreFileSystem:LustreFileSystem",
    "aws:lb/loadBalancer:LoadBalancer",
)

# Inputs that name a resource uniquely in the account and region.
FIXED_NAMES = {
    "aws:lb/loadBalancer:LoadBalancer": "name",
    "aws:lb/targetGroup:TargetGroup": "name",
    "aws:cloudwatch/logGroup:LogGroup": "name",
    "aws:cloudwatch/logResourcePolicy:LogResourcePolicy": "policyName",
    "aws:kms/alias:Alias": "name",
    "aws:budgets/budget:Budget": "name",
    "aws:iam/serviceLinkedRole:ServiceLinkedRole": "customSuffix",
}
BUCKET_SINGLETONS = (
    "aws:s3/bucketPolicy:BucketPolicy",
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketVersioning:BucketVersioning",
    "aws:s3/bucketLogging:BucketLogging",
    "aws:s3/bucketNotification:BucketNotification",
)


@dataclass(frozen=True)
class Collision:
    type: str
    role: str
    why: str
    fix: str


def collisions(before: Plan, after: Plan, changes: list[Change]) -> list[Collision]:
    """Every step of the change AWS would refuse, in the order the engine would reach it."""
    view = _View(before, after, changes)
    found: list[Collision] = []
    for change in changes:
        if change.kind != "replace":
            continue
        old, new = view.old.get(change.key), view.new.get(change.key)
        if old is None or new is None:
            continue
        if change.delete_before_replace:
            found += view.left_in_deleted_subnet(change, old)
        else:
            found += view.create_first(change, old, new)
    found += view.reservation_capacity(changes)
    return found


class _View:
    def __init__(self, before: Plan, after: Plan, changes: list[Change]) -> None:
        self.before, self.after = before, after
        old_cluster, new_cluster = cluster_name(before), cluster_name(after)
        self.old = _by_role(before, old_cluster)
        self.new = _by_role(after, new_cluster)
        self.changes = {c.key: c for c in changes}

    def kind(self, key: tuple[str, str]) -> str | None:
        change = self.changes.get(key)
        return change.kind if change else None

    def create_first(
        self, change: Change, old: PlannedResource, new: PlannedResource
    ) -> list[Collision]:
        fix_dbr = (
            f"report it: {change.role} must be replaced delete-first (deleteBeforeReplace) for "
            "this change to apply"
        )
        found = []
        if change.type == SUBNET and self.kind((VPC, self._vpc_role(new))) != "replace":
            cidr = ipaddress.ip_network(new.inputs["cidrBlock"])
            for other in (r for r in self.old.values() if r.type == SUBNET):
                if cidr.overlaps(ipaddress.ip_network(other.inputs["cidrBlock"])):
                    found.append(
                        Collision(
                            change.type,
                            change.role,
                            f"CreateSubnet {cidr} overlaps {other.inputs['cidrBlock']} of "
                            f"subnet {role(other, cluster_name(self.before))}, which still exists "
                            "until the end of the update (InvalidSubnet.Conflict)",
                            fix_dbr,
                        )
                    )
        if change.type == NAT and self.kind(("aws:ec2/eip:Eip", f"{change.role}-eip")) is None:
            found.append(
                Collision(
                    change.type,
                    change.role,
                    "the new NAT gateway gets the Elastic IP the old one still holds "
                    "(Resource.AlreadyAssociated)",
                    fix_dbr,
                )
            )
        name_input = FIXED_NAMES.get(change.type)
        if name_input and old.inputs.get(name_input) == new.inputs.get(name_input):
            found.append(
                Collision(
                    change.type,
                    change.role,
                    f"{name_input} {new.inputs.get(name_input)!r} is still taken by the resource "
                    "it replaces",
                    fix_dbr,
                )
            )
        if change.type in BUCKET_SINGLETONS:
            found.append(
                Collision(
                    change.type,
                    change.role,
                    "the bucket holds one such configuration: the new one is written first, then "
                    "deleting the old one removes it",
                    fix_dbr,
                )
            )
        if change.type == GROUP:
            found.append(
                Collision(
                    change.type,
                    change.role,
                    "the new group launches every node while the old nodes still run: capacity "
                    "and quota for both",
                    fix_dbr,
                )
            )
        return found

    def _vpc_role(self, subnet: PlannedResource) -> str:
        urns = subnet.property_dependencies.get("vpcId", ())
        by_urn = {r.urn: key for key, r in self.new.items()}
        return next((by_urn[u][1] for u in urns if u in by_urn), "network-vpc")

    def left_in_deleted_subnet(self, change: Change, old: PlannedResource) -> list[Collision]:
        """A delete-first subnet replacement: whatever keeps an interface in the old subnet
        must be deleted by the engine before it, as a dependent that is replaced too."""
        if change.type != SUBNET:
            return []
        deleted_first = dependent_replacements(self.before, old.urn)
        templates_in_subnet = {
            r.urn
            for r in self.before.resources
            if r.type == LAUNCH_TEMPLATE and old.urn in r.dependencies
        }
        new_subnet = self.new.get(change.key)
        replaced_in_new = (
            {role(r, cluster_name(self.after)) for r in self.after.resources if r.urn in urns}
            if new_subnet and (urns := dependent_replacements(self.after, new_subnet.urn))
            else set()
        )
        found = []
        for holder in self.before.resources:
            if holder.type not in INTERFACE_HOLDERS or holder.urn in deleted_first:
                continue
            if old.urn in holder.dependencies or templates_in_subnet & set(holder.dependencies):
                name = role(holder, cluster_name(self.before))
                fix = (
                    "run `pulumi up` once without this change first: the stack's state does "
                    f"not yet hold the replace rules this version gives {name}; then apply it"
                    if name in replaced_in_new
                    else f"report it: {name} must replace with the subnet (replaceOnChanges on "
                    f"the input that takes {change.role})"
                )
                found.append(
                    Collision(
                        holder.type,
                        name,
                        f"its network interfaces stay in subnet {change.role}, so deleting that "
                        "subnet first fails (DependencyViolation): it is updated, not replaced",
                        fix,
                    )
                )
        return found

    def reservation_capacity(self, changes: list[Change]) -> list[Collision]:
        """A created reservation needs capacity and quota for every node: not while the old
        nodes still run outside it."""
        found = []
        for change in changes:
            if change.type != RESERVATION or change.kind not in ("add", "replace"):
                continue
            still_running = [
                r
                for key, r in self.old.items()
                if r.type in (GROUP, INSTANCE)
                and not (
                    change.kind == "replace"
                    and change.delete_before_replace
                    and r.urn in dependent_replacements(self.before, self.old[change.key].urn)
                )
            ]
            for nodes in still_running:
                found.append(
                    Collision(
                        change.type,
                        change.role,
                        f"the reservation is created while {role(nodes, cluster_name(self.before))}"
                        "'s nodes still run outside it: capacity and On-Demand quota for both",
                        "do it in two steps: first `pulumi destroy --target "
                        f"'{nodes.urn}' --target-dependents` (the nodes stop; the data stack "
                        "keeps datasets and checkpoints), then this change and `pulumi up`",
                    )
                )
        return found


def _by_role(plan: Plan, cluster: str) -> dict[tuple[str, str], PlannedResource]:
    return {(r.type, role(r, cluster)): r for r in plan.resources if r.custom and r.op != "read"}


def dependent_replacements(plan: Plan, root: str) -> set[str]:
    """The URNs the engine deletes before a delete-first replacement of ``root`` (itself
    included): transitively, every resource with an input taken from one of them that replaces
    the resource when it changes."""
    replaced = {root}
    grew = True
    while grew:
        grew = False
        for resource in plan.resources:
            if resource.urn in replaced or not resource.custom:
                continue
            if any(
                replaced & set(urns) and replaces_with(resource, prop)
                for prop, urns in resource.property_dependencies.items()
            ):
                replaced.add(resource.urn)
                grew = True
    return replaced
