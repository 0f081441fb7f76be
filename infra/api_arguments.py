"""The public components' arguments checked as Python values, before they become a stack's config:
the Args object itself, an unknown keyword, a value of the wrong kind (a number where a subnet
id belongs), an Output where only a plain value can be checked, and the secrets.

The keywords and their kinds are the Args' TypedDicts (infra/api_settings.py), so what a type
checker accepts is what runs. Values of the right kind then go through the stack file's checks
(infra/config.py); this module only says what those checks could not see, because config values
are strings and a number typed where a string belongs would arrive as its digits.

Secrets: a plain string where a secret belongs is wrapped with pulumi.Output.secret (encrypted in
the state from then on) with a warning that it is still plain text in the program's source."""

from __future__ import annotations

import collections.abc
import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin, is_typeddict

import pulumi

from gpu_cluster.components.serving_config import ServiceAccess
from gpu_cluster.infra.problems import NOT_SET, Problem
from gpu_cluster.infra.suggest import suggest
from gpu_cluster.infra.validation.existing_network import SECURITY_GROUP_ID, SUBNET_ID
from gpu_cluster.infra.validation.storage import KMS_KEY_ARN

# pulumi.Input[T] is Union[T, Awaitable[T], "Output[T]"]: the forward reference and its TypeVar
HINT_NAMES = {"Output": pulumi.Output, "T": TypeVar("T")}


def hints(typed: type) -> dict[str, Any]:
    """A TypedDict's keys and their types."""
    return typing.get_type_hints(typed, localns=HINT_NAMES)


def _is_output(hint: Any) -> bool:
    """Output[T], Awaitable[T], or pulumi.Input's unresolved "Output[T]"."""
    origin = get_origin(hint)
    return (
        hint is pulumi.Output
        or origin in (pulumi.Output, collections.abc.Awaitable)
        or isinstance(hint, typing.ForwardRef)
    )


def is_input(hint: Any) -> bool:
    """The hint is a pulumi.Input (an Output may stand for it)."""
    return any(_is_output(option) for option in get_args(hint))


def describe(hint: Any) -> str:
    """A kind in words: 'a string', 'a list of strings', ..."""
    origin, args = get_origin(hint), get_args(hint)
    if origin in (typing.Union, types.UnionType):
        plain = [a for a in args if a is not type(None) and not _is_output(a)]
        text = " or ".join(dict.fromkeys(describe(a) for a in plain))
        return f"{text} (or a Pulumi Output of one)" if is_input(hint) else text
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in args)
    if origin in (collections.abc.Sequence, list, tuple):
        return f"a list of {describe(args[0]).removeprefix('a ').removeprefix('an ')}s"
    if origin in (collections.abc.Mapping, dict):
        return f"a dict of {describe(args[1]).removeprefix('a ').removeprefix('an ')}s"
    if is_typeddict(hint):
        return "a dict with the keys " + ", ".join(hints(hint))
    return {str: "a string", int: "a whole number", float: "a number", bool: "True or False"}.get(
        hint, getattr(hint, "__name__", str(hint))
    )


def kind_of(value: Any) -> str:
    """What a value is, in words (never its repr)."""
    if value is None:
        return "None"
    if isinstance(value, pulumi.Output):
        return "a Pulumi Output"
    if isinstance(value, bool):
        return "a bool"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a dict"
    if isinstance(value, list | tuple):
        return "a list"
    return f"a {type(value).__name__}"


def _accepts(hint: Any, value: Any) -> bool:
    """The value is of the hint's kind (its contents are checked one by one elsewhere)."""
    origin, args = get_origin(hint), get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(option, value) for option in args)
    if hint is type(None):
        return value is None
    if _is_output(hint):
        return isinstance(value, pulumi.Output)
    if origin is Literal:  # the stack file's checks name the allowed values
        return any(type(value) is type(option) for option in args)
    if origin in (collections.abc.Sequence, list, tuple):
        return isinstance(value, list | tuple)
    if origin in (collections.abc.Mapping, dict) or is_typeddict(hint):
        return isinstance(value, Mapping)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _kind_fix(hint: Any, value: Any, path: str) -> str:
    leaf = path.rsplit(".", 1)[-1]
    if is_input(hint):  # an id or a name another resource gives
        return (
            f"pass the id or name as a string, or the Output of the resource that has it ({leaf})"
        )
    if hint is str and isinstance(value, int | float):
        return f"pass it as a string: {leaf}={str(value)!r}"
    if hint in (int, float) and isinstance(value, str) and value.strip().isdigit():
        return f"pass it as a number: {leaf}={int(value)}"
    if hint is bool and isinstance(value, str) and value.lower() in ("true", "false"):
        return f"pass it as a bool: {leaf}={value.lower() == 'true'}"
    return f"pass {describe(hint)}"


def _inner(hint: Any, value: Any) -> Any:
    """The member of a union that the value is (for its contents)."""
    if get_origin(hint) in (typing.Union, types.UnionType):
        return next(option for option in get_args(hint) if _accepts(option, value))
    return hint


