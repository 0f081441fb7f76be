"""The reference pages of the docs site, generated from the code's own tables so they are never
written twice: every stack config key (infra/spec.py), every `gpuc` command and flag (the
argparse parser of infra/cli.py), every exit code (infra/outcome.py), every audit control
(policy/pack.py) and a JSON Schema of the stack file.

Pure: each function returns a markdown string or the schema dict; docs/hooks/reference.py puts
them into the site at build time. `python -m gpu_cluster.infra.reference schema` prints the
schema (for an editor without the published site)."""

from __future__ import annotations

import argparse
import json
import re
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from annotated_types import Ge, Gt, Le, Lt
from pydantic import BaseModel, BeforeValidator
from pydantic.fields import FieldInfo

from gpu_cluster.infra.spec import PROJECT, StackSpec, true_or_false, whole_number

REGION_KEY = "aws:region"  # the spec's `region` field, read from aws:region only (config.py)
STACK_FILE = "Pulumi.<stack>.yaml"
GENERATED = (
    '!!! note "Generated"\n'
    "    This page is generated from {source} when the site is built; change the code, not "
    "this page.\n"
)

# Pages of the site, by path under docs/ (docs/hooks/reference.py adds them).
CONFIG_PAGE = "reference/config.md"
CLI_PAGE = "reference/cli.md"
EXIT_CODES_PAGE = "reference/exit-codes.md"
AUDIT_PAGE = "reference/audit-controls.md"
SCHEMA_PAGE = "reference/stack-schema.md"
SCHEMA_FILE = "schema/stack.schema.json"

# Stages are a stack's role (infra/spec.py StackSpec.role); a dev box is a cluster of one
# on-demand node (components/purchase.py is_single_instance).
ROLES = ("cluster", "inference", "data")


# --- stack config keys --------------------------------------------------------------------


def _not_for_roles() -> dict[str, tuple[tuple[str, str], ...]]:
    """Top-level key -> ((role, why), ...): the roles whose stacks refuse the key, as the
    meaning checks enforce it (tests/test_reference_docs.py checks each against them)."""
    from gpu_cluster.infra.validation.names import COMPUTE_KEYS, DATA_ONLY_KEYS

    refused: dict[str, list[tuple[str, str]]] = {}
    for name in COMPUTE_KEYS:  # names.check_data_stack
        refused.setdefault(name, []).append(("data", "a data stack has no compute"))
    for name in DATA_ONLY_KEYS:  # names.check_cluster_stack
        for role in ("cluster", "inference"):
            refused.setdefault(name, []).append((role, "only the data stack sets it"))
    # The checks without a table of their own: validation/resolve.py (inference),
    # validation/inference.py (fsx), validation/jobs.py (jobs).
    for name, role, why in (
        ("inference", "cluster", "inference settings apply to a serving stack only"),
        ("inference", "data", "inference settings apply to a serving stack only"),
        ("fsx", "inference", "an inference stack mounts no FSx file system"),
        ("jobs", "inference", "jobs apply to a training stack (role: cluster)"),
    ):
        refused.setdefault(name, []).append((role, why))
    return {name: tuple(reasons) for name, reasons in refused.items()}


def stages_of(key: str) -> tuple[str, ...]:
    """The roles whose stacks may set a top-level key (the others refuse it)."""
    refused = {role for role, _ in _not_for_roles().get(key, ())}
    return tuple(role for role in ROLES if role not in refused)


def refused_roles(key: str) -> tuple[tuple[str, str], ...]:
    return _not_for_roles().get(key, ())


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


def _alias(name: str, field: FieldInfo) -> str:
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


def _description(field: FieldInfo, model: type[BaseModel] | None = None) -> str:
    text = field.description or ""
    if not text and model is not None:
        text = (model.__doc__ or "").strip()
    return text


def _fields(model: type[BaseModel], prefix: str = "") -> Iterator[KeyDoc]:
    for name, field in model.model_fields.items():
        if model is StackSpec and name == "region":
            continue
        path = prefix + _alias(name, field)
        kind = field_shape(path, field)
        yield KeyDoc(
            path,
            kind,
            _default_text(field, kind),
            _description(field, kind.model),
            field.is_required(),
        )
        if kind.model is not None:
            yield from _fields(kind.model, f"{path}.")


