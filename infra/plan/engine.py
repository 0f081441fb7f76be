"""Run infra/__main__.py in-process under the Pulumi SDK's mock engine and record every
registration (type, name, parent, inputs, dependencies, protect) the way the CLI would see it."""

from __future__ import annotations

import gc
import heapq
import runpy
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.output import Unknown
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.config import set_all_config
from pulumi.runtime.proto import resource_pb2
from pulumi.runtime.settings import ROOT, SETTINGS, get_root_resource
from pulumi.runtime.stack import Stack, run_pulumi_func
from pulumi.runtime.sync_await import _ensure_event_loop, _sync_await

import gpu_cluster.infra.program as infra_program
from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.infra.blame import program_error
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.network_check import NetworkLookup
from gpu_cluster.infra.plan.mocks import AwsRefusal, PlanMocks
from gpu_cluster.infra.plan.update_rules import UpdateHazard, hazards
from gpu_cluster.infra.plan.urns import (
    Duplicate,
    DuplicateUrns,
    duplicate_problems,
    registered_by,
    registration_site,
)
from gpu_cluster.infra.program import ReservationLookup
from gpu_cluster.infra.spec import PROJECT
from gpu_cluster.infra.versions import ENGINE_FEATURE

PROGRAM = Path(__file__).resolve().parent.parent / "__main__.py"
STACK_TYPE = "pulumi:pulumi:Stack"


@dataclass(frozen=True, slots=True)
class PlannedResource:
    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    inputs: dict[str, Any]
    dependencies: tuple[str, ...]
    protect: bool
    retain_on_delete: bool
    op: str = "create"
    ignore_changes: tuple[str, ...] = ()
    replacement_trigger: Any = None
    delete_before_replace: bool = False
    replace_on_changes: tuple[str, ...] = ()
    property_dependencies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    custom_timeouts: dict[str, str] = field(default_factory=dict)  # create/update/delete


