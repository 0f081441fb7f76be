r"""Every boto3 request the tests make (gpuc's commands, in process, against moto or a Stubber)
is checked against botocore's service model as AWS checks it: botocore validates a string's,
list's or number's `min` before it sends a request, never its `max`, and moto accepts both, so
a request AWS refuses with a ValidationException (a name too long, too many ids, a value over
4 KB) would pass every test. conftest installs this once for the whole run.

Source: botocore/validate.py (range_check: min only; VALIDATED_METADATA_ATTRS) and the
service models' "max" (e.g. ssm PutParameter Name 2048, GetParameters Names 10 items; the
value's 4 KB is not in the model: infra/aws/jobs.py checks a job spec against it).

Beyond `max`, what AWS's request validation refuses and botocore never checks:
- `pattern`: AWS validates a string member against its pattern as Java's String.matches does
  (the whole value: an unanchored `[\w+=,.@-]+` refuses "my role!" with "Member must satisfy
  regular expression pattern"). java_regex() translates Java's syntax for the `regex` module:
  ASCII `\w \d \s` (Java's default), POSIX `\p{Alnum}`-style classes (ASCII in Java),
  `\x{h..h}`, UTF-16 surrogate pairs `\uD800\uDC00` as one code point, `&&` class
  intersection. A pattern it cannot translate is skipped and counted (UNTRANSLATED); across
  every botocore model there are 2 (tests/test_botocore_limits.py holds the count).
- `enum`: the services whose requests AWS validates against the model (the JSON and query
  services: SSM, Logs, KMS, CloudWatch, IAM, Auto Scaling, SNS, EventBridge, ...) refuse a
  value outside the set with "Member must satisfy enum value set: [...]"; S3 refuses one with
  its own errors (InvalidStorageClass, InvalidArgument). botocore leaves enums open so an
  older SDK can pass a newer value; the installed botocore is newer than this project's code,
  so a value outside its enum is one AWS does not know. Not checked for EC2
  (ENUMS_NOT_ENFORCED): EC2 validates its parameters itself, not by the model, and its model's
  enums are known not to be the values EC2 takes and returns (PlatformValues "Windows" where
  EC2 answers "windows": boto/botocore#3128, aws/aws-sdk#797).
- `required` and `min`: botocore checks them itself.

Every refusal is also recorded (REFUSED in process; the file named by BOTOCORE_LIMITS_RECORD
for the AWS CLI and `gpuc` run as subprocesses, through tests/model_checked/sitecustomize.py
and the boot harness's `aws`), and conftest fails the test that made it, even when the code
under test swallowed the error."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import threading
from collections.abc import Iterator
from typing import Any

import botocore.validate as validate
import regex

_ORIGINAL_RANGE_CHECK = validate.range_check
_ORIGINAL_FORMAT = validate.ValidationErrors._format_error
_ORIGINAL_VALIDATE_STRING = validate.ParamValidator._validate_string
_ORIGINAL_SERIALIZE = validate.ParamValidationDecorator.serialize_to_request
_REQUEST = threading.local()  # set while a request (not a Stubber's response) is validated
RECORD_VARIABLE = "BOTOCORE_LIMITS_RECORD"
REFUSED: list[str] = []  # this process's refusals since the last take()
UNTRANSLATED: set[str] = set()  # model patterns java_regex() could not translate (skipped)
ENUMS_NOT_ENFORCED = {"ec2"}  # services whose model enums AWS does not validate (see above)


def range_check(name: str, value: Any, shape: Any, error_type: str, errors: Any) -> None:
    """botocore's min check, then the model's max (a length or a value)."""
    _ORIGINAL_RANGE_CHECK(name, value, shape, error_type, errors)
    maximum = shape.metadata.get("max")
    if maximum is not None and value > maximum:
        errors.report(
            name, "over the model's max", param=value, max_allowed=maximum, kind=error_type
        )


def _format_error(self: Any, error: tuple) -> str | None:  # botocore's may fall through
    error_type, name, additional = error
    if error_type == "over the model's max":
        what = "length" if additional["kind"] == "invalid length" else "value"
        return (
            f"Invalid {what} for parameter {self._get_name(name)}: {additional['param']}, valid "
            f"max {what}: {additional['max_allowed']} (AWS refuses it; botocore does not check)"
        )
    if error_type == "not the model's pattern":
        return (
            f"Invalid value for parameter {self._get_name(name)}: {additional['param']!r} does not "
            f"match the model's pattern {additional['pattern']} (AWS refuses it; botocore does "
            "not check)"
        )
    if error_type == "not in the model's enum":
        return (
            f"Invalid value for parameter {self._get_name(name)}: {additional['param']!r} is not "
            f"one of the model's enum {additional['allowed']} (AWS refuses it; botocore does not "
            "check)"
        )
    return _ORIGINAL_FORMAT(self, error)


# Java's POSIX classes (US-ASCII only, java.util.regex.Pattern) as class contents
POSIX = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": "\\x00-\\x7F",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": "!-/:-@\\[-`{-~",
    "Graph": "!-~",
    "Print": " -~",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1F\\x7F",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0B\\f\\r",
    "all": "\\x00-\\U0010FFFF",
}
# Java's \w \d \s are ASCII unless UNICODE_CHARACTER_CLASS (never set by AWS)
ASCII_CLASSES = {"w": "a-zA-Z0-9_", "d": "0-9", "s": " \\t\\n\\x0B\\f\\r"}
ESCAPE = re.compile(r"\\(?:[pP]\{\w+\}|x\{[0-9a-fA-F]+\}|u[0-9a-fA-F]{4}|.)", re.S)


def _code_point(token: str) -> int | None:
    if token.startswith("\\u") and len(token) == 6:
        return int(token[2:], 16)
    if len(token) == 1 and 0xD800 <= ord(token) <= 0xDFFF:
        return ord(token)
    return None


def _translate(pattern: str) -> tuple[str, bool]:
    """Java regex syntax -> the `regex` module's, token by token (see the module docstring);
    and whether it needs the module's V1 syntax (Java's nested classes and intersections)."""
    tokens = []
    index = 0
    while index < len(pattern):
        match = ESCAPE.match(pattern, index)
        token = match.group() if match else pattern[index]
        tokens.append(token)
        index += len(token)
    out: list[str] = []
    depth = 0  # inside a character class (Java nests them: [a-z&&[^b]])
    nested = False
    index = 0
    while index < len(tokens):
        token = tokens[index]
        high = _code_point(token)
        low = _code_point(tokens[index + 1]) if index + 1 < len(tokens) else None
        if high is not None and 0xD800 <= high <= 0xDBFF and low and 0xDC00 <= low <= 0xDFFF:
            out.append(f"\\U{0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00):08x}")
            index += 2
            continue
        if token == "[":
            nested = nested or depth > 0
            depth += 1
            out.append(token)
            if index + 1 < len(tokens) and tokens[index + 1] == "^":
                out.append("^")
                index += 1
            if index + 1 < len(tokens) and tokens[index + 1] == "]":  # a leading ] is literal
                out.append("\\]")
                index += 1
        elif token == "]" and depth:
            depth -= 1
            out.append(token)
        elif token.startswith(("\\p{", "\\P{")) and token[3:-1] in POSIX:
            body = POSIX[token[3:-1]]
            negated = token[1] == "P"
            if depth and not negated:
                out.append(body)
                if index + 1 < len(tokens) and tokens[index + 1] == "-":
                    out.append("\\-")
                    index += 1
            elif not depth:
                out.append(f"[{'^' if negated else ''}{body}]")
            else:
                raise ValueError(f"negated POSIX class inside a class: {token}")
        elif token.startswith(("\\p{Is", "\\P{Is")):
            out.append(token[:3] + token[5:])  # \p{IsAlphabetic}: the property Alphabetic
        elif token.startswith("\\x{"):
            out.append(f"\\U{int(token[3:-1], 16):08x}")
        elif len(token) == 2 and token[1] in ASCII_CLASSES:
            body = ASCII_CLASSES[token[1]]
            out.append(body if depth else f"[{body}]")
            if depth and index + 1 < len(tokens) and tokens[index + 1] == "-":
                out.append("\\-")  # Java: a '-' after a class escape is a literal
                index += 1
        elif len(token) == 2 and token[1] in "WDS" and not depth:
            out.append(f"[^{ASCII_CLASSES[token[1].lower()]}]")
        else:
            out.append(token)
        index += 1
    return "".join(out), nested or "&&" in pattern


@functools.cache
def java_regex(pattern: str) -> regex.Pattern | None:
    """The model's pattern as AWS (Java) reads it; None when it cannot be translated."""
    try:
        translated, version_1 = _translate(pattern)
        return regex.compile(translated, regex.V1 if version_1 else regex.V0)
    except (ValueError, regex.error):
        UNTRANSLATED.add(pattern)
        return None


