"""KMS key and IAM controls: rotation, public key policies, admin and wildcard permissions,
whom instance roles trust, Systems Manager instead of SSH keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpu_cluster.policy import aws_types as t
from gpu_cluster.policy.control import control
from gpu_cluster.policy.resources import Res, Stack, as_list, statements

DECRYPT_ACTIONS = ("kms:decrypt", "kms:reencryptfrom")
SSM_CORE = "arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"
EC2_SERVICE = "ec2.amazonaws.com"


@control(
    "KMS.4",
    "kms-4-key-rotation",
    "AWS KMS key rotation should be enabled",
    "medium",
    "set enableKeyRotation true on the key",
    t.KMS_KEY,
)
def key_rotation(r: Res, stack: Stack) -> list[str]:
    return [] if r.props.get("enableKeyRotation") is True else ["key rotation is off"]


def _principals(statement: Mapping[str, Any]) -> list[str]:
    principal = statement.get("Principal")
    if principal == "*":
        return ["*"]
    if isinstance(principal, Mapping):
        return [str(p) for values in principal.values() for p in as_list(values)]
    return [str(p) for p in as_list(principal)]


@control(
    "KMS.5",
    "kms-5-key-not-public",
    "KMS keys should not be publicly accessible",
    "critical",
    "name the account root, roles or services as principals, never '*' without a condition",
    t.KMS_KEY,
)
def key_not_public(r: Res, stack: Stack) -> list[str]:
    return [
        f"statement {s.get('Sid', '?')} allows principal '*' without a condition"
        for s in statements(r.props.get("policy"))
        if s.get("Effect") == "Allow" and "*" in _principals(s) and not s.get("Condition")
    ]


@control(
    "KMS.3",
    "kms-3-key-deletion-protected",
    "AWS KMS keys should not be deleted unintentionally",
    "critical",
    "keep deletionWindowInDays at 30, so a scheduled deletion can be cancelled for a month",
    t.KMS_KEY,
)
def key_deletion_window(r: Res, stack: Stack) -> list[str]:
    days = r.props.get("deletionWindowInDays", 30)
    return [] if days == 30 else [f"deletionWindowInDays is {days}, not 30"]


def _actions(statement: Mapping[str, Any]) -> list[str]:
    return [str(a).lower() for a in as_list(statement.get("Action"))]


def _allows(document: Any) -> list[Mapping[str, Any]]:
    return [s for s in statements(document) if s.get("Effect") == "Allow"]


POLICIES = (t.MANAGED_POLICY, *t.INLINE_POLICIES)


@control(
    "IAM.1",
    "iam-1-no-admin-policies",
    'IAM policies should not allow full "*" administrative privileges',
    "high",
    "grant the actions the principal needs on the resources it needs",
    POLICIES,
)
def no_admin(r: Res, stack: Stack) -> list[str]:
    return [
        f"statement {s.get('Sid', '?')} allows '*' on '*'"
        for s in _allows(r.props.get("policy"))
        if "*" in _actions(s) and "*" in as_list(s.get("Resource"))
    ]


@control(
    "IAM.21",
    "iam-21-no-service-wildcards",
    "IAM customer managed policies that you create should not allow wildcard actions for services",
    "low",
    "list the service's actions instead of 'service:*'",
    POLICIES,
)
def no_service_wildcards(r: Res, stack: Stack) -> list[str]:
    return [
        f"statement {s.get('Sid', '?')} allows {action}"
        for s in _allows(r.props.get("policy"))
        for action in _actions(s)
        if action == "*" or action.endswith(":*")
    ]


def _decrypt_everywhere(r: Res) -> list[str]:
    return [
        f"statement {s.get('Sid', '?')} allows {', '.join(_actions(s))} on every key"
        for s in _allows(r.props.get("policy"))
        if "*" in as_list(s.get("Resource"))
        and any(a in DECRYPT_ACTIONS or a in ("kms:*", "*") for a in _actions(s))
    ]


@control(
    "KMS.1",
    "kms-1-managed-policy-decrypt-scoped",
    "IAM customer managed policies should not allow decryption actions on all KMS keys",
    "medium",
    "name the key ARNs in Resource for kms:Decrypt and kms:ReEncryptFrom",
    t.MANAGED_POLICY,
)
def managed_decrypt(r: Res, stack: Stack) -> list[str]:
    return _decrypt_everywhere(r)


@control(
    "KMS.2",
    "kms-2-inline-policy-decrypt-scoped",
    "IAM principals should not have IAM inline policies that allow decryption actions on all "
    "KMS keys",
    "medium",
    "name the key ARNs in Resource for kms:Decrypt and kms:ReEncryptFrom",
    t.INLINE_POLICIES,
)
def inline_decrypt(r: Res, stack: Stack) -> list[str]:
    return _decrypt_everywhere(r)


@control(
    "NIST.800-53.r5 AC-6",
    "iam-role-trust-scoped",
    "IAM roles trust named AWS services only; instance roles trust only EC2",
    "high",
    "set the role's assume-role policy to the one service that uses it (ec2.amazonaws.com for "
    "an instance profile's role)",
    t.ROLE,
    uses_stack=True,
)
def role_trust(r: Res, stack: Stack) -> list[str]:
    trusted = [p for s in _allows(r.props.get("assumeRolePolicy")) for p in _principals(s)]
    problems = [f"trusts {p}" for p in trusted if "*" in p]
    if stack.referring(r, t.INSTANCE_PROFILE, "role") and set(trusted) != {EC2_SERVICE}:
        problems.append(f"an instance role must trust only {EC2_SERVICE}, not {trusted}")
    return problems


@control(
    "SSM.1",
    "ssm-1-managed-by-systems-manager",
    "Amazon EC2 instances should be managed by AWS Systems Manager (and need no SSH key pair)",
    "medium",
    "launch with an instance profile whose role has AmazonSSMManagedInstanceCore; drop keyName",
    (t.INSTANCE, t.LAUNCH_TEMPLATE),
    uses_stack=True,
)
def ssm_managed(r: Res, stack: Stack) -> list[str] | None:
    if r.type == t.INSTANCE and "launchTemplate" in r.props and "iamInstanceProfile" not in r.props:
        return None if "keyName" not in r.props else ["keyName set: an SSH key pair"]
    problems = ["keyName set: an SSH key pair"] if r.props.get("keyName") else []
    profiles = stack.referred(r, "iamInstanceProfile", t.INSTANCE_PROFILE)
    roles = [role for p in profiles for role in stack.referred(p, "role", t.ROLE)]
    managed = [
        a
        for role in roles
        for a in stack.referring(role, t.ROLE_POLICY_ATTACHMENT, "role")
        if a.props.get("policyArn") == SSM_CORE
    ]
    if not managed:
        problems.append("no instance profile with AmazonSSMManagedInstanceCore")
    return problems


CONTROLS = (
    key_rotation,
    key_not_public,
    key_deletion_window,
    no_admin,
    no_service_wildcards,
    managed_decrypt,
    inline_decrypt,
    role_trust,
    ssm_managed,
)
