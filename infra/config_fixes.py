"""How a shape error's fix reads: the config path and `pulumi config` command of a location,
and the value the fix proposes, read from what the user typed where its meaning is evident
($300 -> 300, off -> 0 or the mapping's switch off, "[a, b]" -> a list of two, a misspelt key
-> the key meant with its value read for that key; infra/examples.py, infra/meant.py)."""

from __future__ import annotations

from typing import Any

from pydantic_core import ErrorDetails

from gpu_cluster.infra.errors import Problem
from gpu_cluster.infra.examples import (
    enabled_switch,
    field_error,
    is_mapping,
    is_off,
    means_no_limit,
    number_example,
    off_switch,
    only_required_field,
    optional,
    whole_number_example,
)
from gpu_cluster.infra.meant import list_items, nearest_number
from gpu_cluster.infra.spec import PROJECT
from gpu_cluster.infra.suggest import closest, suggest

REGION_KEY = "aws:region"


def config_path(loc: tuple[Any, ...]) -> str:
    """``("network", "vpcCidr")`` -> ``gpu-cluster:network.vpcCidr``; region -> ``aws:region``."""
    if loc and loc[0] == "region":
        return REGION_KEY
    head, *rest = [str(part) for part in loc] or ["(stack)"]
    path = f"{PROJECT}:{head}"
    for part in rest:
        path += f"[{part}]" if part.isdigit() else f".{part}"
    return path


def set_command(loc: tuple[Any, ...], value: str = "<value>") -> str:
    if loc and loc[0] == "region":
        return f"pulumi config set aws:region {value}"
    path = config_path(loc).split(":", 1)[1]
    flag = " --path" if len(loc) > 1 else ""
    return f"pulumi config set{flag} {path} {value}"


# Other names for the same choice, where the nearest spelling would mean something else
# (amd64 is x86_64, not arm64).
SAME_MEANING = {
    "amd64": "x86_64",
    "x64": "x86_64",
    "x86-64": "x86_64",
    "intel": "x86_64",
    "aarch64": "arm64",
    "graviton": "arm64",
    "bridged": "bridge",
}


def unknown_key_fix(loc: tuple[Any, ...], unknown: str, known: Any, value: Any) -> str:
    """Remove the key; where a known key is clearly meant, set it to what the value meant
    there (idleStop.timeoutMinutes off -> idleStop.enabled false); a mapping key is never
    given a plain value (idleStp: off -> idleStop.enabled false, not idleStop: off)."""
    path = config_path(loc).split(":", 1)[1]
    flag = " --path" if len(loc) > 1 else ""
    remove = f"pulumi config rm{flag} {path}"
    meant = closest(unknown, known)
    if meant is None:
        return remove
    hint = suggest(unknown, known)
    meant_loc = (*loc[:-1], meant)
    if isinstance(value, dict | list) or " " in str(value) or value in (None, ""):
        return f"{hint}{remove}, then set {meant} (its value was not moved)"
    text = "true" if value is True else "false" if value is False else str(value)
    if is_mapping(meant_loc):
        return f"{hint}{remove}{mapping_fix(meant_loc, value, ' && ')}"
    error = field_error(meant_loc, value)
    if error is None:
        return f"{hint}{remove} && {set_command(meant_loc, text)}"
    return f"{hint}{remove} && {derived_fix(meant_loc, value, error)}"


def mapping_fix(loc: tuple[Any, ...], value: Any, then: str = "") -> str:
    """A plain value where a mapping belongs, as the mapping it meant: off -> {enabled:
    false}; the value of its one required field (budget: $300 -> {monthlyUsd: 300}); else
    how to set its fields. ``then``: what joins it to a command before it (a leading rm)."""
    path = config_path(loc).split(":", 1)[1]
    if enabled_switch(loc) and is_off(value):
        return f"{then}{set_command((*loc, 'enabled'), 'false')}"
    field = only_required_field(loc)
    if field is not None:
        inner = (*loc, field)
        error = field_error(inner, value)
        return then + (derived_fix(inner, value, error) if error else set_command(inner, value))
    return (
        f", then set the fields of {path} (a mapping, not a plain value): "
        f"pulumi config set --path {path}.<field> <value>"
    )


