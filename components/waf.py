"""The AWS WAF web ACL in front of the inference load balancer: its rules as pure functions of
the ServingConfig, and `service_firewall` creating the web ACL, its association with the load
balancer and its logging to an encrypted CloudWatch Logs group.

Rules, in the order WAF evaluates them (lowest priority first):

0. ``ip-reputation``: AWS's Amazon IP reputation list (addresses seen in attacks, bots,
   reconnaissance) blocks first, so they cost nothing further.
1. ``rate-limit-per-ip``: a rate-based rule, one address at most ``rate_limit`` requests per
   ``rate_window_seconds``; over it, the address is blocked until its rate falls back.
2. ``api-key`` (only with inference.access.apiKeys): blocks with 401 a request whose key header
   is not exactly one of the keys (no text transformation: the key is compared byte for byte).
   The keys are Pulumi secrets: the rules input is secret in the state and in every plan.
3. ``common-rule-set``: AWS's core rule set (OWASP-style inputs), with its SizeRestrictions_BODY
   rule counted, not blocked: WAF inspects only the first 8 KB of an ALB request's body and that
   rule blocks every larger body, which an LLM's JSON request (a long prompt, a chat history)
   often is. The rest of the set still inspects the first 8 KB.
4. ``known-bad-inputs``: AWS's known bad inputs (Log4j JNDI lookups, exploit paths, ...).

Every rule and the web ACL send CloudWatch metrics and keep sampled requests. The ACL's logs
go to an ``aws-waf-logs-`` log group encrypted with the stack's KMS key, with the API-key
header and ``authorization`` redacted, so no key reaches the logs. The capacity these rules use
is checked against the web ACL's limit by the plan engine (components/waf_limits.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.inference_args import InferenceArgs
from gpu_cluster.components.naming import child_name
from gpu_cluster.components.serving_config import ServiceFirewall

AUTHORIZATION_HEADER = "authorization"
BODY_SIZE_RULE = "SizeRestrictions_BODY"
LOG_RETENTION_DAYS = 365  # as the stack's other log groups (Security Hub CloudWatch.16)
UNAUTHORIZED = 401

PRIORITIES = {
    "ip-reputation": 0,
    "rate-limit-per-ip": 1,
    "api-key": 2,
    "common-rule-set": 3,
    "known-bad-inputs": 4,
}
MANAGED_GROUPS = {
    "ip-reputation": "AWSManagedRulesAmazonIpReputationList",
    "common-rule-set": "AWSManagedRulesCommonRuleSet",
    "known-bad-inputs": "AWSManagedRulesKnownBadInputsRuleSet",
}


def visibility(metric: str) -> dict[str, Any]:
    return {
        "cloudwatch_metrics_enabled": True,
        "metric_name": metric,
        "sampled_requests_enabled": True,
    }


def managed_rule(name: str, overrides: tuple[str, ...] = ()) -> dict[str, Any]:
    """An AWS managed rule group, its own actions kept (``none``), ``overrides`` counted."""
    statement: dict[str, Any] = {"vendor_name": "AWS", "name": MANAGED_GROUPS[name]}
    if overrides:
        statement["rule_action_overrides"] = [
            {"name": rule, "action_to_use": {"count": {}}} for rule in overrides
        ]
    return {
        "name": name,
        "priority": PRIORITIES[name],
        "override_action": {"none": {}},
        "statement": {"managed_rule_group_statement": statement},
        "visibility_config": visibility(name),
    }


def rate_rule(firewall: ServiceFirewall) -> dict[str, Any]:
    name = "rate-limit-per-ip"
    return {
        "name": name,
        "priority": PRIORITIES[name],
        "action": {"block": {}},
        "statement": {
            "rate_based_statement": {
                "aggregate_key_type": "IP",
                "limit": firewall.rate_limit,
                "evaluation_window_sec": firewall.rate_window_seconds,
            }
        },
        "visibility_config": visibility(name),
    }


def key_match(header: str, key: Any) -> dict[str, Any]:
    """The header is exactly ``key`` (a secret: never in a plan, the state or a log)."""
    return {
        "byte_match_statement": {
            "field_to_match": {"single_header": {"name": header}},
            "positional_constraint": "EXACTLY",
            "search_string": pulumi.Output.secret(key),
            "text_transformations": [{"priority": 0, "type": "NONE"}],
        }
    }


def api_key_rule(header: str, keys: tuple[Any, ...]) -> dict[str, Any]:
    """Block (401) unless the header is exactly one of ``keys``: NOT(match), or NOT(OR(...))
    for two or more (an OR statement takes at least two)."""
    matches = [key_match(header, key) for key in keys]
    inner = matches[0] if len(matches) == 1 else {"or_statement": {"statements": matches}}
    name = "api-key"
    return {
        "name": name,
        "priority": PRIORITIES[name],
        "action": {"block": {"custom_response": {"response_code": UNAUTHORIZED}}},
        "statement": {"not_statement": {"statement": inner}},
        "visibility_config": visibility(name),
    }


def firewall_rules(
    firewall: ServiceFirewall, api_keys: tuple[Any, ...] = (), api_key_header: str = "x-api-key"
) -> list[dict[str, Any]]:
    """The web ACL's rules, in priority order."""
    rules = [
        managed_rule("ip-reputation"),
        rate_rule(firewall),
        managed_rule("common-rule-set", (BODY_SIZE_RULE,)),
        managed_rule("known-bad-inputs"),
    ]
    if api_keys:
        rules.append(api_key_rule(api_key_header.lower(), api_keys))
    return sorted(rules, key=lambda rule: rule["priority"])


