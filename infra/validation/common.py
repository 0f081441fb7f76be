"""What every validation module shares."""

from __future__ import annotations

from infra.spec import PROJECT


def key(name: str) -> str:
    return f"{PROJECT}:{name}"
