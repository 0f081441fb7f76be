"""The Pulumi this program needs, checked when it runs (`pulumi up`/`preview`, `gpuc plan`, and
a program of your own using gpu_cluster's components), before anything is registered.

Node groups, single nodes and capacity reservations are replaced through the
``replacement_trigger`` resource option (components/node_group.py): a new instance type,
subnet, placement group, NIC layout or purchase option must make new nodes. It needs both:

- the Python SDK ``pulumi >= 3.214.0``: pulumi CHANGELOG 3.214.0 (2025-12-30), "[sdk/python] Add
  support for `replacement_trigger` in the Python SDK" (pulumi/pulumi#20940). An older
  ``ResourceOptions`` raises ``TypeError: unexpected keyword argument 'replacement_trigger'``.
- the Pulumi CLI (its engine) ``>= 3.208.0``: CHANGELOG 3.208.0 (2025-11-20), "[engine] Add a
  `replacement_trigger` resource option" (pulumi/pulumi#20936). An older engine drops the field
  without a word, so such a change would update the group in place and keep the old nodes.

The CLI is asked, not its version parsed: the same engine commit made the resource monitor answer
``SupportsFeature("replacementTrigger")`` with true (pkg/resource/deploy/source_eval.go,
``supportsFeatureID``); an older engine answers false for an id it does not know. The SDK is
asked the same way: does ``ResourceOptions`` take ``replacement_trigger``.
"""

from __future__ import annotations

import inspect
from importlib.metadata import PackageNotFoundError, version

import pulumi

from gpu_cluster.infra.errors import ConfigError, Problem

SDK_FLOOR = "3.214.0"  # ResourceOptions(replacement_trigger=...), pulumi#20940
CLI_FLOOR = "3.208.0"  # the engine honours replacement_trigger, pulumi#20936
ENGINE_FEATURE = "replacementTrigger"  # the resource monitor's SupportsFeature id for it


class PulumiTooOld(ConfigError):
    """The SDK or the CLI cannot run this program as written; raised before anything exists."""

    @staticmethod
    def header(stack: str, count: int) -> str:
        return (
            f"stack '{stack}': the Pulumi running this program is too old for it; "
            "nothing was planned or created:"
        )


def installed_sdk() -> str:
    try:
        return version("pulumi")
    except PackageNotFoundError:  # pragma: no cover - pulumi imports, so it is installed
        return "unknown"


def sdk_supports_trigger() -> bool:
    return "replacement_trigger" in inspect.signature(pulumi.ResourceOptions.__init__).parameters


def engine_supports_trigger() -> bool:
    """Ask the engine driving the program (the CLI, or the plan engine's mock monitor)."""
    import grpc
    from pulumi.runtime.proto import resource_pb2
    from pulumi.runtime.settings import get_monitor

    monitor = get_monitor()
    if monitor is None:  # not under an engine: nothing to ask, nothing will be created
        return True
    try:
        answer = monitor.SupportsFeature(resource_pb2.SupportsFeatureRequest(id=ENGINE_FEATURE))
    except grpc.RpcError as error:
        if error.code() == grpc.StatusCode.UNIMPLEMENTED:  # an engine older than the RPC
            return False
        raise
    return bool(answer.hasSupport)


def problems(sdk: str, sdk_ok: bool, engine_ok: bool) -> list[Problem]:
    found = []
    if not sdk_ok:
        found.append(
            Problem(
                path="pulumi (the Python SDK in this environment)",
                received=f"pulumi {sdk}",
                problem=(
                    "its ResourceOptions has no replacement_trigger, which replaces the nodes "
                    "when their instance type or purchase option changes"
                ),
                allowed=f"pulumi >= {SDK_FLOOR}",
                fix=(
                    f"pip install -U 'pulumi>={SDK_FLOOR},<4' in the stack's virtualenv "
                    "(or `pulumi install` again), then run the command again"
                ),
            )
        )
    if not engine_ok:
        found.append(
            Problem(
                path="Pulumi CLI (the engine running this program)",
                received=(
                    f"an engine that does not support the {ENGINE_FEATURE} resource option "
                    f"(older than {CLI_FLOOR}; `pulumi version` shows it)"
                ),
                problem=(
                    "it would ignore replacement_trigger without a word: a change of instance "
                    "type or purchase option would update the node group in place and keep the "
                    "old nodes"
                ),
                allowed=f"Pulumi CLI >= {CLI_FLOOR}",
                fix=(
                    "upgrade the Pulumi CLI (curl -fsSL https://get.pulumi.com | sh, or "
                    "brew upgrade pulumi), then run the command again"
                ),
            )
        )
    return found


def require_supported_pulumi() -> None:
    """Raise PulumiTooOld (a Pulumi RunError: a message, no traceback) if the SDK or the CLI
    cannot run this program as written."""
    found = problems(installed_sdk(), sdk_supports_trigger(), engine_supports_trigger())
    if found:
        raise PulumiTooOld(pulumi.get_stack(), found)
