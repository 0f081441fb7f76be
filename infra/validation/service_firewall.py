"""role: inference - the AWS WAF web ACL in front of the load balancer (inference.waf), and what
the web ACL asks of the API keys it checks (inference.access.apiKeys, apiKeyHeader).

pydantic already holds waf.rateLimit to 10-2,000,000,000 and waf.rateWindowSeconds to 60, 120,
300 or 600 (infra/spec.py InferenceWafSpec, AWS's range: components/waf_limits.py). Here: the
header WAF reads the key from, each key as a string match can hold it, and no more keys than
the web ACL's capacity takes. A key's value is never shown in a problem; offline a key is its
ciphertext's stand-in (infra/spec.py SecretText), whose length is not the key's, and is not
measured."""

from __future__ import annotations

import re

from gpu_cluster.components.serving_config import ServiceFirewall
from gpu_cluster.components.waf_limits import (
    BYTE_MATCH_WCU,
    HEADER_NAME,
    HEADER_NAME_MAX,
    MANAGED_RULE_GROUP_WCU,
    RATE_BASED_WCU,
    SEARCH_STRING_MAX,
    WEB_ACL_INCLUDED_WCU,
    WEB_ACL_MAX_WCU,
)
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import SECRET_NOT_SHOWN, SECRET_STAND_IN, InferenceSpec
from gpu_cluster.infra.validation.common import key

ACCESS = "inference.access"
# The web ACL's rules without keys (every managed group of the table and the rate rule:
# components/waf.py; tests/test_service_firewall.py holds the two together), and each key's
# exact-match statement (WAF's figures).
BASE_WCU = sum(MANAGED_RULE_GROUP_WCU.values()) + RATE_BASED_WCU
KEY_WCU = BYTE_MATCH_WCU["EXACTLY"]
MAX_KEYS = (WEB_ACL_MAX_WCU - BASE_WCU) // KEY_WCU
INCLUDED_KEYS = (WEB_ACL_INCLUDED_WCU - BASE_WCU) // KEY_WCU  # within the basic price
# What a client can send in a header and WAF compares byte for byte: visible ASCII, spaces only
# inside (HTTP drops a value's leading and trailing whitespace, RFC 9110 5.5).
KEY_TEXT = re.compile(r"[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?")


def problem(path: str, received, what: str, allowed: str, fix: str) -> Problem:
    return Problem(path=key(path), received=received, problem=what, allowed=allowed, fix=fix)


def service_firewall(settings: InferenceSpec) -> ServiceFirewall:
    """inference.waf as the component takes it."""
    waf = settings.waf
    return ServiceFirewall(
        enabled=waf.enabled,
        rate_limit=waf.rate_limit,
        rate_window_seconds=waf.rate_window_seconds,
    )


def firewall_problems(settings: InferenceSpec) -> list[Problem]:
    """What the web ACL cannot do with inference.access's keys and header."""
    access = settings.access
    if access is None or not access.api_keys:
        return []
    return _header_problems(access.api_key_header) + _key_problems(list(access.api_keys))


def suggested_header(header: str) -> str:
    """The header name WAF can match closest to ``header`` (x-api-key when nothing is left)."""
    words = re.split(r"[^0-9a-z_-]+", header.lower())
    return "-".join(w for w in words if w)[:HEADER_NAME_MAX].strip("-") or "x-api-key"


def _header_problems(header: str) -> list[Problem]:
    path = f"{ACCESS}.apiKeyHeader"
    if len(header) <= HEADER_NAME_MAX and re.fullmatch(HEADER_NAME, header.lower()):
        return []
    return [
        problem(
            path,
            header,
            "WAF reads the key from one header, named with 1-40 letters, digits, - and _ "
            "(header names are case-insensitive; WAF keeps them in lower case)",
            f"1-{HEADER_NAME_MAX} of a-z, 0-9, - and _, e.g. x-api-key",
            f"pulumi config set --path {path} {suggested_header(header)}",
        )
    ]


def _key_problems(keys: list[str]) -> list[Problem]:
    found = []
    if len(keys) > MAX_KEYS:
        found.append(
            problem(
                f"{ACCESS}.apiKeys",
                f"{len(keys)} keys",
                f"each key is a string match of {KEY_WCU} capacity units; with the managed "
                f"rules ({BASE_WCU}) the web ACL holds at most {MAX_KEYS} keys within its "
                f"{WEB_ACL_MAX_WCU:,} units (over {INCLUDED_KEYS} keys costs more per request)",
                f"at most {MAX_KEYS} keys (two while rotating one)",
                f"pulumi config rm --path {ACCESS}.apiKeys[{len(keys) - 1}] (for each key past "
                f"{MAX_KEYS})",
            )
        )
    for index, value in enumerate(keys):
        if value == SECRET_STAND_IN:  # offline ciphertext: its length is not the key's
            continue
        path = f"{ACCESS}.apiKeys[{index}]"
        fix = f"pulumi config set --secret --path {path} <key>"
        size = len(value.encode())
        if not 1 <= size <= SEARCH_STRING_MAX:
            found.append(
                problem(
                    path,
                    SECRET_NOT_SHOWN,
                    f"a key of {size} bytes: WAF matches a header against a string of 1 to "
                    f"{SEARCH_STRING_MAX} bytes",
                    f"1-{SEARCH_STRING_MAX} bytes, e.g. 32 random bytes as 43 base64url "
                    "characters (openssl rand -base64 32 | tr '+/' '-_' | tr -d '=')",
                    fix,
                )
            )
        elif not KEY_TEXT.fullmatch(value):
            found.append(
                problem(
                    path,
                    SECRET_NOT_SHOWN,
                    "a key a client cannot send as it is: a header value is visible ASCII, and "
                    "HTTP drops its leading and trailing spaces, so this key would never match",
                    "visible ASCII characters (spaces only between them), e.g. base64url",
                    fix,
                )
            )
    return found
