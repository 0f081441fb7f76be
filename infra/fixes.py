"""A problem's fix as data: the `pulumi config set/rm` commands it names, applied to a config
exactly as the CLI would apply them (infra/overrides.py), and its stack-file form."""

from __future__ import annotations

import json
import re
from typing import Any

from gpu_cluster.infra.overrides import apply_overrides, config_key, parse_path

COMMAND = re.compile(
    r"pulumi config (?P<verb>set|rm)(?P<flags>(?: --(?:path|secret|plaintext))*) "
    r"(?P<key>[^\s;,()]+)(?: (?P<value>'[^']*'|\"[^\"]*\"|[^\s;()]+?))?(?=$|[\s;)]|,(?:\s|$))"
)
ALTERNATIVE = re.compile(r"\s*\((?:or|e\.g\.)[: ]|, or |; or | or: ")


def commands(fix: str) -> list[dict[str, Any]]:
    """The commands of the fix's first alternative, in order ([] when it names none)."""
    first = ALTERNATIVE.split(fix, maxsplit=1)[0]
    found = []
    for match in COMMAND.finditer(first):
        found.append(
            {
                "verb": match["verb"],
                "path": "--path" in match["flags"],
                "secret": "--secret" in match["flags"],
                "key": match["key"],
                "value": _unquoted(match["value"]),
            }
        )
    return found


def _unquoted(value: str | None) -> str | None:
    """A shell-quoted value ('*') as the shell passes it to the CLI."""
    if value and len(value) > 1 and value[0] == value[-1] and value[0] in "'\"":
        return value[1:-1]
    return value


def actionable(fix: str) -> bool:
    """A fix a user can follow as written: commands without placeholders such as <value>."""
    found = commands(fix)
    return bool(found) and all(
        "<" not in c["key"] and (c["verb"] == "rm" or (c["value"] and "<" not in c["value"]))
        for c in found
    )


def apply_fix(config: dict[str, str], fix: str) -> dict[str, str]:
    """The config after the fix's commands (as `pulumi config set/rm [--path]` would leave it)."""
    result = dict(config)
    for command in commands(fix):
        if command["verb"] == "set":
            flag = "--set-path" if command["path"] else "--set"
            result = apply_overrides(result, [(flag, f"{command['key']}={command['value']}")])
        else:
            result = _removed(result, command["key"], command["path"])
    return result


def _removed(config: dict[str, str], key: str, path: bool) -> dict[str, str]:
    result = dict(config)
    if not path:
        result.pop(config_key(key), None)
        return result
    segments = parse_path(key)
    top = config_key(str(segments[0]))
    if len(segments) == 1:
        result.pop(top, None)
        return result
    try:
        value = json.loads(result.get(top, "null"))
    except json.JSONDecodeError:
        return result
    container = value
    for segment in segments[1:-1]:
        try:
            container = container[segment]
        except (KeyError, IndexError, TypeError):
            return result
    try:
        del container[segments[-1]]
    except (KeyError, IndexError, TypeError):
        return result
    result[top] = json.dumps(value)
    return result