def config_keys() -> list[KeyDoc]:
    """Every key a stack may set: aws:region, then each gpu-cluster: key and its fields."""
    region = StackSpec.model_fields["region"]
    return [
        KeyDoc(REGION_KEY, Shape("str"), "required", _description(region), True),
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


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def slug(text: str) -> str:
    """The anchor Python-Markdown's toc gives a heading."""
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


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
        "**Stages.** A stack's stage is its `role`: `cluster` (GPU nodes: a dev box when it is "
        "one on-demand node, else a node group), `inference` or `data`. The *stages* column "
        "lists the roles whose stacks may set the key; the others refuse it. It is derived from "
        "what the checks enforce (`COMPUTE_KEYS` and `DATA_ONLY_KEYS` in "
        "`infra/validation/names.py`, and the role checks in `infra/validation/`); a field that "
        "applies to one kind of stack only says so in its description.",
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
            f"| `{key.path}` | {_cell(kind)} | {_cell(key.default)} | "
            f"{_cell(allowed_text(key.shape))} | {stages} | {_cell(key.description)} |"
        )
    nested = [k for k in keys if "." in k.path]
    parents = [k for k in keys if k.shape.model is not None]
    for parent in parents:
        assert parent.shape.model is not None
        lines += [
            "",
            f"## {parent.path}",
            "",
            _cell((parent.shape.model.__doc__ or parent.description).strip()),
            "",
            "| key | type | default | allowed | description |",
            "|---|---|---|---|---|",
        ]
        for key in nested:
            if key.path.rsplit(".", 1)[0] != parent.path:
                continue
            kind = type_text(key.shape)
            if key.shape.model is not None:
                kind = f"[{kind}](#{slug(key.path)})"
            lines.append(
                f"| `{key.path}` | {_cell(kind)} | {_cell(key.default)} | "
                f"{_cell(allowed_text(key.shape))} | {_cell(key.description)} |"
            )
    return "\n".join(lines) + "\n"


# --- the stack file's JSON Schema ---------------------------------------------------------


def _bounded(s: Shape, schema: dict[str, Any]) -> dict[str, Any]:
    names = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}
    for kind, value in s.bounds:
        schema[names[kind]] = value
    return schema


def value_schema(s: Shape) -> dict[str, Any]:
    """What a stack file may hold for a value of this shape, as the program accepts it: Pulumi
    hands a value over as the string it was written as (infra/pulumi_yaml.py), so a quoted
    whole number, "true"/"false" and a number where text is expected pass too."""
    if s.kind == "int":
        return {
            "anyOf": [
                _bounded(s, {"type": "integer"}),
                {"type": "string", "pattern": "^-?[0-9]+$"},
            ]
        }
    if s.kind == "float":
        return {
            "anyOf": [
                _bounded(s, {"type": "number"}),
                {
                    "type": "string",
                    "pattern": r"^[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?$",
                },
            ]
        }
    if s.kind == "bool":
        return {"anyOf": [{"type": "boolean"}, {"enum": ["true", "false", "True", "False"]}]}
    if s.kind == "str":
        return {"type": ["string", "number"]}  # StrictModel: coerce_numbers_to_str
    if s.kind == "enum":
        return {"enum": list(s.choices)}
    if s.kind == "list":
        assert s.item is not None
        return {"type": "array", "items": value_schema(s.item)}
    if s.kind == "map":
        assert s.item is not None
        return {"type": "object", "additionalProperties": value_schema(s.item)}
    if s.kind == "secrets":
        from gpu_cluster.components.naming import SECRET_NAME

        return {
            "type": "object",
            "propertyNames": {"pattern": SECRET_NAME.pattern.replace("\\Z", "$")},
            "additionalProperties": {
                "type": "object",
                "description": "a Pulumi secret: pulumi config set --secret --path "
                "secrets.NAME <value>",
                "properties": {"secure": {"type": "string"}},
                "required": ["secure"],
                "additionalProperties": False,
            },
        }
    assert s.kind == "object" and s.model is not None
    return model_schema(s.model)