def list_problem(full_key: str, key: str, value: str) -> Problem:
    return Problem(
        path=full_key,
        received=value,
        problem="expected a list, got a plain string",
        allowed="a YAML list, e.g. [name@example.com]",
        fix=list_fix((key,), value),
    )


def list_fix(loc: tuple[Any, ...], received: str) -> str:
    """Make the list at ``loc`` from a string: the items written in it ("[a, b]", "a, b"),
    else the string as its one item; never a bracket inside an item. An empty list typed
    ("[]", which `pulumi config set --path` stores as that string) is the key unset."""
    path = config_path(loc).split(":", 1)[1]
    flag = " --path" if len(loc) > 1 else ""
    if received.strip() in ("[]", ""):
        return f"pulumi config rm{flag} {path}"
    items = list_items(received) or [received]
    return " && ".join(
        [f"pulumi config rm{flag} {path}"]
        + [f"pulumi config set --path {path}[{i}] {item}" for i, item in enumerate(items)]
    )


def derived_fix(loc: tuple[Any, ...], received: Any, error: ErrorDetails) -> str:
    """The command that sets ``loc`` to what ``received`` meant, given the field's error."""
    kind = error["type"]
    example = example_text(error)
    if kind == "value_error":
        example = whole_number_example(loc, received)
    elif kind.startswith("float") or kind in ("greater_than", "finite_number"):
        example = number_example(loc, received)
    return value_fix(loc, received, example)


def allowed_text(error: ErrorDetails) -> str:
    kind, ctx = error["type"], error.get("ctx", {})
    if kind == "literal_error":
        return f"one of {ctx.get('expected')}"
    if kind in ("greater_than_equal", "less_than_equal"):
        bound = "at least" if kind == "greater_than_equal" else "at most"
        return f"a whole number {bound} {ctx.get('ge', ctx.get('le'))}"
    if kind == "greater_than":
        return f"a number greater than {ctx.get('gt'):g}"
    if kind == "finite_number":
        return "a finite number (not inf or nan), e.g. 12.5"
    if kind.startswith("float"):
        return "a number, e.g. 12.5"
    if kind.startswith("int"):
        return "a whole number"
    if kind.startswith("bool"):
        return "true or false"
    if kind.startswith("string") or kind == "str_type":
        return "a string"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "a mapping of fields"
    if kind == "list_type":
        return "a list"
    if kind == "missing":
        return "a value"
    if kind == "value_error" and "mapping" in error["msg"]:
        return "a mapping of fields"
    if kind == "value_error":
        return "a whole number written with digits, e.g. 4"
    return error["msg"]


def example_text(error: ErrorDetails) -> str:
    """A value that would pass, for the fix line."""
    kind, ctx = error["type"], error.get("ctx", {})
    if kind == "literal_error":
        choices = [
            c.strip(" '")
            for c in str(ctx.get("expected", "<value>")).replace(" or ", ",").split(",")
        ]
        given = str(error.get("input", ""))
        meant = SAME_MEANING.get(given.lower())
        if meant in choices:
            return meant
        return nearest_number(given, choices) or closest(given, choices) or choices[0]
    if kind in ("greater_than_equal", "less_than_equal"):
        return str(ctx.get("ge", ctx.get("le")))
    if kind == "greater_than" or kind.startswith("float"):
        return "12.5"
    if kind.startswith("bool"):
        return str(ctx.get("meant", "true"))
    if kind == "value_error":
        return "4"
    return "<value>"


NOT_FINITE = (
    "not a finite number: infinity and NaN (inf, .inf, Infinity, nan) mean no price, budget, "
    "percentage or target"
)


def value_fix(loc: tuple[Any, ...], received: Any, example: str) -> str:
    """Set the field to ``example``; where the user meant "off" or "no cap", say that instead:
    idleStop.minutes off -> idleStop.enabled false, spot.maxPrice inf -> unset (no cap)."""
    switch = off_switch(loc, received)
    path = config_path(loc).split(":", 1)[1]
    if switch is not None:
        return f"pulumi config rm --path {path} && {set_command(switch, 'false')}"
    if means_no_limit(received) and optional(loc) and len(loc) > 1:
        return f"pulumi config rm --path {path} (unset: no cap of its own)"
    return set_command(loc, example)
