"""What `gpuc --json` prints: one key style across every command's document, camelCase as
Pulumi's own JSON (`pulumi preview --json`: `newState`, `detailedDiff`). Keys that are data (tag
keys, config keys, resource names, node ids) are kept as they are; tests/test_output_contract.py
holds every command to it."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from typing import Any, TextIO

SNAKE = re.compile(r"_([a-z0-9])")


def camel(name: str) -> str:
    """``usd_per_hour`` -> ``usdPerHour`` (a camelCase name is returned as it is)."""
    return SNAKE.sub(lambda match: match.group(1).upper(), name)


def camel_fields(record: Any) -> dict[str, Any]:
    """A dataclass's fields, their names in camelCase (values as they are: a field holding a
    mapping keyed by data keeps its keys)."""
    return {camel(field.name): getattr(record, field.name) for field in dataclasses.fields(record)}


def dump(document: Any, out: TextIO | None = None) -> None:
    """The document, indented, one trailing newline (dates and other values as strings)."""
    stream = out or sys.stdout
    json.dump(document, stream, indent=2, default=str)
    stream.write("\n")
