"""Settings that do not apply are refused (issue 29, section 4): one table says which keys each
stage uses (infra/validation/stage_keys.py); every key of the spec has its row, and over every
(stage, key) pair a key the stage ignores is refused with the stage and the key, and a key it
uses is not."""

from __future__ import annotations

import json
import re
import textwrap
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pytest
import yaml
from conftest import ROOT
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from gpu_cluster.components.purchase import is_single_instance
from gpu_cluster.infra.api import ArgumentError
from gpu_cluster.infra.cli import main as gpuc
from gpu_cluster.infra.config import load_spec, parse_spec
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.spec import PROJECT, StackSpec
from gpu_cluster.infra.stack_files import load_stack_config, to_config_value
from gpu_cluster.infra.validation import ResolvedCluster
from gpu_cluster.infra.validation.stage_keys import (
    KEYS,
    PROJECT_DEFAULTS,
    STAGES,
    spec_keys,
    stage_of,
    stages_using,
)

STACK_OF_STAGE = {
    "data": "data",
    "dev box": "dev",
    "experiment": "experiment",
    "train": "train",
    "inference": "inference",
}
# values a stack file could give where the type alone does not say one
SPECIAL: dict[str, Any] = {
    "nodes": 2,  # a project default (Pulumi.yaml): its default value is no sign it was set
    "purchaseOption": "spot",
    "secrets": {"WANDB_API_KEY": {"secure": "v1:abc"}},
    "tags": {"owner": "probe"},
    "alertEmails": ["team@example.com"],
    "idleStop.minutes": 30,
    "schedule.start": "08:00",
    "schedule.stop": "20:00",
}


def _leaf(annotation: Any) -> Any:
    """A shape-valid value of a field's type."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return _leaf(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return _leaf(next(a for a in get_args(annotation) if a is not type(None)))
    if origin is Literal:
        return get_args(annotation)[0]
    if origin in (list, dict):
        return [] if origin is list else {}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return required_fields(annotation)
    return {bool: True, int: 1, float: 1.0, str: "x"}[annotation]


def required_fields(model: type[BaseModel], prefix: str = "") -> dict[str, Any]:
    """A mapping of the model that validates: its required fields (schedule's start, stop)."""
    return {
        field.alias or name: SPECIAL.get(f"{prefix}{field.alias or name}", _leaf(field.annotation))
        for name, field in model.model_fields.items()
        if field.is_required()
    }


def sample(path: str) -> tuple[str, Any]:
    """(top-level key, its value) that sets ``path`` and only what it needs."""
    top, *rest = path.split(".")
    model: type[BaseModel] = StackSpec
    fields = [top, *rest]
    chain = []
    for name in fields:
        field = next(f for n, f in model.model_fields.items() if (f.alias or n) == name)
        chain.append((model, field))
        for option in (field.annotation, *get_args(field.annotation)):
            if isinstance(option, type) and issubclass(option, BaseModel):
                model = option
    # the leaf's value: its default where it has one (setting the default still sets it)
    _, leaf = chain[-1]
    default = leaf.get_default(call_default_factory=True)
    if path in SPECIAL:
        value: Any = SPECIAL[path]
    elif leaf.is_required() or default is None or default is PydanticUndefined:
        value = _leaf(leaf.annotation)
    elif isinstance(default, BaseModel):
        value = default.model_dump(by_alias=True, exclude_unset=True)
    else:
        value = default
    for depth in range(len(fields) - 1, 0, -1):  # wrap it in its parents, with their required
        parent_model = chain[depth][0]
        parent_prefix = ".".join(fields[:depth]) + "."
        value = {**required_fields(parent_model, parent_prefix), fields[depth]: value}
    return top, value


def configured(stage: str, path: str) -> tuple[str, dict[str, str]]:
    stack = STACK_OF_STAGE[stage]
    config = load_stack_config(stack, ROOT)
    top, value = sample(path)
    config[f"{PROJECT}:{top}"] = to_config_value(value)
    return stack, config


def refusals(stack: str, config: dict[str, str]) -> list:
    try:
        load_spec(config, stack)
    except ConfigError as error:
        return [p for p in error.problems if " stage (" in p.problem and "ignores" in p.problem]
    return []


# --- the table --------------------------------------------------------------------------------


def test_every_key_of_the_spec_has_a_row_and_every_row_is_a_key():
    """A new key in infra/spec.py fails here until the table says which stages read it."""
    assert set(KEYS) == set(spec_keys())


def test_each_row_names_where_the_program_reads_it_and_why_the_others_do_not():
    for path, use in KEYS.items():
        assert use.stages <= set(STAGES) and use.stages, path
        assert use.reader, path
        if set(STAGES) - use.stages - {"data"}:
            assert use.ignored, f"{path}: why do the other node stages ignore it?"


@pytest.mark.parametrize("stage", STAGES)
def test_each_stage_is_what_its_stack_file_builds(stage):
    """The stage of each stack file, and as the program tells them apart: a dev box is one
    on-demand node (a plain instance), a train stack a gang of 2 or more."""
    stack = STACK_OF_STAGE[stage]
    spec, problems, _ = parse_spec(load_stack_config(stack, ROOT))
    assert spec is not None and not problems
    assert stage_of(spec) == stage
    resolved = load_spec(load_stack_config(stack, ROOT), stack)
    if isinstance(resolved, ResolvedCluster) and resolved.inference is None:
        single = is_single_instance(resolved.purchase, resolved.node_count)
        assert single == (stage == "dev box")
        assert (resolved.cost_controls.gang_timeout_minutes > 0) == (stage == "train")


def test_the_project_defaults_are_pulumi_yamls():
    declared = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())["config"]
    assert set(PROJECT_DEFAULTS) == {k for k, v in declared.items() if "default" in v}
    for name in PROJECT_DEFAULTS:
        field = next(f for n, f in StackSpec.model_fields.items() if (f.alias or n) == name)
        assert declared[name]["default"] == field.get_default()


