"""Types checked (issue 28): basedpyright passes on the package (pyproject.toml's
[tool.basedpyright]), and the public API is typed for its users: a program that passes a wrong
type or a misspelled keyword to GpuClusterArgs or GpuCluster is reported by the type checker, as
an editor shows it, and a correct one is not."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from gpu_cluster.infra import api_settings
from gpu_cluster.infra.spec import StackSpec

ROOT = Path(__file__).resolve().parent.parent
UNRESOLVED = {"reportMissingImports", "reportMissingModuleSource"}


def basedpyright() -> str:
    """The checker of the environment running the tests (the test extra installs it)."""
    found = Path(sys.executable).parent / "basedpyright"
    command = str(found) if found.exists() else shutil.which("basedpyright")
    assert command, "basedpyright is not installed: pip install -e '.[test]'"
    return command


def check(*args: str, cwd: Path) -> dict:
    # as from a shell: not with the tests' PYTHONPATH (tests/model_checked's sitecustomize), which
    # the checker's interpreter would put on its search paths
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BOTOCORE_LIMITS_RECORD")}
    run = subprocess.run(
        [basedpyright(), "--outputjson", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.stdout, run.stderr
    return json.loads(run.stdout)


def errors(report: dict) -> list[dict]:
    return [d for d in report["generalDiagnostics"] if d["severity"] == "error"]


def shown(diagnostics: list[dict]) -> str:
    return "\n".join(
        f"{Path(d['file']).name}:{d['range']['start']['line'] + 1}: {d['message']}"
        f" ({d.get('rule', '')})"
        for d in diagnostics
    )


@pytest.mark.slow
def test_the_package_type_checks():
    report = check(cwd=ROOT)
    unresolved = [d for d in report["generalDiagnostics"] if d.get("rule") in UNRESOLVED]
    assert not unresolved, shown(unresolved)
    assert report["summary"]["errorCount"] == 0, shown(errors(report))
    assert report["summary"]["filesAnalyzed"] > 100


USER_PROGRAM = """
import pulumi
from gpu_cluster import (
    DataStore,
    DataStoreArgs,
    GpuCluster,
    GpuClusterArgs,
    GpuNodeGroup,
    GpuNodeGroupArgs,
    InferenceService,
    InferenceServiceArgs,
)

vpc_id: pulumi.Output[str] = pulumi.Output.from_input("vpc-0a1")

good = GpuCluster(
    "train",
    GpuClusterArgs(
        instance_type="p4d.24xlarge",
        nodes=4,
        availability_zone="us-east-1a",
        network={"vpc_id": vpc_id, "subnet_ids": ["subnet-0a1b2c3d4e5f60789"]},
        storage={"source": "create"},
        idle_stop={"minutes": 60},
        budget={"monthly_usd": 5000},
        tags={"team": "ml-platform"},
    ),
    opts=pulumi.ResourceOptions(protect=False),
)
store = DataStore("vault", DataStoreArgs(bucket="my-team-datasets-0042", audit_trail=True))
service = InferenceService(
    "serve",
    InferenceServiceArgs(
        instance_type="g5.xlarge",
        inference={"availability_zones": ["us-east-1a", "us-east-1b"], "min_nodes": 2},
        storage={"source": "existing", "bucket": store.bucket_name},
    ),
)
group = GpuNodeGroup(
    "workers",
    GpuNodeGroupArgs(
        subnet_id="subnet-0a1b2c3d4e5f60789",
        security_group_id="sg-0a1",
        instance_profile_arn="arn:aws:iam::123456789012:instance-profile/nodes",
        kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/1",
        instance_type="p5.48xlarge",
        purchase_option="spot",
    ),
)
"""

WRONG_PROGRAM = """
from gpu_cluster import GpuCluster, GpuClusterArgs

