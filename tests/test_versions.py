"""The Pulumi the program needs (infra/versions.py): an SDK or CLI too old for
replacement_trigger is a message naming what is installed, what is needed and the fix, and the
program creates nothing. The plan engine answers the probe as a new CLI does; these tests make
it answer as an old one."""

from __future__ import annotations

from importlib.metadata import version

import grpc
import pulumi
import pytest
from conftest import ROOT, plan_stack

from gpu_cluster.infra.cli import main as gpuc
from gpu_cluster.infra.plan.engine import RecordingMonitor, run_plan
from gpu_cluster.infra.stack_files import program_of
from gpu_cluster.infra.versions import CLI_FLOOR, SDK_FLOOR, PulumiTooOld


def old_engine(answer):
    """A RecordingMonitor whose SupportsFeature answers `replacementTrigger` as `answer` does
    (an engine before 3.208 answers false: pkg/resource/deploy/source_eval.go)."""
    original = RecordingMonitor.SupportsFeature

    def supports(self, request):
        if request.id == "replacementTrigger":
            return answer()
        return original(self, request)

    return supports


def no_support():
    return type("SupportsFeatureResponse", (), {"hasSupport": False})


class Unimplemented(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.UNIMPLEMENTED


def no_rpc():
    raise Unimplemented()


def created(plan) -> list[str]:
    return [r.name for r in plan.resources if r.custom]


def test_the_plan_engine_asks_the_probe_and_answers_as_a_new_cli(monkeypatch):
    asked = []
    original = RecordingMonitor.SupportsFeature

    def supports(self, request):
        asked.append(request.id)
        return original(self, request)

    monkeypatch.setattr(RecordingMonitor, "SupportsFeature", supports)
    plan = plan_stack("dev")
    assert plan.error is None, plan.error
    assert "replacementTrigger" in asked
    assert any(r.replacement_trigger is not None for r in plan.resources)


@pytest.mark.parametrize("answer", [no_support, no_rpc], ids=["answers-false", "no-rpc"])
@pytest.mark.parametrize("stack", ["train", "data"])
def test_an_old_cli_is_a_message_and_creates_nothing(monkeypatch, answer, stack):
    monkeypatch.setattr(RecordingMonitor, "SupportsFeature", old_engine(answer))
    plan = plan_stack(stack)
    assert isinstance(plan.error, PulumiTooOld)
    message = str(plan.error)
    assert f"stack '{stack}': the Pulumi running this program is too old" in message
    assert "nothing was planned or created" in message
    assert f"Pulumi CLI >= {CLI_FLOOR}" in message
    assert "upgrade the Pulumi CLI" in message and "pulumi version" in message
    assert "Python SDK" not in message  # the SDK here is new enough
    assert created(plan) == []


def test_an_old_sdk_is_a_message_and_creates_nothing(monkeypatch):
    class ResourceOptions3213(pulumi.ResourceOptions):
        """ResourceOptions as pulumi 3.213 has it: no replacement_trigger."""

        def __init__(self, parent=None, depends_on=None, protect=None, **options):
            super().__init__(parent=parent, depends_on=depends_on, protect=protect, **options)

    monkeypatch.setattr(pulumi, "ResourceOptions", ResourceOptions3213)
    plan = plan_stack("experiment")
    assert isinstance(plan.error, PulumiTooOld)
    message = str(plan.error)
    assert f"received: 'pulumi {version('pulumi')}'" in message
    assert f"allowed:  pulumi >= {SDK_FLOOR}" in message
    assert f"pip install -U 'pulumi>={SDK_FLOOR},<4'" in message
    assert "Pulumi CLI" not in message  # the plan engine answers as a new CLI
    assert created(plan) == []


def test_a_program_of_your_own_is_checked_too(monkeypatch):
    """gpu_cluster's components in a user's program (examples/) ask before they resolve."""
    monkeypatch.setattr(RecordingMonitor, "SupportsFeature", old_engine(no_support))
    project, path, config = program_of(ROOT / "examples" / "training-in-existing-vpc", "dev")
    plan = run_plan("dev", config, program=path, project=project)
    assert isinstance(plan.error, PulumiTooOld)
    assert created(plan) == []


def test_gpuc_plan_prints_it_as_a_message(monkeypatch, capsys):
    monkeypatch.setattr(RecordingMonitor, "SupportsFeature", old_engine(no_support))
    assert gpuc(["plan", "--stack", "dev"]) != 0
    err = capsys.readouterr().err
    assert f"Pulumi CLI >= {CLI_FLOOR}" in err and "Traceback" not in err


def test_the_floors_are_the_ones_pyproject_declares():
    """One floor, written in infra/versions.py and pyproject.toml alike."""
    import tomllib

    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pulumi_requirement,) = [d for d in dependencies if d.startswith("pulumi>=")]
    floor = pulumi_requirement.split(">=")[1].split(",")[0]
    assert tuple(map(int, floor.split("."))) + (0,) * (3 - len(floor.split("."))) == tuple(
        map(int, SDK_FLOOR.split("."))
    )
    guide = (ROOT / "docs" / "getting-started.md").read_text()
    assert f"Pulumi CLI {CLI_FLOOR}" in guide and f"pulumi {SDK_FLOOR}" in guide


def test_urns_keep_the_plans_stack_where_the_sdk_calls_from_another_thread():
    """pulumi before 3.225 calls the monitor from executor threads without the program's
    context, where get_stack() answers "stack" (found by .ci/oldest at pulumi 3.214)."""
    import threading

    from gpu_cluster.infra.plan.mocks import PlanMocks

    monitor = RecordingMonitor(PlanMocks("us-east-1", []), project="gpu-cluster", stack="train")
    urns = []
    thread = threading.Thread(
        target=lambda: urns.append(monitor.make_urn("", "aws:s3/bucket:Bucket", "b"))
    )
    thread.start()
    thread.join()
    assert urns == ["urn:pulumi:train::gpu-cluster::aws:s3/bucket:Bucket::b"]
