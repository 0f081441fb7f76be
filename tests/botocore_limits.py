"""Every boto3 request the tests make (gpuc's commands, in process, against moto or a Stubber)
is checked against botocore's service model as AWS checks it: botocore validates a string's,
list's or number's `min` before it sends a request, never its `max`, and moto accepts both, so
a request AWS refuses with a ValidationException (a name too long, too many ids, a value over
4 KB) would pass every test. conftest installs this once for the whole run.

Source: botocore/validate.py (range_check: min only; VALIDATED_METADATA_ATTRS) and the
service models' "max" (e.g. ssm PutParameter Name 2048, GetParameters Names 10 items; the
value's 4 KB is not in the model: infra/aws/jobs.py checks a job spec against it)."""

from __future__ import annotations

from typing import Any

import botocore.validate as validate

_ORIGINAL_RANGE_CHECK = validate.range_check
_ORIGINAL_FORMAT = validate.ValidationErrors._format_error


def range_check(name: str, value: Any, shape: Any, error_type: str, errors: Any) -> None:
    """botocore's min check, then the model's max (a length or a value)."""
    _ORIGINAL_RANGE_CHECK(name, value, shape, error_type, errors)
    maximum = shape.metadata.get("max")
    if maximum is not None and value > maximum:
        errors.report(
            name, "over the model's max", param=value, max_allowed=maximum, kind=error_type
        )


def _format_error(self: Any, error: tuple) -> str:
    error_type, name, additional = error
    if error_type == "over the model's max":
        what = "length" if additional["kind"] == "invalid length" else "value"
        return (
            f"Invalid {what} for parameter {self._get_name(name)}: {additional['param']}, valid "
            f"max {what}: {additional['max_allowed']} (AWS refuses it; botocore does not check)"
        )
    return _ORIGINAL_FORMAT(self, error)


def install() -> None:
    validate.range_check = range_check
    validate.ValidationErrors._format_error = _format_error
    validate.ParamValidator.VALIDATED_METADATA_ATTRS = {
        *validate.ParamValidator.VALIDATED_METADATA_ATTRS,
        "max",
    }
