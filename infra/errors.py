"""User-facing configuration problems: collected, then raised once as one readable message."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi

NOT_SET = "(not set)"


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a stack's config."""

    path: str
    received: Any
    problem: str
    allowed: str
    fix: str

    def render(self) -> str:
        received = self.received if self.received == NOT_SET else repr(self.received)
        return (
            f"  - {self.path}: {self.problem}\n"
            f"      received: {received}\n"
            f"      allowed:  {self.allowed}\n"
            f"      fix:      {self.fix}"
        )


class ConfigError(pulumi.RunError):
    """Raised with every problem at once; Pulumi prints a RunError without a traceback."""

    def __init__(self, stack: str, problems: list[Problem]) -> None:
        self.stack = stack
        self.problems = problems
        super().__init__(render_problems(stack, problems))


def render_problems(stack: str, problems: list[Problem]) -> str:
    count = len(problems)
    header = (
        f"stack '{stack}' has {count} configuration problem{'s' if count != 1 else ''}; "
        "nothing was planned or created:"
    )
    return "\n".join([header, *(problem.render() for problem in problems)])


class AwsError(RuntimeError):
    """An AWS call failed; the message names the IAM action and what to do."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code
