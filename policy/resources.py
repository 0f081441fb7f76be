"""The view of a stack the controls check: resources with engine-named props and the
dependency links between them, built from an offline plan or from CrossGuard's arguments.

Controls link resources through property dependencies (which resource a `bucket` or `vpcId`
input came from), never through ids: ids are unknown during `pulumi preview`."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

WORLD = ("0.0.0.0/0", "::/0")


@dataclass(frozen=True)
class Res:
    urn: str
    type: str
    name: str
    props: Mapping[str, Any]
    protect: bool = False
    retain_on_delete: bool | None = None  # None: not visible (CrossGuard does not pass it)
    property_dependencies: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def refers_to(self, prop: str, target: Res) -> bool:
        return target.urn in self.property_dependencies.get(prop, ())

    def tags(self) -> Mapping[str, Any]:
        return self.props.get("tags") or {}


class Stack:
    """Every resource of one stack, with lookups by type and by who refers to whom."""

    def __init__(self, resources: Iterable[Res]) -> None:
        self.resources = list(resources)
        self.by_urn = {r.urn: r for r in self.resources}

    def of_type(self, *types: str) -> list[Res]:
        return [r for r in self.resources if r.type in types]

    def referring(self, target: Res, type_: str, prop: str) -> list[Res]:
        """Resources of `type_` whose `prop` input came from `target`."""
        return [r for r in self.of_type(type_) if r.refers_to(prop, target)]

    def referred(self, source: Res, prop: str, *types: str) -> list[Res]:
        """What `source`'s `prop` input came from (of the given types)."""
        found = [self.by_urn[u] for u in source.property_dependencies.get(prop, ()) if u in self]
        return [r for r in found if not types or r.type in types]

    def __contains__(self, urn: str) -> bool:
        return urn in self.by_urn


def has_efa(r: Res) -> bool:
    """A node (template) with EFA interfaces."""
    interfaces = as_list(r.props.get("networkInterfaces"))
    return any("efa" in str(n.get("interfaceType", "")) for n in interfaces)


def truthy(value: Any) -> bool:
    """pulumi-aws carries some launch-template booleans as strings ("true")."""
    return value is True or str(value).lower() == "true"


def document(value: Any) -> Mapping[str, Any]:
    """An IAM/KMS/S3 policy document given as JSON text or as a mapping."""
    if isinstance(value, str):
        return json.loads(value) if value else {}
    return value or {}


def statements(value: Any) -> list[Mapping[str, Any]]:
    found = document(value).get("Statement") or []
    return [found] if isinstance(found, Mapping) else list(found)


def as_list(value: Any) -> list[Any]:
    """A list from a list, one value, or nothing. pulumi-policy hands lists and mappings over
    as read-only Sequence and Mapping proxies, not list and dict."""
    if value is None:
        return []
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return [value]