def model_schema(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in model.model_fields.items():
        alias = _alias(name, field)
        kind = field_shape(prefix + alias, field)
        schema = value_schema(kind)
        if description := _description(field, kind.model):
            schema = {"description": description, **schema}
        properties[alias] = schema
        if field.is_required():
            required.append(alias)
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if model.__doc__ and model is not StackSpec:
        schema["description"] = model.__doc__.strip()
    if required:
        schema["required"] = required
    return schema


def stack_schema(site_url: str | None = None) -> dict[str, Any]:
    """A JSON Schema (draft 7) of stacks/Pulumi.<stack>.yaml as the Pulumi CLI and gpuc read it:
    the stack file's own keys (infra/stack_files.py STACK_FILE_KEYS), and under config: every
    gpu-cluster: key with its value, aws:region and pulumi-aws's other keys, and any other
    namespace's keys (another provider's, or another project's)."""
    from gpu_cluster.infra.namespaces import aws_config_keys
    from gpu_cluster.infra.stack_files import STACK_FILE_KEYS

    config: dict[str, Any] = {
        REGION_KEY: {
            "description": _description(StackSpec.model_fields["region"]),
            "type": "string",
        }
    }
    for name, field in StackSpec.model_fields.items():
        if name == "region":
            continue
        alias = _alias(name, field)
        kind = field_shape(alias, field)
        schema = value_schema(kind)
        description = _description(field, kind.model)
        stages = stages_of(alias)
        if len(stages) < len(ROLES):
            description += f" (role: {' or '.join(stages)})"
        config[f"{PROJECT}:{alias}"] = {"description": description, **schema}
    for name in sorted(aws_config_keys() - {"region"}):
        config[f"aws:{name}"] = {"description": "a pulumi-aws provider setting"}
    # another provider's or another project's key: namespace:name (infra/namespaces.py)
    other = rf"^(?!({re.escape(PROJECT)}|aws):)[^:]+(:[^:]+)*:[^:]+$"
    file_keys = {key: {} for key in sorted(STACK_FILE_KEYS) if key != "config"}
    where = {"$id": f"{site_url.rstrip('/')}/{SCHEMA_FILE}"} if site_url else {}
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        **where,
        "title": f"{PROJECT} stack file ({STACK_FILE})",
        "description": f"The stack configuration of the {PROJECT} Pulumi project.",
        "type": "object",
        "properties": {
            "config": {
                "description": f"{PROJECT}:<key> settings, {REGION_KEY}, and other namespaces' "
                "keys",
                "type": "object",
                "properties": config,
                "patternProperties": {other: {}},
                "additionalProperties": False,
                "required": [REGION_KEY],
            },
            **file_keys,
        },
        "required": ["config"],
        "additionalProperties": False,
    }


def schema_markdown(site_url: str | None = None) -> str:
    """The schema's page; with the site's address (mkdocs.yml site_url), the schema's URL."""
    published = f"{site_url.rstrip('/')}/{SCHEMA_FILE}" if site_url else f"<site>/{SCHEMA_FILE}"
    where = (
        ""
        if site_url
        else "`<site>` is where this site is published (mkdocs.yml has no site_url). "
    )
    return f"""# Stack file schema

{GENERATED.format(source="`infra/spec.py`, `infra/stack_files.py` and `infra/namespaces.py`")}
[`{SCHEMA_FILE}`](../{SCHEMA_FILE}) is a JSON Schema (draft 7) of a stack file,
`stacks/{STACK_FILE}`: its `config:` with every `{PROJECT}:<key>` of the
[configuration reference](config.md), `{REGION_KEY}` and the other `aws:` keys pulumi-aws reads,
and any other namespace's keys. Values are checked as the program receives them: a mapping key
refuses a field it does not know, a whole number may be quoted (`"4"`), a boolean is
`true`/`false`.

It checks the shape only. `gpuc plan` checks the meaning as well (a GPU type the catalog knows,
a zone of the region, a key the stack's role uses, ...), and says how to fix each mistake.

## Point your editor at it

With the YAML extension of VS Code (Red Hat's, built on `yaml-language-server`), or any editor
using `yaml-language-server`, a comment on the first line of a stack file selects the schema:

```yaml
# yaml-language-server: $schema={published}
config:
  aws:region: us-east-1
  {PROJECT}:nodes: 2
```

or, for every stack file of the project at once, in `.vscode/settings.json`:

```json
{{
  "yaml.schemas": {{
    "{published}": ["stacks/Pulumi.*.yaml"]
  }}
}}
```

{where}Offline, write the schema into the project and use its path instead (a path in
`yaml.schemas` is relative to the workspace folder; in the comment, relative to the stack file):

```bash
python -m gpu_cluster.infra.reference schema > stack.schema.json
```

```yaml
# yaml-language-server: $schema=../stack.schema.json
```

The editor then completes the keys, shows each key's description, and underlines a misspelled
key or a value of the wrong kind as you type.
"""


