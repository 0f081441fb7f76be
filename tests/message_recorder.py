"""A pytest plugin that records every message the project builds while tests run: each
Problem's problem, allowed and fix, each ConfigError, CommandError and AwsError as printed, and
each warning a loaded spec carries. tests/test_no_internals.py runs the malformed-config corpora
under it (`-p message_recorder`, GPUC_MESSAGE_RECORD=<file>) and checks what was recorded.
Installed when imported, before conftest imports the project's modules."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from gpu_cluster.infra import config as config_module
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.problems import AwsError, CommandError, Problem

RECORDED: list[dict[str, str]] = []


def record(kind: str, text: object) -> None:
    RECORDED.append({"kind": kind, "text": str(text)})


def after_init(cls: type, fields: Callable[[Any], dict[str, object]]) -> None:
    """Record ``fields(instance)`` each time ``cls`` is constructed."""
    original = cls.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        for kind, text in fields(self).items():
            record(kind, text)

    cls.__init__ = init  # type: ignore[misc]


after_init(Problem, lambda p: {"problem": p.problem, "allowed": p.allowed, "fix": p.fix})
after_init(ConfigError, lambda e: {"ConfigError": e})
after_init(CommandError, lambda e: {"CommandError": e})
after_init(AwsError, lambda e: {"AwsError": e})

_load_spec = config_module.load_spec


def load_spec(*args: Any, **kwargs: Any) -> Any:
    spec = _load_spec(*args, **kwargs)
    for warning in getattr(spec, "warnings", ()):
        record("warning", warning)
    return spec


config_module.load_spec = load_spec


def pytest_unconfigure(config: Any) -> None:
    path = os.environ.get("GPUC_MESSAGE_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            for entry in RECORDED:
                out.write(json.dumps(entry) + "\n")
