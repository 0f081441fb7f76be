"""The stack config keys page: every key of the spec (infra/spec.py) with its type, default,
allowed values and the stages that use it."""

from __future__ import annotations

import json
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, BeforeValidator
from pydantic.fields import FieldInfo

from gpu_cluster.infra.reference.markdown import (
    GENERATED,
    STACK_FILE,
    cell,
    slug,
)
from gpu_cluster.infra.spec import PROJECT, StackSpec, true_or_false, whole_number
from gpu_cluster.infra.validation.stage_keys import STAGES, stages_using

REGION_KEY = "aws:region"  # the spec's `region` field, read from aws:region only (config.py)


# The stages and the keys each uses: one table, infra/validation/stage_keys.py, which the
# meaning checks enforce (a key set on a stage that ignores it is refused).
ROLES = STAGES


def stages_of(key: str) -> tuple[str, ...]:
    """The stages whose stacks may set a key (the others refuse it)."""
    return stages_using(key)


@dataclass(frozen=True)
class Shape:
    """What a spec field holds, as a stack file writes it."""

    kind: str  # int, float, bool, str, enum, list, map, object, secrets
    optional: bool = False
    choices: tuple[str, ...] = ()
    item: Shape | None = None  # list items, map values
    model: type[BaseModel] | None = None
    bounds: tuple[tuple[str, float], ...] = ()  # (ge|le|gt|lt, number)


def _validators(metadata: list[Any]) -> set[Any]:
    return {m.func for m in metadata if isinstance(m, BeforeValidator)}


def _bounds(metadata: list[Any]) -> tuple[tuple[str, float], ...]:
    found: list[tuple[str, float]] = []
    for m in metadata:
        for kind, name in ((Ge, "ge"), (Gt, "gt"), (Le, "le"), (Lt, "lt")):
            if isinstance(m, kind):
                found.append((name, getattr(m, name)))
    return tuple(found)


def shape(annotation: Any, metadata: list[Any] | None = None) -> Shape:
    """A field's annotation (and pydantic metadata) as a Shape."""
    metadata = list(metadata or [])
    optional = False
    origin = get_origin(annotation)
    if origin is Annotated:
        inner, *extra = get_args(annotation)
        return shape(inner, metadata + extra)
    if origin in (Union, types.UnionType):
        members = [a for a in get_args(annotation) if a is not type(None)]
        optional = len(members) < len(get_args(annotation))
        if len(members) != 1:  # pragma: no cover - the spec has no other unions
            raise TypeError(f"unsupported union {annotation!r}")
        inner = shape(members[0], metadata)
        return Shape(**{**inner.__dict__, "optional": optional})
    validators = _validators(metadata)
    if origin is Literal:
        return Shape("enum", choices=tuple(str(a) for a in get_args(annotation)))
    if origin is list:
        return Shape("list", item=shape(get_args(annotation)[0]))
    if origin is dict:
        return Shape("map", item=shape(get_args(annotation)[1]))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return Shape("object", model=annotation)
    if annotation is bool:
        if true_or_false not in validators:  # pragma: no cover - every flag is a ConfigBool
            raise TypeError("a spec boolean without true_or_false")
        return Shape("bool")
    if annotation is int:
        if whole_number not in validators:  # pragma: no cover - every number is a ConfigInt
            raise TypeError("a spec integer without whole_number")
        return Shape("int", bounds=_bounds(metadata))
    if annotation is float:
        return Shape("float", bounds=_bounds(metadata))
    if annotation is str:
        return Shape("str")
    raise TypeError(f"unsupported annotation {annotation!r}")  # pragma: no cover


def field_shape(path: str, field: FieldInfo) -> Shape:
    # `secrets` is a list of names in the spec; the stack file holds NAME: {secure: ...}
    # pairs, which config.decode turns into the names (infra/secrets_config.py)
    if path == "secrets":
        return Shape("secrets")
    return shape(field.annotation, field.metadata)


@dataclass(frozen=True)
class KeyDoc:
    path: str  # `nodes`, `network.vpcCidr`, or aws:region
    shape: Shape
    default: str
    description: str
    required: bool


def config_key_name(name: str, field: FieldInfo) -> str:
    return field.alias or name


def _default_text(field: FieldInfo, shape_: Shape) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True, validated_data={})
    if value is None:
        return "unset"
    if isinstance(value, BaseModel):
        return "each field's default"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if shape_.kind == "secrets" and not value:
        return "`{}`"
    if isinstance(value, list | dict):
        return f"`{json.dumps(value)}`"
    if shape_.kind == "float" and float(value).is_integer():
        return f"`{int(value)}`"
    return f"`{value}`"