def value_problems(value: Any, hint: Any, path: str) -> list[Problem]:
    """What is wrong with one argument's value, its contents included."""
    if not _accepts(hint, value):
        output = isinstance(value, pulumi.Output)
        return [
            Problem(
                path=path,
                received=kind_of(value) if output else (NOT_SET if value is None else value),
                problem=(
                    "is checked before anything is created, so it must be a plain value"
                    if output
                    else f"is {kind_of(value)}, where {describe(hint)} belongs"
                ),
                allowed=describe(hint),
                fix=(
                    "pass the value itself (read it from pulumi.Config, not an Output)"
                    if output
                    else _kind_fix(hint, value, path)
                ),
            )
        ]
    hint = _inner(hint, value)
    origin, args = get_origin(hint), get_args(hint)
    if is_typeddict(hint):
        return settings_problems(value, hint, path)
    if origin in (collections.abc.Sequence, list, tuple) and args:
        return [p for i, v in enumerate(value) for p in value_problems(v, args[0], f"{path}[{i}]")]
    if origin in (collections.abc.Mapping, dict) and len(args) == 2:
        return [
            p
            for k, v in value.items()
            for p in [
                *value_problems(k, args[0], f"{path} key {k!r}"),
                *value_problems(v, args[1], f"{path}[{k!r}]"),
            ]
        ]
    return []


# a stack file's keys that a component sets itself
OWNED = {
    "role": "the component is the role: GpuCluster (cluster), InferenceService (inference), "
    "DataStore (data)",
    "cluster_name": "the component's name is the cluster's name",
}


def settings_problems(settings: Mapping[str, Any], typed: type, path: str = "") -> list[Problem]:
    """Every unknown keyword and value of the wrong kind in the settings of an Args TypedDict."""
    known = hints(typed)
    problems: list[Problem] = []
    for key, value in settings.items():
        where = f"{path}.{key}" if path else key
        if not path and key in OWNED:
            problems.append(
                Problem(
                    path=where,
                    received=value if isinstance(value, str) else kind_of(value),
                    problem=f"is not an argument: {OWNED[key]}",
                    allowed=", ".join(sorted(known)),
                    fix=f"leave out {key}",
                )
            )
            continue
        if key not in known:
            hint = suggest(str(key), list(known))
            problems.append(
                Problem(
                    path=where,
                    received=value if not isinstance(value, pulumi.Output) else kind_of(value),
                    problem=f"unknown argument '{key}'",
                    allowed=", ".join(sorted(known)),
                    fix=hint.strip() if hint else f"leave out {key}",
                )
            )
            continue
        problems += value_problems(value, known[key], where)
    return problems


def args_problem(component: str, name: Any, args: Any, expected: type) -> Problem | None:
    """The Args object itself: the right class (a dict of keywords is not one)."""
    if isinstance(args, expected):
        return None
    example = (
        expected.__name__ + "(**settings)"
        if isinstance(args, Mapping)
        else expected.__name__ + "(...)"
    )
    return Problem(
        path=f"{component}({name!r}).args",
        received=kind_of(args) if not isinstance(args, type) else args.__name__,
        problem=f"is not a {expected.__name__}",
        allowed=f"a {expected.__name__}",
        fix=f"pass {component}({name!r}, {example})",
    )


def name_problem(component: str, name: Any) -> Problem | None:
    if isinstance(name, str) and name:
        return None
    return Problem(
        path=f"{component}(name)",
        received=name if isinstance(name, str | int | float) else kind_of(name),
        problem="a component's name is a non-empty string (it is part of every child's URN)",
        allowed="a string, e.g. 'train'",
        fix=f"{component}('train', ...)",
    )


def opts_problem(component: str, name: Any, opts: Any) -> Problem | None:
    if opts is None or isinstance(opts, pulumi.ResourceOptions):
        return None
    return Problem(
        path=f"{component}({name!r}).opts",
        received=kind_of(opts),
        problem="is not a pulumi.ResourceOptions",
        allowed="pulumi.ResourceOptions(...) or None",
        fix="pass opts=pulumi.ResourceOptions(...)",
    )


def secret_values(
    secrets: Mapping[str, Any],
) -> tuple[dict[str, pulumi.Input[str]], list[Problem], list[str]]:
    """The secrets as Pulumi secrets, the problems, and a warning per plain string wrapped."""
    values: dict[str, pulumi.Input[str]] = {}
    problems: list[Problem] = []
    warnings: list[str] = []
    for key, value in secrets.items():
        if isinstance(value, pulumi.Output):
            values[key] = value
        elif isinstance(value, str) and value:
            values[key] = pulumi.Output.secret(value)
            warnings.append(
                f"secrets[{key!r}] is a plain string: it is stored as a Pulumi secret, but it is "
                "in plain text in your program; read it with "
                f"pulumi.Config().require_secret({key!r}) (set with `pulumi config set --secret`)"
            )
        else:
            problems.append(
                Problem(
                    path=f"secrets[{key!r}]",
                    received=kind_of(value) if not isinstance(value, str) else value,
                    problem="a secret's value is a non-empty string or a Pulumi secret Output",
                    allowed="pulumi.Config().require_secret(name), or a string",
                    fix=f"pass secrets={{{key!r}: pulumi.Config().require_secret({key!r})}}",
                )
            )
    return values, problems, warnings


