"""What can go wrong, as plain data: a config Problem, and the two errors that carry a failure
up to the command line (AwsError from an AWS call; CommandError with a `gpuc` exit code).

The bottom of infra: it imports nothing of the project, so every layer can collect and raise
these. How a problem reads (its fix in stack-file form) is infra/errors.py; how a command ends
(the exit codes, --json) is infra/outcome.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NOT_SET = "(not set)"

# `gpuc` exit codes (infra/outcome.py reports them; the docs site's exit-code reference is
# generated from EXIT_CODES, infra/reference/)
OK = 0
INTERNAL = 1
USAGE = 2
INPUT = 3
AWS = 4
FINDINGS = 5
EXIT_CODES: dict[int, tuple[str, str]] = {
    OK: ("OK", "the command did what was asked"),
    INTERNAL: ("INTERNAL", "a bug in gpuc: the message asks for a report"),
    USAGE: ("USAGE", "the command line itself (argparse, a missing confirmation)"),
    INPUT: (
        "INPUT",
        "your input is wrong: stack file, YAML, configuration, option values, your own program",
    ),
    AWS: (
        "AWS",
        "an AWS call failed or could not look: credentials, permissions, limits, capacity, an "
        "endpoint that does not answer or whose answer is not AWS's",
    ),
    FINDINGS: (
        "FINDINGS",
        "the command ran and found a problem to fix (`gpuc audit`: a failing control; `gpuc "
        "diff`: a change that cannot be applied as is; `gpuc preflight`: a failing check; `gpuc "
        "sweep`: resources left behind; `gpuc nccl-test`: a run under its pass line, a slow or "
        "lost node)",
    ),
}


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a stack's config."""

    path: str
    received: Any
    problem: str
    allowed: str
    fix: str


class AwsError(RuntimeError):
    """An AWS call failed; the message names the IAM action and what to do."""

    def __init__(self, message: str, code: str = "", endpoint: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.endpoint = endpoint  # the URL that answered, where the answer was not AWS's


class CommandError(Exception):
    def __init__(self, code: int, message: str, problems: list[dict[str, Any]] | None = None):
        super().__init__(message)
        self.code = code
        self.problems = problems or []
