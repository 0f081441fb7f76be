"""How a `gpuc` command ends: its exit codes (documented in docs/troubleshooting.md) and the one
error type commands raise for a user-facing failure, printed as a message or, with --json, a
document."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any, TextIO

from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.problems import (
    AWS,
    FINDINGS,
    INPUT,
    INTERNAL,
    OK,
    USAGE,
    AwsError,
    CommandError,
    Problem,
)

# the exit codes and CommandError are plain data (infra/problems.py), so that any layer can
# raise one; commands take them from here with the rest of how a command ends
__all__ = [
    "AWS",
    "FINDINGS",
    "INPUT",
    "INTERNAL",
    "OK",
    "USAGE",
    "CommandError",
    "from_exception",
    "load_cluster_spec",
    "load_stack_spec",
    "problem_dicts",
    "report",
]


def problem_dicts(problems: Iterable[Problem]) -> list[dict[str, Any]]:
    """Problems as --json prints them."""
    return [
        {
            "path": p.path,
            "problem": p.problem,
            "received": p.received,
            "allowed": p.allowed,
            "fix": p.fix,
        }
        for p in problems
    ]


def from_exception(error: Exception) -> CommandError:
    """The CommandError a known failure stands for; anything else is INTERNAL."""
    from gpu_cluster.infra.stack_files import StackFileError

    if isinstance(error, CommandError):
        return error
    if isinstance(error, ConfigError):
        return CommandError(INPUT, str(error), problem_dicts(error.problems))
    if isinstance(error, StackFileError):
        return CommandError(INPUT, str(error))
    if isinstance(error, AwsError):
        return CommandError(AWS, str(error))
    what = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    return CommandError(
        INTERNAL,
        f"internal error ({what}); this is a bug in gpuc, please "
        "report it with the command you ran (GPUC_DEBUG=1 shows the traceback)",
    )


def report(error: CommandError, as_json: bool, out: TextIO | None = None) -> int:
    stream = out or sys.stdout
    if as_json:
        document = {
            "error": {"code": error.code, "message": str(error), "problems": error.problems}
        }
        json.dump(document, stream, indent=2, default=str)
        stream.write("\n")
    else:
        print(f"error: {error}", file=sys.stderr)
    return error.code


def load_stack_spec(stack: str, overrides: Sequence[tuple[str, str]] = ()):
    """The stack's resolved spec (with --set/--set-path overrides), or a CommandError (INPUT)
    saying what is wrong."""
    from gpu_cluster.infra.config import load_spec
    from gpu_cluster.infra.overrides import stack_config

    try:
        return load_spec(stack_config(stack, overrides), stack)
    except Exception as error:
        raise from_exception(error) from error


def load_cluster_spec(stack: str, overrides: Sequence[tuple[str, str]] = ()):
    from gpu_cluster.infra.validation import ResolvedCluster

    spec = load_stack_spec(stack, overrides)
    if not isinstance(spec, ResolvedCluster):
        raise CommandError(INPUT, f"stack '{stack}' has no GPU nodes (role: data)")
    return spec
