"""Stack config -> StackSpec: decode Pulumi's string config map, translate pydantic errors
into Problems (with "did you mean"), then run the meaning checks in infra/validation.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, get_args

import pulumi
from pydantic import BaseModel, ValidationError

from gpu_cluster.infra.config_fixes import (
    NOT_FINITE,
    REGION_KEY,
    allowed_text,
    config_path,
    derived_fix,
    example_text,
    list_fix,
    list_problem,
    mapping_fix,
    set_command,
    unknown_key_fix,
)
from gpu_cluster.infra.errors import NOT_SET, ConfigError, Problem
from gpu_cluster.infra.examples import whole_number_example
from gpu_cluster.infra.namespaces import namespace_problems
from gpu_cluster.infra.secrets_config import secret_names
from gpu_cluster.infra.spec import CONFIG_KEYS, LIST_KEYS, OBJECT_KEYS, PROJECT, StackSpec
from gpu_cluster.infra.validation.service_access import without_secret_values
from gpu_cluster.infra.yaml_numbers import path_text

if TYPE_CHECKING:
    from gpu_cluster.infra.validation import ResolvedCluster, ResolvedData
    from gpu_cluster.infra.yaml_numbers import NumberNote

__all__ = ["NESTED_KEYS", "REGION_KEY", "config_path", "load_spec", "parse_spec", "set_command"]

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


def original_value(raw: Any, loc: tuple[Any, ...], fallback: Any) -> Any:
    """What the user wrote at ``loc`` (validators may have converted the value since)."""
    for part in loc:
        try:
            raw = raw[part]
        except (KeyError, IndexError, TypeError):
            return fallback
    return raw


def quoted(word: str) -> str:
    """A word as a message quotes it: in double quotes when it holds a single one."""
    return f'"{word}"' if "'" in word else f"'{word}'"


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
                    problem=f"unknown key {quoted(unknown)}"
                    if unknown
                    else "a key with an empty name",
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
                    allowed=allowed_text(item),
                    fix=f"remove it (pulumi config rm {loc[0]}) or set its fields with "
                    f"`pulumi config set --path {config_path(loc).split(':', 1)[1]}.<field> "
                    "<value>`",
                )
            )
        else:
            received = original_value(raw, loc, item.get("input", NOT_SET))
            example = (
                whole_number_example(loc, received) if kind == "value_error" else example_text(item)
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
                        else allowed_text(item)
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
        problems += without_secret_values(problems_from_validation(error, raw))
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


def file_number_notes(stack: str, config: dict[str, str]) -> list[NumberNote]:
    """The stack file's numbers that Pulumi reads otherwise than a person does (010 is 8),
    where the config still holds them: warnings (`pulumi up` logs them, gpuc prints them), or
    an aside to the problem with the number read, where that number is refused."""
    from gpu_cluster.infra.stack_files import number_notes

    return number_notes(stack, config)


def with_asides(problems: list[Problem], notes: list[NumberNote]) -> list[Problem]:
    """Each problem about a number the stack file spelled otherwise says how Pulumi read it
    (gangTimeoutMinutes: 011 is refused as 9)."""
    by_path = {path_text(note.path): note for note in notes}
    return [
        replace(p, problem=f"{p.problem} ({by_path[p.path].aside()})") if p.path in by_path else p
        for p in problems
    ]


def load_spec(config: Mapping[str, str], stack: str) -> ResolvedCluster | ResolvedData:
    """Shape checks, then meaning checks; every problem is raised at once as a ConfigError."""
    from gpu_cluster.infra.validation import resolve

    spec, problems, dropped = parse_spec(config)
    notes = file_number_notes(stack, dict(config))
    # without a role, or with the inference settings dropped for a mistake, meaning checks
    # would check the stack as something it is not (a cluster needs one zone, ...)
    if spec is not None and not {"role", "inference"} & dropped:
        resolved, meaning = resolve(spec, stack, known_stacks=local_stacks())
        problems += [p for p in meaning if not _is_about(p, dropped)]
        if not problems:
            assert resolved is not None  # resolve: a spec whenever there is no problem
            warnings = tuple(note.warning() for note in notes)
            return replace(resolved, warnings=(*warnings, *resolved.warnings))
    raise ConfigError(stack, with_asides(problems, notes), dict(config))


def load_from_pulumi():
    """The program's entry: the running stack's config, validated and resolved."""
    return load_spec(current_config(), pulumi.get_stack())
