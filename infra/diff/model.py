"""What changes between two plans: resources added, removed, updated in place or replaced,
with the changed inputs and what each change does to running nodes.

Resources are matched by type and role (the logical name without the cluster-name prefix), so
two stacks compare as if one stack's config became the other's. Replacement follows the
provider's replace-on-change properties (replace_rules.py), the resource's replacementTrigger,
and what it takes from a replaced resource."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from gpu_cluster.components.lustre import LINKED_FOLDERS
from gpu_cluster.components.user_data import LUSTRE_MOUNT
from gpu_cluster.infra.diff.replace_rules import REPLACE_ON_CHANGE, REPLACE_WHEN
from gpu_cluster.infra.plan.engine import STACK_TYPE, UNKNOWN_TEXT, Plan, PlannedResource

GROUP = "aws:autoscaling/group:Group"
INSTANCE = "aws:ec2/instance:Instance"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
# What a node's replacementTrigger takes computed values from (components/node_group.py: the
# subnet id, the placement group name, the file system id). A trigger with a value unknown until
# `up` changes when one of these is replaced - and the engine then replaces the nodes. Used for a
# plan without states (a saved one); a planned one says which ids a trigger holds.
# Template inputs that are also in a group's replacementTrigger (type, NIC layout, placement,
# how nodes are bought): compared here too, for plans where the trigger is known only after up.
NODE_BUILD = (
    "instanceType",
    "networkInterfaces",
    "instanceMarketOptions",
    "capacityReservationSpecification",
)
TRIGGER_SOURCES = (
    "aws:ec2/subnet:Subnet",
    "aws:ec2/placementGroup:PlacementGroup",
    LUSTRE,
)


@dataclass
class Change:
    type: str
    role: str
    kind: str  # add | remove | update | replace
    changed: dict[str, tuple[Any, Any]] = field(default_factory=dict)  # leaf path -> (old, new)
    reasons: list[str] = field(default_factory=list)
    impact: list[str] = field(default_factory=list)  # what it does to running nodes
    delete_before_replace: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return (self.type, self.role)


def cluster_name(plan: Plan) -> str:
    return plan.config.get("gpu-cluster:clusterName") or plan.stack


def role(resource: PlannedResource, cluster: str) -> str:
    prefix = f"{cluster}-"
    return resource.name[len(prefix) :] if resource.name.startswith(prefix) else resource.name


MOCK_IDENTIFIER = re.compile(
    r"(?<![0-9a-z])[0-9a-f]{7,17}(?![0-9a-z])"  # resource ids and name suffixes
    r"|[0-9a-f]{8}-1234-5678-9abc-[0-9a-f]{12}"  # KMS key ids (infra/plan/mocks.py)
)


def _normalized(value: Any, cluster: str | None) -> Any:
    """Inputs with the cluster name and the offline ids abstracted, so two stacks' resources
    compare by content."""
    if cluster is None:
        return value
    text = MOCK_IDENTIFIER.sub("<id>", json.dumps(value, sort_keys=True, default=str))
    for named in (f'"{cluster}"', f"{cluster}-", f"/{cluster}/"):  # a value, prefix or path part
        text = text.replace(named, named.replace(cluster, "<cluster>"))
    return json.loads(text)


def _compared(plan: Plan) -> dict[tuple[str, str], PlannedResource]:
    cluster = cluster_name(plan)
    return {
        (r.type, role(r, cluster)): r
        for r in plan.resources
        if r.custom and r.op != "read" and r.type != STACK_TYPE
    }


def changed_inputs(old: Any, new: Any, path: str = "") -> dict[str, tuple[Any, Any]]:
    """Every changed leaf: `tags.team`, `blockDeviceMappings[0].ebs.volumeSize`."""
    if old == new or UNKNOWN_TEXT in (old, new):  # known only after `up`: not compared
        return {}
    if isinstance(old, dict) and isinstance(new, dict):
        found: dict[str, tuple[Any, Any]] = {}
        for key in sorted(set(old) | set(new)):
            found |= changed_inputs(old.get(key), new.get(key), f"{path}.{key}" if path else key)
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        found = {}
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            found |= changed_inputs(a, b, f"{path}[{index}]")
        return found
    return {path: (old, new)}


def top_level(path: str) -> str:
    return path.split(".", 1)[0].split("[", 1)[0]


def covered(path: str, properties: tuple[str, ...] | list[str]) -> bool:
    """Whether a changed leaf falls under one of these properties (``ignoreChanges`` and
    ``replaceOnChanges`` name a property or a path inside one)."""
    return any(path == p or path.startswith((f"{p}.", f"{p}[")) for p in properties)


def replaces_with(resource: PlannedResource, prop: str) -> bool:
    """A change of this input replaces the resource: the provider's ForceNew or the resource's
    own replaceOnChanges - also one on a path inside it (``launchTemplate.id``): the engine
    makes the whole input taken from a replaced resource unknown, and an unknown value matches
    every path inside it (step_generator.go calculateDependentReplacements; the diff of an
    unknown property)."""
    rules = (*REPLACE_ON_CHANGE.get(resource.type, ()), *resource.replace_on_changes)
    return covered(prop, rules) or any(r.startswith((f"{prop}.", f"{prop}[")) for r in rules)


def trigger_changed(old: Any, new: Any) -> bool:
    """pulumi/pulumi pkg/resource/deploy/step_generator.go shouldTriggerReplace: an unknown
    trigger always replaces (here: not compared; _propagate decides from what it takes), and a
    null one - none registered, or none in the state - never does; otherwise a different value
    replaces."""
    if old is None or new is None or UNKNOWN_TEXT in (old, new):
        return False
    return old != new


def generated_identifiers(state: dict[str, Any], inputs: dict[str, Any]) -> set[str]:
    """The id and name AWS or Pulumi gives a resource, which a replacement changes (a name the
    program sets stays the same)."""
    values = (state.get("id"), state.get("name"))
    return {v for v in values if isinstance(v, str) and len(v) >= 8 and v not in inputs.values()}


def diff_plans(before: Plan, after: Plan) -> list[Change]:
    old_cluster, new_cluster = cluster_name(before), cluster_name(after)
    if old_cluster == new_cluster:  # one stack: compare values as they are
        old_cluster = new_cluster = None
    old, new = _compared(before), _compared(after)
    changes: dict[tuple[str, str], Change] = {}
    for key in sorted(set(old) | set(new)):
        type_, name = key
        if key not in old:
            changes[key] = Change(type_, name, "add")
            continue
        if key not in new:
            changes[key] = Change(type_, name, "remove")
            continue
        a, b = old[key], new[key]
        changed = changed_inputs(
            _normalized(a.inputs, old_cluster), _normalized(b.inputs, new_cluster)
        )
        triggered = trigger_changed(
            _normalized(a.replacement_trigger, old_cluster),
            _normalized(b.replacement_trigger, new_cluster),
        )
        changed = {p: v for p, v in changed.items() if not covered(p, b.ignore_changes)}
        conditional = REPLACE_WHEN.get(type_, {})
        forcing = sorted(
            {
                top_level(p)
                for p, (was, now) in changed.items()
                if covered(p, (*REPLACE_ON_CHANGE.get(type_, ()), *b.replace_on_changes))
                or (p in conditional and conditional[p](was, now))
            }
        )
        if forcing or triggered:
            reasons = [f"{p} cannot change in place" for p in forcing]
            if triggered:
                reasons.append("its replacementTrigger changed (what a running node cannot change)")
            changes[key] = Change(type_, name, "replace", changed, reasons)
        elif changed:
            changes[key] = Change(type_, name, "update", changed)
    _propagate(changes, new, after.states)
    for key, change in changes.items():
        change.delete_before_replace = key in new and new[key].delete_before_replace
        change.impact = node_impact(change, new.get(key))
    return list(changes.values())


def _trigger_takes(
    resource: PlannedResource, source: PlannedResource, states: dict[str, dict[str, Any]]
) -> bool:
    """Whether the resource's replacementTrigger holds an id or name of ``source``."""
    if not states:  # a saved plan: by dependency, for the kinds the program puts in triggers
        return source.urn in resource.dependencies and source.type in TRIGGER_SOURCES
    text = json.dumps(resource.replacement_trigger, default=str)
    found = generated_identifiers(states.get(source.urn, {}), source.inputs)
    return any(identifier in text for identifier in found)


