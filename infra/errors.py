"""User-facing configuration problems: collected, then raised once as one readable message."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pulumi

NOT_SET = "(not set)"
PROJECT = "gpu-cluster"


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a stack's config."""

    path: str
    received: Any
    problem: str
    allowed: str
    fix: str

    def render(self, stack: str = "<stack>") -> str:
        received = self.received if self.received == NOT_SET else repr(self.received)
        text = (
            f"  - {self.path}: {self.problem}\n"
            f"      received: {received}\n"
            f"      allowed:  {self.allowed}\n"
            f"      fix:      {self.fix}"
        )
        yaml = yaml_fix(self.fix)
        if yaml:
            text += f"\n      or in stacks/Pulumi.{stack}.yaml: {yaml}"
        return text


SET_COMMAND = re.compile(r"^pulumi config set( --path)? (\S+) (\S+)")
RM_COMMAND = re.compile(r"^pulumi config rm( --path)? (\S+)")


def yaml_fix(fix: str) -> str | None:
    """The stack-file form of a `pulumi config set/rm` fix (the offline user has no CLI)."""
    if match := SET_COMMAND.match(fix):
        path, value = match.group(2), match.group(3)
        if value.startswith("<"):
            return None
        head, *rest = path.split(".")
        key = head if ":" in head else f"{PROJECT}:{head}"
        if not rest:
            return f"{key}: {value}"
        return f"{key}: {{{': {'.join(rest)}: {value}{'}' * len(rest)}"
    if match := RM_COMMAND.match(fix):
        head, *rest = match.group(2).split(".")
        key = head if ":" in head else f"{PROJECT}:{head}"
        return f"delete {'.'.join([key, *rest])}"
    return None


class ConfigError(pulumi.RunError):
    """Raised with every problem at once; Pulumi prints a RunError without a traceback."""

    def __init__(self, stack: str, problems: list[Problem]) -> None:
        self.stack = stack
        self.problems = problems
        super().__init__(render_problems(stack, problems, self.header(stack, len(problems))))

    @staticmethod
    def header(stack: str, count: int) -> str:
        return (
            f"stack '{stack}' has {count} configuration problem{'s' if count != 1 else ''}; "
            "nothing was planned or created:"
        )


def render_problems(stack: str, problems: list[Problem], header: str) -> str:
    return "\n".join([header, *(problem.render(stack) for problem in problems)])


class AwsError(RuntimeError):
    """An AWS call failed; the message names the IAM action and what to do."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code