def _validate_string(self: Any, param: Any, shape: Any, errors: Any, name: str) -> None:
    """botocore's type and min check, then the model's pattern and enum."""
    _ORIGINAL_VALIDATE_STRING(self, param, shape, errors, name)
    if not isinstance(param, str) or not getattr(_REQUEST, "active", False):
        return  # a Stubber's response: AWS's own output, its enums open to new values
    pattern = shape.metadata.get("pattern")
    if pattern is not None:
        compiled = java_regex(pattern)
        if compiled is not None and compiled.fullmatch(param) is None:
            errors.report(name, "not the model's pattern", param=param, pattern=pattern)
    allowed = shape.enum
    if allowed and param not in allowed and _REQUEST.service not in ENUMS_NOT_ENFORCED:
        errors.report(name, "not in the model's enum", param=param, allowed=allowed)


def serialize_to_request(self: Any, parameters: Any, operation_model: Any) -> Any:
    """botocore's validation of one request before it is sent, each refusal recorded."""
    _REQUEST.active = True
    _REQUEST.service = operation_model.service_model.service_name
    try:
        return _ORIGINAL_SERIALIZE(self, parameters, operation_model)
    except validate.ParamValidationError as error:
        service = operation_model.service_model.service_name
        record(f"{service} {operation_model.name}: {error}")
        raise
    finally:
        _REQUEST.active = False


