"""The reference pages of the docs site, generated from the code's own tables so they are never
written twice: every stack config key (infra/spec.py), every `gpuc` command and flag (the
argparse parser of infra/cli.py), every exit code (infra/outcome.py), every audit control
(policy/pack.py) and a JSON Schema of the stack file.

Pure: each function returns a markdown string or the schema dict; docs/hooks/reference.py puts
them into the site at build time. One module per page kind: keys (config keys), schema (the
stack file's JSON Schema), commands (gpuc's commands, exit codes, audit controls), markdown
(what they share). `python -m gpu_cluster.infra.reference schema` prints the
schema (for an editor without the published site)."""

from __future__ import annotations

import json
import sys

from gpu_cluster.infra.reference.commands import audit_markdown, cli_markdown, exit_codes_markdown
from gpu_cluster.infra.reference.keys import config_markdown
from gpu_cluster.infra.reference.markdown import (
    AUDIT_PAGE,
    CLI_PAGE,
    CONFIG_PAGE,
    EXIT_CODES_PAGE,
    SCHEMA_FILE,
    SCHEMA_PAGE,
)
from gpu_cluster.infra.reference.schema import schema_markdown, stack_schema

__all__ = [
    "audit_markdown",
    "cli_markdown",
    "config_markdown",
    "exit_codes_markdown",
    "main",
    "pages",
    "schema_markdown",
    "stack_schema",
]


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