def field_description(field: FieldInfo, model: type[BaseModel] | None = None) -> str:
    text = field.description or ""
    if not text and model is not None:
        text = (model.__doc__ or "").strip()
    return text


def _fields(model: type[BaseModel], prefix: str = "") -> Iterator[KeyDoc]:
    for name, field in model.model_fields.items():
        if model is StackSpec and name == "region":
            continue
        path = prefix + config_key_name(name, field)
        kind = field_shape(path, field)
        yield KeyDoc(
            path,
            kind,
            _default_text(field, kind),
            field_description(field, kind.model),
            field.is_required(),
        )
        if kind.model is not None:
            yield from _fields(kind.model, f"{path}.")


def config_keys() -> list[KeyDoc]:
    """Every key a stack may set: aws:region, then each gpu-cluster: key and its fields."""
    region = StackSpec.model_fields["region"]
    return [
        KeyDoc(REGION_KEY, Shape("str"), "required", field_description(region), True),
        *_fields(StackSpec),
    ]


def _number(value: float) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def type_text(s: Shape) -> str:
    words = {
        "int": "whole number",
        "float": "number",
        "bool": "true or false",
        "str": "text",
        "enum": "text",
        "object": "mapping",
        "secrets": "mapping of NAME: secret",
    }
    if s.kind == "list":
        assert s.item is not None
        return f"list of {type_text(s.item)}"
    if s.kind == "map":
        assert s.item is not None
        return f"mapping of text to {type_text(s.item)}"
    return words[s.kind]


def allowed_text(s: Shape) -> str:
    if s.kind == "enum":
        return ", ".join(f"`{c}`" for c in s.choices)
    if s.kind == "bool":
        return "`true`, `false`"
    if s.bounds:
        signs = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
        return ", ".join(f"{signs[k]} {_number(v)}" for k, v in s.bounds)
    if s.kind == "list" and s.item is not None:
        return allowed_text(s.item)
    if s.kind == "secrets":
        from gpu_cluster.components.naming import SECRET_NAME_ALLOWED

        return f"names: {SECRET_NAME_ALLOWED}; values: Pulumi secrets (`--secret`)"
    return ""


def config_markdown() -> str:
    keys = config_keys()
    top = [k for k in keys if "." not in k.path]
    lines = [
        "# Stack configuration keys",
        "",
        GENERATED.format(source="`infra/spec.py` (the pydantic spec the config loader reads)"),
        f"A stack file (`stacks/{STACK_FILE}`) sets these under `config:`, each as "
        f"`{PROJECT}:<key>` (the region as `{REGION_KEY}`). `pulumi config set KEY VALUE` sets a "
        "top-level key; `pulumi config set --path network.vpcCidr VALUE` a field of a mapping. "
        "A key that is not listed here is refused, with the nearest known key as the fix.",
        "",
        "**Stages.** `data` (`role: data`), `dev box` (one on-demand node, a plain instance), "
        "`experiment` (a node group of one node), `train` (a node group of 2 or more nodes) and "
        "`inference` (`role: inference`). The *stages* column lists the stages whose program "
        "reads the key; a key set on another stage is refused, with the stage and the key. It "
        "is the table the checks enforce (`KEYS` in `infra/validation/stage_keys.py`).",
        "",
        "| key | type | default | allowed | stages | description |",
        "|---|---|---|---|---|---|",
    ]
    for key in top:
        kind = type_text(key.shape)
        if key.shape.model is not None:
            kind = f"[{kind}](#{slug(key.path)})"
        roles = ROLES if key.path == REGION_KEY else stages_of(key.path)
        stages = "all" if roles == ROLES else ", ".join(roles)
        lines.append(
            f"| `{key.path}` | {cell(kind)} | {cell(key.default)} | "
            f"{cell(allowed_text(key.shape))} | {stages} | {cell(key.description)} |"
        )
    nested = [k for k in keys if "." in k.path]
    parents = [k for k in keys if k.shape.model is not None]
    for parent in parents:
        assert parent.shape.model is not None
        lines += [
            "",
            f"## {parent.path}",
            "",
            cell((parent.shape.model.__doc__ or parent.description).strip()),
            "",
            "| key | type | default | allowed | stages | description |",
            "|---|---|---|---|---|---|",
        ]
        for key in nested:
            if key.path.rsplit(".", 1)[0] != parent.path:
                continue
            kind = type_text(key.shape)
            if key.shape.model is not None:
                kind = f"[{kind}](#{slug(key.path)})"
            used = stages_of(key.path)
            stages = "all" if used == ROLES else ", ".join(used)
            lines.append(
                f"| `{key.path}` | {cell(kind)} | {cell(key.default)} | "
                f"{cell(allowed_text(key.shape))} | {stages} | {cell(key.description)} |"
            )
    return "\n".join(lines) + "\n"
