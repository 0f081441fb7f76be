"""Checkov judges the inference stage's plan (tests/checkov_plan.py turns it into the Terraform
plan JSON Checkov reads): the public load balancer is behind a WAF web ACL (CKV2_AWS_28, a graph
check: it fails without the web ACL, so the plan's references really connect), and every other
check Checkov has passes, except the findings recorded below with their reasons."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi_aws
import pytest
from checkov_plan import (
    TERRAFORM_TYPES,
    addresses,
    attribute,
    is_mapped,
    require_checkov,
    run_checkov,
    snake,
    terraform_plan,
)
from conftest import ROOT, STACKS, plan_config, plan_stack

from gpu_cluster.infra.overrides import apply_overrides
from gpu_cluster.infra.plan.engine import Plan
from gpu_cluster.infra.stack_files import load_stack_config

ALB = "aws_lb.inference_service_alb"

NO_WAF = "inference.waf.enabled=false"

# Checks the inference plan must pass, and the Terraform types each must have judged (so a
# check cannot pass by finding nothing to look at after a conversion change).
MUST_PASS: dict[str, str] = {
    "CKV2_AWS_28": "aws_lb",  # public ALB protected by WAF
    "CKV2_AWS_31": "aws_wafv2_web_acl",  # WAF logging configuration
    "CKV_AWS_192": "aws_wafv2_web_acl",  # AWSManagedRulesKnownBadInputsRuleSet (Log4j)
    "CKV2_AWS_20": "aws_lb",  # HTTP redirected to HTTPS
    "CKV_AWS_2": "aws_lb_listener",  # listener protocol HTTPS (or a redirect)
    "CKV_AWS_103": "aws_lb_listener",  # TLS 1.2 or newer
    "CKV_AWS_91": "aws_lb",  # access logs
    "CKV_AWS_150": "aws_lb",  # deletion protection
    "CKV_AWS_131": "aws_lb",  # drop invalid header fields
    "CKV_AWS_158": "aws_cloudwatch_log_group",  # log group encrypted with KMS
    "CKV_AWS_338": "aws_cloudwatch_log_group",  # log retention of a year or more
    "CKV_AWS_7": "aws_kms_key",  # key rotation
    "CKV_AWS_79": "aws_launch_template",  # IMDSv2
    "CKV_AWS_260": "aws_security_group",  # no port 80 open to the world in a group's rules
}

# What Checkov finds on the inference plan that the project decides otherwise, each with why.
FINDINGS: dict[tuple[str, str], str] = {
    ("CKV2_AWS_76", ALB): (
        "the check wants AWSManagedRulesAnonymousIpList as well as KnownBadInputs (Log4j, which "
        "CKV_AWS_192 confirms): the web ACL does not block anonymous IPs (VPNs, Tor, hosting "
        "providers), which would refuse clients calling from cloud hosts"
    ),
    ("CKV_AWS_145", "aws_s3_bucket.inference_service_alb_logs"): (
        "ALB access logs can only be written to a bucket encrypted with SSE-S3, not SSE-KMS "
        "(Elastic Load Balancing guide, 'Access logs: bucket requirements')"
    ),
    ("CKV_AWS_18", "aws_s3_bucket.inference_service_alb_logs"): (
        "the access-log bucket's own access logs would need another log bucket"
    ),
    ("CKV_AWS_144", "aws_s3_bucket.inference_service_alb_logs"): (
        "access logs are not replicated to another region"
    ),
    ("CKV2_AWS_62", "aws_s3_bucket.inference_service_alb_logs"): (
        "nothing consumes events from the access-log bucket"
    ),
}


def checkov_run(test: Callable[..., None]) -> Callable[..., None]:
    """A test of the module's plans and its Checkov run: slow, and in one xdist group so that a
    single worker plans and runs Checkov once for all of them."""
    return pytest.mark.xdist_group("checkov")(pytest.mark.slow(test))


def inference(*overrides: str) -> Plan:
    config = apply_overrides(
        load_stack_config("inference", ROOT), [("--set-path", o) for o in overrides]
    )
    plan = plan_config(config, "inference")
    assert plan.error is None, plan.error
    return plan


def without(document: dict[str, Any], tf_type: str) -> dict[str, Any]:
    """The plan document without its resources of `tf_type` (planned, configured, changed)."""
    kept = copy.deepcopy(document)
    for part in (kept["planned_values"], kept["configuration"]):
        root = part["root_module"]
        root["resources"] = [r for r in root["resources"] if r["type"] != tf_type]
    kept["resource_changes"] = [r for r in kept["resource_changes"] if r["type"] != tf_type]
    return kept


@pytest.fixture(scope="module")
def plans() -> dict[str, dict[str, Any]]:
    planned = terraform_plan(inference())
    return {
        "inference": planned,
        "no-waf": terraform_plan(inference(NO_WAF)),
        # the same plan without the one resource that ties the web ACL to the load balancer
        "unassociated": without(planned, "aws_wafv2_web_acl_association"),
    }


@pytest.fixture(scope="module")
def results(plans, tmp_path_factory) -> dict[str, dict[str, dict[str, str]]]:
    return run_checkov(require_checkov(ROOT), plans, tmp_path_factory.mktemp("checkov"))


def resources(document: dict[str, Any]) -> list[dict[str, Any]]:
    return document["planned_values"]["root_module"]["resources"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_planned_type_is_mapped_or_deliberately_not(stack: str) -> None:
    plan = plan_stack(stack)
    assert plan.error is None, plan.error
    assert [r.type for r in plan.resources if not is_mapped(r.type)] == []


@pytest.mark.parametrize("token", sorted(TERRAFORM_TYPES))
def test_every_mapped_token_is_a_pulumi_aws_resource(token: str) -> None:
    """The token is the one pulumi-aws registers (pulumi_aws/<module>/<name>.py)."""
    module, name = re.fullmatch(r"aws:(\w+)/(\w+):\w+", token).groups()  # pyright: ignore[reportOptionalMemberAccess]
    source = Path(pulumi_aws.__file__).parent / module / f"{snake(name)}.py"
    assert f"'{token}'" in source.read_text() or f'"{token}"' in source.read_text()


@checkov_run
def test_the_web_acl_and_its_association_reference_the_load_balancer(plans) -> None:
    """References come from the engine's property dependencies: the association's resource_arn
    is the load balancer's ARN, unknown until apply, so Checkov reads the reference instead."""
    configured = plans["inference"]["configuration"]["root_module"]["resources"]
    (association,) = [r for r in configured if r["type"] == "aws_wafv2_web_acl_association"]
    assert association["expressions"]["resource_arn"]["references"] == [f"{ALB}.arn", ALB]
    planned = {r["address"]: r["values"] for r in resources(plans["inference"])}
    assert "resource_arn" not in planned[association["address"]]
    assert not any(r["type"].startswith("aws_wafv2") for r in resources(plans["no-waf"]))


