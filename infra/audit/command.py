"""`gpuc audit --stack NAME [--json]`: plan the stack offline, run every control of the
security pack over it, print one row per control; exit FINDINGS when a control fails."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from gpu_cluster.infra.json_doc import camel
from gpu_cluster.infra.outcome import FINDINGS, OK, from_exception
from gpu_cluster.infra.overrides import stack_config
from gpu_cluster.infra.plan.engine import Plan, run_plan
from gpu_cluster.policy.control import Control
from gpu_cluster.policy.pack import Finding, audit
from gpu_cluster.policy.resources import Res


def plan_resources(plan: Plan) -> list[Res]:
    """The plan as the controls see it: each resource's inputs, options and links."""
    return [
        Res(
            urn=r.urn,
            type=r.type,
            name=r.name,
            props=r.inputs,
            protect=r.protect,
            retain_on_delete=r.retain_on_delete,
            property_dependencies=r.property_dependencies,
        )
        for r in plan.resources
        if r.custom and r.op != "read"
    ]


def audit_stack(stack: str, overrides: Sequence[tuple[str, str]] = ()) -> list[Finding]:
    # Planned as `pulumi up` would see it (mock ids and ARNs, no unknowns), so every control
    # can read every value; `pulumi preview --policy-pack` skips a control on an unknown.
    plan = run_plan(stack, stack_config(stack, overrides), preview=False)
    if plan.error is not None:
        raise from_exception(plan.error)
    return audit(plan_resources(plan)) + access_findings(plan)


LOAD_BALANCER = "aws:lb/loadBalancer:LoadBalancer"
# Who may call an inference service is the stack's inference.access (the program exports it as
# serving.access): public: true is allowed, and flagged here and by every plan.
PUBLIC_SERVICE = Control(
    "NIST.800-53.r5 AC-3",
    "inference-access-not-public",
    "An inference service limits who may call it (inference.access: networks, API keys or "
    "sign-in), unless it is meant for anyone",
    "high",
    "pulumi config set --path inference.access.cidrs[0] <your network CIDR> && pulumi config rm "
    "--path inference.access.public (or apiKeys, oidc or cognito instead of the CIDRs)",
    (LOAD_BALANCER,),
    lambda r, stack: None,
    audit_only="reads the stack's inference.access, which CrossGuard does not see",
)


def access_findings(plan: Plan) -> list[Finding]:
    """The service's access as the program resolved it: public: true fails the control."""
    serving = plan.outputs.get("serving")
    access = serving.get("access") if isinstance(serving, dict) else None
    if not isinstance(access, dict):
        return []
    finding = Finding(PUBLIC_SERVICE)
    finding.checked = [r.name for r in plan.resources if r.type == LOAD_BALANCER]
    if access.get("public"):
        finding.failures = [
            (name, "inference.access.public is true: anyone on the internet may call the service")
            for name in finding.checked
        ]
    return [finding]


def finding_json(finding: Finding) -> dict[str, Any]:
    control = finding.control
    return {
        "id": control.id,
        "policy": control.name,
        "title": control.title,
        "severity": control.severity,
        "status": finding.status,
        "checked": finding.checked,
        "failures": [{"resource": r, "problem": p} for r, p in finding.failures],
        "suppressed": [{"resource": r, "why": why} for r, why in finding.suppressed],
        "fix": control.fix,
        "crossGuard": control.audit_only is None,
    }


def summary(findings: list[Finding]) -> dict[str, int]:
    counts = {"pass": 0, "fail": 0, "suppressed": 0, "not applicable": 0}
    for finding in findings:
        counts[finding.status] += 1
    return counts


def _names(names: list[str], room: int = 3) -> str:
    shown = ", ".join(names[:room])
    return shown + (f" +{len(names) - room}" if len(names) > room else "")


def render_text(stack: str, findings: list[Finding]) -> str:
    counts = summary(findings)
    lines = [
        f"gpuc audit {stack}: {len(findings)} controls - "
        + ", ".join(f"{n} {status}" for status, n in counts.items()),
        "",
        f"{'CONTROL':<24}{'SEVERITY':<10}{'STATUS':<16}RESOURCES CHECKED",
    ]
    for finding in findings:
        lines.append(
            f"{finding.control.id:<24}{finding.control.severity:<10}{finding.status:<16}"
            f"{_names(finding.checked) or '-'}"
        )
        lines.append(f"{'':<4}{finding.control.title}")
        for resource, problem in finding.failures:
            lines.append(f"{'':<4}FAIL {resource}: {problem}")
        if finding.failures:
            lines.append(f"{'':<4}fix: {finding.control.fix}")
        for resource, why in finding.suppressed:
            lines.append(f"{'':<4}suppressed on {resource}: {why}")
    return "\n".join(lines)


def run_audit(stack: str, as_json: bool, overrides: Sequence[tuple[str, str]] = ()) -> int:
    findings = audit_stack(stack, overrides)
    if as_json:
        document = {
            "stack": stack,
            "summary": {
                camel(status.replace(" ", "_")): n for status, n in summary(findings).items()
            },
            "controls": [finding_json(f) for f in findings],
        }
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(render_text(stack, findings))
    return FINDINGS if any(f.status == "fail" for f in findings) else OK