# --- gpuc: commands and flags -------------------------------------------------------------


def subcommands(
    parser: argparse.ArgumentParser, prefix: str = "gpuc"
) -> Iterator[tuple[str, argparse.ArgumentParser, str]]:
    """(`gpuc capacity-block offerings`, its parser, its help) for every command, depth first."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        for name, sub in action.choices.items():
            full = f"{prefix} {name}"
            yield full, sub, helps.get(name, "")
            yield from subcommands(sub, full)


def arguments(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    """A command's own arguments (not -h, not its subcommands)."""
    return [
        a
        for a in parser._actions
        if not isinstance(a, argparse._HelpAction | argparse._SubParsersAction)
    ]


def _repeatable(action: argparse.Action) -> bool:
    from gpu_cluster.infra.overrides import OverrideAction

    kinds = (argparse._AppendAction, argparse._AppendConstAction, argparse._CountAction)
    return isinstance(action, (*kinds, OverrideAction))


def _takes_value(action: argparse.Action) -> bool:
    return action.nargs != 0


def _metavar(action: argparse.Action) -> str:
    if action.choices is not None and action.metavar is None:
        return "{" + ",".join(str(c) for c in action.choices) + "}"
    metavar = action.metavar
    if isinstance(metavar, tuple):  # pragma: no cover - gpuc uses none
        return " ".join(metavar)
    if metavar:
        return str(metavar)
    return action.dest if not action.option_strings else action.dest.upper()


def _synopsis(command: str, parser: argparse.ArgumentParser) -> str:
    parts = [command]
    for action in arguments(parser):
        if isinstance(action, argparse._VersionAction):
            parts.append(f"[{action.option_strings[0]}]")
            continue
        if not action.option_strings:
            if action.nargs == argparse.REMAINDER:
                parts.append(f"[{_metavar(action)}]")
            elif action.nargs in ("*", "?"):
                parts.append(f"[{_metavar(action)} ...]")
            else:
                parts.append(_metavar(action))
            continue
        flag = action.option_strings[0]
        text = f"{flag} {_metavar(action)}" if _takes_value(action) else flag
        if _repeatable(action):
            text += " ..."
        parts.append(text if action.required else f"[{text}]")
    if any(isinstance(a, argparse._SubParsersAction) for a in parser._actions):
        parts.append("COMMAND")
    return " ".join(parts)


def _default(action: argparse.Action) -> str:
    if action.required or not _takes_value(action) or isinstance(action, argparse._VersionAction):
        return ""
    if action.default in (None, [], argparse.SUPPRESS):
        return ""
    return f"`{action.default}`"


def _argument_rows(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| argument | value | default | description |", "|---|---|---|---|"]
    for action in arguments(parser):
        names = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{_metavar(action)}`"
        value = f"`{_metavar(action)}`" if action.option_strings and _takes_value(action) else ""
        notes = []
        if action.required and action.nargs not in ("*", "?", argparse.REMAINDER):
            notes.append("required")
        if _repeatable(action) and "repeatable" not in (action.help or ""):
            notes.append("repeatable")
        if isinstance(action, argparse._VersionAction):
            help_text = "print gpuc's version and exit"
        else:
            help_text = action.help or ""
        if action.help == argparse.SUPPRESS:
            continue
        text = " ".join([help_text, *(f"({note})" for note in notes)]).strip()
        rows.append(f"| {names} | {_cell(value)} | {_cell(_default(action))} | {_cell(text)} |")
    return rows


def cli_markdown() -> str:
    from gpu_cluster.infra.cli import parser as build_parser

    root = build_parser()
    lines = [
        "# gpuc commands",
        "",
        GENERATED.format(source="the argparse parser of `infra/cli.py`"),
        f"`gpuc` is installed with the package. {root.description}. Each command's exit code is "
        "one of the [exit codes](exit-codes.md); `--json` makes a command print a JSON document, "
        "errors included.",
        "",
        "```",
        _synopsis("gpuc", root),
        "```",
        "",
    ]
    lines += _argument_rows(root)
    lines += ["", "| command | what it does |", "|---|---|"]
    commands = list(subcommands(root))
    for name, _, help_text in commands:
        lines.append(f"| [`{name}`](#{slug(name)}) | {_cell(help_text)} |")
    for name, sub, help_text in commands:
        description = sub.description or help_text
        lines += ["", f"## {name}", "", description, "", "```", _synopsis(name, sub), "```", ""]
        if arguments(sub):
            lines += _argument_rows(sub)
        nested = [n for n, _, _ in subcommands(sub) if n.count(" ") == name.count(" ") + 1]
        if nested:
            lines += ["", "Commands: " + ", ".join(f"[`{n}`](#{slug(n)})" for n in nested)]
    return "\n".join(lines) + "\n"


