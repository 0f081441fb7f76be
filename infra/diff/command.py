"""`gpuc diff A B`, `gpuc diff --stack S --set ...`, `gpuc diff --from plan.json --stack S`:
the resources added, removed, updated and replaced, what that does to running nodes, and the
GPUs and cost before and after."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from gpu_cluster.infra.diff.collisions import Collision, collisions
from gpu_cluster.infra.diff.model import Change, diff_plans, running_jobs, shown, summary
from gpu_cluster.infra.outcome import FINDINGS, INPUT, OK, USAGE, CommandError, from_exception
from gpu_cluster.infra.overrides import stack_config
from gpu_cluster.infra.plan.engine import Plan, PlannedResource, run_plan

SIGN = {"add": "+", "remove": "-", "update": "~", "replace": "+-"}


def planned(stack: str, overrides: list[tuple[str, str]]) -> Plan:
    # Planned as after `up` (offline ids known), as an existing stack's state is: values a
    # replacement changes (a subnet id) differ, and the replacement triggers can be compared.
    plan = run_plan(stack, stack_config(stack, overrides))
    if plan.error is not None:
        raise from_exception(plan.error)
    return plan


def saved_plan(path: Path) -> Plan:
    """A document `gpuc plan --json` wrote."""
    try:
        document = json.loads(path.read_text())
        steps = document["steps"]
        resources = [_resource(step) for step in steps]
    except FileNotFoundError as error:
        raise CommandError(INPUT, f"--from {path}: no such file") from error
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise CommandError(INPUT, f"--from {path}: not a JSON document ({error})") from error
    except (KeyError, TypeError, IndexError) as error:
        raise CommandError(
            INPUT, f"--from {path}: not a `gpuc plan --json` document (missing {error})"
        ) from error
    stack = resources[0].urn.split("::")[0].rsplit(":", 1)[-1] if resources else "saved"
    return Plan(
        stack=stack,
        resources=resources,
        outputs=document.get("outputs") or {},
        config=document.get("config") or {},
    )


def _resource(step: dict[str, Any]) -> PlannedResource:
    state = step["newState"]
    return PlannedResource(
        urn=state["urn"],
        type=state["type"],
        name=state["urn"].rsplit("::", 1)[-1],
        custom=state["custom"],
        parent=state.get("parent", ""),
        inputs=state.get("inputs") or {},
        dependencies=tuple(state.get("dependencies") or ()),
        protect=bool(state.get("protect")),
        retain_on_delete=bool(state.get("retainOnDelete")),
        op=step.get("op", "create"),
        replacement_trigger=state.get("replacementTrigger"),
        delete_before_replace=bool(state.get("deleteBeforeReplace")),
        replace_on_changes=tuple(state.get("replaceOnChanges") or ()),
        ignore_changes=tuple(state.get("ignoreChanges") or ()),
        property_dependencies={
            k: tuple(v) for k, v in (state.get("propertyDependencies") or {}).items()
        },
    )


def totals(plan: Plan) -> dict[str, float | list[str] | None]:
    out = plan.outputs
    return {
        "gpus": out.get("totalGpus", 0),
        "usdPerHour": out.get("estimatedUsdPerHour"),
        "usdPerMonth": out.get("estimatedUsdPerMonth"),
        "prepaid": list(out.get("costPrepaid") or []),  # billed outside these (a block)
    }


def change_json(change: Change) -> dict[str, Any]:
    return {
        "type": change.type,
        "role": change.role,
        "change": change.kind,
        "inputs": {k: {"before": a, "after": b} for k, (a, b) in change.changed.items()},
        "reasons": change.reasons,
        "impact": change.impact,
        "deleteBeforeReplace": change.delete_before_replace,
    }


def _prepaid(totals_: dict) -> str:
    return " + prepaid Capacity Block" if totals_.get("prepaid") else ""


def _money(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"${value:,.{digits}f}"


def collision_json(collision: Collision) -> dict[str, str]:
    return {
        "type": collision.type,
        "role": collision.role,
        "why": collision.why,
        "fix": collision.fix,
    }


def render_collisions(found: list[Collision]) -> list[str]:
    if not found:
        return []
    lines = ["", "This change cannot be applied as is: AWS would refuse a step of it."]
    for collision in found:
        lines += [
            f"  x {collision.role} ({collision.type.rsplit(':', 1)[-1]}): {collision.why}",
            f"      fix: {collision.fix}",
        ]
    return lines


def render_text(title: str, changes: list[Change], before: dict, after: dict) -> str:
    lines = [title, ""]
    order = {"replace": 0, "remove": 1, "update": 2, "add": 3}
    for change in sorted(changes, key=lambda c: (order[c.kind], c.role)):
        lines.append(f"{SIGN[change.kind]:>2} {change.type}  {change.role}  {change.kind}")
        for key, (old, new) in list(change.changed.items())[:8]:
            was, now = shown(old), shown(new)
            if was == now:  # two offline ids: say which one is new
                now = now.replace("<", "<new ", 1)
            lines.append(f"      {key}: {was} -> {now}")
        if len(change.changed) > 8:
            lines.append(f"      ... and {len(change.changed) - 8} more inputs")
        lines += [f"      why: {reason}" for reason in change.reasons]
        lines += [f"      ! {impact}" for impact in change.impact]
    counts = summary(changes)
    if not changes:
        lines.append("   no changes")
    lines += [
        "",
        f"Resources: {counts['add']} to add, {counts['remove']} to remove, "
        f"{counts['update']} to update in place, {counts['replace']} to replace",
        f"GPUs: {before['gpus']:g} -> {after['gpus']:g}",
        f"Cost: {_money(before['usdPerHour'])}/h{_prepaid(before)} -> "
        f"{_money(after['usdPerHour'])}/h{_prepaid(after)}, "
        f"{_money(before['usdPerMonth'], 0)}/month -> {_money(after['usdPerMonth'], 0)}/month",
    ]
    interrupted, lost = running_jobs(changes)
    if interrupted:
        lines.append("Running jobs: interrupted by this change (see ! lines)")
    else:
        lines.append("Running jobs: not interrupted")
    if lost:
        lines.append(f"Lost: {'; '.join(lost)}")
    return "\n".join(lines)


def run_diff(
    stacks: list[str],
    stack: str | None,
    saved: str | None,
    overrides: list[tuple[str, str]],
    as_json: bool,
) -> int:
    named = [*stacks, *([stack] if stack else [])]
    if saved:
        if len(named) != 1:
            raise CommandError(USAGE, "--from PLAN.json compares with one stack: add --stack NAME")
        before, after = saved_plan(Path(saved)), planned(named[0], overrides)
        title = f"gpuc diff: {saved} -> {named[0]}"
    elif len(named) == 2:
        before, after = planned(named[0], []), planned(named[1], overrides)
        title = (
            f"gpuc diff: {named[0]} -> {named[1]} (as if {named[0]}'s config became {named[1]}'s)"
        )
    elif len(named) == 1 and overrides:
        before, after = planned(named[0], []), planned(named[0], overrides)
        shown_overrides = " ".join(f"{flag} {text}" for flag, text in overrides)
        title = f"gpuc diff: {named[0]} -> {named[0]} with {shown_overrides}"
    else:
        raise CommandError(
            USAGE,
            "gpuc diff needs two stacks (gpuc diff dev train), one stack and --set/--set-path "
            "overrides (gpuc diff --stack train --set nodes=8), or --from PLAN.json --stack NAME",
        )
    changes = diff_plans(before, after)
    found = collisions(before, after, changes)
    if as_json:
        document = {
            "before": totals(before),
            "after": totals(after),
            "summary": summary(changes),
            "runningJobs": dict(zip(("interrupted", "lost"), running_jobs(changes), strict=True)),
            "changes": [change_json(c) for c in changes],
            "applies": not found,
            "cannotApply": [collision_json(c) for c in found],
        }
        json.dump(document, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        print(render_text(title, changes, totals(before), totals(after)))
        print("\n".join(render_collisions(found)) or "\nThe change applies as planned.")
    return FINDINGS if found else OK