def _propagate(
    changes: dict[tuple[str, str], Change],
    new: dict[tuple[str, str], PlannedResource],
    states: dict[str, dict[str, Any]] | None = None,
) -> None:
    """A replaced resource gets a new id: what takes a replace-on-change input from it is
    replaced too, anything else taking an input from it is updated, and a replacementTrigger
    holding its id or name changes. An updated launch template gets a new version, which its
    group or instance takes."""
    by_urn = {r.urn: key for key, r in new.items()}
    moved = True
    while moved:
        moved = False
        for key, resource in new.items():
            if resource.replacement_trigger is not None:
                for source_key, source in list(changes.items()):
                    planned = new.get(source_key)
                    if (
                        source.kind == "replace"
                        and planned is not None
                        and planned.urn != resource.urn
                        and _trigger_takes(resource, planned, states or {})
                    ):
                        why = f"its replacementTrigger takes {source.role}'s id, which is replaced"
                        moved = _apply(changes, key, "replace", why) or moved
            for prop, urns in resource.property_dependencies.items():
                for source in (changes.get(by_urn[u]) for u in urns if u in by_urn):
                    kind, why = _inherited(resource, prop, source)
                    if kind is not None and _apply(changes, key, kind, why):
                        moved = True


def _inherited(
    resource: PlannedResource, prop: str, source: Change | None
) -> tuple[str | None, str]:
    if source is None:
        return None, ""
    type_ = resource.type
    upstream = f"{source.role} ({source.type.rsplit(':', 1)[-1]})"
    if source.kind == "replace":
        kind = "replace" if replaces_with(resource, prop) else "update"
        return kind, f"{prop} comes from {upstream}, which is replaced"
    if source.type == LAUNCH_TEMPLATE and source.kind == "update":
        rebuilt = sorted({top_level(p) for p in source.changed} & set(NODE_BUILD))
        # only a group whose replacementTrigger holds how its nodes are built (the cluster's);
        # any other group (the inference service's) takes the new version in place
        if type_ == GROUP and rebuilt and resource.replacement_trigger is not None:
            return "replace", f"how its nodes are built changed in {upstream}: {', '.join(rebuilt)}"
        return "update", f"takes the new version of {upstream}"
    return None, ""


