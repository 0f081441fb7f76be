"""Is an HTTP answer AWS's? A proxy's sign-in page, a web server's 404 behind a wrong
AWS_ENDPOINT_URL or an emulator's error page is not: botocore parses an HTML page on a JSON
service as ``{"message": ...}`` and a well-formed one on an XML service as ``{}``, so a listing
would read as "nothing there". Pure functions: the wrapper (infra/aws/__init__.py) calls them on
every raw response before botocore parses it."""

from __future__ import annotations

import html
import json
import re
from functools import cache
from urllib.parse import urlsplit

XML_PROTOCOLS = ("query", "ec2", "rest-xml")
# awsJson1.0/1.1: every body AWS sends is a JSON document (botocore's BaseJSONParser reads
# anything else as {"message": body} without an error)
JSON_PROTOCOLS = ("json",)
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


def not_aws_answer(protocol: str, status: int, body: object) -> str | None:
    """What the answer is instead of an AWS response (``an HTML page (HTTP 404, "Not
    Found")``), or None when it may be AWS's. ``body``: the raw bytes (a stream for a
    streaming operation, never judged)."""
    if not isinstance(body, bytes | bytearray) or not body.strip():
        return None
    body = bytes(body)
    if is_html(body):
        title = page_title(body)
        return f"an HTML page (HTTP {status}" + (f', "{title}")' if title else ")")
    start = body.lstrip()[:1]
    if protocol in XML_PROTOCOLS and start != b"<":
        return f"not XML (HTTP {status})"
    if protocol in JSON_PROTOCOLS:
        try:
            json.loads(body)
        except ValueError:
            return f"not JSON (HTTP {status})"
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
