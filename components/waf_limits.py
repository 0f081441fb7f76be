"""AWS WAF's limits on a web ACL, each with the document it comes from: the capacity units
(WCUs) every rule costs and the web ACL's maximum, the rate-based rule's range and windows,
the string match's length, the logging destination's name.

Part of the plan engine's limits table (components/aws_limits.py runs `findings` for every
resource): the mocks refuse a web ACL AWS would refuse, in every plan and every test. A rule
kind or managed rule group without a figure here is refused too, so a new one brings its
figure with it. Values are the engine's (camelCase inputs); a Pulumi secret's value is measured
but never shown."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

WEB_ACL = "aws:wafv2/webAcl:WebAcl"
LOGGING = "aws:wafv2/webAclLoggingConfiguration:WebAclLoggingConfiguration"

# WAF Developer Guide, "AWS WAF quotas" (fixed, per web ACL): at most 5,000 WCUs; "Web ACL
# capacity units (WCUs) in AWS WAF": the basic price covers 1,500, each 500 above it costs more
# per million requests (AWS What's New, 2023-04-11, "web ACL capacity units limits").
WEB_ACL_MAX_WCU = 5000
WEB_ACL_INCLUDED_WCU = 1500
CAPACITY_SOURCE = "WAF Developer Guide, 'AWS WAF quotas': at most 5,000 WCUs per web ACL"

# WAF Developer Guide, "AWS Managed Rules rule groups list" (VendorName AWS): Baseline rule
# groups - Core rule set (CRS) WCU 700, Known bad inputs WCU 200; IP reputation rule groups -
# Amazon IP reputation list WCU 25.
MANAGED_RULE_GROUP_WCU: Mapping[str, int] = {
    "AWSManagedRulesCommonRuleSet": 700,
    "AWSManagedRulesKnownBadInputsRuleSet": 200,
    "AWSManagedRulesAmazonIpReputationList": 25,
}
# "Using rate-based rule statements": 2 WCUs as a base cost, 30 for each custom aggregation key.
RATE_BASED_WCU, CUSTOM_KEY_WCU = 2, 30
# "String match rule statement": exactly / starts with / ends with 2, contains (word) 10; +10
# for All query parameters, double for JSON body, +10 per text transformation (NONE is "no
# text transformation": none applied, nothing added).
BYTE_MATCH_WCU: Mapping[str, int] = {
    "EXACTLY": 2,
    "STARTS_WITH": 2,
    "ENDS_WITH": 2,
    "CONTAINS": 10,
    "CONTAINS_WORD": 10,
}
TEXT_TRANSFORMATION_WCU = 10
# "Using logical rule statements": AND, OR and NOT cost what their nested statements cost.
LOGICAL = {"andStatement": "statements", "orStatement": "statements", "notStatement": "statement"}

# terraform-provider-aws internal/service/wafv2/schemas.go byteMatchStatementSchema:
# search_string StringLenBetween(1, 200) (the WAF API takes a blob; the provider refuses more).
SEARCH_STRING_MAX = 200
# schemas.go rateBasedStatementSchema: limit IntBetween(10, 2000000000), evaluation_window_sec
# IntInSlice(60, 120, 300, 600) (WAF API RateBasedStatement: Limit 10-2,000,000,000).
RATE_LIMIT_MIN, RATE_LIMIT_MAX = 10, 2_000_000_000
RATE_WINDOWS = (60, 120, 300, 600)
# schemas.go fieldToMatchBaseSchema single_header name: 1-40 of [0-9a-z_-] ("the value is
# returned in lower case by the API": an upper-case name would differ on every refresh).
HEADER_NAME_MAX, HEADER_NAME = 40, r"[0-9a-z_-]+"
# schemas.go visibilityConfigSchema metric_name: 1-128 of [0-9A-Za-z_-].
METRIC_NAME_MAX, METRIC_NAME = 128, r"[0-9A-Za-z_-]+"
# WAF API Rule.Name (EntityName): 1-128, ^[\w\-]+$.
RULE_NAME_MAX, RULE_NAME = 128, r"[\w-]+"
# WAF Developer Guide, "Sending web ACL traffic logs to an Amazon CloudWatch Logs log group":
# the log group's name must start with aws-waf-logs-; the ARN is the group's, without ":*".
LOG_GROUP_PREFIX = "aws-waf-logs-"
LOGGING_SOURCE = (
    "WAF Developer Guide, 'Sending web ACL traffic logs to an Amazon CloudWatch Logs log "
    "group': the group's name starts with aws-waf-logs-"
)
PROVIDER_SOURCE = "terraform-provider-aws internal/service/wafv2/schemas.go"

# pulumi sdk/python/lib/pulumi/runtime/rpc.py: a secret travels as {_special_sig_key:
# _special_secret_sig, "value": ...} through the engine and the mocks.
SECRET_SIG = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")


@dataclass(frozen=True, slots=True)
class Finding:
    """What AWS would refuse, in the shape of aws_limits.Violation (why: the message)."""

    input_name: str
    size: int
    maximum: int
    unit: str
    source: str
    why: str = ""


def revealed(value: Any) -> Any:
    """A secret's value, for measuring only (a Finding never quotes a value)."""
    if isinstance(value, Mapping) and value.get(SECRET_SIG[0]) == SECRET_SIG[1]:
        return revealed(value.get("value"))
    return value


