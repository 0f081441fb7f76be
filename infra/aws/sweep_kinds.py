"""What `gpuc sweep` finds: one leftover, and how a resource is matched to a stack: by its
stack-id tag (project/stack/region, components/names.py), never by the stack tag alone. IAM
roles, instance profiles and budgets are account-wide: the stack tag `train` is also on the live
`train` of another region or another project, whose nodes would lose their role."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpu_cluster.components.names import StackIdentity
from gpu_cluster.components.naming import STACK_ID_TAG


@dataclass(frozen=True)
class Leftover:
    kind: str
    resource_id: str
    detail: str
    usd_per_hour: float


def kind_name(lister: object) -> str:
    return getattr(lister, "__name__", str(lister)).replace("_", " ")


def stack_filter(identity: StackIdentity) -> list[dict[str, Any]]:
    return [{"Name": f"tag:{STACK_ID_TAG}", "Values": [identity.stack_id]}]


def has_tag(tags: list[dict[str, str]] | dict[str, str] | None, identity: StackIdentity) -> bool:
    """The resource carries this stack's stack-id tag (tags as a map or Key/Value pairs)."""
    if isinstance(tags, dict):
        return tags.get(STACK_ID_TAG) == identity.stack_id
    return any(
        t.get("Key") == STACK_ID_TAG and t.get("Value") == identity.stack_id for t in tags or []
    )