def _apply(
    changes: dict[tuple[str, str], Change], key: tuple[str, str], kind: str, why: str
) -> bool:
    current = changes.get(key)
    if current is None:
        changes[key] = Change(key[0], key[1], kind, reasons=[why])
        return True
    if current.kind in ("add", "remove") or why in current.reasons:
        return False
    if kind == "replace":
        current.kind = "replace"
    current.reasons.append(why)
    return True


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) else None


def node_impact(change: Change, resource: PlannedResource | None = None) -> list[str]:
    """What a change does to running nodes and their NVMe scratch, before it happens
    (``resource``: the change's new registration, when it has one)."""
    if change.type == GROUP and resource is not None and resource.inputs.get("minElbCapacity"):
        return serving_impact(change, resource.inputs)
    if change.type == GROUP:
        if change.kind == "replace" and change.delete_before_replace:
            return [
                "every node is terminated before the new group launches (delete-before-replace): "
                "a running job stops and the nodes' NVMe scratch is wiped"
            ]
        if change.kind == "replace":
            return [
                "a new group launches, then the old one and its nodes are deleted: work on the "
                "old nodes stops and their NVMe scratch is wiped"
            ]
        if change.kind == "remove":
            return ["every node is terminated: a running job stops"]
        impact = []
        old, new = change.changed.get("desiredCapacity", (None, None))
        old, new = _count(old), _count(new)
        if old is not None and new is not None and new > old:
            impact.append(f"adds {new - old} node(s); running nodes are untouched")
        elif old is not None and new is not None and new < old:
            impact.append(
                f"terminates {old - new} node(s): a job running on them stops, their NVMe "
                "scratch is gone"
            )
        if any("new version" in r for r in change.reasons) or {
            top_level(p) for p in change.changed
        } & {"launchTemplate", "mixedInstancesPolicy"}:
            impact.append(
                "a new launch-template version: only nodes launched from now on get it (no "
                "running node is replaced; start an instance refresh to roll it)"
            )
        return impact
    if change.type == INSTANCE:
        if change.kind == "replace":
            return ["the dev box is replaced: a running job stops; its root disk and NVMe are lost"]
        if change.kind == "remove":
            return ["the dev box is terminated"]
        keys = {top_level(p) for p in change.changed}
        stop_start = [k for k in ("instanceType", "userData", "userDataBase64") if k in keys]
        if stop_start:
            # ec2_instance.go resourceInstanceUpdate -> modifyInstanceAttributeWithStopStart
            return [
                f"{', '.join(stop_start)}: the box is stopped, changed (ModifyInstanceAttribute) "
                "and started again - a running job stops and NVMe scratch is wiped; the root "
                "disk and its files stay"
            ]
        if any("new version" in r for r in change.reasons):
            return [
                "the box keeps running on its launch-template version; a replacement, or a new "
                "box after `pulumi destroy`, launches from the new one"
            ]
        return []
    if change.type == LAUNCH_TEMPLATE and change.kind == "update":
        return ["a new template version: reaches nodes launched from now on only"]
    if change.type == LUSTRE and change.kind in ("replace", "remove"):
        return [lustre_loss(change.kind)]
    if change.type == "aws:ec2/capacityReservation:CapacityReservation" and change.kind in (
        "replace",
        "remove",
    ):
        return ["the reservation is cancelled: its capacity is released to others"]
    return []


