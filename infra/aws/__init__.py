"""The one boto3 wrapper: sessions with retries, ClientError -> AwsError naming the IAM action,
and an answer that is not AWS's (a proxy's page, a wrong endpoint's 404) an AwsError too, never
an empty listing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from botocore import xform_name
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

from gpu_cluster.infra.aws.answers import is_aws_endpoint, is_html, not_aws_answer, page_title
from gpu_cluster.infra.problems import AwsError

__all__ = ["NOT_AWS", "AwsError", "call", "client", "emulator_lacks", "paginate", "translated"]

# Bounded: botocore waits 60 s to connect and 60 s per read by default, for each attempt; an
# endpoint that does not answer would hold a command for many minutes. Throttling still gets
# adaptive retries, within three attempts in all (a dead endpoint fails a call in ~35 s).
RETRY_CONFIG = Config(
    connect_timeout=5, read_timeout=10, retries={"total_max_attempts": 3, "mode": "adaptive"}
)
# the codes AWS answers a missing permission with (only these get the IAM hint)
PERMISSION_ERRORS = ("AccessDenied", "AccessDeniedException", "UnauthorizedOperation")
UNREACHABLE = "EndpointUnreachable"  # AwsError.code: no AWS call in this region can succeed
CHECK_ENDPOINT = "check AWS_ENDPOINT_URL and any proxy setting such as HTTPS_PROXY"
NOT_AWS = "NotAwsResponse"
HTML_TAG = re.compile(
    r"<\s*(!doctype|html|head|body|title|h1)\b", re.IGNORECASE
)  # AwsError.code: the endpoint answered, but not as AWS answers
UNREACHABLE_ERRORS = (
    EndpointConnectionError,
    ConnectTimeoutError,
    ReadTimeoutError,
    ConnectionClosedError,
)


class NotAwsAnswer(Exception):
    """Raised before botocore parses an answer that is not an AWS response."""

    def __init__(self, endpoint: str, what: str) -> None:
        super().__init__(f"{endpoint} answered with {what}, not an AWS response")
        self.endpoint = endpoint


def refuse_foreign_answers(api: Any) -> Any:
    """Make ``api`` raise NotAwsAnswer on an answer that is not AWS's (botocore's before-parse
    event sees each raw response; the Stubber's canned ones never reach it)."""
    endpoint = api.meta.endpoint_url

    def check(operation_model: Any, response_dict: dict[str, Any], **_: Any) -> None:
        protocol = operation_model.service_model.resolved_protocol
        what = not_aws_answer(
            protocol,
            response_dict.get("status_code", 0),
            response_dict.get("headers", {}),
            response_dict.get("body"),
        )
        if what:
            raise NotAwsAnswer(endpoint, what)

    api.meta.events.register("before-parse", check)
    return api


def client(service: str, region: str, session: boto3.Session | None = None) -> Any:
    """A boto3 client with adaptive retries (a bad profile or region is an AwsError) that
    refuses an answer not AWS's."""
    try:
        api = (session or boto3.Session()).client(service, region_name=region, config=RETRY_CONFIG)
    except BotoCoreError as exc:
        raise AwsError(f"cannot reach {service} in region '{region}': {exc}") from exc
    return refuse_foreign_answers(api)


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
    """The client's method for an API operation, as botocore names it (ListWebACLs:
    list_web_acls, not list_web_a_c_ls)."""
    return xform_name(operation)


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
    except NotAwsAnswer as exc:
        raise AwsError(f"{action} failed: {exc} ({CHECK_ENDPOINT})", NOT_AWS, exc.endpoint) from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "Error")
        if code.isdigit() and is_html(str(error.get("Message") or "").encode()):
            # a client not made by client() (its answers unchecked): botocore read an HTML
            # page as an error with a bare status; the endpoint that sent it is not known here
            raise AwsError(
                f"{action} failed: {code}{_detail(error.get('Message'))}, not an AWS response "
                f"({CHECK_ENDPOINT})",
                NOT_AWS,
            ) from exc
        hint = (
            f" The caller needs IAM permission '{action}'."
            if code in PERMISSION_ERRORS or "AccessDenied" in code
            else ""
        )
        raise AwsError(
            f"{action} failed: {code}{_detail(error.get('Message'))}.{hint}", code
        ) from exc
    except UNREACHABLE_ERRORS as exc:
        message = f"{action} failed: the endpoint does not answer ({exc})"
        raise AwsError(message, UNREACHABLE) from exc
    except BotoCoreError as exc:
        raise AwsError(f"{action} failed: {exc}") from exc
    except ResponseParserError as exc:  # not a BotoCoreError: an endpoint that is not AWS's
        message = f"{action} failed: the answer could not be parsed, not an AWS response"
        raise AwsError(f"{message} ({CHECK_ENDPOINT})", NOT_AWS) from exc


def _detail(message: object) -> str:
    """``: <AWS's message>`` on one line without its own final period (an HTML page by its
    title, never pasted); nothing when AWS gave none."""
    text = " ".join(str(message or "").split()).rstrip(".")
    if HTML_TAG.search(text):  # an error page someone put where AWS's message goes
        title = page_title(text.encode())
        text = "an HTML page" + (f' ("{title}")' if title else "")
    return f": {text}" if text else ""


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


def emulator_lacks(error: AwsError) -> bool:
    """The answer was not AWS's and came from an endpoint that is not AWS's own (an emulator
    such as moto's server answers an API it lacks with an HTML 500 page). A caller may take it
    as "this endpoint has no such API" only where the same endpoint answered AWS's way before;
    from AWS's own endpoints a foreign answer is a proxy's, and nothing was read."""
    return error.code == NOT_AWS and not is_aws_endpoint(error.endpoint)
