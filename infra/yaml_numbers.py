"""Numbers in a stack file that Pulumi reads otherwise than a person does, and numbers it
cannot hand to a program at all.

Pulumi's YAML reader (yaml.v3, resolve.go; modelled in infra/pulumi_yaml.py) takes a plain
``010`` as octal 8, ``0o17``, ``0x1F`` and ``0b101`` in their bases, and drops underscores
(``1_000`` is 1000): the program then receives "8", not "010" or 10. These are warnings: the
value is valid, perhaps not the one meant. ``.inf`` and ``.nan`` are refused: Pulumi's config
loader turns every value into a string with encoding/json, which fails on them
(resource/config/object.go, MarshalString -> json.Marshal: "json: unsupported value: +Inf")."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import yaml

from gpu_cluster.infra.pulumi_yaml import PLAIN_TAG, PulumiLoader, config_string, resolve_plain

DECIMAL = re.compile(r"^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$")
Path = tuple[str | int, ...]


@dataclass(frozen=True)
class NumberNote:
    """A plain scalar at ``path`` (config key first), written ``text``, that Pulumi reads as
    ``value`` (``how``: octal, hexadecimal, binary, underscores dropped)."""

    path: Path
    text: str
    value: int | float
    how: str

    @property
    def received(self) -> str:
        """The string the program receives for it."""
        return config_string(self.value)

    @property
    def decimal(self) -> str:
        """The number a person reads: 10 for 010; what Pulumi reads for 0x1F, 0o17, 1_000."""
        digits = self.text.lstrip("+-").replace("_", "")
        if self.how != "octal" or digits[:2].lower() == "0o":
            return self.received
        return ("-" if self.text.startswith("-") else "") + (digits.lstrip("0") or "0")

    def warning(self) -> str:
        return (
            f"{path_text(self.path)}: {self.text} is read by Pulumi as {self.received} "
            f'({self.how}); write "{self.text}" (quoted) to keep it as written, or {self.decimal}'
        )

    def aside(self) -> str:
        """The note as a problem's aside, where the number read is the one refused."""
        return (
            f"the stack file's {self.text} is {self.received} to Pulumi ({self.how}); "
            f'write "{self.text}" (quoted) or {self.decimal}'
        )


def path_text(path: Path) -> str:
    """("gpu-cluster:spot", "fallbackTypes", 0) -> gpu-cluster:spot.fallbackTypes[0]."""
    head, *rest = path
    return str(head) + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in rest)


def how_read(text: str) -> tuple[int | float, str] | None:
    """(the number Pulumi reads, how) where that differs from the decimal a person reads in
    ``text``; None when they agree or it is no number."""
    value = resolve_plain(text)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return None  # refused, not read otherwise (non_finite)
    if DECIMAL.match(text):
        try:
            if Decimal(text) == Decimal(value) or float(text) == value:
                return None
        except InvalidOperation:  # pragma: no cover - DECIMAL matched a number
            return None
    digits = text.lstrip("+-").lower()
    prefixes = {"0x": "hexadecimal", "0o": "octal", "0b": "binary"}
    if digits[:2] in prefixes:
        return value, prefixes[digits[:2]]
    plain = digits.replace("_", "")
    if isinstance(value, int) and len(plain) > 1 and plain.startswith("0"):
        return value, "octal"
    return value, "underscores dropped"


def _plain_scalars(node: yaml.Node, path: Path) -> list[tuple[Path, str]]:
    if isinstance(node, yaml.ScalarNode):
        return [(path, node.value)] if node.tag == PLAIN_TAG else []
    if isinstance(node, yaml.SequenceNode):
        return [s for i, item in enumerate(node.value) for s in _plain_scalars(item, (*path, i))]
    if isinstance(node, yaml.MappingNode):
        return [
            s
            for key, item in node.value
            if isinstance(key, yaml.ScalarNode)
            for s in _plain_scalars(item, (*path, key.value))
        ]
    return []


def config_scalars(text: str) -> list[tuple[Path, str]]:
    """Every plain scalar under a stack file's ``config:``, with its path (key first)."""
    root = yaml.compose(text, Loader=PulumiLoader)
    if not isinstance(root, yaml.MappingNode):
        return []
    for key, value in root.value:
        config = isinstance(key, yaml.ScalarNode) and key.value == "config"
        if config and isinstance(value, yaml.MappingNode):
            return [s for k, v in value.value for s in _plain_scalars(v, (str(k.value),))]
    return []


def surprising_numbers(text: str) -> list[NumberNote]:
    """The numbers of a stack file that Pulumi reads otherwise than a person does."""
    return [
        NumberNote(path, written, *read)
        for path, written in config_scalars(text)
        if (read := how_read(written)) is not None
    ]


def non_finite(value: Any, path: Path) -> list[tuple[Path, float]]:
    """Where a decoded config value holds infinity or NaN, which Pulumi cannot hand over."""
    if isinstance(value, float) and not math.isfinite(value):
        return [(path, value)]
    if isinstance(value, dict):
        return [f for k, v in value.items() for f in non_finite(v, (*path, str(k)))]
    if isinstance(value, list):
        return [f for i, v in enumerate(value) for f in non_finite(v, (*path, i))]
    return []


def received_at(config: dict[str, str], path: Path) -> Any:
    """The value at ``path`` in a flat config map (nested keys JSON-decoded), or None."""
    value: Any = config.get(str(path[0]))
    if len(path) == 1:
        return value
    try:
        value = json.loads(value) if isinstance(value, str) else None
        for part in path[1:]:
            value = value[part]  # pyright: ignore[reportOptionalSubscript]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError):
        return None
    return value


def still_set(config: dict[str, str], note: NumberNote) -> bool:
    """The config still holds what the file gave at the note's path (no --set replaced it)."""
    found = received_at(config, note.path)
    if len(note.path) == 1:
        return found == note.received
    return not isinstance(found, bool) and isinstance(found, int | float) and found == note.value
