"""Is an HTTP answer AWS's? A proxy's sign-in page, a web server's 404 behind a wrong
AWS_ENDPOINT_URL or an emulator's error page is not: botocore parses an HTML page on a JSON
service as ``{"message": ...}``, a well-formed one on an XML service and any JSON document as
``{}`` or as the keys it happens to have, so a listing would read as "nothing there". An answer
is AWS's when it parses as its protocol says and, when it succeeds, carries AWS's request id.
Pure functions: the wrapper (infra/aws/__init__.py) calls them on
every raw response before botocore parses it."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping
from functools import cache
from urllib.parse import urlsplit

XML_PROTOCOLS = ("query", "ec2", "rest-xml")
# awsJson1.0/1.1: every body AWS sends is a JSON document (botocore's BaseJSONParser reads
# anything else as {"message": body} without an error)
JSON_PROTOCOLS = ("json",)
REQUEST_ID_HEADERS = frozenset({"x-amzn-requestid", "x-amz-request-id", "x-amz-id-2"})
REQUEST_ID_ELEMENT = re.compile(rb"<(?:requestId|RequestId)>[^<]+</")
TITLE = re.compile(rb"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
HEADING = re.compile(rb"<h1[^>]*>(.*?)</h1>", re.IGNORECASE | re.DOTALL)
TAG = re.compile(r"<[^>]*>")


def page_title(body: bytes) -> str:
    """The page's title (else its first heading) as plain text, at most 60 characters."""
    match = TITLE.search(body) or HEADING.search(body)
    if not match:
        return ""
    text = TAG.sub("", html.unescape(match.group(1).decode("utf-8", "replace")))
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def is_html(body: bytes) -> bool:
    """An HTML page, by its first bytes (not its Content-Type: moto's server labels its JSON
    answers text/html)."""
    return body.lstrip()[:15].lower().startswith((b"<!doctype html", b"<html"))


def has_request_id(protocol: str, headers: Mapping[str, str], body: bytes) -> bool:
    """AWS names every answer with a request id: a header (x-amzn-RequestId; S3's
    x-amz-request-id / x-amz-id-2) or, in the XML of the query and EC2 protocols, a RequestId
    (requestId) element: where botocore's parsers (botocore/parsers.py) read
    ResponseMetadata.RequestId from."""
    names = {name.lower() for name in headers}
    return bool(names & REQUEST_ID_HEADERS) or (
        protocol in XML_PROTOCOLS and REQUEST_ID_ELEMENT.search(body) is not None
    )


def not_aws_answer(
    protocol: str, status: int, headers: Mapping[str, str], body: object
) -> str | None:
    """What the answer is instead of an AWS response (``an HTML page (HTTP 404, "Not
    Found")``), or None when it may be AWS's. ``body``: the raw bytes (a stream for a
    streaming operation: only its headers are judged)."""
    raw = bytes(body) if isinstance(body, bytes | bytearray) else b""
    if raw.strip() and is_html(raw):
        title = page_title(raw)
        return f"an HTML page (HTTP {status}" + (f', "{title}")' if title else ")")
    if raw.strip() and protocol in XML_PROTOCOLS and raw.lstrip()[:1] != b"<":
        return f"not XML (HTTP {status})"
    if raw.strip() and protocol in JSON_PROTOCOLS:
        try:
            json.loads(raw)
        except ValueError:
            return f"not JSON (HTTP {status})"
    if status < 300 and not has_request_id(protocol, headers, raw):
        return f"an answer without AWS's request id (HTTP {status})"
    return None


@cache
def aws_host_suffixes() -> tuple[str, ...]:
    """The domains AWS's endpoints live under: each partition's dnsSuffix in botocore's
    endpoints data (amazonaws.com, amazonaws.com.cn, ...) and the dual-stack api.aws."""
    from botocore.loaders import create_loader

    partitions = create_loader().load_data("endpoints")["partitions"]
    suffixes = {partition["dnsSuffix"] for partition in partitions} | {"api.aws"}
    return tuple(sorted(f".{suffix}" for suffix in suffixes))


def is_aws_endpoint(url: str) -> bool:
    """The URL is one of AWS's own endpoints (not an AWS_ENDPOINT_URL's emulator or proxy)."""
    host = (urlsplit(url).hostname or "").lower()
    return host.endswith(aws_host_suffixes())
