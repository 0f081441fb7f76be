"""What a planned change collides with while the engine runs it: the checks behind "this change
cannot be applied as is".

Engine order relied on (pulumi/pulumi pkg/resource/deploy/step_generator.go and
step_executor.go): a replacement is create-first unless the resource is delete-before-replace,
and the old resource of a create-first replacement is deleted only at the end of the update,
after every create. So is a resource the program no longer registers: deploymentExecutor.Execute
calls performPostSteps only once the program has registered everything (each registration
returns when its step is done), and performPostSteps asks stepGenerator.GenerateDeletes for the
deletes of what was not registered (and of pending replacements) and runs them then
(deployment_executor.go). A resource removed and another of its kind added in one update
therefore both exist while the new one is created. For a delete-before-replace resource the
engine first deletes each dependent that would be replaced with it
(calculateDependentReplacements: the dependent's inputs taken from the replaced resource become
unknown, then its provider Diff and its replaceOnChanges decide); a dependent that would only
be updated is left in place.

AWS behaviour relied on (EC2 API reference unless noted):
- CreateSubnet refuses a CIDR that overlaps a subnet of the VPC (InvalidSubnet.Conflict), and
  DeleteSubnet refuses a subnet that still holds a network interface (DependencyViolation);
- CreateNatGateway refuses an Elastic IP that is still associated (Resource.AlreadyAssociated);
- fixed names are unique per account and region: load balancers and target groups
  (DuplicateLoadBalancerName, DuplicateTargetGroupName), log groups
  (ResourceAlreadyExistsException), KMS aliases (AlreadyExistsException), budgets
  (DuplicateRecordException), service-linked role suffixes (InvalidInput), SSM parameters
  (PutParameter without Overwrite: ParameterAlreadyExists), Route 53 records
  (ChangeResourceRecordSets CREATE: InvalidChangeBatch, the record already exists);
- some creates take over what has the name instead: PutResourcePolicy (CloudWatch Logs) and
  PutMetricAlarm create or update, and PutObject replaces the object at a key; deleting the old
  resource at the end then removes what the new one wrote;
- an S3 bucket has one configuration of each kind (policy, lifecycle, encryption, ...): a
  create-first replacement writes the new one, then deleting the old one removes it;
- CreateCapacityReservation needs capacity and On-Demand quota for every instance it reserves,
  whether or not instances run outside it.
"""

from __future__ import annotations

import ipaddress

