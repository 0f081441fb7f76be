"""AWS WAF in front of the inference load balancer (issue 30 s1): the web ACL, its rules and
their capacity, the association, the encrypted logs, the API-key rule with secret keys, what the
plan engine refuses, every bad inference.waf / key input, and the audit's ELB.16 control."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from fnmatch import fnmatch

import boto3
import pytest
from conftest import ROOT, stack_names
from hypothesis import given, settings
from hypothesis import strategies as st
from moto import mock_aws
from pulumi.runtime.config import set_all_config

from gpu_cluster.components.aws_limits import violations
from gpu_cluster.components.names import StackIdentity, waf_log_group, web_acl_name
from gpu_cluster.components.naming import cluster_tags
from gpu_cluster.components.waf import BODY_SIZE_RULE, MANAGED_GROUPS, PRIORITIES
from gpu_cluster.components.waf_limits import (
    BYTE_MATCH_WCU,
    CUSTOM_KEY_WCU,
    HEADER_NAME,
    HEADER_NAME_MAX,
    LOGGING,
    MANAGED_RULE_GROUP_WCU,
    RATE_BASED_WCU,
    SECRET_SIG,
    WEB_ACL,
    WEB_ACL_INCLUDED_WCU,
    WEB_ACL_MAX_WCU,
    revealed,
    web_acl_wcu,
)
from gpu_cluster.infra import cli
from gpu_cluster.infra.aws.sweep import Sweeper
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.cost.firewall import firewall_rule_count
from gpu_cluster.infra.cost.model import estimate_serving
from gpu_cluster.infra.errors import ConfigError, render_problem
from gpu_cluster.infra.fixes import apply_fix
from gpu_cluster.infra.outcome import FINDINGS
from gpu_cluster.infra.plan import mocks as plan_mocks
from gpu_cluster.infra.plan.engine import SECRET, Plan, run_plan
from gpu_cluster.infra.plan.mocks import AwsRefusal, refusals
from gpu_cluster.infra.plan.render import preview_json, text_tree
from gpu_cluster.infra.plan.update_rules import hazards
from gpu_cluster.infra.prices.unit_prices import unit_prices
from gpu_cluster.infra.spec import SECRET_NOT_SHOWN
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation import ResolvedCluster
from gpu_cluster.infra.validation.service_firewall import (
    BASE_WCU,
    KEY_WCU,
    MAX_KEYS,
    suggested_header,
)

INFERENCE = load_stack_config("inference", ROOT)
SECRET_INFERENCE = ["gpu-cluster:inference"]  # set with --secret: the CLI marks the key secret
ASSOCIATION = "aws:wafv2/webAclAssociation:WebAclAssociation"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
KEYS = ("k3y-0ne-Zq8vYwXb7T2mN4pR6sD1fG", "k3y-tw0-Hj5kL9qW3eR7tY1uI8oP2a")


def config_with(**settings_by_path) -> dict[str, str]:
    """The inference stack file with inference.<path> = value (dotted paths)."""
    config = dict(INFERENCE)
    inference = json.loads(config["gpu-cluster:inference"])
    for path, value in settings_by_path.items():
        target = inference
        *parents, last = path.split(".")
        for parent in parents:
            target = target.setdefault(parent, {})
        target[last] = value
    config["gpu-cluster:inference"] = json.dumps(inference)
    return config


def planned(**settings_by_path) -> Plan:
    """The inference stack planned as `pulumi up` sees it (keys decrypted, marked secret)."""
    plan = run_plan("inference", config_with(**settings_by_path), secret_keys=SECRET_INFERENCE)
    assert plan.error is None, plan.error
    return plan


@pytest.fixture(scope="module")
def plan() -> Plan:
    return planned()


def only(plan: Plan, type_: str):
    (resource,) = plan.of_type(type_)
    return resource


def rules_by_name(plan: Plan) -> dict[str, dict]:
    return {rule["name"]: rule for rule in only(plan, WEB_ACL).inputs["rules"]}


# --- the web ACL in the plan ----------------------------------------------------------------


def test_the_web_acl_has_the_four_rule_kinds_in_priority_order(plan):
    acl = only(plan, WEB_ACL).inputs
    assert acl["scope"] == "REGIONAL" and acl["defaultAction"] == {"allow": {}}
    assert acl["name"] == "gpu-cluster-inference-waf"
    rules = acl["rules"]
    assert [r["name"] for r in rules] == [
        "ip-reputation",
        "rate-limit-per-ip",
        "common-rule-set",
        "known-bad-inputs",
    ]
    assert [r["priority"] for r in rules] == sorted(r["priority"] for r in rules)
    assert all(r["priority"] == PRIORITIES[r["name"]] for r in rules)
    for rule in rules:
        assert rule["visibilityConfig"] == {
            "cloudwatchMetricsEnabled": True,
            "metricName": rule["name"],
            "sampledRequestsEnabled": True,
        }
    assert acl["visibilityConfig"]["cloudwatchMetricsEnabled"] is True
    assert acl["visibilityConfig"]["sampledRequestsEnabled"] is True
    by_name = rules_by_name(plan)
    for name, group in MANAGED_GROUPS.items():
        statement = by_name[name]["statement"]["managedRuleGroupStatement"]
        assert (statement["vendorName"], statement["name"]) == ("AWS", group)
        assert by_name[name]["overrideAction"] == {"none": {}}  # the group's own actions
    assert by_name["rate-limit-per-ip"]["action"] == {"block": {}}


def test_the_core_rule_set_counts_its_body_size_rule_and_only_that(plan):
    """WAF sees only the first 8 KB of an ALB request's body; SizeRestrictions_BODY blocks any
    larger body, which long LLM prompts are."""
    statement = rules_by_name(plan)["common-rule-set"]["statement"]["managedRuleGroupStatement"]
    assert statement["ruleActionOverrides"] == [
        {"name": BODY_SIZE_RULE, "actionToUse": {"count": {}}}
    ]
    others = ("ip-reputation", "known-bad-inputs")
    assert all(
        "ruleActionOverrides"
        not in rules_by_name(plan)[n]["statement"]["managedRuleGroupStatement"]
        for n in others
    )


@pytest.mark.parametrize(
    ("limit", "window"), [(10, 60), (1500, 120), (2000, 300), (2_000_000_000, 600)]
)
def test_the_rate_rule_takes_its_limit_and_window_from_config(limit, window):
    plan = planned(**{"waf.rateLimit": limit, "waf.rateWindowSeconds": window})
    statement = rules_by_name(plan)["rate-limit-per-ip"]["statement"]["rateBasedStatement"]
    assert statement == {"aggregateKeyType": "IP", "limit": limit, "evaluationWindowSec": window}


def test_by_default_an_address_gets_2000_requests_per_5_minutes(plan):
    statement = rules_by_name(plan)["rate-limit-per-ip"]["statement"]["rateBasedStatement"]
    assert (statement["limit"], statement["evaluationWindowSec"]) == (2000, 300)
    assert plan.outputs["serving"]["firewall"] == {
        "enabled": True,
        "rateLimitPerIp": 2000,
        "rateWindowSeconds": 300,
    }
    assert "Firewall: AWS WAF - IP reputation, 2,000 requests per IP per 300 s" in text_tree(plan)


def test_the_web_acl_is_associated_with_the_load_balancer(plan):
    association = only(plan, ASSOCIATION)
    load_balancer = plan.named("inference-service-alb")
    acl = only(plan, WEB_ACL)
    assert association.inputs["resourceArn"] == plan.state(load_balancer)["arn"]
    assert association.inputs["webAclArn"] == plan.state(acl)["arn"]
    # linked, not just equal: Checkov's CKV2_AWS_28 and the ELB.16 control follow the link
    assert association.property_dependencies["resourceArn"] == (load_balancer.urn,)
    assert plan.state(acl)["arn"].startswith(
        "arn:aws:wafv2:us-east-1:123456789012:regional/webacl/gpu-cluster-inference-waf/"
    )


def test_the_logs_go_to_an_encrypted_aws_waf_logs_group_with_keys_redacted(plan):
    logging = only(plan, LOGGING).inputs
    group = next(r for r in plan.of_type(LOG_GROUP) if r.name == "inference-service-waf-logs")
    arn = plan.state(group)["arn"]
    assert logging["logDestinationConfigs"] == [arn]
    assert logging["resourceArn"] == plan.state(only(plan, WEB_ACL))["arn"]
    assert group.inputs["name"].startswith("aws-waf-logs-")
    key = plan.named("inference-security-key")
    assert group.inputs["kmsKeyId"] == plan.state(key)["arn"]
    assert group.inputs["retentionInDays"] == 365
    assert logging["redactedFields"] == [
        {"singleHeader": {"name": "authorization"}},
        {"singleHeader": {"name": "x-api-key"}},
    ]
    # CloudWatch Logs may use the key for this group: the key policy's encryption-context ARN
    statements = {s["Sid"]: s for s in json.loads(key.inputs["policy"])["Statement"]}
    logs = statements["AllowCloudWatchLogsForThisStack"]
    assert logs["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    patterns = logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    assert any(fnmatch(arn, pattern) for pattern in patterns)
    others = [p for p in patterns if "aws-waf-logs-" not in p]
    assert not any(fnmatch(arn, pattern) for pattern in others)  # the new grant is what covers it


@pytest.mark.parametrize("type_", [ASSOCIATION, LOGGING])
def test_what_is_deleted_by_the_resource_it_acts_on_is_replaced_delete_first(plan, type_):
    """DisassociateWebACL and DeleteLoggingConfiguration take only the load balancer's or the
    web ACL's ARN: an old association or logging configuration deleted after its replacement
    was created would remove the new one."""
    resource = only(plan, type_)
    assert resource.delete_before_replace
    create_first = replace(resource, delete_before_replace=False)
    (problem,) = hazards(create_first)
    assert "replace it delete-first" in problem.problem


def test_the_capacity_is_the_tables_and_within_the_limit_and_the_basic_price(plan):
    acl = only(plan, WEB_ACL)
    total, unknown = web_acl_wcu(acl.inputs["rules"])
    assert unknown == []
    assert total == sum(MANAGED_RULE_GROUP_WCU.values()) + RATE_BASED_WCU == BASE_WCU == 927
    assert plan.state(acl)["capacity"] == total
    assert total <= WEB_ACL_INCLUDED_WCU < WEB_ACL_MAX_WCU


# --- API keys: checked by the web ACL, never in a plan ---------------------------------------


@pytest.fixture
def web_acl_inputs(monkeypatch):
    """What the engine hands the mocks for each web ACL (secrets still wrapped)."""
    seen: list[dict] = []
    original = plan_mocks.PlanMocks.new_resource

    def recording(self, args):
        if args.typ == WEB_ACL:
            seen.append(dict(args.inputs))
        return original(self, args)

    monkeypatch.setattr(plan_mocks.PlanMocks, "new_resource", recording)
    return seen


@pytest.mark.parametrize("keys", [KEYS[:1], KEYS])
def test_the_api_key_rule_blocks_any_other_key_and_no_key_reaches_the_plan(keys, web_acl_inputs):
    plan = planned(**{"access.apiKeys": list(keys), "access.apiKeyHeader": "X-Api-Key"})
    acl = only(plan, WEB_ACL)
    assert acl.inputs["rules"] == SECRET  # the whole rules input is secret, as in the state
    assert plan.state(acl)["capacity"] == BASE_WCU + KEY_WCU * len(keys)
    documents = (
        json.dumps(preview_json(plan)),
        text_tree(plan),
        json.dumps(plan.states, default=str),
        json.dumps(plan.outputs, default=str),
    )
    for key in keys:
        assert not any(key in document for document in documents)
    (raw,) = web_acl_inputs
    assert raw["rules"][SECRET_SIG[0]] == SECRET_SIG[1]  # secret to the engine itself
    rules = {r["name"]: r for r in revealed(raw["rules"])}
    assert list(rules) == sorted(PRIORITIES, key=PRIORITIES.__getitem__)  # api-key third
    rule = rules["api-key"]
    assert rule["priority"] == PRIORITIES["api-key"]
    assert rule["action"] == {"block": {"customResponse": {"responseCode": 401}}}
    inner = rule["statement"]["notStatement"]["statement"]
    matches = inner["orStatement"]["statements"] if len(keys) > 1 else [inner]
    assert [revealed(m["byteMatchStatement"]["searchString"]) for m in matches] == list(keys)
    for match in matches:
        statement = match["byteMatchStatement"]
        assert statement["positionalConstraint"] == "EXACTLY"
        assert statement["fieldToMatch"] == {"singleHeader": {"name": "x-api-key"}}
        assert statement["textTransformations"] == [{"priority": 0, "type": "NONE"}]
    logging = only(plan, LOGGING).inputs
    assert {"singleHeader": {"name": "x-api-key"}} in logging["redactedFields"]


# --- what the plan engine refuses -------------------------------------------------------------


def managed(group: str) -> dict:
    return {"managedRuleGroupStatement": {"vendorName": "AWS", "name": group}}


def rule(statement: dict, name: str = "r") -> dict:
    metric = {"cloudwatchMetricsEnabled": True, "metricName": name, "sampledRequestsEnabled": True}
    return {"name": name, "priority": 0, "statement": statement, "visibilityConfig": metric}


def acl(*statements: dict, **inputs) -> dict:
    return {
        "name": "planted",
        "scope": "REGIONAL",
        "defaultAction": {"allow": {}},
        "visibilityConfig": {"metricName": "planted"},
        "rules": [rule(s, f"r{i}") for i, s in enumerate(statements)],
        **inputs,
    }


def secret(value):
    return {SECRET_SIG[0]: SECRET_SIG[1], "value": value}


def key_match(search, header: str = "x-api-key") -> dict:
    return {
        "byteMatchStatement": {
            "fieldToMatch": {"singleHeader": {"name": header}},
            "positionalConstraint": "EXACTLY",
            "searchString": search,
            "textTransformations": [{"priority": 0, "type": "NONE"}],
        }
    }


def rate(limit, window=300, keys: int = 0) -> dict:
    statement = {"aggregateKeyType": "IP", "limit": limit, "evaluationWindowSec": window}
    if keys:
        statement["customKeys"] = [{"ip": {}}] * keys
    return {"rateBasedStatement": statement}


PLANTED = [
    (acl(*[managed("AWSManagedRulesCommonRuleSet")] * 8), "rules is 5,600 WCUs"),
    (acl(managed("AWSManagedRulesBotControlRuleSet")), "no WCU figure for managed rule group"),
    (acl({"sqliMatchStatement": {}}), "no WCU figure for statement sqliMatchStatement"),
    (acl(rate(5)), "5 requests; AWS allows 10 to 2,000,000,000"),
    (acl(rate(2_000_000_001)), "2,000,000,001 requests"),
    (acl(rate(100, window=30)), "30 seconds; AWS allows 60, 120, 300 or 600"),
    (acl(key_match(secret("k" * 201))), "searchString is 201 bytes"),
    (acl(key_match("")), "an empty search string"),
    (acl(key_match("abc", header="X-Api-Key")), "singleHeader.name"),
    (acl(key_match("abc", header="h" * 41)), "singleHeader.name is 41 characters"),
    (acl(visibilityConfig={"metricName": "has space"}), "visibilityConfig.metricName"),
    (acl(name="has space"), "name"),
    (acl(name="n" * 129), "name is 129 characters"),
    (acl(description=" padded"), "description"),
]


@pytest.mark.parametrize(("inputs", "said"), PLANTED)
def test_a_web_acl_aws_would_refuse_is_refused_by_the_mocks(inputs, said):
    problems = refusals(WEB_ACL, "planted", inputs)
    assert problems, inputs
    text = "\n".join(f"{p.path}: {p.problem}" for p in problems)
    assert said in text
    assert all(p.path.startswith("planted.") and WEB_ACL in p.path for p in problems)
    assert "k" * 201 not in text  # a secret search string is measured, never shown


def test_the_plan_engine_refuses_an_over_limit_web_acl_a_program_creates(tmp_path):
    program = tmp_path / "__main__.py"
    program.write_text(
        "import pulumi_aws as aws\n"
        "group = {'managed_rule_group_statement': {'vendor_name': 'AWS',\n"
        "         'name': 'AWSManagedRulesCommonRuleSet'}}\n"
        "metric = lambda n: {'cloudwatch_metrics_enabled': True, 'metric_name': n,\n"
        "                    'sampled_requests_enabled': True}\n"
        "aws.wafv2.WebAcl('big', scope='REGIONAL', default_action={'allow': {}},\n"
        "    visibility_config=metric('big'),\n"
        "    rules=[{'name': f'crs{i}', 'priority': i, 'statement': group,\n"
        "            'override_action': {'none': {}}, 'visibility_config': metric(f'crs{i}')}\n"
        "           for i in range(8)])\n"
    )
    plan = run_plan("planted", {"aws:region": "us-east-1"}, program=program)
    assert isinstance(plan.error, AwsRefusal)
    (problem,) = plan.error.problems
    assert problem.path == f"big.rules ({WEB_ACL})"
    assert "5,600 WCUs; AWS allows at most 5,000" in problem.problem
    assert "AWS WAF quotas" in problem.problem


STATEMENTS = st.sampled_from(
    [(managed(group), wcu) for group, wcu in MANAGED_RULE_GROUP_WCU.items()]
    + [(rate(100, keys=k), RATE_BASED_WCU + CUSTOM_KEY_WCU * k) for k in range(3)]
    + [(key_match("abc"), BYTE_MATCH_WCU["EXACTLY"])]
    + [
        (
            {"notStatement": {"statement": {"orStatement": {"statements": [key_match("a")] * n}}}},
            BYTE_MATCH_WCU["EXACTLY"] * n,
        )
        for n in (2, 3)
    ]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(STATEMENTS, max_size=12))
def test_the_capacity_is_the_sum_of_the_table_and_refused_past_5000(chosen):
    inputs = acl(*(statement for statement, _ in chosen))
    expected = sum(wcu for _, wcu in chosen)
    assert web_acl_wcu(inputs["rules"]) == (expected, [])
    over = [v for v in violations(WEB_ACL, inputs) if v.unit == "WCUs"]
    assert bool(over) == (expected > WEB_ACL_MAX_WCU)


@pytest.mark.parametrize(
    ("destination", "refused"),
    [
        ("arn:aws:logs:us-east-1:123456789012:log-group:aws-waf-logs-gpu-cluster-x-waf", False),
        ("arn:aws:logs:us-east-1:123456789012:log-group:/gpu-cluster/x-waf", True),
        ("arn:aws:logs:us-east-1:123456789012:log-group:aws-waf-logs-x:*", True),
        ("arn:aws:s3:::aws-waf-logs-bucket", False),  # an S3 bucket: not a log group
    ],
)
def test_waf_logs_only_to_an_aws_waf_logs_group(destination, refused):
    found = refusals(LOGGING, "logging", {"logDestinationConfigs": [destination]})
    assert bool(found) == refused
    assert all("aws-waf-logs-" in p.problem for p in found)


# --- names -------------------------------------------------------------------------------------


def test_web_acl_names_differ_per_stack_and_fit_wafs_limits():
    mine = StackIdentity("gpu-cluster", "inference", "us-east-1", "inference")
    second = StackIdentity("gpu-cluster", "inference-b", "us-east-1", "inference")
    elsewhere = StackIdentity("gpu-cluster", "inference", "eu-west-1", "inference")
    assert web_acl_name(mine) != web_acl_name(second)  # same cluster name, another stack
    assert waf_log_group(mine) != waf_log_group(second)
    # regional scope: the same stack in another region may keep its name
    assert web_acl_name(mine) == web_acl_name(elsewhere)
    for identity in (mine, second, elsewhere):
        assert violations(WEB_ACL, {"name": web_acl_name(identity)}) == []
        assert waf_log_group(identity).startswith("aws-waf-logs-")


# --- bad inputs ----------------------------------------------------------------------------


def checked(config: dict[str, str]) -> list:
    """The problems of a config checked as the program checks it, keys set with --secret."""
    set_all_config(config, SECRET_INFERENCE)
    try:
        load_spec(config, "inference")
    except ConfigError as error:
        return error.problems
    finally:
        set_all_config({}, [])
    return []


def problems_of(config: dict[str, str]) -> list:
    problems = checked(config)
    assert problems, "the config was accepted"
    return problems


BAD_WAF = [
    ("waf.rateLimit", 5, "greater than or equal to 10", "at least 10", "waf.rateLimit 10"),
    (
        "waf.rateLimit",
        3_000_000_000,
        "less than or equal to 2000000000",
        "at most 2000000000",
        "waf.rateLimit 2000000000",
    ),
    ("waf.rateLimit", "lots", "", "whole number", "waf.rateLimit"),
    # the fix: the window nearest what was meant (30 s: 60; 5m: 300), not the one it reads like
    (
        "waf.rateWindowSeconds",
        30,
        "60, 120, 300 or 600",
        "60, 120, 300 or 600",
        "waf.rateWindowSeconds 60",
    ),
    (
        "waf.rateWindowSeconds",
        "5m",
        "60, 120, 300 or 600",
        "60, 120, 300 or 600",
        "waf.rateWindowSeconds 300",
    ),
    ("waf.rateWindowSeconds", "10 minutes", "60, 120, 300 or 600", "", "waf.rateWindowSeconds 600"),
    ("waf.enabled", "maybe", "true or false", "true or false", "waf.enabled true"),
    (
        "access.apiKeyHeader",
        "X API Key!",
        "WAF reads the key from one header",
        "1-40 of a-z, 0-9, - and _",
        "access.apiKeyHeader x-api-key",
    ),
    (
        "access.apiKeyHeader",
        "x-" + "long" * 10,
        "WAF reads the key from one header",
        "1-40 of a-z",
        "access.apiKeyHeader x-longlonglonglonglonglonglonglonglonglo",
    ),
]


@pytest.mark.parametrize(("path", "value", "what", "allowed", "fix"), BAD_WAF)
def test_a_bad_waf_setting_is_refused_with_its_path_allowed_values_and_fix(
    path, value, what, allowed, fix
):
    settings_by_path = {path: value}
    if path.startswith("access."):
        settings_by_path["access.apiKeys"] = [KEYS[0]]
    problems = problems_of(config_with(**settings_by_path))
    (problem,) = [p for p in problems if p.path == f"gpu-cluster:inference.{path}"]
    assert what in problem.problem and allowed in problem.allowed
    assert problem.received == value
    assert f"pulumi config set --path inference.{fix}" in problem.fix
    assert KEYS[0] not in render_problem(problem)
    followed = apply_fix(config_with(**settings_by_path), problem.fix)
    assert checked(followed) == []  # the fix, followed, is a stack that plans


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_the_suggested_header_is_always_one_waf_can_read(header):
    suggestion = suggested_header(header)
    assert re.fullmatch(HEADER_NAME, suggestion) and len(suggestion) <= HEADER_NAME_MAX
    if re.fullmatch(HEADER_NAME, header.lower()) and len(header) <= HEADER_NAME_MAX:
        assert suggestion == header.lower().strip("-") or not header.strip("-")


BAD_KEYS = [
    ("", "a key of 0 bytes"),
    ("k" * 201, "a key of 201 bytes: WAF matches a header against a string of 1 to 200 bytes"),
    (" padded-key", "HTTP drops its leading and trailing spaces"),
    ("tab\tinside", "a header value is visible ASCII"),
    ("clé-non-ascii", "a header value is visible ASCII"),
]


@pytest.mark.parametrize(("key", "what"), BAD_KEYS)
def test_a_key_waf_cannot_match_is_refused_without_showing_it(key, what):
    problems = problems_of(config_with(**{"access.apiKeys": [KEYS[0], key]}))
    (problem,) = [p for p in problems if p.path == "gpu-cluster:inference.access.apiKeys[1]"]
    assert what in problem.problem
    assert problem.received == SECRET_NOT_SHOWN
    assert "pulumi config set --secret --path inference.access.apiKeys[1]" in problem.fix
    if key:
        assert key not in render_problem(problem)


def test_more_keys_than_the_web_acl_holds_are_refused():
    assert MAX_KEYS == (WEB_ACL_MAX_WCU - BASE_WCU) // KEY_WCU
    keys = [f"key-{i:05d}" for i in range(MAX_KEYS + 1)]
    problems = problems_of(config_with(**{"access.apiKeys": keys}))
    (problem,) = [p for p in problems if p.path == "gpu-cluster:inference.access.apiKeys"]
    assert f"at most {MAX_KEYS} keys" in problem.allowed
    assert problem.received == f"{MAX_KEYS + 1} keys"
    assert not any(k in render_problem(p) for p in problems for k in keys[:3])


def test_a_key_stored_encrypted_is_not_measured_offline():
    """Offline the spec holds the ciphertext's stand-in, whose length is not the key's."""
    config = config_with(**{"access.apiKeys": [{"secure": "v1:" + "A" * 400}]})
    plan = run_plan("inference", config)
    assert plan.error is None, plan.error
    assert only(plan, WEB_ACL).inputs["rules"] == SECRET


# --- off: no web ACL, and the audit says so ------------------------------------------------------


def test_waf_off_creates_no_web_acl_and_no_waf_log_grant():
    plan = planned(**{"waf.enabled": False})
    kinds = (WEB_ACL, ASSOCIATION, LOGGING)
    assert [r.name for r in plan.resources if r.type in kinds] == []
    assert not any(r.name.endswith("waf-logs") for r in plan.of_type(LOG_GROUP))
    assert "aws-waf-logs-" not in plan.named("inference-security-key").inputs["policy"]
    assert plan.outputs["serving"]["firewall"] == {"enabled": False}
    assert "Firewall: none (inference.waf.enabled false)" in text_tree(plan)


def test_the_audit_fails_elb16_when_waf_is_off_and_passes_it_when_on(capsys):
    args = ["audit", "--stack", "inference", "--json"]
    assert cli.main([*args, "--set-path", "inference.waf.enabled=false"]) == FINDINGS
    controls = {c["id"]: c for c in json.loads(capsys.readouterr().out)["controls"]}
    elb16 = controls["ELB.16"]
    assert elb16["status"] == "fail"
    assert elb16["failures"] == [
        {
            "resource": "inference-service-alb",
            "problem": "an internet-facing Application Load Balancer with no AWS WAF web ACL",
        }
    ]
    assert "inference.waf.enabled true" in elb16["fix"]
    assert "CKV2_AWS_28" in elb16["title"]
    cli.main(args)
    controls = {c["id"]: c for c in json.loads(capsys.readouterr().out)["controls"]}
    assert controls["ELB.16"]["status"] == "pass"
    assert controls["ELB.16"]["checked"] == ["inference-service-alb"]


# --- cost ----------------------------------------------------------------------------------------


def serving_spec(config: dict[str, str]) -> ResolvedCluster:
    spec = load_spec(config, "inference")
    assert isinstance(spec, ResolvedCluster) and spec.inference is not None
    return spec


def waf_lines(config: dict[str, str]) -> list:
    spec = serving_spec(config)
    return [line for line in estimate_serving(spec).lines if line.item == "AWS WAF web ACL"]


def test_the_cost_has_the_web_acl_by_the_month_and_each_request_it_inspects():
    (line,) = waf_lines(INFERENCE)
    unit = unit_prices("us-east-1")
    monthly = unit["waf_web_acl_month"] + 4 * unit["waf_rule_month"]
    per_request = unit.serving_requests_per_second * 3600 / 1e6 * unit["waf_million_requests"]
    assert (unit["waf_web_acl_month"], unit["waf_rule_month"]) == (5.0, 1.0)
    assert unit["waf_million_requests"] == 0.6
    assert line.usd_per_hour == pytest.approx(monthly / unit.hours_per_month + per_request)
    assert line.always_on and "4 rules" in line.detail
    assert waf_lines(config_with(**{"waf.enabled": False})) == []


def test_the_cost_counts_the_rules_the_web_acl_has(plan):
    serving = serving_spec(INFERENCE).inference
    assert serving is not None
    assert firewall_rule_count(serving) == len(rules_by_name(plan)) == 4
    with_keys = replace(serving, access=replace(serving.access, api_keys=KEYS))
    assert firewall_rule_count(with_keys) == len(PRIORITIES) == 5


# --- teardown: a web ACL a failed destroy left bills until gpuc sweep deletes it -----------------


def web_acl_left(stack: str) -> str:
    """A web ACL (logging to its group) as `pulumi destroy` stopped half way leaves it."""
    names = stack_names(stack)
    tags = [{"Key": k, "Value": v} for k, v in cluster_tags(names).items()]
    wafv2 = boto3.client("wafv2", region_name="us-east-1")
    metric = {
        "SampledRequestsEnabled": True,
        "CloudWatchMetricsEnabled": True,
        "MetricName": web_acl_name(names),
    }
    acl = wafv2.create_web_acl(
        Name=web_acl_name(names),
        Scope="REGIONAL",
        DefaultAction={"Allow": {}},
        VisibilityConfig=metric,
        Tags=tags,
    )["Summary"]
    logs = boto3.client("logs", region_name="us-east-1")
    logs.create_log_group(logGroupName=waf_log_group(names))
    group = f"arn:aws:logs:us-east-1:123456789012:log-group:{waf_log_group(names)}"
    wafv2.put_logging_configuration(
        LoggingConfiguration={"ResourceArn": acl["ARN"], "LogDestinationConfigs": [group]}
    )
    return acl["ARN"]


@mock_aws
def test_gpuc_sweep_finds_prices_and_deletes_a_web_acl_left_behind(capsys):
    ours, theirs = web_acl_left("inference"), web_acl_left("inference-b")
    wafv2 = boto3.client("wafv2", region_name="us-east-1")
    sweeper = Sweeper(
        ec2=None, autoscaling=None, logs=None, region="us-east-1", stack="inference", wafv2=wafv2
    )
    (found,) = list(sweeper.web_acls())
    unit = unit_prices("us-east-1")
    assert (found.kind, found.resource_id) == ("web ACL", ours)
    assert found.usd_per_hour == pytest.approx(unit["waf_web_acl_month"] / unit.hours_per_month)
    assert cli.main(["sweep", "--stack", "inference", "--delete", "--yes"]) == 0
    capsys.readouterr()
    left = [acl["ARN"] for acl in wafv2.list_web_acls(Scope="REGIONAL")["WebACLs"]]
    assert left == [theirs]  # the other stack's, with the same cluster name, stays
