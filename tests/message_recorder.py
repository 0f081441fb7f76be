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

RECORDED: list[dict[str, Any]] = []


def record(kind: str, text: object, typed: list[str] | None = None) -> None:
    """One message; ``typed``: what the user wrote that it may quote (keys, values)."""
    RECORDED.append({"kind": kind, "text": str(text), "typed": typed or []})


def strings(value: object) -> list[str]:
    """Every key and scalar of a value the user gave, as text."""
    if isinstance(value, dict):
        return [text for key, item in value.items() for text in [str(key), *strings(item)]]
    if isinstance(value, list | tuple):
        return [text for item in value for text in strings(item)]
    return [str(value)]


def after_init(cls: type, fields: Callable[[Any], dict[str, object]], typed: Callable) -> None:
    """Record ``fields(instance)`` each time ``cls`` is constructed."""
    original = cls.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        for kind, text in fields(self).items():
            record(kind, text, typed(self))

    cls.__init__ = init  # type: ignore[misc]


after_init(
    Problem,
    lambda p: {"problem": p.problem, "allowed": p.allowed, "fix": p.fix},
    lambda p: [p.path, *strings(p.received)],
)
after_init(
    ConfigError,
    lambda e: {"ConfigError": e},
    lambda e: [
        *strings(e.config or {}),
        *(t for p in e.problems for t in [p.path, *strings(p.received)]),
    ],
)
after_init(CommandError, lambda e: {"CommandError": e}, lambda e: [])
after_init(AwsError, lambda e: {"AwsError": e}, lambda e: [])

_load_spec = config_module.load_spec


def load_spec(*args: Any, **kwargs: Any) -> Any:
    spec = _load_spec(*args, **kwargs)
    for warning in getattr(spec, "warnings", ()):
        record("warning", warning, strings(args[0]) if args else [])
    return spec


config_module.load_spec = load_spec


def pytest_unconfigure(config: Any) -> None:
    path = os.environ.get("GPUC_MESSAGE_RECORD")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            for entry in RECORDED:
                out.write(json.dumps(entry) + "\n")
