"""Every control of the pack, and what running them over one stack finds."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from gpu_cluster.policy import ec2, identity, network, records, s3, service
from gpu_cluster.policy.control import Control
from gpu_cluster.policy.resources import Res, Stack
from gpu_cluster.policy.suppressions import suppressed

CONTROLS: tuple[Control, ...] = (
    *ec2.CONTROLS,
    *network.CONTROLS,
    *s3.CONTROLS,
    *identity.CONTROLS,
    *records.CONTROLS,
    *service.CONTROLS,
)


@dataclass
class Finding:
    """One control over one stack."""

    control: Control
    checked: list[str] = field(default_factory=list)  # resource names
    failures: list[tuple[str, str]] = field(default_factory=list)  # (resource, problem)
    suppressed: list[tuple[str, str]] = field(default_factory=list)  # (resource, why)

    @property
    def status(self) -> str:
        if self.failures:
            return "fail"
        if self.suppressed:
            return "suppressed"
        return "pass" if self.checked else "not applicable"


def problems(control: Control, resource: Res, stack: Stack) -> list[str] | None:
    """The control's problems with one resource; None when it does not apply."""
    if resource.type not in control.types:
        return None
    return control.check(resource, stack)


def audit(resources: Iterable[Res], controls: Iterable[Control] = CONTROLS) -> list[Finding]:
    """Run each control over every resource of the stack, suppressions applied."""
    stack = Stack(resources)
    findings = []
    for control in controls:
        finding = Finding(control)
        for resource in stack.resources:
            found = problems(control, resource, stack)
            if found is None:
                continue
            finding.checked.append(resource.name)
            why = suppressed(control.name, resource) if found else None
            if why:
                finding.suppressed.append((resource.name, why))
            else:
                finding.failures += [(resource.name, message) for message in found]
        findings.append(finding)
    return findings
