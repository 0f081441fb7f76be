"""No internals in messages (issue 29): no Python reprs (objects, dicts, None, True, ''), no raw
HTML pages, no empty parentheses, no placeholder paths, no tracebacks - checked over every
message the project builds while its malformed-config corpora run (tests/test_malformed_configs.py
and tests/test_say_what_is_wrong.py, recorded by tests/message_recorder.py) and over every AWS
failure through the one wrapper (infra/aws/__init__.py): each error code botocore's models give
the services gpuc calls, botocore's own exceptions, and real HTTP answers that are not AWS's."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import ExitStack
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    NoCredentialsError,
    NoRegionError,
    ParamValidationError,
    ReadTimeoutError,
)
from botocore.parsers import ResponseParserError
from conftest import ROOT
from foreign_answers import answering_server

from gpu_cluster.infra.aws import AwsError, call, client, translated
from gpu_cluster.infra.cli import SWEPT_SERVICES
from gpu_cluster.infra.errors import shown

# What a message must never show, each with what it is.
INTERNALS: dict[str, re.Pattern[str]] = {
    "a Python object's repr": re.compile(r"<[\w.]+ object at 0x|<(function|class|module|bound) "),
    "a Python dict's repr": re.compile(r"\{'[^']*': "),
    "Python's None": re.compile(r"(?<!')\bNone\b(?!')"),  # 'None': the string typed
    "Python's True/False": re.compile(r"(?<!')\b(True|False)\b(?!')"),
    "empty quotes": re.compile(r"''"),
    "empty parentheses": re.compile(r"\(\s*\)"),
    "an HTML page": re.compile(r"<(!doctype|html|head|body|title|h1|p)\b", re.IGNORECASE),
    # a file named by a placeholder (stacks/Pulumi.<stack>.yaml); `<field> <value>` in a command
    # and `arn:aws:kms:<region>:...` in a format are for the user to fill, not paths
    "a placeholder path": re.compile(r"/path/to\b|<[\w -]+>[\w.-]*\.(ya?ml|json|py|csv|txt)\b"),
    "a traceback": re.compile(r"Traceback \(most recent call last\)|File \"[^\"]+\", line \d+"),
}


def internals(text: str, typed: Iterable[str] = ()) -> list[str]:
    """What ``text`` shows that it should not (empty when it reads as a message). ``typed``:
    what the user wrote: where the message quotes it (a tag key `Aws:None`), it is theirs."""
    quoted = [  # as typed, or as a message shows it (escaped when it holds a quote: shown())
        (m.start(), m.end())
        for value in typed
        if value
        for form in {value, shown(value)}
        for m in re.finditer(re.escape(form), text)
    ]

    def theirs(match: re.Match[str]) -> bool:
        return any(start <= match.start() and match.end() <= end for start, end in quoted)

    return [
        what
        for what, pattern in INTERNALS.items()
        if any(not theirs(match) for match in pattern.finditer(text))
    ]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("received: <gpu_cluster.infra.spec.Spot object at 0x7f3a>", ["a Python object's repr"]),
        ("received: {'create': False}", ["a Python dict's repr", "Python's True/False"]),
        ("received: None", ["Python's None"]),
        ("received: ''", ["empty quotes"]),
        ("ec2:RunInstances failed: Throttling ()", ["empty parentheses"]),
        ("failed: 404: <html><body>Not Found</body></html>", ["an HTML page"]),
        ("or in stacks/Pulumi.<stack>.yaml: nodes: 4", ["a placeholder path"]),
        ("write it to /path/to/job.yaml", ["a placeholder path"]),
        ("received: {create: false}", []),
        ("received: (empty)", []),
        ("received: null", []),
        ("fix: pulumi config set aws:region <region>", []),  # a value to choose, not a path
        ("allowed:  arn:aws:kms:<region>:<account>:key/<key-id>", []),  # a format
        ("received: 'None'", []),  # the string typed
        ("received: {} ()", ["empty parentheses"]),
        ("received: 'True'", []),  # the string the user typed
        ('an HTML page (HTTP 404, "Not Found")', []),
    ],
)
def test_the_check_finds_each_kind_of_internal(text, found):
    assert internals(text) == found


def test_what_the_user_typed_may_be_quoted_but_nothing_else():
    assert internals("- gpu-cluster:tags.Aws:None: not a valid AWS tag", ["Aws:None"]) == []
    typed = "it's (a) ''"  # shown JSON-escaped, as a value holding a quote is
    assert internals(f"received: {shown(typed)}", [typed]) == []
    assert internals(f"received: {shown(typed)} ()", [typed]) == ["empty parentheses"]
    assert internals("tags.Aws:None in zone None", ["Aws:None"]) == ["Python's None"]


# --- every message the malformed-config corpora make ------------------------------------------

CORPORA = ("tests/test_malformed_configs.py", "tests/test_say_what_is_wrong.py")
PYTEST_ARGS = ("-p", "no:cacheprovider", "-k", "not cli", *CORPORA)  # cli: their subprocesses


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, str]]:
    """The corpora run under tests/message_recorder.py: every message they made."""
    record = tmp_path_factory.mktemp("messages") / "messages.jsonl"
    env = {
        **os.environ,
        "GPUC_MESSAGE_RECORD": str(record),
        "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "message_recorder", "-n", "0", "-q", *PYTEST_ARGS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert record.is_file(), done.stdout[-2000:] + done.stderr[-2000:]
    return [json.loads(line) for line in record.read_text().splitlines()]


@pytest.mark.slow  # the corpora run in a pytest of their own (~40 s)
def test_every_message_of_the_config_corpora_is_free_of_internals(recorded):
    messages = {(e["kind"], e["text"]): e["typed"] for e in recorded}
    kinds = {kind for kind, _ in messages}
    assert {"problem", "allowed", "fix", "ConfigError"} <= kinds
    assert len(messages) > 1000, len(messages)  # the corpora ran: ~1,400 distinct messages
    found = sorted(
        f"[{kind}] {line.strip()}: {internals(line, typed)}"
        for (kind, text), typed in messages.items()
        for line in text.splitlines()
        if internals(line, typed)
    )
    assert found == []


# --- every AWS failure through the one wrapper ------------------------------------------------

CALLED = (*SWEPT_SERVICES, "ssm", "s3", "service-quotas", "pricing", "ecr")
AWS_SAYS = (
    "The request was refused.",
    "",
    None,
    "<html><body><h1>403 Forbidden</h1></body></html>",
)
# EC2 models no error shapes: the codes its API reference lists that gpuc's calls meet
EC2_CODES = (
    "UnauthorizedOperation",
    "InsufficientInstanceCapacity",
    "InvalidParameterValue",
    "RequestLimitExceeded",
    "VcpuLimitExceeded",
    "InvalidSubnetID.NotFound",
    "InvalidCapacityReservationId.NotFound",
    "DependencyViolation",
    "DryRunOperation",
    "AuthFailure",
    "Blocked",
    "OptInRequired",
)


def modeled_codes() -> list[tuple[str, str]]:
    """(service, error code) of every error shape in the models of the services gpuc calls,
    plus EC2's documented codes and the ones every service may answer."""
    session = botocore.session.get_session()
    codes = {("ec2", code) for code in EC2_CODES}
    for service in CALLED:
        model = session.get_service_model(service)
        shapes: list[Any] = list(model.error_shapes)  # type: ignore[arg-type] - a cached list
        for shape in shapes:
            codes.add((service, shape.metadata.get("error", {}).get("code", shape.name)))
        for common in ("AccessDenied", "ExpiredToken", "Throttling", "InternalFailure", "404"):
            codes.add((service, common))
    return sorted(codes)