ACCESS_SECRET = {"secure": "input"}  # what the stack file's checks see for a secret given


def access_secret_values(
    settings: Mapping[str, Any],
) -> tuple[dict[str, Any], dict[str, pulumi.Output], list[Problem], list[str]]:
    """inference.access's API keys and OIDC client secret, each a Pulumi secret kept aside by
    its path; the settings with a secret's marker in their place (its value is never checked
    nor shown), the problems, and a warning per plain string wrapped."""
    inference = settings.get("inference")
    access = inference.get("access") if isinstance(inference, Mapping) else None
    if not isinstance(inference, Mapping) or not isinstance(access, Mapping):
        return dict(settings), {}, [], []
    access = dict(access)
    values: dict[str, pulumi.Output] = {}
    problems: list[Problem] = []
    warnings: list[str] = []

    def secret(path: str, value: Any) -> Any:
        if isinstance(value, pulumi.Output):
            values[path] = pulumi.Output.secret(value)
        elif isinstance(value, str) and value:
            values[path] = pulumi.Output.secret(value)
            warnings.append(
                f"{path} is a plain string: it is stored as a Pulumi secret, but it is in plain "
                "text in your program; read it with pulumi.Config().require_secret(name) (set "
                "with `pulumi config set --secret`)"
            )
        elif isinstance(value, str):
            problems.append(
                Problem(
                    path=path,
                    received=value,
                    problem="a secret's value is a non-empty string or a Pulumi secret Output",
                    allowed="pulumi.Config().require_secret(name), or a string",
                    fix=f"pass {path.rsplit('.', 1)[-1].split('[')[0]} from "
                    "pulumi.Config().require_secret(name)",
                )
            )
            return value
        else:  # a value of another kind: settings_problems names it
            return value
        return ACCESS_SECRET

    keys = access.get("api_keys")
    if isinstance(keys, list | tuple):
        access["api_keys"] = [
            secret(f"inference.access.api_keys[{i}]", key) for i, key in enumerate(keys)
        ]
    oidc = access.get("oidc")
    if isinstance(oidc, Mapping) and "client_secret" in oidc:
        access["oidc"] = {
            **oidc,
            "client_secret": secret("inference.access.oidc.client_secret", oidc["client_secret"]),
        }
    return {**settings, "inference": {**inference, "access": access}}, values, problems, warnings


def with_secrets(access: ServiceAccess, values: Mapping[str, pulumi.Output]) -> ServiceAccess:
    """The checked access with each secret's stand-in swapped back for the value given."""
    keys = tuple(
        values.get(f"inference.access.api_keys[{i}]", key) for i, key in enumerate(access.api_keys)
    )
    oidc = access.oidc
    secret = values.get("inference.access.oidc.client_secret")
    if oidc is not None and secret is not None:
        oidc = dataclasses.replace(oidc, client_secret=secret)
    return dataclasses.replace(access, api_keys=keys, oidc=oidc)


# GpuNodeGroupArgs' ids, when given as plain strings: the shapes AWS accepts
# (infra/validation/: the same patterns a stack file's ids are checked with)
INSTANCE_PROFILE_ARN = re.compile(
    r"^arn:aws[a-z-]*:iam::\d{12}:instance-profile/[\w+=,.@/-]{1,128}\Z"
)


def node_group_input_problems(inputs: Mapping[str, Any]) -> list[Problem]:
    """GpuNodeGroupArgs' ids and user data: a string of the right shape, or an Output."""
    shapes = {  # key: (pattern, what it is, its shape, an Output that gives it)
        "subnet_id": (SUBNET_ID, "a subnet id", "subnet- and 8 or 17 hex digits", "subnet.id"),
        "security_group_id": (
            SECURITY_GROUP_ID,
            "a security group id",
            "sg- and 8 or 17 hex digits",
            "group.id",
        ),
        "instance_profile_arn": (
            INSTANCE_PROFILE_ARN,
            "an instance profile ARN",
            "arn:aws:iam::<account>:instance-profile/<name>",
            "profile.arn",
        ),
        "kms_key_arn": (
            KMS_KEY_ARN,
            "a KMS key ARN",
            "arn:aws:kms:<region>:<account>:key/<key id>",
            "key.arn",
        ),
    }
    problems: list[Problem] = []
    for key, value in inputs.items():
        kind = value_problems(value, pulumi.Input[str], key)
        if kind or isinstance(value, pulumi.Output) or key not in shapes:
            problems += kind
            continue
        pattern, what, shape, example = shapes[key]
        if not pattern.match(value):
            problems.append(
                Problem(
                    path=key,
                    received=value,
                    problem=f"is not {what}",
                    allowed=shape,
                    fix=f"pass the resource's own output, e.g. {key}={example}",
                )
            )
    return problems