# --- exit codes ---------------------------------------------------------------------------


def exit_codes() -> list[tuple[int, str, str]]:
    """(code, name, meaning) of every `gpuc` exit code (infra/problems.py EXIT_CODES)."""
    from gpu_cluster.infra.problems import EXIT_CODES

    return [(code, name, meaning) for code, (name, meaning) in sorted(EXIT_CODES.items())]


def exit_codes_markdown() -> str:
    lines = [
        "# Exit codes",
        "",
        GENERATED.format(source="`infra/problems.py` (EXIT_CODES)"),
        "Every `gpuc` command ends with one of these. With `--json`, a failure is also printed "
        'as `{"error": {"code": ..., "message": ..., "problems": [...]}}` on stdout.',
        "",
        "| code | name | meaning |",
        "|---|---|---|",
    ]
    lines += [f"| {code} | `{name}` | {_cell(meaning)} |" for code, name, meaning in exit_codes()]
    return "\n".join(lines) + "\n"


# --- audit controls -----------------------------------------------------------------------


def audit_markdown() -> str:
    from gpu_cluster.policy.pack import CONTROLS
    from gpu_cluster.policy.suppressions import SUPPRESSIONS

    lines = [
        "# Audit controls",
        "",
        GENERATED.format(source="the security pack, `policy/`"),
        "`gpuc audit --stack NAME` plans the stack offline and runs every control over the "
        "plan; a failing control makes it exit 5 (`FINDINGS`). The same controls run under "
        "`pulumi preview --policy-pack policy` (CrossGuard), except those marked *gpuc audit "
        "only*. Ids are the AWS Foundational Security Best Practices ones, or NIST 800-53.",
        "",
        "| control | severity | what it checks | on | fix | policy (CrossGuard) |",
        "|---|---|---|---|---|---|",
    ]
    for c in CONTROLS:
        on = ", ".join(f"`{t}`" for t in c.types)
        policy = f"`{c.name}`" + (f" (gpuc audit only: {c.audit_only})" if c.audit_only else "")
        lines.append(
            f"| {c.id} | {c.severity} | {_cell(c.title)} | {on} | {_cell(c.fix)} | "
            f"{_cell(policy)} |"
        )
    lines += [
        "",
        "## Suppressions",
        "",
        "Where a control cannot hold by design, it is suppressed on the named resources only, "
        "and `gpuc audit` reports it as *suppressed* with the reason.",
        "",
        "| control | on resources | why |",
        "|---|---|---|",
    ]
    lines += [f"| `{s.control}` | `{s.resources}` | {_cell(s.why)} |" for s in SUPPRESSIONS]
    return "\n".join(lines) + "\n"


def pages(site_url: str | None = None) -> dict[str, str]:
    """Every generated page, by its path under docs/."""
    schema = stack_schema(site_url)
    return {
        CONFIG_PAGE: config_markdown(),
        CLI_PAGE: cli_markdown(),
        EXIT_CODES_PAGE: exit_codes_markdown(),
        AUDIT_PAGE: audit_markdown(),
        SCHEMA_PAGE: schema_markdown(site_url),
        SCHEMA_FILE: json.dumps(schema, indent=2) + "\n",
    }


def main(argv: list[str]) -> int:
    if argv != ["schema"]:
        print("usage: python -m gpu_cluster.infra.reference schema", file=sys.stderr)
        return 2
    print(json.dumps(stack_schema(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
