"""The one boto3 wrapper: sessions with retries, ClientError -> AwsError naming the IAM action."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

RETRY_CONFIG = Config(retries={"max_attempts": 8, "mode": "adaptive"})


class AwsError(RuntimeError):
    """An AWS call failed; the message names the IAM action and what to do."""


def client(service: str, region: str, session: boto3.Session | None = None) -> Any:
    """A boto3 client with adaptive retries."""
    return (session or boto3.Session()).client(service, region_name=region, config=RETRY_CONFIG)


def _action(service: str, operation: str) -> str:
    return f"{service}:{operation}"


def paginate(
    api: Any, service: str, operation: str, result_key: str, **kwargs: Any
) -> Iterator[Any]:
    """Yield every item of a paginated call, translating failures into AwsError."""
    snake = "".join("_" + c.lower() if c.isupper() else c for c in operation).lstrip("_")
    try:
        for page in api.get_paginator(snake).paginate(**kwargs):
            yield from page.get(result_key, [])
    except NoCredentialsError as exc:
        raise AwsError(
            f"{_action(service, operation)} needs AWS credentials: none were found. "
            "Set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run `aws sso login`."
        ) from exc
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise AwsError(
            f"{_action(service, operation)} failed: {error.get('Code', 'Error')}: "
            f"{error.get('Message', exc)}. The caller needs IAM permission "
            f"'{_action(service, operation)}'."
        ) from exc
    except BotoCoreError as exc:
        raise AwsError(f"{_action(service, operation)} failed: {exc}") from exc
