"""The boot files under components/boot/ as text: read once, shell scripts flush-left, and
their ``{{NAME}}`` placeholders filled. Shared by the user data (components/user_data.py) and
the boot bundle (components/boot_bundle.py)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from gpu_cluster.components.cloudwatch_agent import min_agent_version
from gpu_cluster.components.naming import CLUSTER_TAG, STACK_ID_TAG
from gpu_cluster.components.node_errors import health_constants

BOOT_DIR = Path(__file__).parent / "boot"
PLACEHOLDER = re.compile(r"\{\{([A-Z_]+)\}\}")
RENDEZVOUS_PORT = 29500
CONSTANTS = {
    "CLUSTER_TAG": CLUSTER_TAG,
    "STACK_ID_TAG": STACK_ID_TAG,
    "RENDEZVOUS_PORT": str(RENDEZVOUS_PORT),
    "EFA_AGENT_VERSION": min_agent_version("efa"),
    **health_constants(),  # the health check's Xid table and error classes, from data
}


# A here-document's opening line (not a here-string, <<<): its body is data, kept as it is.
HEREDOC = re.compile(r"(?<!<)<<-?\s*['\"]?([A-Za-z_]+)['\"]?")


def flush_left(script: str) -> str:
    """A shell script with each line's indentation removed (bash ignores it), except inside
    its here-documents (Python, YAML, unit files: there it is data). Room in the user data."""
    lines, end = [], None
    for line in script.split("\n"):
        if end is not None:
            lines.append(line)
            end = None if line.strip() == end else end
            continue
        opening = HEREDOC.search(line)
        if opening and not line.lstrip().startswith("#"):
            end = opening.group(1)
        lines.append(line.lstrip(" \t"))
    return "\n".join(lines)


@cache
def boot_script(name: str) -> str:
    text = (BOOT_DIR / name).read_text()
    return flush_left(text) if name.endswith(".sh") else text


def fill(template: str, values: dict[str, str]) -> str:
    """Replace every ``{{NAME}}``; a placeholder without a value is a bug, not a blank."""

    def value(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return PLACEHOLDER.sub(value, template)
