"""Stack config -> StackSpec: decode Pulumi's string config map, translate pydantic errors
into Problems (with "did you mean"), then run the meaning checks in infra/validation.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, get_args

import pulumi
from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from gpu_cluster.infra.errors import NOT_SET, ConfigError, Problem
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
from gpu_cluster.infra.meant import list_items
from gpu_cluster.infra.namespaces import namespace_problems
from gpu_cluster.infra.secrets_config import secret_names
from gpu_cluster.infra.spec import CONFIG_KEYS, LIST_KEYS, OBJECT_KEYS, PROJECT, StackSpec
from gpu_cluster.infra.suggest import closest, suggest

if TYPE_CHECKING:
    from gpu_cluster.infra.validation import ResolvedCluster, ResolvedData

REGION_KEY = "aws:region"
NESTED_KEYS: dict[str, frozenset[str]] = {
    field.alias or name: frozenset(
        nested.alias or nested_name for nested_name, nested in model.model_fields.items()
    )
    for name, field in StackSpec.model_fields.items()
    for model in get_args(field.annotation) or (field.annotation,)
    if isinstance(model, type) and issubclass(model, BaseModel)
}


def current_config() -> dict[str, str]:
    """Every config value the Pulumi runtime holds for this stack (CLI or mock engine)."""
    from pulumi.runtime import config as runtime_config

    return {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}


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


def decode(config: Mapping[str, str]) -> tuple[dict[str, Any], list[Problem]]:
    """Pick this project's keys out of the config map; JSON-decode the object-valued ones."""
    raw: dict[str, Any] = {}
    problems: list[Problem] = namespace_problems(config)
    if REGION_KEY in config:
        raw["region"] = config[REGION_KEY]
    prefix = f"{PROJECT}:"
    for full_key, value in config.items():
        if not full_key.startswith(prefix):
            continue
        key = full_key[len(prefix) :]
        if key == "region":  # the spec's field, but the region is only ever read from aws:region
            problems.append(
                Problem(
                    path=full_key,
                    received=value,
                    problem="unknown key 'region'",
                    allowed=", ".join(sorted(CONFIG_KEYS)),
                    fix=f"did you mean '{REGION_KEY}'? pulumi config rm region && "
                    f"pulumi config set {REGION_KEY} {value}",
                )
            )
            continue
        if key in OBJECT_KEYS and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                problems.append(
                    Problem(
                        path=full_key,
                        received=value,
                        problem="expected an object (a YAML mapping), got a plain string",
                        allowed="a mapping of fields, e.g. {vpcCidr: 10.42.0.0/16}",
                        fix=f"pulumi config rm {key}" + mapping_fix((key,), value, " && ")
                        if key != "secrets"
                        else "pulumi config rm secrets && pulumi config set --secret --path "
                        "secrets.<NAME> <value>",
                    )
                )
                continue
        if key in LIST_KEYS and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                problems.append(list_problem(full_key, key, value))
                continue
        if key == "secrets":
            value, secret_problems = secret_names(value)
            problems += secret_problems
        raw[key] = value
    return raw, problems


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
    else the string as its one item; never a bracket inside an item."""
    path = config_path(loc).split(":", 1)[1]
    flag = " --path" if len(loc) > 1 else ""
    items = list_items(received) or [received]
    return " && ".join(
        [f"pulumi config rm{flag} {path}"]
        + [f"pulumi config set --path {path}[{i}] {item}" for i, item in enumerate(items)]
    )


def derived_fix(loc: tuple[Any, ...], received: Any, error: ErrorDetails) -> str:
    """The command that sets ``loc`` to what ``received`` meant, given the field's error."""
    kind = error["type"]
    example = _example(error)
    if kind == "value_error":
        example = whole_number_example(loc, received)
    elif kind.startswith("float") or kind in ("greater_than", "finite_number"):
        example = number_example(loc, received)
    return value_fix(loc, received, example)


def _allowed(error: ErrorDetails) -> str:
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


def _example(error: ErrorDetails) -> str:
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
        return closest(given, choices) or choices[0]
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


def original_value(raw: Any, loc: tuple[Any, ...], fallback: Any) -> Any:
    """What the user wrote at ``loc`` (validators may have converted the value since)."""
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return fallback
    return raw