# --- every (stage, key) pair ------------------------------------------------------------------


PAIRS = [(stage, path) for stage in STAGES for path in spec_keys() if path != "role"]


@pytest.mark.parametrize(("stage", "path"), PAIRS, ids=[f"{s}-{p}" for s, p in PAIRS])
def test_a_key_is_refused_exactly_where_its_stage_ignores_it(stage, path):
    stack, config = configured(stage, path)
    spec, shape, _ = parse_spec(config)
    assert spec is not None and not shape, shape  # the sample is well-shaped
    now = stage_of(spec)  # nodes: 2 makes the dev box a train stack, spot an experiment
    found = refusals(stack, config)
    # the key, or the nearest parent its stage ignores, is refused
    refused_at = path
    while "." in refused_at and now not in stages_using(refused_at.rsplit(".", 1)[0]):
        refused_at = refused_at.rsplit(".", 1)[0]
    mine = [p for p in found if p.path == f"{PROJECT}:{refused_at}"]
    if now in stages_using(path):
        assert not mine, mine
        return
    assert len(mine) == 1, found
    problem = mine[0]
    assert problem.problem.startswith(f"the {now} stage (")
    assert f"ignores {refused_at}: " in problem.problem
    assert problem.allowed.startswith("not set on this stage")
    assert problem.fix == f"pulumi config rm{' --path' if '.' in refused_at else ''} {refused_at}"


@pytest.mark.parametrize("stage", [s for s in STAGES if s != "train"])
def test_gang_timeout_set_where_there_is_no_gang_is_refused_by_gpuc_plan(stage, capsys):
    """The issue's own case: `gpuc plan --stack S --set gangTimeoutMinutes=30`."""
    code = gpuc(["plan", "--stack", STACK_OF_STAGE[stage], "--set", "gangTimeoutMinutes=30"])
    err = capsys.readouterr().err
    assert code == 3
    assert f"gpu-cluster:gangTimeoutMinutes: the {stage} stage" in err
    assert "fix:      pulumi config rm gangTimeoutMinutes" in err
    assert "delete gpu-cluster:gangTimeoutMinutes" in err  # the stack-file form


def test_a_refused_key_is_not_judged_again_by_the_checks_of_the_keys_used():
    """gangTimeoutMinutes: 5 on a dev box is one problem (ignored), not also 'too short'."""
    config = {**load_stack_config("dev", ROOT), f"{PROJECT}:gangTimeoutMinutes": "5"}
    with pytest.raises(ConfigError) as raised:
        load_spec(config, "dev")
    assert [p.path for p in raised.value.problems] == [f"{PROJECT}:gangTimeoutMinutes"]


# --- the public components go through the same table -----------------------------------------


def plan_program(tmp_path: Path, body: str):
    path = tmp_path / "__main__.py"
    path.write_text("from gpu_cluster import *\n" + textwrap.dedent(body))
    return run_plan("dev", {"aws:region": "us-east-1"}, program=path, project="mine")


@pytest.mark.parametrize(
    ("body", "argument", "stage"),
    [
        (
            'GpuCluster("box", GpuClusterArgs(instance_type="g5.xlarge", '
            'availability_zone="us-east-1a", gang_timeout_minutes=30))',
            "GpuClusterArgs.gang_timeout_minutes",
            "dev box",
        ),
        (
            'InferenceService("serve", InferenceServiceArgs(instance_type="g5.xlarge", '
            "nodes=3, inference={"
            '"availability_zones": ["us-east-1a", "us-east-1b"], '
            '"tls": {"certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/'
            '00000000-0000-0000-0000-000000000000"}}))',
            "InferenceServiceArgs.nodes",
            "inference",
        ),
    ],
)
def test_a_component_refuses_a_key_its_stage_ignores(tmp_path, body, argument, stage):
    plan = plan_program(tmp_path, body)
    assert isinstance(plan.error, ArgumentError), plan.error
    found = {p.path: p for p in plan.error.problems}
    assert argument in found, found
    assert found[argument].problem.startswith(f"the {stage} stage (")
    assert found[argument].fix.startswith("leave out ")
    assert [r.type for r in plan.resources] == ["pulumi:pulumi:Stack"]


def test_sample_values_set_only_their_key():
    """The pair test's samples: each sets its key (and the required fields beside it)."""
    for path in spec_keys():
        top, value = sample(path)
        assert top == path.split(".")[0]
        if "." in path:
            inner: Any = value
            for part in path.split(".")[1:]:
                assert part in inner, (path, value)
                inner = inner[part]
    json.dumps([sample(p) for p in spec_keys()])  # plain data, as a stack file holds


def test_the_configuration_pages_stages_column_is_the_table():
    """docs/concepts/configuration.md's hand-written overview: its stages cell for each row."""
    page = (ROOT / "docs" / "concepts" / "configuration.md").read_text()
    rows = [line for line in page.splitlines() if line.startswith("| `")]
    checked = set()
    for row in rows:
        cells = [cell.strip() for cell in row.split(" | ")]
        names = [n for n in re.findall(r"`([A-Za-z:.]+)`", cells[0]) if n != "aws:region"]
        for name in names:
            used = stages_using(name)
            assert cells[2] == ("all" if used == STAGES else ", ".join(used)), row
            checked.add(name)
    top = {k for k in spec_keys() if "." not in k}
    assert top <= checked, top - checked
