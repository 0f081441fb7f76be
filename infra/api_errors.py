"""How the public components name a problem: as the argument the user passed
(``GpuClusterArgs.network.subnet_ids[0]``), with the line of their program that made the
component, and one ArgumentError for all of them."""

from __future__ import annotations

import dataclasses
import re

from gpu_cluster.infra.blame import caller_site
from gpu_cluster.infra.errors import ConfigError, render_problem
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import PROJECT


class ArgumentError(ConfigError):
    """Every problem of a component's arguments, named as arguments; nothing was created."""

    def __init__(self, component: str, name: str, problems: list[Problem]) -> None:
        self.component = component
        self.site = caller_site()  # the user's line that made the component
        named = [as_argument(component, p) for p in problems]
        super().__init__(name, named)
        where = f" (at {self.site})" if self.site else ""
        self.args = (
            "\n".join(
                [
                    f"{component}({name!r}){where} has {len(named)} argument problem"
                    f"{'s' if len(named) != 1 else ''}; nothing was created:",
                    *(render_problem(problem) for problem in named),
                ]
            ),
        )

    def __str__(self) -> str:
        return self.args[0]


def snake(path: str) -> str:
    """`network.subnetIds[0]` -> `network.subnet_ids[0]`."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m[1].lower(), path)


FIX_COMMAND = re.compile(
    r"pulumi config (set|rm)(?: --(?:path|secret|plaintext))* (\S+)(?: (\S+))?"
)


def as_argument(component: str, problem: Problem) -> Problem:
    if problem.path.startswith(component):  # the Args object, the name, opts: named already
        return problem
    path = problem.path.split(":", 1)[1] if problem.path.startswith(f"{PROJECT}:") else problem.path
    argument = f"{component}Args.{snake(path)}" if path != "region" else "region"

    def fix(match: re.Match[str]) -> str:
        verb, key, value = match[1], snake(match[2].split(":", 1)[-1]), match[3]
        return f"leave out {key}," if verb == "rm" else f"set {key}={value or '<value>'}"

    if path == "clusterName":  # the component's name is the cluster's name (OWNED)
        suggested = FIX_COMMAND.search(problem.fix)
        better = suggested[3] if suggested and suggested[3] else "<name>"
        return dataclasses.replace(
            problem,
            path=f"{component}(name)",
            problem=problem.problem.replace("clusterName", "the component's name"),
            fix=f"name it {component}({better!r}, ...)",
        )
    unknown_key = problem.problem.startswith("unknown key")
    return dataclasses.replace(
        problem,
        path=argument,
        allowed=snake(problem.allowed) if unknown_key else problem.allowed,
        fix=re.sub(r"'(\w+)'", lambda m: f"'{snake(m[1])}'", FIX_COMMAND.sub(fix, problem.fix))
        if unknown_key
        else FIX_COMMAND.sub(fix, problem.fix),
    )


def covered(problem: Problem, early: list[Problem]) -> bool:
    """A stack-file problem about a value whose Python kind was already refused."""
    return any(
        problem.path == e.path or problem.path.startswith((f"{e.path}.", f"{e.path}["))
        for e in early
    )