def statement_wcu(statement: Mapping[str, Any]) -> tuple[int, list[str]]:
    """One statement's WCUs, and the kinds or groups this table has no figure for."""
    total, unknown = 0, []
    for kind, body in statement.items():
        body = revealed(body) or {}
        if kind == "managedRuleGroupStatement":
            group = str(body.get("name", ""))
            if group not in MANAGED_RULE_GROUP_WCU:
                unknown.append(f"managed rule group {group}")
            total += MANAGED_RULE_GROUP_WCU.get(group, 0)
            kind, body = "scopeDown", {"statement": body.get("scopeDownStatement") or {}}
        elif kind == "rateBasedStatement":
            total += RATE_BASED_WCU + CUSTOM_KEY_WCU * len(body.get("customKeys") or [])
            kind, body = "scopeDown", {"statement": body.get("scopeDownStatement") or {}}
        elif kind == "byteMatchStatement":
            cost, why = _byte_match_wcu(body)
            total += cost
            unknown += why
            continue
        elif kind not in LOGICAL:
            unknown.append(f"statement {kind}")
            continue
        nested = body.get(LOGICAL.get(kind, "statement"))
        for inner in nested if isinstance(nested, list) else [nested]:
            cost, why = statement_wcu(revealed(inner) or {})
            total += cost
            unknown += why
    return total, unknown


def _byte_match_wcu(body: Mapping[str, Any]) -> tuple[int, list[str]]:
    constraint = str(body.get("positionalConstraint", ""))
    if constraint not in BYTE_MATCH_WCU:
        return 0, [f"byte match {constraint or '(no positionalConstraint)'}"]
    field = body.get("fieldToMatch") or {}
    cost = BYTE_MATCH_WCU[constraint] * (2 if "jsonBody" in field else 1)
    cost += 10 if "allQueryArguments" in field else 0
    steps = [t for t in body.get("textTransformations") or [] if t.get("type") != "NONE"]
    return cost + TEXT_TRANSFORMATION_WCU * len(steps), []


def web_acl_wcu(rules: Sequence[Mapping[str, Any]]) -> tuple[int, list[str]]:
    """A web ACL's WCUs: the sum over its rules' statements."""
    total, unknown = 0, []
    for rule in rules:
        cost, why = statement_wcu(revealed(rule.get("statement")) or {})
        total += cost
        unknown += why
    return total, unknown


