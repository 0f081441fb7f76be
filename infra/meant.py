"""What a user evidently meant by a value the config refuses, for the fix to propose: 8am is
08:00, Berlin is Europe/Berlin, münchen.example.com is its IDNA form, "[a, b]" is a list of
two, a100 is A100, 5m is 300 seconds. Each returns None where the meaning is not evident: a fix
then names no made-up value (a lookalike of another kind, another GPU, an example domain)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from datetime import datetime
from functools import cache
from zoneinfo import available_timezones

from gpu_cluster.infra.suggest import closest

CLOCK_AS_WRITTEN = re.compile(
    r"^\s*(\d{1,2})(?:[:.h]?(\d{2}))?(?::\d{2})?\s*(?:([ap])\.?\s*m\.?|h|hrs?|uhr|o'?clock)?\s*$",
    re.IGNORECASE,
)
# IANA areas whose zones are places (not Etc/ offsets or backward links such as US/...)
AREAS = ("Africa", "America", "Antarctica", "Arctic", "Asia", "Atlantic", "Australia", "Europe")
AREAS += ("Indian",)
AREAS += ("Pacific",)


def clock(text: str) -> str | None:
    """HH:MM (24-hour) for a time as people write it: 8am, 6 pm, 8:30pm, 0800, 18h, 8:00."""
    match = CLOCK_AS_WRITTEN.match(text)
    if not match:
        return None
    hour, minute = int(match[1]), int(match[2] or 0)
    half = (match[3] or "").lower()
    if half and not 1 <= hour <= 12:
        return None
    if half:
        hour = hour % 12 + (12 if half == "p" else 0)
    if hour > 23 or minute > 59:
        return None
    return f"{hour:02d}:{minute:02d}"


DURATION = re.compile(
    r"^\s*(\d+(?:\.\d+)?)\s*(s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?)?\s*$",
    re.IGNORECASE,
)
SECONDS_PER = {"s": 1, "m": 60, "h": 3600}


def seconds(text: str) -> float | None:
    """A duration in seconds: 300, 300s, 5m, 5 min, 2 minutes, 1h (None: not a duration)."""
    match = DURATION.match(text)
    if match is None:
        return None
    unit = (match[2] or "s")[0].lower()
    return float(match[1]) * SECONDS_PER[unit]


def nearest_number(text: str, choices: Iterable[str]) -> str | None:
    """Of whole-number ``choices``, the one nearest what ``text`` says (a duration counts in
    seconds: 5m is 300, so 300 of 60/120/300/600; 30 is 60, the nearest, not 300 that reads
    like it). None when a choice is not a number or the text says none."""
    options = list(choices)
    wanted = seconds(text)
    if wanted is None or not options or not all(c.isdigit() for c in options):
        return None
    return min(options, key=lambda c: (abs(int(c) - wanted), int(c)))


@cache
def _cities() -> dict[str, str]:
    """city (lower case, spaces for underscores) -> its IANA zone, for the place zones."""
    found: dict[str, str] = {}
    for zone in sorted(available_timezones(), key=lambda z: (z.count("/"), z)):
        area, _, place = zone.partition("/")
        if area in AREAS and place:
            found.setdefault(place.rsplit("/", 1)[-1].replace("_", " ").lower(), zone)
    return found


def zone_of_city(text: str) -> str | None:
    """The IANA zone named after a city: Berlin -> Europe/Berlin, new york ->
    America/New_York; a close spelling of one (Berln) too."""
    city = text.strip().replace("_", " ").lower()
    cities = _cities()
    if city in cities:
        return cities[city]
    near = difflib_close(city, cities)
    return cities[near] if near else None


def difflib_close(word: str, choices: Iterable[str]) -> str | None:
    """A spelling close to ``word`` (one slip in a word of five or more letters)."""
    if len(word) < 5:
        return None
    import difflib

    match = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.85)
    return match[0] if match else None


def in_utc(text: str) -> str | None:
    """A date, or a date and time without a zone, as that time in UTC in RFC 3339
    (2027-01-31 -> 2027-01-31T00:00:00Z): what a user writing no zone evidently meant."""
    try:
        moment = datetime.fromisoformat(text.strip().replace(" ", "T"))
    except ValueError:
        return None
    return f"{moment:%Y-%m-%dT%H:%M:%S}Z" if moment.tzinfo is None else None


def dns_name(text: str, valid: re.Pattern[str]) -> str | None:
    """The name a user meant in the form DNS takes: lower case, no scheme, path or final dot,
    each international label in its IDNA (punycode) form: münchen.example.com ->
    xn--mnchen-3ya.example.com. None when that is still not a name ``valid`` takes."""
    host = re.sub(r"^[a-z][a-z0-9+.-]*://", "", text.strip(), flags=re.IGNORECASE)
    host = host.split("/", 1)[0].rstrip(".").lower()
    try:
        ascii_name = ".".join(
            label.encode("idna").decode("ascii") if not label.isascii() else label
            for label in host.split(".")
        )
    except UnicodeError:
        return None
    return ascii_name if valid.match(ascii_name) else None


def list_items(text: str) -> list[str] | None:
    """The items of a list written as one string: "[a, b]", "a, b" or "a b" (a YAML list
    typed into a scalar, e.g. with --set-path); None for a single word."""
    inner = text.strip()
    if inner[:1] == "[" and inner[-1:] == "]":
        inner = inner[1:-1]
    items = [item.strip().strip("'\"") for item in re.split(r"[,\s]+", inner)]
    items = [item for item in items if item]
    return items if items and (len(items) > 1 or text.strip()[:1] == "[") else None


def plain(text: str) -> str:
    """``text`` in NFKC form without invisible format characters (a zero-width space)."""
    normal = unicodedata.normalize("NFKC", text)
    return "".join(c for c in normal if unicodedata.category(c) != "Cf")


DAY_WORDS = {
    "weekdays": "MON-FRI",
    "workdays": "MON-FRI",
    "weekends": "SAT-SUN",
    "weekend": "SAT-SUN",
    "daily": "*",
    "everyday": "*",
    "every day": "*",
    "all": "*",
}


def weekdays(text: str, days: tuple[str, ...]) -> str | None:
    """Days as a schedule takes them (MON-FRI) from days as people write them: weekdays,
    Monday-Friday, mo-fr, MON-FRY, mon to fri; None when a part is no day."""
    lowered = text.strip().lower()
    if lowered in DAY_WORDS:
        return DAY_WORDS[lowered]
    lowered = re.sub(r"\s+to\s+|\s*[\u2013\u2014-]\s*", "-", lowered)
    found = []
    for part in re.split(r"\s*([,-])\s*", lowered):
        if part in (",", "-"):
            found.append(part)
            continue
        day = next((d for d in days if part[:2] == d.lower()[:2]), None)
        if day is None or (len(part) > 3 and part[:3] != day.lower()):
            return None
        found.append(day)
    return "".join(found)


def _model_key(text: str) -> str:
    """A100 for "nvidia a-100"; O and 0 are one character (A10O is A100)."""
    key = re.sub(r"[\s_-]+", "", plain(text).upper()).removeprefix("NVIDIA")
    return key.replace("O", "0")


def gpu_model(text: str, models: Iterable[str]) -> str | None:
    """The catalog's GPU model a user typed another way (a100, A-100, NVIDIA A100, a10 for
    A10G): the same characters up to case, spaces and dashes, or missing only the model's
    one-letter variant suffix. Never another model (H300 is not H200; A1000 is not A100)."""
    typed = _model_key(text)
    by_key = {_model_key(model): model for model in models}
    if not typed.isascii():  # a lookalike letter (a Cyrillic A): the model it imitates
        return closest(text, by_key.values())
    if typed in by_key or (typed.endswith("S") and typed[:-1] in by_key):  # A100s
        return by_key.get(typed) or by_key[typed[:-1]]
    variants = [m for key, m in by_key.items() if key[:-1] == typed and key[-1].isalpha()]
    return variants[0] if len(variants) == 1 else None


TYPE_NAME = re.compile(r"^\s*([a-z][a-z0-9-]*)[.\s_-]+(\w+)\s*$", re.IGNORECASE)


def instance_type(text: str, types: Iterable[str]) -> str | None:
    """The catalog's type a user typed another way: case, a dash or space for the dot, or a
    size written short or with a slip (p4d.24xl, p4d.24xlarg): the same family and the same
    number of the size. Never another family or size (p5.96xlarge is not p5.48xlarge)."""
    known = sorted(types)
    lowered = plain(text).strip().lower()
    if not lowered.isascii():  # a lookalike letter: the type it imitates
        return closest(lowered, known)
    match = TYPE_NAME.match(lowered)
    if lowered in known or not match:
        return lowered if lowered in known else None
    family, size = match[1], match[2]
    if f"{family}.{size}" in known:
        return f"{family}.{size}"
    number = _leading_number(size)
    same = [
        t.split(".", 1)[1]
        for t in known
        if family_of(t) == family and _leading_number(t.split(".", 1)[1]) == number
    ]
    short = [s for s in same if s.startswith(size)] if len(size) > len(number) else []
    near = short if len(short) == 1 else [hit] if (hit := closest(size, same)) else []
    return f"{family}.{near[0]}" if near else None


def _leading_number(size: str) -> str:
    return re.sub(r"\D.*$", "", size)


def family_of(text: str) -> str:
    """p4d of p4d.24xlarge (the text before the dot)."""
    return text.strip().lower().split(".", 1)[0]
