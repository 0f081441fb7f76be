"""How old each bundled price snapshot is, and the warning `gpuc plan` and `gpuc cost` print
when one is older than the limit (default 30 days; ``--max-price-age`` or
``GPUC_MAX_PRICE_AGE_DAYS``), naming the command that refreshes it.

SkyPilot and dstack refresh their spot and on-demand prices every few hours; a bundled
snapshot cannot, so it says how old it is instead of passing for today's price."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime

DEFAULT_MAX_AGE_DAYS = 30
MAX_AGE_ENV = "GPUC_MAX_PRICE_AGE_DAYS"


@dataclass(frozen=True)
class Snapshot:
    name: str  # what it prices, e.g. "GPU prices (on-demand and spot)"
    date: str | None  # ISO date of the snapshot, None: never taken
    refresh: str  # the command that takes a new one


def age_days(snapshot_date: str | None, today: date) -> int | None:
    """Whole days since the snapshot; None when it has no readable date."""
    if not snapshot_date:
        return None
    try:
        taken = date.fromisoformat(snapshot_date[:10])
    except ValueError:
        return None
    return (today - taken).days


def stale_warnings(
    snapshots: Iterable[Snapshot], max_age_days: int, today: date | None = None
) -> list[str]:
    """One warning per snapshot older than ``max_age_days`` (or without a date)."""
    today = today or datetime.now(UTC).date()
    warnings = []
    for snapshot in snapshots:
        age = age_days(snapshot.date, today)
        if age is None:
            warnings.append(
                f"{snapshot.name}: the bundled snapshot has no date; `{snapshot.refresh}` takes one"
            )
        elif age > max_age_days:
            warnings.append(
                f"{snapshot.name} are {age} days old (snapshot of {snapshot.date}, over the "
                f"{max_age_days}-day limit): `{snapshot.refresh}` refreshes them"
            )
    return warnings


def max_age_days(given: int | None = None, environ: Callable[[str], str | None] = os.getenv) -> int:
    """The limit: the flag, else the environment variable, else 30 days. A bad environment
    value raises ValueError with the fix (the CLI reports it as an input error)."""
    if given is not None:
        return given
    raw = environ(MAX_AGE_ENV)
    if raw is None or raw == "":
        return DEFAULT_MAX_AGE_DAYS
    try:
        days = int(raw)
    except ValueError:
        days = -1
    if days < 1:
        raise ValueError(
            f"{MAX_AGE_ENV}={raw!r}: expected a whole number of days of at least 1, e.g. "
            f"{MAX_AGE_ENV}=30 (or unset it for the default of {DEFAULT_MAX_AGE_DAYS})"
        )
    return days