def _statements(statement: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every (kind, body) in a statement tree, nested ones included."""
    for kind, body in statement.items():
        body = revealed(body) or {}
        yield kind, body
        for key in ("statement", "statements", "scopeDownStatement"):
            nested = body.get(key)
            for inner in nested if isinstance(nested, list) else [nested] if nested else []:
                yield from _statements(revealed(inner) or {})


def _text(name: str, value: Any, maximum: int, pattern: str, source: str) -> list[Finding]:
    text = revealed(value)
    if not isinstance(text, str):
        return []
    size = len(text)
    if not 1 <= size <= maximum:
        return [Finding(name, size, maximum, "characters", source)]
    if not re.fullmatch(pattern, text):
        return [
            Finding(
                name,
                size,
                maximum,
                "characters",
                source,
                f"{text!r} has characters AWS refuses; allowed: {pattern}",
            )
        ]
    return []


def web_acl_findings(inputs: Mapping[str, Any]) -> list[Finding]:
    """What WAF (or the provider) would refuse in a web ACL's inputs."""
    rules = [revealed(r) or {} for r in revealed(inputs.get("rules")) or []]
    found = []
    total, unknown = web_acl_wcu(rules)
    if unknown:
        why = (
            f"no WCU figure for {', '.join(sorted(set(unknown)))}: add AWS's figure to "
            "components/waf_limits.py"
        )
        found.append(Finding("rules", total, WEB_ACL_MAX_WCU, "WCUs", CAPACITY_SOURCE, why))
    if total > WEB_ACL_MAX_WCU:
        found.append(Finding("rules", total, WEB_ACL_MAX_WCU, "WCUs", CAPACITY_SOURCE))
    visibility = revealed(inputs.get("visibilityConfig")) or {}
    found += _text(
        "visibilityConfig.metricName",
        visibility.get("metricName"),
        METRIC_NAME_MAX,
        METRIC_NAME,
        PROVIDER_SOURCE,
    )
    for index, rule in enumerate(rules):
        where = f"rules[{index}]"
        found += _text(
            f"{where}.name",
            rule.get("name"),
            RULE_NAME_MAX,
            RULE_NAME,
            "WAF API Reference, Rule: Name, 1-128 of ^[\\w\\-]+$",
        )
        metric = (revealed(rule.get("visibilityConfig")) or {}).get("metricName")
        found += _text(
            f"{where}.visibilityConfig.metricName",
            metric,
            METRIC_NAME_MAX,
            METRIC_NAME,
            PROVIDER_SOURCE,
        )
        for kind, body in _statements(revealed(rule.get("statement")) or {}):
            found += _statement_findings(where, kind, body)
    return found


def _statement_findings(where: str, kind: str, body: Mapping[str, Any]) -> list[Finding]:
    found = []
    if kind == "rateBasedStatement":
        limit, window = revealed(body.get("limit")), revealed(body.get("evaluationWindowSec"))
        if isinstance(limit, int | float) and not RATE_LIMIT_MIN <= limit <= RATE_LIMIT_MAX:
            found.append(
                Finding(
                    f"{where} rate limit",
                    int(limit),
                    RATE_LIMIT_MAX,
                    "requests",
                    f"{PROVIDER_SOURCE}: limit 10-2,000,000,000",
                    f"{int(limit):,} requests; AWS allows 10 to 2,000,000,000",
                )
            )
        if isinstance(window, int | float) and window not in RATE_WINDOWS:
            found.append(
                Finding(
                    f"{where} evaluationWindowSec",
                    int(window),
                    600,
                    "seconds",
                    f"{PROVIDER_SOURCE}: evaluation_window_sec 60, 120, 300 or 600",
                    f"{int(window)} seconds; AWS allows 60, 120, 300 or 600",
                )
            )
    if kind == "byteMatchStatement":
        search = revealed(body.get("searchString"))
        if isinstance(search, str) and not 1 <= len(search.encode()) <= SEARCH_STRING_MAX:
            # a secret's size only: the value is never shown
            found.append(
                Finding(
                    f"{where} searchString",
                    len(search.encode()),
                    SEARCH_STRING_MAX,
                    "bytes",
                    f"{PROVIDER_SOURCE}: search_string 1-200 characters",
                    "" if search else "an empty search string",
                )
            )
    header = (revealed(body.get("fieldToMatch")) or {}).get("singleHeader") or {}
    found += _text(
        f"{where} singleHeader.name",
        header.get("name"),
        HEADER_NAME_MAX,
        HEADER_NAME,
        f"{PROVIDER_SOURCE}: single_header name, 1-40 of [0-9a-z_-]",
    )
    return found


def logging_findings(inputs: Mapping[str, Any]) -> list[Finding]:
    """A logging configuration's destinations: CloudWatch Logs groups named aws-waf-logs-*."""
    found = []
    for index, arn in enumerate(revealed(inputs.get("logDestinationConfigs")) or []):
        arn = revealed(arn)
        if not isinstance(arn, str) or ":logs:" not in arn:
            continue
        group = arn.split(":log-group:", 1)[-1]
        if not group.startswith(LOG_GROUP_PREFIX) or group.endswith(":*"):
            why = f"log group {group!r} does not start with {LOG_GROUP_PREFIX} (or ends with :*)"
            found.append(
                Finding(
                    f"logDestinationConfigs[{index}]",
                    len(group),
                    512,
                    "characters",
                    LOGGING_SOURCE,
                    why,
                )
            )
    for index, field in enumerate(revealed(inputs.get("redactedFields")) or []):
        header = (revealed(field) or {}).get("singleHeader") or {}
        found += _text(
            f"redactedFields[{index}].singleHeader.name",
            header.get("name"),
            HEADER_NAME_MAX,
            HEADER_NAME,
            PROVIDER_SOURCE,
        )
    return found


def findings(resource_type: str, inputs: Mapping[str, Any]) -> list[Finding]:
    """Every WAF limit ``inputs`` break (nothing for other resource types)."""
    if resource_type == WEB_ACL:
        return web_acl_findings(inputs)
    if resource_type == LOGGING:
        return logging_findings(inputs)
    return []