def problems_from_validation(error: ValidationError, raw: Any = None) -> list[Problem]:
    problems = []
    for item in error.errors():
        loc = tuple(item["loc"])
        kind = item["type"]
        if kind == "extra_forbidden":
            parent, unknown = loc[:-1], str(loc[-1])
            known = NESTED_KEYS.get(str(parent[0]), frozenset()) if parent else CONFIG_KEYS
            problems.append(
                Problem(
                    path=config_path(loc),
                    received=item["input"],
                    problem=f"unknown key '{unknown}'",
                    allowed=", ".join(sorted(known)),
                    fix=unknown_key_fix(loc, unknown, known, item["input"]),
                )
            )
        elif kind == "missing" and loc == ("region",):
            problems.append(
                Problem(
                    path=REGION_KEY,
                    received=NOT_SET,
                    problem="the AWS region is not set",
                    allowed="an AWS region such as us-east-1",
                    fix=set_command(loc, "us-east-1"),
                )
            )
        elif kind == "value_error" and "mapping" in item["msg"]:
            problems.append(
                Problem(
                    path=config_path(loc),
                    received=item.get("input"),
                    problem=item["msg"].removeprefix("Value error, "),
                    allowed=_allowed(item),
                    fix=f"remove it (pulumi config rm {loc[0]}) or set its fields with "
                    f"`pulumi config set --path {config_path(loc).split(':', 1)[1]}.<field> "
                    "<value>`",
                )
            )
        else:
            received = original_value(raw, loc, item.get("input", NOT_SET))
            example = (
                whole_number_example(loc, received) if kind == "value_error" else _example(item)
            )
            fix = derived_fix(loc, received, item)
            if kind in ("model_type", "model_attributes_type") and not isinstance(received, dict):
                fix = f"pulumi config rm {loc[0]}" + mapping_fix(loc, received, " && ")
            if kind == "list_type" and isinstance(received, str) and len(loc) > 1:
                # a string where a list belongs: its items ("[a, b]": a and b), else itself
                fix = list_fix(loc, received)
            problems.append(
                Problem(
                    path=config_path(loc),
                    received=received,
                    problem=NOT_FINITE
                    if kind == "finite_number"
                    else "expected a mapping of settings, got a plain value"
                    if kind in ("model_type", "model_attributes_type")
                    else item["msg"].removeprefix("Value error, "),
                    allowed=(
                        f"a whole number written with digits, e.g. {example}"
                        if kind == "value_error"
                        else _allowed(item)
                    ),
                    fix=fix,
                )
            )
    return problems


def parse_spec(config: Mapping[str, str]) -> tuple[StackSpec | None, list[Problem], set[str]]:
    """Shape checks. Returns the spec (with any ill-shaped top-level key dropped back to its
    default, so meaning checks can still run on the rest), the problems, and the dropped keys."""
    raw, problems = decode(config)
    dropped = {
        problem.path.split(":", 1)[1]
        for problem in problems
        if problem.path.startswith(f"{PROJECT}:")
    } - {"region"}
    try:
        return StackSpec.model_validate(raw_without(raw, dropped)), problems, dropped
    except ValidationError as error:
        problems += problems_from_validation(error, raw)
        dropped |= {str(item["loc"][0]) for item in error.errors() if item["loc"]}
    if "region" in dropped:
        return None, problems, dropped
    try:
        return StackSpec.model_validate(raw_without(raw, dropped)), problems, dropped
    except ValidationError:  # pragma: no cover - every ill-shaped key was dropped above
        return None, problems, dropped


def raw_without(raw: dict[str, Any], keys: set[str]) -> dict[str, Any]:
    return {key: value for key, value in raw.items() if key not in keys}


def _is_about(problem: Problem, keys: set[str]) -> bool:
    path = problem.path.split(":", 1)[-1]
    return any(path == key or path.startswith((f"{key}.", f"{key}[")) for key in keys)


def local_stacks() -> list[str]:
    """The stack files next to the project (none when run outside a checkout)."""
    from gpu_cluster.infra.stack_files import StackFileError, available_stacks, project_root

    try:
        return available_stacks(project_root())
    except StackFileError:
        return []


def file_number_warnings(stack: str, config: dict[str, str]) -> list[str]:
    """The stack file's numbers that Pulumi reads otherwise than a person does (010 is 8),
    where the config still holds them: `pulumi up` logs them, gpuc prints them."""
    from gpu_cluster.infra.stack_files import number_warnings

    return number_warnings(stack, config)


def load_spec(config: Mapping[str, str], stack: str) -> ResolvedCluster | ResolvedData:
    """Shape checks, then meaning checks; every problem is raised at once as a ConfigError."""
    from gpu_cluster.infra.validation import resolve

    spec, problems, dropped = parse_spec(config)
    # without a role, or with the inference settings dropped for a mistake, meaning checks
    # would check the stack as something it is not (a cluster needs one zone, ...)
    if spec is not None and not {"role", "inference"} & dropped:
        resolved, meaning = resolve(spec, stack, known_stacks=local_stacks())
        problems += [p for p in meaning if not _is_about(p, dropped)]
        if not problems:
            assert resolved is not None  # resolve: a spec whenever there is no problem
            notes = tuple(file_number_warnings(stack, dict(config)))
            return replace(resolved, warnings=(*notes, *resolved.warnings)) if notes else resolved
    raise ConfigError(stack, problems, dict(config))


def load_from_pulumi():
    """The program's entry: the running stack's config, validated and resolved."""
    return load_spec(current_config(), pulumi.get_stack())