def redacted_headers(api_key_header: str) -> list[str]:
    """The headers no log may hold: the API key's and authorization (OIDC/Cognito tokens)."""
    return sorted({api_key_header.lower(), AUTHORIZATION_HEADER})


@dataclass
class FirewallArgs:
    firewall: ServiceFirewall
    web_acl_name: str  # components/names.py web_acl_name
    log_group_name: str  # components/names.py waf_log_group (aws-waf-logs-...)
    load_balancer_arn: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    api_keys: tuple[Any, ...] = ()
    api_key_header: str = "x-api-key"
    tags: dict[str, str] | None = None


def service_firewall(name: str, args: FirewallArgs, parent: pulumi.Resource) -> aws.wafv2.WebAcl:
    """The web ACL, associated with the load balancer, logging to an encrypted log group."""
    child = pulumi.ResourceOptions(parent=parent)
    tags = args.tags or {}
    web_acl = aws.wafv2.WebAcl(
        child_name(name, "waf"),
        name=args.web_acl_name,
        description="gpu-cluster inference: IP reputation, rate limit, core rules, bad inputs",
        scope="REGIONAL",
        default_action={"allow": {}},
        # plain dicts of the rule shape (snake_case keys, as the *ArgsDict types)
        rules=cast(
            "list[aws.wafv2.WebAclRuleArgsDict]",
            firewall_rules(args.firewall, args.api_keys, args.api_key_header),
        ),
        visibility_config=aws.wafv2.WebAclVisibilityConfigArgs(**visibility(args.web_acl_name)),
        tags=tags,
        # the keys are secrets in the rules' inputs; keep the rules read back secret too
        opts=pulumi.ResourceOptions(parent=parent, additional_secret_outputs=["rules"]),
    )
    # Both are deleted by the resource they act on (DisassociateWebACL(ResourceArn),
    # DeleteLoggingConfiguration(web ACL ARN)): replaced create-first, the old one's delete at
    # the end of the update would undo the new one. Replaced delete-first (update_rules.py).
    replace_first = pulumi.ResourceOptions(parent=parent, delete_before_replace=True)
    aws.wafv2.WebAclAssociation(
        child_name(name, "waf-association"),
        resource_arn=args.load_balancer_arn,
        web_acl_arn=web_acl.arn,
        opts=replace_first,
    )
    logs = aws.cloudwatch.LogGroup(
        child_name(name, "waf-logs"),
        name=args.log_group_name,
        kms_key_id=args.kms_key_arn,
        retention_in_days=LOG_RETENTION_DAYS,
        tags=tags,
        opts=child,
    )
    aws.wafv2.WebAclLoggingConfiguration(
        child_name(name, "waf-logging"),
        resource_arn=web_acl.arn,
        log_destination_configs=[logs.arn],
        redacted_fields=[
            {"single_header": {"name": header}} for header in redacted_headers(args.api_key_header)
        ],
        opts=replace_first,
    )
    return web_acl


def protect_load_balancer(
    name: str, args: InferenceArgs, load_balancer_arn: pulumi.Input[str], parent: pulumi.Resource
) -> aws.wafv2.WebAcl | None:
    """The service's web ACL (None with inference.waf.enabled false)."""
    s = args.serving
    if not s.firewall.enabled:
        return None
    firewall = FirewallArgs(
        firewall=s.firewall,
        web_acl_name=args.web_acl_name or f"{args.load_balancer_name}-waf",
        log_group_name=args.waf_log_group or f"aws-waf-logs-{args.load_balancer_name}",
        load_balancer_arn=load_balancer_arn,
        kms_key_arn=args.kms_key_arn,
        api_keys=s.access.api_keys,
        api_key_header=s.access.api_key_header,
        tags=args.tags,
    )
    return service_firewall(name, firewall, parent)
