"""The one boto3 wrapper: sessions with retries, ClientError -> AwsError naming the IAM action."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    ReadTimeoutError,
)
from botocore.parsers import ResponseParserError

from gpu_cluster.infra.problems import AwsError

__all__ = ["AwsError", "call", "client", "paginate", "translated"]

# Bounded: botocore waits 60 s to connect and 60 s per read by default, for each attempt; an
# endpoint that does not answer would hold a command for many minutes. Throttling still gets
# adaptive retries, within three attempts in all (a dead endpoint fails a call in ~35 s).
RETRY_CONFIG = Config(
    connect_timeout=5, read_timeout=10, retries={"total_max_attempts": 3, "mode": "adaptive"}
)
# the codes AWS answers a missing permission with (only these get the IAM hint)
PERMISSION_ERRORS = ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation")
UNREACHABLE = "EndpointUnreachable"  # AwsError.code: no AWS call in this region can succeed
UNREACHABLE_ERRORS = (
    EndpointConnectionError,
    ConnectTimeoutError,
    ReadTimeoutError,
    ConnectionClosedError,
)


def client(service: str, region: str, session: boto3.Session | None = None) -> Any:
    """A boto3 client with adaptive retries (a bad profile or region is an AwsError)."""
    try:
        return (session or boto3.Session()).client(service, region_name=region, config=RETRY_CONFIG)
    except BotoCoreError as exc:
        raise AwsError(f"cannot reach {service} in region {region!r}: {exc}") from exc


# Where the IAM action differs from the client's service and operation name (Service
# Authorization Reference): Elastic Load Balancing's prefix, and the Budgets actions that
# grant its read and write calls.
IAM_PREFIX = {"elbv2": "elasticloadbalancing"}
IAM_ACTION = {
    ("budgets", "DescribeBudget"): "ViewBudget",
    ("budgets", "DescribeBudgets"): "ViewBudget",
    ("budgets", "DescribeBudgetActionsForBudget"): "ViewBudget",
    ("budgets", "DeleteBudget"): "ModifyBudget",
    ("budgets", "DeleteBudgetAction"): "ModifyBudget",
}


def _action(service: str, operation: str) -> str:
    name = IAM_ACTION.get((service, operation), operation)
    return f"{IAM_PREFIX.get(service, service)}:{name}"


def _snake(operation: str) -> str:
    return "".join("_" + c.lower() if c.isupper() else c for c in operation).lstrip("_")


@contextmanager
def translated(service: str, operation: str) -> Iterator[None]:
    """Turn boto3 failures into an AwsError that names the IAM action and the fix."""
    action = _action(service, operation)
    try:
        yield
    except NoCredentialsError as exc:
        raise AwsError(
            f"{action} needs AWS credentials: none were found. "
            "Set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run `aws sso login`.",
            "NoCredentials",
        ) from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = error.get("Code", "Error")
        hint = (
            f" The caller needs IAM permission '{action}'."
            if code in PERMISSION_ERRORS or "AccessDenied" in code
            else ""
        )
        raise AwsError(
            f"{action} failed: {code}: {error.get('Message', exc)}.{hint}", code
        ) from exc
    except UNREACHABLE_ERRORS as exc:
        message = f"{action} failed: the endpoint does not answer ({exc})"
        raise AwsError(message, UNREACHABLE) from exc
    except BotoCoreError as exc:
        raise AwsError(f"{action} failed: {exc}") from exc
    except ResponseParserError as exc:  # not a BotoCoreError: an endpoint that is not AWS's
        raise AwsError(
            f"{action} failed: the endpoint's answer is not an AWS response ({exc})".split("\n")[0],
            "ResponseParserError",
        ) from exc


def call(api: Any, service: str, operation: str, **kwargs: Any) -> dict[str, Any]:
    """One (non-paginated) API call, failures translated."""
    with translated(service, operation):
        return getattr(api, _snake(operation))(**kwargs)


def paginate(
    api: Any, service: str, operation: str, result_key: str, **kwargs: Any
) -> Iterator[Any]:
    """Yield every item of a paginated call, translating failures into AwsError."""
    with translated(service, operation):
        for page in api.get_paginator(_snake(operation)).paginate(**kwargs):
            yield from page.get(result_key, [])
