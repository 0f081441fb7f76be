"""`--set key=value` and `--set-path a.b=value`: a stack's config changed exactly as
`pulumi config set` (and `pulumi config set --path`) would change it, then validated as usual.

Pulumi's rules (pulumi config set, CLI reference): a key without a namespace is the project's;
a top-level value is always a string; with --path, "true" and "false" become booleans and
integers become numbers, everything else a string; a path is dot-separated names, [N] list
indices and ["quoted.names"]."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Sequence
from typing import Any

from gpu_cluster.infra.problems import USAGE, CommandError
from gpu_cluster.infra.spec import PROJECT

SEGMENT = re.compile(r'\.?([^.\[\]"]+)|\[(\d+)\]|\["((?:[^"\\]|\\.)*)"\]')
INTEGER = re.compile(r"^[-+]?[0-9]+$")
INT64_MIN, UINT64_MAX = -(2**63), 2**64 - 1
Path = list[str | int]


def _usage(message: str) -> CommandError:
    return CommandError(USAGE, message)


def split_assignment(text: str, flag: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise _usage(
            f"{flag} {text!r}: expected KEY=VALUE, e.g. {flag} "
            + ("nodes=8" if flag == "--set" else "network.vpcCidr=10.50.0.0/16")
        )
    return key, value


def config_key(key: str) -> str:
    """`nodes` -> `gpu-cluster:nodes`; a namespaced key (`aws:region`) stays as it is."""
    return key if ":" in key else f"{PROJECT}:{key}"


def parse_path(path: str) -> Path:
    """`network.vpcCidr`, `spot.fallbackTypes[0]`, `tags["cost.center"]` -> segments."""
    segments: Path = []
    position = 0
    while position < len(path):
        match = SEGMENT.match(path, position)
        if match is None or (position == 0 and path.startswith(".")):
            raise _usage(
                f"--set-path {path!r}: cannot read the path at {path[position:]!r}; a path is "
                'names joined by dots, [N] list indices and ["quoted.names"], e.g. '
                "spot.fallbackTypes[0]"
            )
        name, index, quoted = match.groups()
        if index is not None:
            segments.append(int(index))
        else:
            segments.append(name if name is not None else quoted.replace('\\"', '"'))
        position = match.end()
    if not segments or not isinstance(segments[0], str):
        raise _usage(f"--set-path {path!r}: a path starts with a config key, e.g. network.vpcCidr")
    return segments


def typed(value: str) -> Any:
    """What `pulumi config set --path` stores (pkg/cmd/pulumi/config, Map.Set -> coerce):
    exactly true/false a boolean; a value of more than one character starting with 0 a string;
    else an integer if strconv.ParseInt(value, 10, 64) (or ParseUint) takes it; else a string."""
    if value in ("true", "false"):
        return value == "true"
    if len(value) > 1 and value.startswith("0"):
        return value
    if INTEGER.match(value) and INT64_MIN <= int(value) <= UINT64_MAX:
        return int(value)
    return value


def _container(current: Any, segment: str | int) -> Any:
    return [] if isinstance(segment, int) else {}


def _assign(container: Any, path: Path, value: Any, shown: str) -> Any:
    """Set `value` at `path` inside `container` (created as needed), as Pulumi does."""
    head, rest = path[0], path[1:]
    if isinstance(head, int):
        if not isinstance(container, list):
            raise _usage(f"--set-path {shown}: [{head}] indexes a list, but that value is not one")
        if head > len(container):
            raise _usage(
                f"--set-path {shown}: index {head} is past the end of a list of "
                f"{len(container)} (set [{len(container)}] to append)"
            )
        if head == len(container):
            container.append(None)
        container[head] = _assigned(container[head], rest, value, shown)
    else:
        if not isinstance(container, dict):
            raise _usage(f"--set-path {shown}: .{head} names a field, but that value is not a map")
        container[head] = _assigned(container.get(head), rest, value, shown)
    return container


def _assigned(child: Any, rest: Path, value: Any, shown: str) -> Any:
    """What a list item or map field becomes: `value`, or `child` with `value` set inside."""
    if not rest:
        return value
    child = child if isinstance(child, dict | list) else _container(child, rest[0])
    return _assign(child, rest, value, shown)


def apply_overrides(config: dict[str, str], overrides: Sequence[tuple[str, str]]) -> dict[str, str]:
    """The config after each (flag, KEY=VALUE) in order; the stack file is never written."""
    result = dict(config)
    for flag, text in overrides:
        key, value = split_assignment(text, flag)
        if flag == "--set":
            result[config_key(key)] = value  # top-level values are always strings
            continue
        path = parse_path(key)
        top = config_key(str(path[0]))
        nested = path[1:]
        if not nested:
            result[top] = value  # "Top level entries are always treated as strings"
            continue
        existing = result.get(top)
        try:
            current = json.loads(existing) if existing is not None else None
        except json.JSONDecodeError:
            current = existing
        if current is None:
            current = _container(None, nested[0])
        if not isinstance(current, dict | list):
            raise _usage(
                f"--set-path {key}: {top} is the plain value {existing!r}, not a map or list; "
                f"use --set {path[0]}=VALUE to replace it"
            )
        result[top] = json.dumps(_assign(current, nested, typed(value), key))
    return result


class OverrideAction(argparse.Action):
    """--set and --set-path share one ordered list of (flag, KEY=VALUE), applied in order."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        overrides = [*(getattr(namespace, self.dest, None) or []), (option_string, values)]
        setattr(namespace, self.dest, overrides)


def add_override_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        dest="overrides",
        action=OverrideAction,
        default=[],
        metavar="KEY=VALUE",
        help="as `pulumi config set KEY VALUE` (a string), for this run only",
    )
    parser.add_argument(
        "--set-path",
        dest="overrides",
        action=OverrideAction,
        metavar="PATH=VALUE",
        help="as `pulumi config set --path PATH VALUE` (true/false and integers typed)",
    )


def stack_config(stack: str, overrides: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """The stack file's config with the command line's overrides applied."""
    from gpu_cluster.infra import stack_files

    return apply_overrides(stack_files.load_stack_config(stack), overrides)