args = GpuClusterArgs(instance_type="p4d.24xlarge", availability_zone="us-east-1a")
wrong_name = GpuCluster(4, args)  # line 5: an int where the name (a str) belongs
wrong_nodes = GpuClusterArgs(nodes="four")  # line 6: a str where a whole number belongs
misspelled = GpuClusterArgs(idel_stop={"minutes": 60})  # line 7: no such keyword
wrong_key = GpuClusterArgs(network={"subnet_idz": []})  # line 8: no such network key
wrong_option = GpuClusterArgs(purchase_option="cheap")  # line 9: not a purchase option
"""


def user_project(tmp_path: Path, program: str) -> Path:
    """A user's project next to this checkout: gpu_cluster found through extraPaths (the
    editable install's import hook is invisible to static tools), the rest in this venv."""
    tmp_path.mkdir()
    (tmp_path / "pyrightconfig.json").write_text(
        json.dumps(
            {
                "extraPaths": [str(ROOT)],
                "pythonPath": sys.executable,
                "typeCheckingMode": "standard",
                "pythonVersion": "3.11",
            }
        )
    )
    (tmp_path / "__main__.py").write_text(textwrap.dedent(program))
    return tmp_path


@pytest.mark.slow
def test_a_user_program_is_type_checked_against_the_public_api(tmp_path):
    report = check(cwd=user_project(tmp_path / "good", USER_PROGRAM))
    unresolved = [d for d in report["generalDiagnostics"] if d.get("rule") in UNRESOLVED]
    assert not unresolved, shown(unresolved)
    assert report["summary"]["errorCount"] == 0, shown(errors(report))

    report = check(cwd=user_project(tmp_path / "wrong", WRONG_PROGRAM))
    found = {d["range"]["start"]["line"] + 1: d for d in errors(report)}
    assert set(found) == {5, 6, 7, 8, 9}, shown(errors(report))
    assert '"name" of type "str"' in found[5]["message"]
    assert '"nodes" of type "int"' in found[6]["message"]
    assert found[7]["message"] == 'No parameter named "idel_stop"'
    assert "subnet_idz" in found[8]["message"]
    assert '"purchase_option"' in found[9]["message"]


def _keys(settings: type) -> set[str]:
    return set(settings.__annotations__)


def _model(annotation: object) -> type[BaseModel] | None:
    for option in (annotation, *typing.get_args(annotation)):
        if isinstance(option, type) and issubclass(option, BaseModel):
            return option
    return None


def _typed_dict(annotation: object) -> type | None:
    """The TypedDict an annotation of infra/api_settings.py names (annotations are forward refs)."""
    names = re.findall(r"\b[A-Z]\w*Settings\b", getattr(annotation, "__forward_arg__", ""))
    return getattr(api_settings, names[0]) if names else None


def test_the_typed_arguments_are_the_stack_files_keys():
    """Each Args' keyword arguments name keys of the spec, and each nested dict's keys are
    exactly its model's fields (a new spec key is a new typed argument)."""
    spec = set(StackSpec.model_fields)
    arguments = {"region", "role", "cluster_name", "secrets"}  # arguments of their own
    data_only = {"audit_trail", "ebs_encryption_by_default", "snapshot_block_public_access"}
    cluster = _keys(api_settings.ClusterSettings)
    assert cluster | arguments | {"inference"} | data_only == spec
    assert _keys(api_settings.ServingSettings) == cluster | {"inference"}
    assert _keys(api_settings.NodeGroupSettings) < cluster
    assert _keys(api_settings.DataSettings) == data_only | {"bucket", "storage", "tags"}

    def nested(settings: type, model: type[BaseModel]) -> None:
        hints = settings.__annotations__
        assert set(hints) == set(model.model_fields), settings.__name__
        for name, field in model.model_fields.items():
            inner = _model(field.annotation)
            if inner is not None:
                typed = _typed_dict(hints[name])
                assert typed is not None, f"{settings.__name__}.{name}"
                nested(typed, inner)

    hints = api_settings.ServingSettings.__annotations__
    for name in _keys(api_settings.ServingSettings):
        inner = _model(StackSpec.model_fields[name].annotation)
        if inner is not None:
            typed = _typed_dict(hints[name])
            assert typed is not None, name
            nested(typed, inner)
