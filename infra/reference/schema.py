"""A JSON Schema of the stack file (Pulumi.<stack>.yaml) as the Pulumi CLI reads it, and its
page."""

from __future__ import annotations

import re
from typing import Any, get_args

from pydantic import BaseModel

from gpu_cluster.infra.reference.keys import (
    REGION_KEY,
    ROLES,
    Shape,
    config_key_name,
    field_description,
    field_shape,
    stages_of,
)
from gpu_cluster.infra.reference.markdown import (
    GENERATED,
    SCHEMA_FILE,
    STACK_FILE,
)
from gpu_cluster.infra.spec import PROJECT, SecretText, StackSpec, ciphertext_stand_in


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


SECURE_VALUE = {
    "type": "object",
    "description": "a Pulumi secret (pulumi config set --secret --path ...)",
    "properties": {"secure": {"type": "string"}},
    "required": ["secure"],
    "additionalProperties": False,
}


def secret_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A secret field (spec.SecretText, or a list of them): its ciphertext, {secure: ...}, is
    what the stack file holds."""
    if schema.get("type") == "array":
        return {**schema, "items": {"anyOf": [schema["items"], SECURE_VALUE]}}
    return {"anyOf": [schema, SECURE_VALUE]}


def model_schema(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, field in model.model_fields.items():
        alias = config_key_name(name, field)
        kind = field_shape(prefix + alias, field)
        schema = value_schema(kind)
        if SecretText in get_args(field.annotation) or any(
            getattr(m, "func", None) is ciphertext_stand_in for m in field.metadata
        ):
            schema = secret_schema(schema)
        if description := field_description(field, kind.model):
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
            "description": field_description(StackSpec.model_fields["region"]),
            "type": "string",
        }
    }
    for name, field in StackSpec.model_fields.items():
        if name == "region":
            continue
        alias = config_key_name(name, field)
        kind = field_shape(alias, field)
        schema = value_schema(kind)
        description = field_description(field, kind.model)
        stages = stages_of(alias)
        if len(stages) < len(ROLES):
            description += f" (stages: {', '.join(stages)})"
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
