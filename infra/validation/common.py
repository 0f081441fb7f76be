"""What every validation module shares."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

from gpu_cluster.infra.spec import PROJECT

# An unquoted timestamp in a stack file reaches the program as Go's time.Time.String()
# (infra/pulumi_yaml.py): "2027-01-31 00:00:00 +0000 UTC", "2027-01-31 18:00:00.5 +0200 +0200".
GO_TIME = re.compile(
    r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})(\.\d{1,9})? ([+-])(\d{2})(\d{2}) \S+$"
)


def key(name: str) -> str:
    return f"{PROJECT}:{name}"


def config_moment(text: str) -> datetime | None:
    """A date and time with a zone, as a stack file can give it: RFC 3339, or the form Pulumi
    hands the program for an unquoted timestamp. None when it is neither."""
    if match := GO_TIME.match(text):
        day, clock, fraction, sign, hours, minutes = match.groups()
        offset = timedelta(hours=int(hours), minutes=int(minutes)) * (-1 if sign == "-" else 1)
        micros = int((fraction or ".0")[1:7].ljust(6, "0"))
        moment = datetime.fromisoformat(f"{day}T{clock}").replace(
            microsecond=micros, tzinfo=timezone(offset)
        )
        return moment
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None


def rfc3339(moment: datetime) -> str:
    """The UTC form AWS takes: 2027-01-31T00:00:00Z."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