def test_every_client_error_reads_as_a_message():
    checked = 0
    for service, code in modeled_codes():
        for says in AWS_SAYS:
            error: dict[str, Any] = {"Code": code}
            if says is not None:
                error["Message"] = says
            response: Any = {"Error": error, "ResponseMetadata": {"HTTPStatusCode": 400}}
            with pytest.raises(AwsError) as raised, translated(service, "DescribeThings"):
                raise ClientError(response, "DescribeThings")
            text = str(raised.value)
            assert internals(text) == [], (service, code, says, text)
            assert text.startswith(f"{service}:") or text.startswith("elasticloadbalancing:")
            checked += 1
    assert checked > 500, checked


def test_an_html_message_from_aws_is_never_pasted():
    response: Any = {"Error": {"Code": "403", "Message": AWS_SAYS[-1]}}
    with pytest.raises(AwsError) as raised, translated("logs", "DescribeLogGroups"):
        raise ClientError(response, "DescribeLogGroups")
    assert internals(str(raised.value)) == [], str(raised.value)


BOTOCORE_FAILURES = [
    NoCredentialsError(),
    NoRegionError(),
    EndpointConnectionError(endpoint_url="https://ec2.us-east-9.amazonaws.com/"),
    ConnectTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com/"),
    ReadTimeoutError(endpoint_url="https://ec2.us-east-1.amazonaws.com/"),
    ConnectionClosedError(endpoint_url="https://ec2.us-east-1.amazonaws.com/"),
    ParamValidationError(report="Invalid length for parameter Name, value: 0, valid min: 1"),
    ResponseParserError("Unable to parse response (syntax error), invalid XML received: b'<ht'"),
]


