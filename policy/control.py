"""One security control: its framework id, severity and fix, and the check that decides it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpu_cluster.policy.resources import Res, Stack

# A check returns the problems of one resource ([] when it complies), or None when the
# control does not apply to this particular resource of a listed type.
Check = Callable[[Res, Stack], "list[str] | None"]

SEVERITIES = ("critical", "high", "medium", "low")


@dataclass(frozen=True)
class Control:
    id: str  # the AWS Foundational Security Best Practices id, or the NIST 800-53 one
    name: str  # the CrossGuard policy name: unique, lower-case
    title: str
    severity: str
    fix: str
    types: tuple[str, ...]  # the resource types it checks
    check: Check
    uses_stack: bool = False  # reads other resources: a CrossGuard stack policy
    audit_only: str | None = None  # why CrossGuard cannot run it (docs/concepts/security.md)

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"{self.name}: severity {self.severity!r} not in {SEVERITIES}")


def control(
    id: str,
    name: str,
    title: str,
    severity: str,
    fix: str,
    types: tuple[str, ...] | str,
    *,
    uses_stack: bool = False,
    audit_only: str | None = None,
) -> Callable[[Check], Control]:
    """Decorator: the function below becomes the control's check."""

    def wrap(check: Check) -> Control:
        kinds = (types,) if isinstance(types, str) else types
        return Control(id, name, title, severity, fix, kinds, check, uses_stack, audit_only)

    return wrap
