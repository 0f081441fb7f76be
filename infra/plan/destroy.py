"""`pulumi destroy` over a plan (the stack's state after `pulumi up`): what the engine deletes,
what it keeps, and whether the destroy runs at all. `gpuc plan` prints the stop-paying command
from it, and the tests hold every stack to it.

Engine behaviour relied on (pulumi/pulumi):
- pkg/resource/deploy/step.go, DeleteStep.Apply: deleting a protected resource fails
  (deleteProtectedError, "cannot be deleted because it is protected") unless it is being
  replaced or protect is ignored; the check comes before the DryRun branch, so a plain
  `pulumi destroy` already fails in its preview and deletes nothing - GPU nodes included.
- pkg/cmd/pulumi/operations/destroy.go, getProtectedExcludes: `pulumi destroy
  --exclude-protected` excludes every protected resource and everything it transitively
  depends on, and destroys the rest; with nothing unprotected left it prints "There were no
  unprotected resources to destroy" and stops. It cannot be combined with --target.
- pkg/resource/graph/dependency_graph.go, TransitiveDependenciesOf/markAsDependency: a
  resource's dependencies are its provider, parent (and the parent's, up to the stack),
  dependencies, property dependencies and deletedWith.
- retainOnDelete: the engine drops the resource from the state without the provider's Delete
  (step.go, DeleteStep.Apply), so AWS keeps it.

AWS behaviour relied on: DeleteLoadBalancer refuses a load balancer whose deletion protection is
on (OperationNotPermitted; Elastic Load Balancing API reference, DeleteLoadBalancer, and the
attribute deletion_protection.enabled), and terraform-provider-aws (elbv2/load_balancer.go,
resourceLoadBalancerDelete) calls it as it is. That delete fails when the destroy reaches it,
not in the preview: the nodes before it are gone, the load balancer keeps billing.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_cluster.infra.plan.engine import STACK_TYPE, Plan, PlannedResource

EXCLUDE_PROTECTED = "--exclude-protected"
# Deletes AWS refuses while an input is true, and how this project's config turns it off.
REFUSED_BY_AWS = {
    "aws:lb/loadBalancer:LoadBalancer": (
        "enableDeletionProtection",
        "pulumi config set --path inference.deletionProtection false",
    ),
}


@dataclass(frozen=True)
class Destroy:
    refused: tuple[PlannedResource, ...]  # protected deletes: the preview fails on the first
    deleted: tuple[PlannedResource, ...]  # deleted in AWS (custom, not retained)
    kept: tuple[PlannedResource, ...]  # left in the state (custom resources)
    # deleted by the engine but refused by AWS: the destroy fails there, part done
    refused_by_aws: tuple[PlannedResource, ...] = ()

    @property
    def runs(self) -> bool:
        """The engine's preview passes and it starts deleting."""
        return not self.refused

    @property
    def completes(self) -> bool:
        """Every delete succeeds: nothing is left billing in the stack."""
        return self.runs and not self.refused_by_aws


def transitive_dependencies(plan: Plan, resource: PlannedResource) -> set[str]:
    """The URNs ``resource`` depends on, as the engine's dependency graph walks them."""
    by_urn = {r.urn: r for r in plan.resources}
    seen: set[str] = set()
    todo = [resource.urn]
    while todo:
        current = by_urn.get(todo.pop())
        if current is None or current.urn in seen:
            continue
        seen.add(current.urn)
        todo += [current.parent, *current.dependencies]
        todo += [urn for urns in current.property_dependencies.values() for urn in urns]
    seen.discard(resource.urn)
    return seen


def protected_excludes(plan: Plan) -> set[str]:
    """What `pulumi destroy --exclude-protected` leaves: each protected resource and all it
    depends on (destroy.go, getProtectedExcludes)."""
    excluded: set[str] = set()
    for resource in plan.resources:
        if resource.protect:
            excluded |= {resource.urn} | transitive_dependencies(plan, resource)
    return excluded


def destroy(plan: Plan, exclude_protected: bool = False) -> Destroy:
    """`pulumi destroy` (or with --exclude-protected) of a stack whose state is ``plan``."""
    live = [r for r in plan.resources if r.type != STACK_TYPE and r.op != "read"]
    excluded = protected_excludes(plan) if exclude_protected else set()
    targets = [r for r in live if r.urn not in excluded]
    custom = [r for r in targets if r.custom]
    deleted = tuple(r for r in custom if not r.retain_on_delete)
    return Destroy(
        refused=tuple(r for r in targets if r.protect),
        deleted=deleted,
        kept=tuple(r for r in live if r.custom and r.urn in excluded),
        refused_by_aws=tuple(
            r
            for r in deleted
            if r.type in REFUSED_BY_AWS and r.inputs.get(REFUSED_BY_AWS[r.type][0]) is True
        ),
    )


def stop_paying_command(plan: Plan) -> str:
    """The commands that delete the stack's compute: `pulumi destroy`, with --exclude-protected
    when the stack holds protected resources (a plain destroy would delete nothing), after
    turning off what AWS refuses to delete (and `pulumi up` to apply that)."""
    command = f"pulumi destroy -s {plan.stack}"
    plain = destroy(plan)
    if plain.refused:
        command = f"{command} {EXCLUDE_PROTECTED}"
    first = sorted({REFUSED_BY_AWS[r.type][1] for r in plain.refused_by_aws})
    return " && ".join(
        [
            *(f"{c} -s {plan.stack}" for c in first),
            *([f"pulumi up -s {plan.stack}"] if first else []),
            command,
        ]
    )
