"""Config keys outside the project's namespace: a key without one, a misspelled project
namespace, or an `aws:` key pulumi-aws does not read. Other providers' keys stay allowed."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import PROJECT
from gpu_cluster.infra.suggest import closest, suggest

AWS = "aws"


@cache
def aws_config_keys() -> frozenset[str]:
    """The keys pulumi-aws reads from `aws:` config (from the installed provider SDK)."""
    spec = importlib.util.find_spec("pulumi_aws")
    if spec is None or spec.origin is None:  # pragma: no cover - a dependency of the project
        return frozenset()
    source = (Path(spec.origin).parent / "config" / "vars.py").read_text()
    return frozenset(re.findall(r"__config__\.get(?:_\w+)?\('(\w+)'", source))


def namespace_problems(config: Mapping[str, str]) -> list[Problem]:
    problems = []
    for full_key, value in config.items():
        namespace, _, name = full_key.rpartition(":")
        if not namespace:
            problems.append(
                Problem(
                    path=full_key,
                    received=value,
                    problem="a config key without a namespace",
                    allowed=f"{PROJECT}:<key>, aws:<key>, or another provider's <provider>:<key>",
                    fix=f"write it as {PROJECT}:{full_key}",
                )
            )
        elif namespace == AWS and name not in aws_config_keys():
            problems.append(
                Problem(
                    path=full_key,
                    received=value,
                    problem=f"pulumi-aws has no config key '{name}'",
                    allowed="aws:region, aws:profile, aws:defaultTags, ... (pulumi-aws's keys)",
                    fix=f"{suggest(name, aws_config_keys())}remove it or rename it",
                )
            )
        elif namespace != PROJECT and namespace != AWS and closest(namespace, [PROJECT]):
            problems.append(
                Problem(
                    path=full_key,
                    received=value,
                    problem=f"unknown namespace '{namespace}'",
                    allowed=f"{PROJECT}:<key> for this project's settings",
                    fix=f"did you mean '{PROJECT}:{name}'? rename the key",
                )
            )
    return problems
