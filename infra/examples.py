"""The value a fix proposes: one that passes the field's own bounds, taken from what the user
wrote where that is clear (500GB -> 500, 30m -> 30 minutes, 10m -> 600 seconds, 1.2TB -> 1200
GiB, $300 -> 300, off -> 0 where 0 is off), else the field's default, else its minimum."""

from __future__ import annotations

import re
from typing import Any, TypeGuard

from annotated_types import Ge, Gt, Le
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import ErrorDetails

from gpu_cluster.infra.spec import StackSpec

# a number as people write money, rates and percentages: $300, 300 USD, 1,000, $2.50/h, 5 %
NUMBER_AS_WRITTEN = re.compile(
    r"^\s*(?:US)?\$?\s*([0-9][0-9,_]*(?:\.[0-9]+)?|\.[0-9]+)\s*"
    r"(?:\$|usd|dollars?|%|percent|/\s*(?:h|hr|hour|mo|month))?\s*$",
    re.IGNORECASE,
)
# words for "no limit" / "not at all" that a user types for a number
OFF_WORDS = frozenset({"off", "none", "no", "never", "disabled", "disable", "false", "0"})
NUMBER_WORDS = {
    word: n
    for n, word in enumerate(
        ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")
    )
}
NUMBER_WITH_UNIT = re.compile(r"^\s*\+?([0-9]+(?:\.[0-9]+)?)\s*([a-zA-Z]*)\s*$")
# unit -> factor, by what the field counts (its name ends with it)
FACTORS = {
    "Gib": {"": 1, "g": 1, "gb": 1, "gib": 1, "t": 1000, "tb": 1000, "tib": 1024},
    "Seconds": {"": 1, "s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600},
    "minutes": {"": 1, "m": 1, "min": 1, "h": 60},
    "Minutes": {"": 1, "m": 1, "min": 1, "h": 60},
}


def field_at(loc: tuple[Any, ...]) -> tuple[str, Any] | None:
    """(field name, pydantic FieldInfo) of a config location, e.g. ("rootVolume", "sizeGib")."""
    model: type[BaseModel] | None = StackSpec
    info = None
    for part in loc:
        if model is None or not isinstance(part, str):
            return None
        by_alias = {f.alias or n: (n, f) for n, f in model.model_fields.items()}
        by_alias |= {n: (n, f) for n, f in model.model_fields.items()}
        if part not in by_alias:
            return None
        info = by_alias[part][1]
        model = _model_of(info.annotation)
    return (str(loc[-1]), info) if info is not None else None


def _model_of(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_of(arg)
        if found is not None:
            return found
    return None


def bounds(info: Any) -> tuple[float | None, float | None]:
    """The field's numeric ge/le bounds (the spec's bounds are all numbers)."""
    low = next((m.ge for m in info.metadata if isinstance(m, Ge) and _numeric(m.ge)), None)
    high = next((m.le for m in info.metadata if isinstance(m, Le) and _numeric(m.le)), None)
    return low, high


def _numeric(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float)


def whole_number_example(loc: tuple[Any, ...], received: Any) -> str:
    """A whole number the field accepts, read from ``received`` when its unit is clear."""
    found = field_at(loc)
    if found is None:
        return "4"
    name, info = found
    low, high = bounds(info)
    if _is_off(received) and (low is None or low <= 0) and (high is None or high >= 0):
        return "0"  # off for a timeout or a count that allows 0 (0: off)
    guess = _from_units(name, received)
    if guess is None:
        default = info.default
        guess = default if isinstance(default, int) and not isinstance(default, bool) else None
    if guess is None:
        guess = int(low) if low is not None else 4
    if low is not None:
        guess = max(guess, int(low))
    if high is not None:
        guess = min(guess, int(high))
    return str(guess)


def _from_units(name: str, received: Any) -> int | None:
    if isinstance(received, str) and received.strip().lower() in NUMBER_WORDS:
        return NUMBER_WORDS[received.strip().lower()]  # four -> 4
    match = NUMBER_WITH_UNIT.match(str(received)) if received is not None else None
    if not match:
        return None
    factors = next((f for suffix, f in FACTORS.items() if name.endswith(suffix)), {"": 1})
    factor = factors.get(match[2].lower())
    return None if factor is None else round(float(match[1]) * factor)


def number_example(loc: tuple[Any, ...], received: Any) -> str:
    """A number the float field at ``loc`` accepts: the one written in ``received`` ($300 ->
    300, 2.5/h -> 2.5) when it is inside the bounds, else the field's default, else 12.5."""
    found = field_at(loc)
    written = _number_as_written(received)
    if found is None:
        return _number_text(written) if written is not None else "12.5"
    low, high = bounds(found[1])
    above = next((m.gt for m in found[1].metadata if isinstance(m, Gt) and _numeric(m.gt)), None)
    for guess in (written, found[1].default, 12.5, low, high):
        if not _numeric(guess) or isinstance(guess, bool):
            continue
        inside = (low is None or guess >= low) and (high is None or guess <= high)
        if inside and (above is None or guess > above):
            return _number_text(guess)
    return "12.5"


def _number_text(number: float) -> str:
    """300 for 300.0, 2.5 for 2.5, 1000000 (not 1e+06)."""
    return str(int(number)) if float(number).is_integer() else repr(float(number))


def _number_as_written(received: Any) -> float | None:
    match = NUMBER_AS_WRITTEN.match(str(received)) if received is not None else None
    if not match:
        return None
    try:
        return float(match[1].replace(",", "").replace("_", ""))
    except ValueError:
        return None


def means_no_limit(received: Any) -> bool:
    """+infinity as a user writes it for "no cap": inf, Infinity, .inf, 1e999."""
    text = str(received).strip().lower().replace(".inf", "inf")
    try:
        return float(text) == float("inf")
    except ValueError:
        return False


def optional(loc: tuple[Any, ...]) -> bool:
    """The field at ``loc`` may be left out (its default is unset)."""
    found = field_at(loc)
    return found is not None and found[1].default is None


def _is_off(received: Any) -> bool:
    if isinstance(received, int) and not isinstance(received, bool):
        return received == 0
    return isinstance(received, str) and received.strip().lower() in OFF_WORDS


def off_switch(loc: tuple[Any, ...], received: Any) -> tuple[Any, ...] | None:
    """``off`` (none, never, ...) for a number that cannot be 0, in a mapping with an
    ``enabled`` switch (idleStop.minutes: off): that switch's location, to set it false."""
    found = field_at(loc)
    if found is None or not _is_off(received) or len(loc) < 2:
        return None
    if field_error(loc, 0) is None or not enabled_switch(loc[:-1]):
        return None  # 0 is allowed (and means off), or there is no switch
    if all(field_error(loc, n) is not None for n in (1, 10, 100, 1000)):
        return None  # not a number: the switch itself (enabled: no is false)
    return (*loc[:-1], "enabled")


def field_error(loc: tuple[Any, ...], value: Any) -> ErrorDetails | None:
    """What the field at ``loc`` says of ``value`` (its type and bounds; None: it takes it)."""
    found = field_at(loc)
    if found is None:
        return None
    try:
        TypeAdapter(found[1].rebuild_annotation()).validate_python(value)
    except ValidationError as error:
        return error.errors()[0]
    return None


def is_list(loc: tuple[Any, ...]) -> bool:
    """The field at ``loc`` holds a list (secrets, alertEmails)."""
    found = field_at(loc)
    return found is not None and getattr(found[1].annotation, "__origin__", None) is list


def is_mapping(loc: tuple[Any, ...]) -> bool:
    """The field at ``loc`` holds a mapping of settings or a list (never a plain value)."""
    found = field_at(loc)
    if found is None:
        return False
    annotation = found[1].annotation
    parts = (annotation, *getattr(annotation, "__args__", ()))
    origins = {getattr(part, "__origin__", part) for part in parts}
    return _model_of(annotation) is not None or bool(origins & {dict, list})


def only_required_field(loc: tuple[Any, ...]) -> str | None:
    """The one field a mapping at ``loc`` requires (budget: monthlyUsd), if it has one."""
    found = field_at(loc)
    model = _model_of(found[1].annotation) if found else None
    if model is None:
        return None
    required = [f.alias or n for n, f in model.model_fields.items() if f.is_required()]
    return required[0] if len(required) == 1 else None


def enabled_switch(loc: tuple[Any, ...]) -> bool:
    """The mapping at ``loc`` has an ``enabled`` switch (idleStop)."""
    found = field_at(loc)
    model = _model_of(found[1].annotation) if found else None
    return model is not None and "enabled" in model.model_fields


def is_off(received: Any) -> bool:
    """off, none, never, false, 0: what a user writes to turn a setting off."""
    return _is_off(received)
