"""The limits table (components/aws_limits.py): every limit refuses what AWS refuses and lets
through what AWS takes, as the plan engine's mocks apply it to every resource."""

from __future__ import annotations

import base64
import re

import pytest

from gpu_cluster.components.aws_limits import LIMITS, MAX_TAGS, Limit, violations
from gpu_cluster.infra.plan.mocks import refusals

GOOD = {  # a value AWS takes, per pattern-less or special input
    "userData": base64.b64encode(b"#!/bin/bash\necho hi\n").decode(),
    "userDataBase64": base64.b64encode(b"#!/bin/bash\necho hi\n").decode(),
}


def good_value(limit: Limit) -> str:
    if limit.input_name in GOOD and limit.resource_type.endswith("LaunchTemplate"):
        return GOOD["userData"]
    if limit.input_name == "userDataBase64":
        return GOOD["userDataBase64"]
    if limit.pattern.startswith("alias/"):
        return "alias/gpuc-train"
    return "a" * max(limit.minimum, 3)


def too_long(limit: Limit) -> str:
    if limit.input_name.startswith("userData"):
        raw = bytes(range(256)) * (limit.maximum // 256 + 1)
        encoded = limit.input_name == "userDataBase64" or "LaunchTemplate" in limit.resource_type
        return base64.b64encode(raw).decode() if encoded else raw.decode("latin-1")
    prefix = "alias/" if limit.pattern.startswith("alias/") else ""
    return prefix + "a" * (limit.maximum + 1 - len(prefix))


@pytest.mark.parametrize("limit", LIMITS, ids=lambda lim: f"{lim.resource_type}.{lim.input_name}")
def test_each_limit_refuses_too_much_and_takes_what_aws_takes(limit):
    assert limit.source
    assert refusals(limit.resource_type, "r", {limit.input_name: good_value(limit)}) == []
    (problem,) = refusals(limit.resource_type, "r", {limit.input_name: too_long(limit)})
    assert f"r.{limit.input_name}" in problem.path and f"{limit.maximum:,}" in problem.allowed
    assert limit.source in problem.problem


@pytest.mark.parametrize(
    "limit", [lim for lim in LIMITS if lim.pattern], ids=lambda lim: f"{lim.resource_type}"
)
def test_characters_outside_the_allowed_set_are_refused(limit):
    good = good_value(limit)
    bad = next(good + c for c in "~:" if not re.fullmatch(limit.pattern, good + c))
    (found,) = violations(limit.resource_type, {limit.input_name: bad})
    assert "characters AWS refuses" in found.message() and limit.allowed in found.message()


@pytest.mark.parametrize("limit", [lim for lim in LIMITS if lim.minimum > 1])
def test_too_short_is_refused(limit):
    short = good_value(limit)[: limit.minimum - 1]
    assert violations(limit.resource_type, {limit.input_name: short})


def test_reserved_and_oversized_tags_are_refused_in_maps_and_group_lists():
    kind = "aws:ec2/vpc:Vpc"
    assert violations(kind, {"tags": {"team": "ml", "cost-center": "4711"}}) == []
    assert violations(kind, {"tags": {f"k{i}": "v" for i in range(MAX_TAGS + 1)}})
    assert violations(kind, {"tags": {"k" * 129: "v"}})
    assert violations(kind, {"tags": {"k": "v" * 257}})
    (reserved,) = violations(kind, {"tags": {"aws:cloudformation:stack": "x"}})
    assert "reserved" in reserved.message()
    group = "aws:autoscaling/group:Group"
    listed = [{"key": "aws:x", "value": "1", "propagateAtLaunch": True}]
    assert violations(group, {"tags": listed})
    assert violations(group, {"tags": [{"key": "ok", "value": "1"}]}) == []


def test_whitespace_does_not_count_in_an_inline_role_policy():
    limit = next(lim for lim in LIMITS if lim.resource_type == "aws:iam/rolePolicy:RolePolicy")
    padded = "{" + " " * 20000 + '"a": 1}'
    assert violations(limit.resource_type, {"policy": padded}) == []


def test_unknown_values_are_not_judged():
    from pulumi.runtime import rpc

    kind = "aws:lb/loadBalancer:LoadBalancer"
    assert refusals(kind, "r", {"name": rpc.UNKNOWN}) == []


def test_each_refusal_says_what_the_user_can_do():
    data = next(lim for lim in LIMITS if lim.input_name == "userData")
    (problem,) = refusals(data.resource_type, "r", {"userData": too_long(data)})
    assert "fsx, secrets, spot" in problem.fix
    (name,) = refusals("aws:lb/loadBalancer:LoadBalancer", "r", {"name": "a" * 40})
    assert "clusterName" in name.fix
    (tag,) = refusals("aws:ec2/vpc:Vpc", "r", {"tags": {"aws:x": "1"}})
    assert "tags" in tag.fix and "aws:" in tag.fix
    (policy,) = refusals("aws:kms/key:Key", "r", {"policy": "x" * 40000})
    assert policy.fix.startswith("report it")