@dataclass
class Plan:
    stack: str
    resources: list[PlannedResource] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    states: dict[str, dict[str, Any]] = field(default_factory=dict)
    invokes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    error: ConfigError | None = None
    config: dict[str, str] = field(default_factory=dict)  # what it planned with
    secret_keys: tuple[str, ...] = ()  # config keys holding Pulumi secrets (never shown)
    warnings: list[str] = field(default_factory=list)  # for the user; the plan still stands

    def of_type(self, type_: str) -> list[PlannedResource]:
        return [r for r in self.resources if r.type == type_]

    def named(self, name: str) -> PlannedResource:
        return next(r for r in self.resources if r.name == name)

    def state(self, resource: PlannedResource) -> dict[str, Any]:
        """The resource's state after the (mock) create: inputs plus computed outputs."""
        return self.states[resource.urn]


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The SDK's mock monitor, keeping what the engine would receive for each resource."""

    def __init__(
        self,
        mocks: PlanMocks,
        preview: bool = False,
        project: str | None = None,
        stack: str | None = None,
    ) -> None:
        super().__init__(mocks)
        self.plan_mocks = mocks  # as self.mocks, typed: its ids are always strings
        # The SDK before 3.225 calls the monitor from executor threads without the program's
        # context (pulumi#22017 added wrap_with_context there), where get_stack() and
        # get_project() answer their defaults "stack" and "project": keep the plan's own.
        self.project = project
        self.stack = stack
        self.planned: list[PlannedResource] = []
        self.sites: dict[str, str] = {}  # urn: where the user's code registered it
        self.duplicates: list[Duplicate] = []
        self.users: set[str] = set()  # URNs a user's own program registered (not a component's)
        # As `pulumi preview`: what AWS computes on create (ids, ARNs, names, addresses) is
        # unknown, so inputs that use it show as output<string>.
        self.preview = preview

    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """The URN the engine makes: the parent's whole qualified type, except the root stack's
        (pkg/resource/deploy/deployment.go, generateURN). The SDK's mock keeps only the last
        segment and keeps the stack's, so a URN it prints would not name a real resource."""
        qualified = parent.split("::")[2] if parent else ""
        if qualified and qualified != STACK_TYPE:
            type_ = f"{qualified}${type_}"
        stack = self.stack or pulumi.get_stack()
        return "urn:pulumi:" + "::".join([stack, self.project or pulumi.get_project(), type_, name])

    # pulumi's MockMonitor answers with a class object (its return type); the engine, a message
    def SupportsFeature(self, request):  # pyright: ignore[reportIncompatibleMethodOverride]
        """Answer as the CLI's engine does from 3.208 (infra/versions.py asks before the program
        creates anything), whatever the SDK's own mock answers."""
        if request.id == ENGINE_FEATURE:
            return resource_pb2.SupportsFeatureResponse(hasSupport=True)
        return super().SupportsFeature(request)

    def _registered(self, urn: str, request: Any) -> None:
        """Note a URN seen a second time (urns.py): the engine refuses the program."""
        here = registration_site(request)
        if registered_by(request) == "user":
            self.users.add(urn)
        if urn in self.sites:
            self.duplicates.append(Duplicate(urn, request.parent, self.sites[urn], here))
        else:
            self.sites[urn] = here

    def RegisterResource(self, request):
        urn = self.make_urn(request.parent, request.type, request.name)
        self._registered(urn, request)
        if request.type == STACK_TYPE:
            self._record(urn, request, {})
            return resource_pb2.RegisterResourceResponse(urn=urn)
        _ensure_event_loop()
        inputs = rpc.deserialize_properties(request.object)
        self._record(urn, request, inputs)
        resource_id, state = self.plan_mocks.new_resource(
            pulumi_mocks.MockResourceArgs(
                typ=request.type,
                name=request.name,
                inputs=inputs,
                provider=request.provider,
                resource_id=request.importId,
                custom=request.custom or False,
            )
        )
        self.resources[urn] = pulumi_mocks.MockMonitor.ResourceRegistration(urn, resource_id, state)
        if self.preview and request.custom:
            obj = _sync_await(rpc.serialize_properties(inputs, {}))
            return resource_pb2.RegisterResourceResponse(urn=urn, id="", object=obj)
        obj = _sync_await(rpc.serialize_properties(state, {}))
        return resource_pb2.RegisterResourceResponse(urn=urn, id=resource_id, object=obj)

    def ReadResource(self, request):
        """Reads (StackReference, .get()) are steps too: `pulumi preview` shows them as op read."""
        response = super().ReadResource(request)
        self._registered(response.urn, request)
        self.planned.append(
            PlannedResource(
                urn=response.urn,
                type=request.type,
                name=request.name,
                custom=True,
                parent=request.parent,
                inputs=whole_numbers(rpc.deserialize_properties(request.properties)),
                dependencies=tuple(request.dependencies),
                protect=False,
                retain_on_delete=False,
                op="read",
            )
        )
        return response

    def _record(self, urn: str, request: Any, inputs: dict[str, Any]) -> None:
        self.planned.append(
            PlannedResource(
                urn=urn,
                type=request.type,
                name=request.name,
                custom=bool(request.custom),
                parent=request.parent,
                inputs=placeholders(whole_numbers(inputs)),
                dependencies=tuple(request.dependencies),
                protect=bool(request.protect),
                retain_on_delete=bool(request.retainOnDelete),
                ignore_changes=tuple(request.ignoreChanges),
                custom_timeouts={
                    step: getattr(request.customTimeouts, step)
                    for step in ("create", "update", "delete")
                    if request.HasField("customTimeouts") and getattr(request.customTimeouts, step)
                },
                delete_before_replace=bool(request.deleteBeforeReplace),
                replace_on_changes=tuple(request.replaceOnChanges),
                property_dependencies={  # sorted: arrival order varies from run to run
                    key: tuple(sorted(deps.urns))
                    for key, deps in request.propertyDependencies.items()
                },
                replacement_trigger=(
                    placeholders(json_format.MessageToDict(request.replacement_trigger))
                    if has_field(request, "replacement_trigger")
                    else None
                ),
            )
        )


def has_field(request: Any, name: str) -> bool:
    """Set in the request; False where the SDK's protocol has no such field (replacement_trigger
    is in pulumi's protos from 3.208), so an SDK too old for the program still gets as far as
    infra/versions.py's message instead of failing on the root stack's registration."""
    return name in request.DESCRIPTOR.fields_by_name and request.HasField(name)


def whole_numbers(value: Any) -> Any:
    """The engine carries numbers as doubles; print 4.0 as 4, as `pulumi preview --json` does."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    return value


UNKNOWN_TEXT = "output<string>"  # how `pulumi preview` shows a value known only after `up`
SECRET = "[secret]"  # how `pulumi preview` shows a secret


def placeholders(value: Any) -> Any:
    """The engine's unknown sentinel and secrets, shown the way `pulumi preview` shows them:
    a secret's value never reaches a plan, its output or its JSON."""
    if rpc.is_rpc_secret(value):
        return SECRET
    if isinstance(value, Unknown) or (isinstance(value, str) and value == rpc.UNKNOWN):
        return UNKNOWN_TEXT
    if isinstance(value, dict):
        return {k: placeholders(v) for k, v in value.items()}
    if isinstance(value, list):
        return [placeholders(v) for v in value]
    return value


def _resolve(value: Any) -> Any:
    if isinstance(value, pulumi.Output):
        if not _sync_await(value.is_known()):
            return UNKNOWN_TEXT
        if _sync_await(value.is_secret()):
            return SECRET
        # apply/all/resource outputs already hold deeply unwrapped values; from_input would
        # wrap every list element in a new Output again (~50 ms for a 2048-GPU plan's lists)
        return _sync_await(value.future())
    return _sync_await(pulumi.Output.from_input(value).future())


