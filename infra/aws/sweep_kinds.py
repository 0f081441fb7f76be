"""What `gpuc sweep` finds: one leftover, and how a resource is matched to a stack (its tag)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_cluster.components.naming import STACK_TAG


@dataclass(frozen=True)
class Leftover:
    kind: str
    resource_id: str
    detail: str
    usd_per_hour: float


def kind_name(lister: object) -> str:
    return getattr(lister, "__name__", str(lister)).replace("_", " ")


def stack_filter(stack: str) -> list[dict[str, Any]]:
    return [{"Name": f"tag:{STACK_TAG}", "Values": [stack]}]


def has_tag(tags: list[dict[str, str]] | dict[str, str] | None, stack: str) -> bool:
    if isinstance(tags, dict):
        return tags.get(STACK_TAG) == stack
    return any(t.get("Key") == STACK_TAG and t.get("Value") == stack for t in tags or [])