def references(expression: Any) -> list[str]:
    if isinstance(expression, dict):
        found = list(expression.get("references", []))
        return found + [r for v in expression.values() for r in references(v)]
    return [r for v in expression for r in references(v)] if isinstance(expression, list) else []


@pytest.mark.parametrize("stack", STACKS)
def test_every_reference_names_a_planned_resource_and_every_unknown_has_one(stack: str) -> None:
    """A value the plan leaves unknown (an output AWS computes) is read from its reference."""
    plan = plan_stack(stack)
    document = terraform_plan(plan)
    planned = {r["address"]: r["values"] for r in resources(document)}
    configured = {
        r["address"]: r["expressions"]
        for r in document["configuration"]["root_module"]["resources"]
    }
    for resource in plan.resources:
        address = addresses(plan.resources).get(resource.urn)
        if address is None or resource.op == "read":
            continue
        named = {".".join(ref.split(".")[:2]) for ref in references(configured[address])}
        assert named <= set(planned), address
        tf_type = address.split(".")[0]
        unknown = {attribute(tf_type, key) for key in resource.inputs} - set(planned[address])
        assert unknown <= set(configured[address]), (address, unknown)
        holes = {k for k, v in planned[address].items() if isinstance(v, list) and None in v}
        assert holes <= set(configured[address]), (address, holes)
        assert all(map(TERRAFORM_NAME.fullmatch, names(planned[address]))), address


TERRAFORM_NAME = re.compile(r"[a-z][a-z0-9_]*")


def names(values: Any) -> list[str]:
    """Every attribute and block name in planned values, at any depth (not a map's keys)."""
    if isinstance(values, list):
        return [n for v in values for n in names(v)]
    if not isinstance(values, dict):
        return []
    return [
        *values,
        *(n for k, v in values.items() if k not in ("tags", "tags_all") for n in names(v)),
    ]


@checkov_run
def test_the_load_balancer_is_behind_waf_and_not_without_it(results) -> None:
    assert results["inference"]["CKV2_AWS_28"] == {ALB: "PASSED"}
    assert results["no-waf"]["CKV2_AWS_28"] == {ALB: "FAILED"}


@checkov_run
def test_only_the_association_connects_the_web_acl_to_the_load_balancer(results) -> None:
    """Checkov's graph edge is the association's reference to the load balancer: without it the
    web ACL (still planned, still logging) protects nothing."""
    assert results["unassociated"]["CKV2_AWS_28"] == {ALB: "FAILED"}
    assert results["unassociated"]["CKV2_AWS_31"] == results["inference"]["CKV2_AWS_31"]


@checkov_run
@pytest.mark.parametrize("check", sorted(MUST_PASS))
def test_checks_that_apply_pass(check: str, results, plans) -> None:
    judged = results["inference"].get(check, {})
    kind = MUST_PASS[check]
    of_kind = {r["address"] for r in resources(plans["inference"]) if r["type"] == kind}
    assert of_kind and of_kind <= set(judged), (check, sorted(of_kind - set(judged)))
    assert set(judged.values()) == {"PASSED"}, judged


@checkov_run
def test_every_other_failure_is_a_recorded_finding(results) -> None:
    failed = {
        (check, address)
        for check, outcomes in results["inference"].items()
        for address, outcome in outcomes.items()
        if outcome == "FAILED"
    }
    assert failed == set(FINDINGS)


@pytest.mark.parametrize(
    ("ci", "outcome"), [("true", pytest.fail.Exception), (None, pytest.skip.Exception)]
)
def test_without_checkov_ci_fails_and_a_checkout_skips(ci, outcome, tmp_path: Path) -> None:
    environ = {"PATH": str(tmp_path)} | ({"CI": ci} if ci else {})
    with pytest.raises(outcome, match="README's test command"):
        require_checkov(tmp_path, environ)


def test_checkov_is_found_in_the_checkouts_own_venv(tmp_path: Path) -> None:
    executable = tmp_path / ".venv-checkov" / "bin" / "checkov"
    executable.parent.mkdir(parents=True)
    executable.write_text("")
    assert require_checkov(tmp_path, {"CI": "true", "PATH": ""}) == str(executable)