from gpu_cluster.infra.diff.collision import Collision
from gpu_cluster.infra.diff.model import Change, cluster_name, replaces_with, role
from gpu_cluster.infra.diff.service_moves import removed_zone_subnets, service_moves
from gpu_cluster.infra.plan.engine import UNKNOWN_TEXT, Plan, PlannedResource

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
    "aws:ssm/parameter:Parameter": "name",
    "aws:cloudwatch/metricAlarm:MetricAlarm": "alarmName",
}
# What else makes two resources of a type the same thing to AWS (inputs, all set).
IDENTITIES: dict[str, tuple[str, ...]] = {
    **{type_: (name,) for type_, name in FIXED_NAMES.items()},
    "aws:route53/record:Record": ("zoneId", "name", "type", "setIdentifier"),
    "aws:s3/bucketObjectv2:BucketObjectv2": ("bucket", "key"),
}
# Creates that take over the resource with that identity (the API creates or updates).
TAKEN_OVER = {
    "aws:cloudwatch/logResourcePolicy:LogResourcePolicy": "PutResourcePolicy",
    "aws:cloudwatch/metricAlarm:MetricAlarm": "PutMetricAlarm",
    "aws:s3/bucketObjectv2:BucketObjectv2": "PutObject",
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
    found += view.removed_and_added(changes)
    found += view.reservation_capacity(changes)
    found += removed_zone_subnets(before, after, changes)
    return service_moves(before, after, changes, found)


def identity(resource: PlannedResource) -> tuple | None:
    """What AWS tells two resources of this type apart by, when the program sets all of it."""
    inputs = IDENTITIES.get(resource.type)
    if resource.type in BUCKET_SINGLETONS:
        inputs = ("bucket",)
    if not inputs:
        return None
    values = tuple(resource.inputs.get(name) for name in inputs)
    if values[0] is None or UNKNOWN_TEXT in values:  # the first one named is always set
        return None
    return values


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
        # a service's group waits until its minimum serves before the old one drains
        # (components/serving_group.py, minElbCapacity): the overlap is the point, not a refusal
        if change.type == GROUP and not new.inputs.get("minElbCapacity"):
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

    def _vpc(self, subnet: PlannedResource, side: dict, plan: Plan) -> str | None:
        """The subnet's VPC as both sides know it: the program's VPC by role while it is
        neither replaced, added nor removed; a VPC the user gave by its id."""
        urns = subnet.property_dependencies.get("vpcId", ())
        by_urn = {r.urn: key for key, r in side.items()}
        keys = [by_urn[u] for u in urns if u in by_urn]
        if keys:
            return None if self.kind(keys[0]) is not None else f"role:{keys[0][1]}"
        vpc = subnet.inputs.get("vpcId")
        return f"id:{vpc}" if isinstance(vpc, str) and vpc != UNKNOWN_TEXT else None

    def removed_and_added(self, changes: list[Change]) -> list[Collision]:
        """What a create of this update collides with while a resource the update removes, or
        replaces create-first, still exists: both are deleted only at the end of the update.
        Paired by type and by what AWS tells two of that type apart by (a subnet's CIDR in its
        VPC, a fixed name, a bucket's one configuration of each kind, an object's key)."""
        cluster_before = cluster_name(self.before)
        lingering = [
            (c, self.old[c.key])
            for c in changes
            if c.key in self.old
            and (c.kind == "remove" or (c.kind == "replace" and not c.delete_before_replace))
        ]
        created = [
            (c, self.new[c.key])
            for c in changes
            if c.kind in ("add", "replace") and c.key in self.new
        ]
        found = []
        for change, new in created:
            for gone, old in lingering:
                if old.type != new.type or gone.key == change.key:
                    continue  # a replacement with itself: create_first
                why = self._collides(change, new, gone, old)
                if why:
                    state = "removes" if gone.kind == "remove" else "replaces create-first"
                    found.append(
                        Collision(
                            change.type,
                            change.role,
                            f"{why} {role(old, cluster_before)}, which this update {state}: the "
                            "engine deletes it only at the end of the update, after every create",
                            self._pair_fix(change, gone),
                        )
                    )
        return found

    def _collides(
        self, change: Change, new: PlannedResource, gone: Change, old: PlannedResource
    ) -> str:
        if new.type == SUBNET:
            if change.kind == "replace" and not change.delete_before_replace:
                return ""  # create_first compares it with every old subnet
            vpc = self._vpc(new, self.new, self.after)
            if vpc is None or vpc != self._vpc(old, self.old, self.before):
                return ""
            cidr = ipaddress.ip_network(new.inputs["cidrBlock"])
            if not cidr.overlaps(ipaddress.ip_network(old.inputs["cidrBlock"])):
                return ""
            return (
                f"CreateSubnet {cidr} overlaps {old.inputs['cidrBlock']} "
                "(InvalidSubnet.Conflict) of subnet"
            )
        key = identity(new)
        if key is None or key != identity(old):
            return ""
        if new.type in BUCKET_SINGLETONS:
            return (
                "the bucket holds one such configuration: the new one is written, then deleted with"
            )
        shown = "/".join(str(v) for v in key if v is not None)
        if new.type in TAKEN_OVER:
            return (
                f"{TAKEN_OVER[new.type]} of {shown!r} takes over, and the delete at the end then "
                "removes, what is still"
            )
        return f"{shown!r} is still taken by"

    def _pair_fix(self, change: Change, gone: Change) -> str:
        if change.type == SUBNET:
            return (
                "a subnet the update removes still holds its CIDR: keep that subnet's CIDR for "
                "it (a serving zone's subnets take their zone letter's, components/cidr.py), or "
                "`pulumi destroy` the stack first"
            )
        return (
            f"report it: {change.role} takes what {gone.role} holds; gpu-cluster must keep the "
            f"logical name (an alias) so that the engine replaces or updates one resource"
        )

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
            drained = self._deleted_before(change, changes)
            still_running = [
                r for r in self.old.values() if r.type in (GROUP, INSTANCE) and r.urn not in drained
            ]
            for nodes in still_running:
                found.append(
                    Collision(
                        change.type,
                        change.role,
                        f"the reservation is created while {role(nodes, cluster_name(self.before))}"
                        "'s nodes still run outside it: capacity and On-Demand quota for both",
                        self._reservation_fix(change, nodes),
                    )
                )
        return found

    def _deleted_before(self, change: Change, changes: list[Change]) -> set[str]:
        """The old URNs the engine deletes before it creates this reservation: its own
        delete-first replacement's dependents, and those of each delete-first replacement of
        what it depends on (registered, and so replaced, before it: its placement group)."""
        drained: set[str] = set()
        if change.kind == "replace" and change.delete_before_replace:
            drained |= dependent_replacements(self.before, self.old[change.key].urn)
        depends_on = set(self.new[change.key].dependencies) if change.key in self.new else set()
        for other in changes:
            new = self.new.get(other.key)
            if (
                other.kind == "replace"
                and other.delete_before_replace
                and other.key in self.old
                and new is not None
                and new.urn in depends_on
            ):
                drained |= dependent_replacements(self.before, self.old[other.key].urn)
        return drained

    def _reservation_fix(self, change: Change, nodes: PlannedResource) -> str:
        """This version drains the nodes first when the state holds its rules (the placement
        group's replacementTrigger, the group's replaceOnChanges); a state from before them
        needs one `pulumi up` without the change first."""
        name = role(nodes, cluster_name(self.before))
        reservation = self.new.get(change.key)
        for source in self.after.resources:
            if reservation is None or source.urn not in reservation.dependencies:
                continue
            if not source.delete_before_replace or source.replacement_trigger is None:
                continue
            drains = dependent_replacements(self.after, source.urn)
            after_cluster = cluster_name(self.after)
            if name in {role(r, after_cluster) for r in self.after.resources if r.urn in drains}:
                return (
                    "run `pulumi up` once without this change first: the stack's state does not "
                    f"yet hold the rules this version gives {name} and its placement group (the "
                    "nodes are then drained before the reservation is created); then apply it"
                )
        return (
            "do it in two steps: first `pulumi destroy --target "
            f"'{nodes.urn}' --target-dependents` (the nodes stop; the data stack "
            "keeps datasets and checkpoints), then this change and `pulumi up`"
        )


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