@pytest.mark.parametrize("failure", BOTOCORE_FAILURES, ids=lambda f: type(f).__name__)
def test_every_botocore_failure_reads_as_a_message(failure):
    with pytest.raises(AwsError) as raised, translated("ec2", "DescribeInstances"):
        raise failure
    assert internals(str(raised.value)) == [], str(raised.value)
    assert str(raised.value).startswith("ec2:DescribeInstances")


ANSWERS = {
    "proxy page": (200, "text/html", b"<!DOCTYPE html><html><head><title>Blocked</title></head>"),
    "404 page": (404, "text/html", b"<html><body><h1>404 Not Found</h1><p>nginx</p></body></html>"),
    "500 page": (500, "text/html", b"<!doctype html><title>500 Internal Server Error</title>"),
    "plain 404": (404, "text/plain", b"Not Found"),
    "plain 502": (502, "text/plain", b"Bad Gateway"),
    "empty JSON": (200, "application/json", b"{}"),
    "foreign XML": (200, "text/xml", b"<?xml version='1.0'?><status>ok</status>"),
}
# one call per protocol botocore speaks for gpuc: ec2, query, json, rest-json, rest-xml
CALLS = [
    ("ec2", "DescribeInstances", {}),
    ("iam", "ListRoles", {}),
    ("logs", "DescribeLogGroups", {}),
    ("scheduler", "ListSchedules", {}),
    ("s3", "ListBuckets", {}),
]


@pytest.fixture(scope="module")
def answering() -> Iterator[dict[str, str]]:
    """One loopback server per answer, each answering every request alike."""
    with ExitStack() as stack:
        yield {
            name: stack.enter_context(answering_server(*answer)) for name, answer in ANSWERS.items()
        }


@pytest.mark.parametrize("answer", sorted(ANSWERS))
@pytest.mark.parametrize(("service", "operation", "kwargs"), CALLS, ids=[c[0] for c in CALLS])
def test_an_answer_that_is_not_aws_is_an_error_that_reads_as_a_message(
    answering, answer, service, operation, kwargs, monkeypatch
):
    monkeypatch.setenv("AWS_ENDPOINT_URL", answering[answer])
    api = client(service, "us-east-1", boto3.Session())
    with pytest.raises(AwsError) as raised:
        call(api, service, operation, **kwargs)
    text = str(raised.value)
    assert internals(text) == [], text
    assert len(text) < 400, text  # a line or two, not a page
