"""Duplicate URNs, refused as the Pulumi engine refuses them: two registrations with the same
type and name under the same parent fail `pulumi preview` and `pulumi up` with "Duplicate resource
URN '<urn>'; try giving it a unique name" (pulumi/pulumi pkg/diag/errors.go, error 2001, raised by
the step generator). The SDK's mock monitor does not check it; the plan does, and names both
registration sites (the SDK sends each registration's stack trace: RegisterResourceRequest's
stackTrace, sourcePosition)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

from gpu_cluster.infra.blame import Owner, first_user_site, owner, site
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.problems import Problem


def _path(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def _frames(request: Any) -> list[tuple[str, int | None]]:
    """The registration's stack trace, innermost first (the SDK's order)."""
    trace = getattr(request, "stackTrace", None)
    return [
        (_path(frame.pc.uri), frame.pc.line or None)
        for frame in (trace.frames if trace is not None else ())
        if frame.HasField("pc") and frame.pc.uri
    ]


def registered_by(request: Any) -> Owner:
    """Whose code registered a resource: the innermost frame that is not a library's (a
    component of this package creates its children; a user's program, its own resources)."""
    for filename, _ in _frames(request):
        kind = owner(filename)
        if kind != "library":
            return kind
    return "ours"


def registration_site(request: Any) -> str:
    """Where the user's code registered a resource: the first frame of its stack trace that is
    the user's (not this package's, not a library's); else the SDK's source position."""
    found = first_user_site(_frames(request))
    if found:
        return found
    position = getattr(request, "sourcePosition", None)
    if position is not None and position.uri:
        return site(_path(position.uri), position.line or None)
    return "an unknown place"


@dataclass(frozen=True, slots=True)
class Duplicate:
    urn: str
    parent: str
    first: str
    second: str


class DuplicateUrns(ConfigError):
    """The engine would refuse the program: the same URN registered twice."""

    @staticmethod
    def header(stack: str, count: int) -> str:
        return (
            f"stack '{stack}': the Pulumi engine would refuse {count} duplicate resource "
            f"URN{'s' if count != 1 else ''}; nothing was created:"
        )


def duplicate_problems(duplicates: list[Duplicate]) -> list[Problem]:
    """One problem per duplicate whose parent is not itself a duplicate (a component registered
    twice duplicates all its children too: the component is the one to rename)."""
    twice = {d.urn for d in duplicates}
    return [
        Problem(
            path=d.urn,
            received="registered at " + " and at ".join(in_order(d.first, d.second)),
            problem=f"Duplicate resource URN '{d.urn}'; try giving it a unique name",
            allowed="one resource of a type and name under one parent",
            fix=f"give the one at {in_order(d.first, d.second)[1]} another name",
        )
        for d in duplicates
        if d.parent not in twice
    ]


def in_order(*sites: str) -> list[str]:
    """Sites in source order (the SDK registers concurrently: arrival order is not it)."""

    def key(where: str) -> tuple[str, int]:
        path, _, line = where.rpartition(":")
        return (path, int(line)) if line.isdigit() else (where, 0)

    return sorted(sites, key=key)