def record(refusal: str) -> None:
    REFUSED.append(refusal)
    path = os.environ.get(RECORD_VARIABLE)
    if path:
        with open(path, "a") as file:
            file.write(json.dumps({"pid": os.getpid(), "refused": refusal}) + "\n")


@contextlib.contextmanager
def refusals_expected() -> Iterator[list[str]]:
    """For a test of the check itself: the refusals made inside (listed in what it yields) are
    the test's subject, not a failure of it (conftest's fixture does not see them)."""
    path = os.environ.get(RECORD_VARIABLE)
    size = os.path.getsize(path) if path and os.path.exists(path) else 0
    start = len(REFUSED)
    seen: list[str] = []
    try:
        yield seen
    finally:
        seen += REFUSED[start:]
        del REFUSED[start:]
        if path and os.path.exists(path):
            with open(path, "r+") as file:
                file.truncate(size)


def take() -> list[str]:
    """This process's refusals since the last take(), forgotten."""
    taken = list(REFUSED)
    REFUSED.clear()
    return taken


def install(record_file: str | None = None) -> None:
    """Every botocore request of this process checked (and refusals recorded in
    ``record_file``, for a process whose refusals another one reads)."""
    if record_file:
        os.environ[RECORD_VARIABLE] = record_file
    validate.range_check = range_check
    validate.ValidationErrors._format_error = _format_error
    validate.ParamValidator._validate_string = _validate_string
    validate.ParamValidationDecorator.serialize_to_request = serialize_to_request
    validate.ParamValidator.VALIDATED_METADATA_ATTRS = {
        *validate.ParamValidator.VALIDATED_METADATA_ATTRS,
        "max",
        "pattern",
        "enum",
    }
