"""Stack files read as the Pulumi CLI reads them, and each value as the program receives it.

Pulumi reads Pulumi.<stack>.yaml with gopkg.in/yaml.v3 (sdk/go/common/encoding/marshal.go),
decodes it, re-encodes it and decodes it again (workspace/loaders.go, LoadProjectStackBytes),
then turns every config value into the string the program gets (resource/config/value.go,
Value.UnmarshalYAML -> object.MarshalString). PyYAML follows YAML 1.1, so this module replaces
its resolution of plain (unquoted) scalars with yaml.v3's (resolve.go, resolve):

- booleans are only true/True/TRUE and false/False/FALSE: yes, no, on, off stay strings;
- null is "", ~, null, Null, NULL;
- integers: underscores removed, then Go's strconv.ParseInt with base 0 (0x.., 0o.., 0b..,
  and 0777 as octal), then ParseUint;
- floats: the YAML 1.2 pattern, .inf and .nan; a float that overflows stays a string;
- timestamps: YYYY-M-D, with T/t or a space and H:M:S[.fraction][Z|+hh:mm]; they reach the
  program in Go's time.Time.String() form ("2027-01-31 00:00:00 +0000 UTC");
- 20:00 (YAML 1.1 sexagesimal) and NO stay strings; a quoted scalar is always a string.

MarshalString: a string as it is; a boolean or number as Go's encoding/json writes it (after the
re-encode, an integral float such as 1e3 is the integer 1000); a mapping or list as compact JSON
with sorted keys; a top-level null as "".
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import yaml

PLAIN_TAG = "tag:gpu-cluster,2026:plain"  # a plain scalar, resolved here as yaml.v3 does

NULLS = ("", "~", "null", "Null", "NULL")
TRUES = ("true", "True", "TRUE")
FALSES = ("false", "False", "FALSE")
SPECIAL_FLOATS = {
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
}
YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
GO_INT = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
_DATE = r"(\d{4})-(\d{1,2})-(\d{1,2})"
_TIME = r"(\d{1,2}):(\d{1,2}):(\d{1,2})(?:\.(\d{1,9}))?"
TIMESTAMP_FORMS = (
    re.compile(rf"^{_DATE}[Tt]{_TIME}(Z|[+-]\d{{2}}:\d{{2}})$"),
    re.compile(rf"^{_DATE} {_TIME}()$"),
    re.compile(rf"^{_DATE}()()()()()$"),
)
INT64 = (-(2**63), 2**63 - 1)
UINT64_MAX = 2**64 - 1


@dataclass(frozen=True)
class GoTime:
    """A yaml.v3 timestamp: Go's time.Time, kept with the offset it was written with."""

    moment: datetime
    nanos: int  # the fraction of a second, in nanoseconds, as written

    def __str__(self) -> str:
        """time.Time.String(): 2006-01-02 15:04:05.999999999 -0700 MST."""
        fraction = f".{self.nanos:09d}".rstrip("0") if self.nanos else ""
        offset = self.moment.utcoffset() or timedelta(0)
        minutes = int(offset.total_seconds()) // 60
        sign = "-" if minutes < 0 else "+"
        numeric = f"{sign}{abs(minutes) // 60:02d}{abs(minutes) % 60:02d}"
        name = "UTC" if minutes == 0 else numeric  # a fixed zone without a name prints its offset
        return f"{self.moment:%Y-%m-%d %H:%M:%S}{fraction} {numeric} {name}"


def go_int(text: str) -> int | None:
    """strconv.ParseInt(text, 0, 64), then ParseUint: None when Go would refuse it."""
    if not GO_INT.match(text):
        return None
    sign = -1 if text.startswith("-") else 1
    digits = text.lstrip("+-")
    lower = digits.lower()
    if lower.startswith("0x"):
        value = int(digits[2:], 16)
    elif lower.startswith("0o"):
        value = int(digits[2:], 8)
    elif lower.startswith("0b"):
        value = int(digits[2:], 2)
    elif len(digits) > 1 and digits.startswith("0"):
        value = int(digits[1:], 8)
    else:
        value = int(digits)
    value *= sign
    if INT64[0] <= value <= INT64[1] or 0 <= value <= UINT64_MAX:
        return value
    return None


def timestamp(text: str) -> GoTime | None:
    """yaml.v3 parseTimestamp: four digits and a dash first, then one of its three layouts."""
    if not re.match(r"^\d{4}-", text):
        return None
    for form in TIMESTAMP_FORMS:
        match = form.match(text)
        if not match:
            continue
        year, month, day, hour, minute, second, fraction, zone = match.groups()
        try:
            offset = timedelta(0)
            if zone and zone != "Z":
                sign = -1 if zone[0] == "-" else 1
                offset = sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6]))
            moment = datetime(
                int(year),
                int(month),
                int(day),
                int(hour or 0),
                int(minute or 0),
                int(second or 0),
                tzinfo=timezone(offset),
            )
        except ValueError:  # Go's time.Parse refuses a day, hour ... out of range
            return None
        return GoTime(moment, int((fraction or "").ljust(9, "0")) if fraction else 0)
    return None


