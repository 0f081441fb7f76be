"""How a configuration problem reads: each Problem (infra/problems.py) with its fix, and that
fix in stack-file form for the offline user; collected, then raised once as one readable message
(ConfigError)."""

from __future__ import annotations

import json

import pulumi

from gpu_cluster.infra.fixes import actionable, apply_fix, commands
from gpu_cluster.infra.overrides import typed
from gpu_cluster.infra.problems import NOT_SET, AwsError, Problem
from gpu_cluster.infra.pulumi_yaml import flow, top_level

__all__ = [
    "NOT_SET",
    "PROJECT",
    "AwsError",
    "ConfigError",
    "Problem",
    "render_problem",
    "render_problems",
    "shown",
    "yaml_fix",
]

PROJECT = "gpu-cluster"


def render_problem(
    problem: Problem,
    stack: str = "<stack>",
    config: dict[str, str] | None = None,
    fixed: dict[str, str] | None = None,
) -> str:
    received = problem.received if problem.received == NOT_SET else shown(problem.received)
    text = (
        f"  - {problem.path}: {problem.problem}\n"
        f"      received: {received}\n"
        f"      allowed:  {problem.allowed}\n"
        f"      fix:      {problem.fix}"
    )
    yaml = yaml_fix(problem.fix, config, fixed)
    if yaml:
        lines = yaml.splitlines()
        text += f"\n      or in stacks/Pulumi.{stack}.yaml: {lines[0]}"
        text += "".join(f"\n        and: {line}" for line in lines[1:])
    return text


def shown(value: object) -> str:
    """A received value as the stack file spells it, never a Python repr: null, true, 3,
    {a: [1, 2]} (YAML flow); a string in quotes ('p4d.24xl'; JSON-escaped when it holds a quote
    or a control character), an empty one as (empty)."""
    if isinstance(value, str):
        if not value:
            return "(empty)"
        if "'" in value or not value.isprintable():
            return json.dumps(value, ensure_ascii=False)
        return f"'{value}'"
    return flow(value)


def yaml_fix(
    fix: str, config: dict[str, str] | None = None, fixed: dict[str, str] | None = None
) -> str | None:
    """The stack-file form of a `pulumi config set/rm` fix (the offline user has no CLI): with
    the stack's config, each changed key's whole new value (a mapping with its other fields
    kept), one line per key; `delete <key>` for a key the fix removes. ``fixed``: the config
    with every problem's fix applied (all_fixed), so that two fixes in one mapping each show
    the mapping with both: a line pasted replaces the key's whole value."""
    if config is not None and actionable(fix):
        try:
            after = apply_fix(config, fix)
        except Exception:  # a fix the CLI itself would refuse: no stack-file form
            return None
        whole = fixed if fixed is not None else after
        lines = [
            f"delete {key}"
            if key not in after
            else f"{key}: {top_level(whole.get(key, after[key]))}"
            for key in sorted(set(config) | set(after))
            if config.get(key) != after.get(key)
        ]
        return "\n".join(lines) or None
    lines = []
    for command in commands(fix):
        head, *rest = command["key"].split(".")
        key = head if ":" in head else f"{PROJECT}:{head}"
        if command["verb"] == "rm":
            lines.append(f"delete {'.'.join([key, *rest])}")
            continue
        value = command["value"]
        if not value or value.startswith("<") or "[" in command["key"]:
            return None
        value = flow(typed(value)) if rest else top_level(value)
        nested = f"{': {'.join(rest)}: {value}{'}' * len(rest)}" if rest else value
        lines.append(f"{key}: {{{nested}" if rest else f"{key}: {nested}")
    return "\n".join(lines) or None


class ConfigError(pulumi.RunError):
    """Raised with every problem at once; Pulumi prints a RunError without a traceback."""

    def __init__(
        self, stack: str, problems: list[Problem], config: dict[str, str] | None = None
    ) -> None:
        self.stack = stack
        self.problems = problems
        self.config = config
        super().__init__(
            render_problems(stack, problems, self.header(stack, len(problems)), config)
        )

    @staticmethod
    def header(stack: str, count: int) -> str:
        return (
            f"stack '{stack}' has {count} configuration problem{'s' if count != 1 else ''}; "
            "nothing was planned or created:"
        )


def all_fixed(config: dict[str, str], problems: list[Problem]) -> dict[str, str]:
    """The config with every problem's fix applied in turn (a fix that does not apply is
    skipped): what the stack file reads once the user has followed them all."""
    result = dict(config)
    for problem in problems:
        if actionable(problem.fix):
            try:
                result = apply_fix(result, problem.fix)
            except Exception:  # a fix the CLI would refuse: yaml_fix shows no line for it
                continue
    return result


def render_problems(
    stack: str, problems: list[Problem], header: str, config: dict[str, str] | None = None
) -> str:
    fixed = all_fixed(config, problems) if config is not None else None
    return "\n".join(
        [header, *(render_problem(problem, stack, config, fixed) for problem in problems)]
    )