def serving_impact(change: Change, inputs: dict[str, Any]) -> list[str]:
    """A service's group (components/serving_group.py): a replacement serves before the old
    group drains; a new template version is rolled by an instance refresh."""
    if change.kind == "replace":
        return [
            f"a new group launches and serves its minimum ({inputs['minElbCapacity']} healthy "
            "targets) before the old one is drained and deleted: no request is dropped; "
            "capacity and quota for both groups' nodes meanwhile"
        ]
    if change.kind == "update" and (
        any("new version" in r for r in change.reasons)
        or {top_level(p) for p in change.changed} & {"launchTemplate", "mixedInstancesPolicy"}
    ):
        preferences = (inputs.get("instanceRefresh") or {}).get("preferences") or {}
        return [
            "a new launch-template version: an instance refresh replaces the running nodes, "
            f"keeping {preferences.get('minHealthyPercentage', 90)}% of them in service"
        ]
    return []


def lustre_loss(kind: str) -> str:
    """What deleting the file system loses, from how components/lustre.py links it to the
    bucket: folders with automatic export write new and changed files back; the others are
    import only, and nothing outside the linked folders is in the bucket."""
    exported = [f"{LUSTRE_MOUNT}/{f}" for f, out in LINKED_FOLDERS.items() if out]
    imported = [f"{LUSTRE_MOUNT}/{f}" for f, out in LINKED_FOLDERS.items() if not out]
    what = (
        "the Lustre file system is deleted at the end of the update, after a new, empty one is "
        "created"
        if kind == "replace"
        else "the Lustre file system is deleted at the end of the update"
    )
    return (
        f"{what}: files not exported to the bucket are lost - everything in "
        f"{', '.join(imported)} (import only) and outside the linked folders, and writes to "
        f"{', '.join(exported)} not yet exported (automatic export copies new and changed "
        "files to the bucket)"
    )


def running_jobs(changes: list[Change]) -> tuple[bool, list[str]]:
    """Whether a running job is interrupted, and what it loses that the bucket does not keep."""
    impacts = [i for c in changes if c.kind in ("replace", "remove", "update") for i in c.impact]
    interrupted = any("stops" in i or "terminated" in i for i in impacts)
    lost = []
    if any(c.type == LUSTRE and c.kind in ("replace", "remove") for c in changes):
        lost.append("what is on the Lustre file system and not exported to the bucket")
    if any(c.type in (GROUP, INSTANCE) and c.kind in ("replace", "remove") for c in changes):
        lost.append("the nodes' NVMe scratch")
    if any(c.type == INSTANCE and c.kind in ("replace", "remove") for c in changes):
        lost.append("the dev box's root disk")
    return interrupted, lost


def summary(changes: list[Change]) -> dict[str, int]:
    counts = {"add": 0, "remove": 0, "update": 0, "replace": 0}
    for change in changes:
        counts[change.kind] += 1
    return counts


OFFLINE_ID = re.compile(r"\b([a-z]+(?:alloc|assoc)?)-[0-9a-f]{7,17}\b")


def shown(value: Any, room: int = 60) -> str:
    """A value for the diff text; the offline plan's made-up ids show as what they stand for
    (`<subnet id>`), never as ids that look like real ones."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    text = OFFLINE_ID.sub(lambda m: f"<{m.group(1)} id>", text)
    if value is None:
        text = "(unset)"
    if text == UNKNOWN_TEXT:
        return "(known after up)"
    return text if len(text) <= room else text[: room - 3] + "..."
