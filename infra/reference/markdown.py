"""What every generated page shares: the pages' paths in the site, the note that a page is
generated, table cells and anchors."""

from __future__ import annotations

import re

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


def cell(text: str) -> str:
    """Text as one markdown table cell."""
    return text.replace("|", "\\|").replace("\n", " ")


def slug(text: str) -> str:
    """The anchor Python-Markdown's toc gives a heading."""
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)
