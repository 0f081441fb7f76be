"""The controls as CrossGuard policies. Building them starts nothing; the PolicyPack that
serves them is made in __main__.py only (its constructor starts the analyzer server).

pulumi-policy hands resource policies the resource's inputs and stack policies every
resource's outputs with property dependencies; reading a value unknown during preview raises
its UnknownValueError, which it reports as "can't run policy during preview" (advisory)."""

from __future__ import annotations

from typing import Any

from pulumi_policy import (
    Policy,
    PolicyComplianceFramework,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

from gpu_cluster.policy.control import Control
from gpu_cluster.policy.pack import CONTROLS, problems
from gpu_cluster.policy.resources import Res, Stack
from gpu_cluster.policy.suppressions import suppressed

FSBP = "aws-foundational-security-best-practices"


def framework(control: Control) -> PolicyComplianceFramework:
    if control.id.startswith("NIST.800-53.r5 "):
        return PolicyComplianceFramework(
            name="nist-800-53", version="r5", reference=control.id.split(" ", 1)[1]
        )
    return PolicyComplianceFramework(name=FSBP, reference=control.id)


def _report(control: Control, resource: Res, found: list[str], report: ReportViolation) -> None:
    if not found or suppressed(control.name, resource):
        return
    for message in found:
        report(f"[{control.id}] {resource.name}: {message}. Fix: {control.fix}", resource.urn)


def _resource(args: ResourceValidationArgs) -> Res:
    return Res(args.urn, args.resource_type, args.name, args.props, bool(args.opts.protect))


def _stack_resources(args: StackValidationArgs) -> list[Res]:
    return [
        Res(
            r.urn,
            r.resource_type,
            r.name,
            r.props,
            bool(r.opts.protect),
            property_dependencies={
                key: tuple(d.urn for d in deps) for key, deps in r.property_dependencies.items()
            },
        )
        for r in args.resources
    ]


def policy(control: Control) -> ResourceValidationPolicy | StackValidationPolicy:
    common: dict[str, Any] = {
        "name": control.name,
        "description": f"{control.id}: {control.title}",
        "severity": Severity(control.severity),
        "framework": framework(control),
        "remediation_steps": control.fix,
    }
    if control.uses_stack:

        def validate_stack(args: StackValidationArgs, report: ReportViolation) -> None:
            stack = Stack(_stack_resources(args))
            for resource in stack.resources:
                _report(control, resource, problems(control, resource, stack) or [], report)

        return StackValidationPolicy(validate=validate_stack, **common)

    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        resource = _resource(args)
        _report(control, resource, problems(control, resource, Stack([resource])) or [], report)

    return ResourceValidationPolicy(validate=validate, **common)


def policies() -> list[Policy]:
    """Every control CrossGuard can run (see Control.audit_only for the others)."""
    return [policy(c) for c in CONTROLS if c.audit_only is None]