def resolve_plain(text: str) -> Any:
    """A plain scalar as yaml.v3 decodes it into interface{}."""
    if text in NULLS:
        return None
    if text in TRUES:
        return True
    if text in FALSES:
        return False
    if text in SPECIAL_FLOATS:
        return SPECIAL_FLOATS[text]
    if not text or not (text[0].isdigit() or text[0] in "+-."):
        return text
    if text[0] == ".":
        return _float(text) if YAML_FLOAT.match(text) else text
    moment = timestamp(text)
    if moment is not None:
        return moment
    plain = text.replace("_", "")
    number = go_int(plain)
    if number is not None:
        return number
    if YAML_FLOAT.match(plain):
        return _float(plain)
    return text


def _float(text: str) -> float | str:
    value = float(text)
    return text if math.isinf(value) else value  # Go's ParseFloat fails on overflow


class PulumiLoader(yaml.SafeLoader):
    """PyYAML with yaml.v3's plain scalars, refusing a key given twice (yaml.v3 does too:
    "mapping key ... already defined")."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode and implicit[0]:
            return PLAIN_TAG
        return super().resolve(kind, value, implicit)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if _hashable(key) in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} is given twice (lines {seen[_hashable(key)]} and {line})",
                )
            seen[_hashable(key)] = line
        return super().construct_mapping(node, deep=deep)


def _hashable(key: Any) -> Any:
    return str(key) if isinstance(key, GoTime | float) else key


def _construct_plain(loader: PulumiLoader, node: yaml.ScalarNode) -> Any:
    return resolve_plain(loader.construct_scalar(node))


PulumiLoader.add_constructor(PLAIN_TAG, _construct_plain)


def load(text: str) -> Any:
    return yaml.load(text, Loader=PulumiLoader)


def go_json_float(value: float) -> str:
    """encoding/json's float64: shortest digits, 'f' form unless |x| < 1e-6 or >= 1e21."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"json: unsupported value: {value}")
    if value == 0:
        return "0"
    digits = Decimal(repr(value))
    if 1e-6 <= abs(value) < 1e21:
        text = format(digits, "f")
        return text.rstrip("0").rstrip(".") if "." in text else text
    sign, numerals, exponent = digits.normalize().as_tuple()
    assert isinstance(exponent, int)  # a finite number (NaN and infinities refused above)
    mantissa = "".join(map(str, numerals))
    power = len(mantissa) + exponent - 1
    body = mantissa[0] + ("." + mantissa[1:] if len(mantissa) > 1 else "")
    return f"{'-' if sign else ''}{body}e{'-' if power < 0 else '+'}{abs(power):02d}".replace(
        "e-0", "e-"
    )


def reencoded(value: Any) -> Any:
    """What survives Pulumi's decode, re-encode, decode: an integral float becomes an integer
    (yaml.v3 writes floats with FormatFloat 'g', which a second decode reads back as an int)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e6:
        return int(value)
    if isinstance(value, dict):
        return {k: reencoded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [reencoded(v) for v in value]
    return value


def _json_ready(value: Any) -> Any:
    if isinstance(value, GoTime):
        return str(value)
    if isinstance(value, dict):
        return {_json_key(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_ready(v) for v in value]
    return value


def _json_key(key: Any) -> str:
    """Go's fmt %v of a non-string key."""
    if key is None:
        return "<nil>"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)


def _scalar(value: Any) -> str | None:
    """A boolean, null or number as both JSON and YAML write it (None for anything else)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_json_float(value)
    return None


def go_json(value: Any) -> str:
    """encoding/json.Marshal: compact, sorted keys, <>& escaped, Go's number forms."""
    if (scalar := _scalar(value)) is not None:
        return scalar
    if isinstance(value, str):
        return _go_string(value)
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(f"{_go_string(k)}:{go_json(v)}" for k, v in items) + "}"
    return "[" + ",".join(go_json(v) for v in value) + "]"


def _go_string(text: str) -> str:
    encoded = json.dumps(text, ensure_ascii=False)
    for char, escape in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        encoded = encoded.replace(char, escape)
    return encoded


def config_string(value: Any) -> str:
    """The string the program receives for one config value (object.MarshalString)."""
    value = reencoded(value)
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, GoTime):
        return str(value)
    if isinstance(value, dict | list):
        return go_json(_json_ready(value))
    return go_json(value)


FLOW_UNSAFE = re.compile(r"""^[\s\-?:,\[\]{}#&*!|>'"%@`]|[\s]$|: | #|[,\[\]{}]""")


def flow(value: Any) -> str:
    """Flow-style YAML that this reader (and Pulumi's) reads back as exactly ``value``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{flow(k)}: {flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(flow(v) for v in value) + "]"
    if isinstance(value, float) and (math.isinf(value) or math.isnan(value)):
        # YAML's own spelling (Python's json reads Infinity and NaN; JSON has neither)
        return ".nan" if math.isnan(value) else (".inf" if value > 0 else "-.inf")
    if (scalar := _scalar(value)) is not None:
        return scalar
    text = str(value)
    if text and not FLOW_UNSAFE.search(text) and resolve_plain(text) == text:
        return text
    return json.dumps(text, ensure_ascii=False)


def top_level(config_value: str) -> str:
    """A config value written for the stack file so that Pulumi hands the program the same
    string: a mapping or list in flow style, anything else plain when that reads back the same."""
    if config_value[:1] in "{[":
        try:
            return flow(json.loads(config_value))
        except json.JSONDecodeError:
            pass
    plain = flow(config_value)
    if plain != config_value and not FLOW_UNSAFE.search(config_value):
        try:
            if config_string(load(f"k: {config_value}")["k"]) == config_value:
                return config_value
        except yaml.YAMLError:
            pass
    return plain