def creation_order(resources: list[PlannedResource]) -> list[PlannedResource]:
    """A reproducible order: parents and dependencies first, ties broken by URN (the engine
    registers concurrently, so arrival order varies from run to run)."""
    by_urn = {r.urn: r for r in resources}
    waiting_on = {
        r.urn: {u for u in (r.parent, *r.dependencies) if u in by_urn and u != r.urn}
        for r in resources
    }
    dependents: dict[str, list[str]] = {}
    for urn, needs in waiting_on.items():
        for need in needs:
            dependents.setdefault(need, []).append(urn)
    ready = [urn for urn, needs in waiting_on.items() if not needs]
    heapq.heapify(ready)
    ordered = []
    while ready:
        urn = heapq.heappop(ready)
        ordered.append(replace(by_urn[urn], dependencies=tuple(sorted(by_urn[urn].dependencies))))
        for dependent in dependents.get(urn, []):
            waiting_on[dependent].discard(urn)
            if not waiting_on[dependent]:
                heapq.heappush(ready, dependent)
    return ordered


def run_plan(
    stack: str,
    config: dict[str, str],
    program: Path = PROGRAM,
    reservation_lookup: ReservationLookup | None = None,
    preview: bool = False,
    network_lookup: NetworkLookup | None = None,
    secret_keys: list[str] | None = None,
    project: str = PROJECT,
) -> Plan:
    """Plan one stack: the program's resources and outputs, or the ConfigError it raised.
    Offline, reservations and an existing network are not looked up unless a
    ``reservation_lookup`` or ``network_lookup`` is given."""
    region = config.get("aws:region", "us-east-1")
    mocks = PlanMocks(region, load_catalog().zones(region))
    monitor = RecordingMonitor(mocks, preview, project=project, stack=stack)
    set_all_config(dict(config), list(secret_keys or []))  # as the CLI's --secret keys
    ROOT.set(None)  # a fresh root Stack per plan: no outputs or parents leak between runs
    # pulumi's @contextproperty is typed as a method (its own `# type: ignore`s say so)
    SETTINGS.outputs.clear()  # pyright: ignore[reportAttributeAccessIssue]
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=preview, monitor=monitor)
    plan = Plan(stack=stack, config=dict(config), secret_keys=tuple(secret_keys or ()))
    # A plan allocates hundreds of thousands of objects and frees almost none of them in cycles,
    # so the cyclic GC only rescans the live heap (all of pulumi_aws included) over and over:
    # half the time of a 2048-GPU plan, and growing faster than the cluster. Pause it for the
    # plan, as timeit does; reference counting still frees everything else.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    live_lookup, infra_program.live_lookup = infra_program.live_lookup, reservation_lookup
    network, infra_program.network_lookup = infra_program.network_lookup, network_lookup
    # As the language host runs it: the program's folder first on the import path, so a
    # program's own modules import (pulumi-language-python runs main from its folder).
    folder = str(Path(program).resolve().parent)
    sys.path.insert(0, folder)

    def run_program() -> None:
        runpy.run_path(str(program), run_name="__main__")

    try:
        _sync_await(run_pulumi_func(run_program))
    except ConfigError as error:
        plan.error = error
    except (Exception, SystemExit) as error:  # the user's own failure is theirs (blame.py)
        blamed = program_error(error)
        if blamed is None:
            raise
        raise blamed from error
    finally:
        sys.path.remove(folder)
        infra_program.live_lookup = live_lookup
        infra_program.network_lookup = network
        if gc_was_enabled:
            gc.enable()
    if plan.error is None and monitor.duplicates:  # the engine refuses the program there
        plan.error = DuplicateUrns(stack, duplicate_problems(monitor.duplicates))
    if plan.error is None and mocks.refused:  # `pulumi up` would fail there: no outputs
        plan.error = AwsRefusal(stack, mocks.refused)
    ours = [r for r in monitor.planned if r.urn not in monitor.users]
    broken = [problem for r in ours for problem in hazards(r)]
    # a user's own resource that a later `pulumi up` could not replace: theirs to decide
    plan.warnings += [
        f"your {p.path}: {p.problem} ({p.allowed})"
        for r in monitor.planned
        if r.urn in monitor.users
        for p in hazards(r)
    ]
    if plan.error is None and broken:  # a later `pulumi up` would fail or lose data
        plan.error = UpdateHazard(stack, broken)
    root = get_root_resource()
    if plan.error is None and isinstance(root, Stack):
        plan.outputs = {name: _resolve(value) for name, value in root.outputs.items()}
    plan.resources = creation_order(monitor.planned)
    plan.invokes = mocks.invokes
    plan.states = {
        urn: placeholders({**reg.state, "id": reg.id}) for urn, reg in monitor.resources.items()
    }
    return plan
