"""One step of a planned change that AWS or the engine would refuse (plain data)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Collision:
    type: str
    role: str
    why: str
    fix: str
