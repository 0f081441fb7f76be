"""Values as Pulumi reads them (issue 29, section 2): a stack file's number that Pulumi reads
otherwise than a person does (010 is 8) is warned with the value received and the quoted form,
by every command that loads the stack; infinity and NaN are refused wherever a number is meant,
as Pulumi itself refuses them in a stack file (no traceback)."""

from __future__ import annotations

import math
import shutil
import types
import typing

import pytest
from conftest import ROOT
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from gpu_cluster.infra import cli
from gpu_cluster.infra.aws import preflight
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.fixes import apply_fix
from gpu_cluster.infra.overrides import stack_config
from gpu_cluster.infra.problems import INPUT
from gpu_cluster.infra.pulumi_yaml import config_string, load
from gpu_cluster.infra.spec import ConfigFloat, StackSpec
from gpu_cluster.infra.stack_files import StackFileError, load_stack_config, number_warnings
from gpu_cluster.infra.yaml_numbers import how_read, surprising_numbers

# (as written in a stack file, what the program receives, how Pulumi read it, the decimal a
# person reads or the number received): every kind of number that reads otherwise
SURPRISES = [
    ("010", "8", "octal", "10"),
    ("-010", "-8", "octal", "-10"),
    ("0123", "83", "octal", "123"),
    ("0_10", "8", "octal", "10"),
    ("0o17", "15", "octal", "15"),
    ("0O17", "15", "octal", "15"),
    ("0x1F", "31", "hexadecimal", "31"),
    ("0X1f", "31", "hexadecimal", "31"),
    ("0b101", "5", "binary", "5"),
    ("1_000", "1000", "underscores dropped", "1000"),
    ("1_0.5", "10.5", "underscores dropped", "10.5"),
]
# numbers a person and Pulumi read alike: no warning
AGREED = ["10", "0", "00", "007", "08", "1e3", "0.5", ".5", "-3", "+4", "1.10", '"010"', "'0x1F'"]
NON_FINITE = [".inf", "-.inf", "+.inf", ".Inf", ".INF", ".nan", ".NaN", ".NAN"]


def stack_text(key: str, written: str) -> str:
    return f"config:\n  aws:region: us-east-1\n  gpu-cluster:{key}: {written}\n"


@pytest.mark.parametrize(("written", "received", "how", "decimal"), SURPRISES)
def test_a_number_read_otherwise_is_warned_with_the_value_and_the_quoted_form(
    written, received, how, decimal
):
    (note,) = surprising_numbers(stack_text("nodes", written))
    assert config_string(load(f"k: {written}")["k"]) == received  # the reader's own reading
    assert note.received == received and note.how == how
    assert note.warning() == (
        f'gpu-cluster:nodes: {written} is read by Pulumi as {received} ({how}); write "{written}" '
        f"(quoted) to keep it as written, or {decimal}"
    )
    quoted = load(f'k: "{written}"')["k"]
    assert quoted == written  # the quoted form keeps the text


@pytest.mark.parametrize("written", AGREED)
def test_a_number_read_alike_is_not_warned(written):
    assert surprising_numbers(stack_text("nodes", written)) == []


@given(st.integers(min_value=8, max_value=2**40), st.sampled_from(["0", "0o", "0x", "0b"]))
def test_every_base_is_warned_with_the_number_pulumi_reads(number, prefix):
    digits = {"0": f"{number:o}", "0o": f"{number:o}", "0x": f"{number:x}", "0b": f"{number:b}"}
    written = prefix + digits[prefix]
    read = how_read(written)
    assert read is not None and read[0] == number, written
    assert config_string(load(f"k: {written}")["k"]) == str(number)


@given(st.integers(min_value=1, max_value=10**9))
def test_plain_decimals_are_never_warned(number):
    assert how_read(str(number)) is None


def test_nested_values_tags_and_list_items_are_found_with_their_path():
    text = (
        "config:\n  gpu-cluster:rootVolume:\n    sizeGib: 0x12C\n  gpu-cluster:tags:\n"
        "    costCenter: 0123\n  gpu-cluster:inference:\n    availabilityZones: [a, b]\n"
        "    batching: {preferredBatchSizes: [04, 010]}\n"
    )
    paths = {(n.path, n.received) for n in surprising_numbers(text)}
    assert paths == {
        (("gpu-cluster:rootVolume", "sizeGib"), "300"),
        (("gpu-cluster:tags", "costCenter"), "83"),
        (("gpu-cluster:inference", "batching", "preferredBatchSizes", 1), "8"),
    }


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A copy of the project's Pulumi.yaml and stacks, as the current folder."""
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def edited(project, stack: str, old: str, new: str) -> None:
    path = project / "stacks" / f"Pulumi.{stack}.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_the_warning_travels_with_the_spec_until_the_value_is_replaced(project):
    edited(project, "dev", "sizeGib: 200", "sizeGib: 0310")
    config = load_stack_config("dev", project)
    assert config["gpu-cluster:rootVolume"] == '{"sizeGib":200}'  # 0310 is octal 200
    spec = load_spec(config, "dev")
    assert any("rootVolume.sizeGib: 0310 is read by Pulumi as 200" in w for w in spec.warnings)
    replaced = stack_config("dev", [("--set-path", "rootVolume.sizeGib=310")])
    assert number_warnings("dev", replaced, project) == []
    assert not any("0310" in w for w in load_spec(replaced, "dev").warnings)


def test_gpuc_plan_prints_it(project, capsys):
    edited(project, "experiment", "team: ml-platform", "team: 0123")
    assert cli.main(["plan", "--stack", "experiment"]) == 0
    out = capsys.readouterr().out
    assert (
        'warning: gpu-cluster:tags.team: 0123 is read by Pulumi as 83 (octal); write "0123"' in out
    )


def test_a_data_stack_warns_too_and_preflight_prints_it(project, capsys, monkeypatch):
    edited(project, "data", "team: ml-platform", "team: 0123")
    assert cli.main(["plan", "--stack", "data"]) == 0
    assert "warning: gpu-cluster:tags.team: 0123 is read by Pulumi as 83" in capsys.readouterr().out
    monkeypatch.setattr(preflight.Clients, "for_region", staticmethod(lambda region: None))
    monkeypatch.setattr(preflight, "run_data_preflight", lambda spec, clients: [])
    assert cli.main(["preflight", "--stack", "data"]) == 0
    assert "warning: gpu-cluster:tags.team: 0123 is read by Pulumi as 83" in capsys.readouterr().err


@pytest.mark.parametrize("written", NON_FINITE)
def test_infinity_or_nan_in_a_stack_file_is_refused_as_pulumi_refuses_it(project, written, capsys):
    edited(
        project, "experiment", "    fallbackTypes:", f"    maxPrice: {written}\n    fallbackTypes:"
    )
    with pytest.raises(StackFileError) as refused:
        load_stack_config("experiment", project)
    message = str(refused.value)
    assert "gpu-cluster:spot.maxPrice: " in message and "json: unsupported value" in message
    assert "write a finite number" in message
    assert cli.main(["plan", "--stack", "experiment"]) == INPUT
    err = capsys.readouterr().err
    assert "gpu-cluster:spot.maxPrice" in err and "Traceback" not in err and "internal" not in err


def test_a_project_default_of_infinity_is_refused_too(project):
    path = project / "Pulumi.yaml"
    text = path.read_text()
    assert "\nconfig:\n" in text
    path.write_text(text.replace("\nconfig:\n", "\nconfig:\n  budgetCap:\n    default: .nan\n"))
    with pytest.raises(StackFileError, match=r"gpu-cluster:budgetCap\.default: \.nan"):
        load_stack_config("dev", project)


def kinds_of(annotation: object) -> list[object]:
    """The types an annotation admits, through Optional, unions and Annotated."""
    if typing.get_origin(annotation) is typing.Annotated:
        return kinds_of(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [k for arg in typing.get_args(annotation) for k in kinds_of(arg)]
    return [annotation]


def float_fields(model: type[BaseModel] = StackSpec, prefix: tuple[str, ...] = ()):
    """Every float setting of the spec, as its location, whatever its nesting."""
    for name, field in model.model_fields.items():
        loc = (*prefix, field.alias or name)
        kinds = kinds_of(field.annotation)
        if float in kinds:
            yield loc
        for kind in kinds:
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                yield from float_fields(kind, loc)


FLOATS = list(float_fields())
# infinity and NaN as a user can write them: pydantic's float takes every one of these
SPELLINGS = ["inf", "+inf", "-inf", "Infinity", "-Infinity", "nan", "NaN", "1e999", "-1e999"]
HOSTS = {"spot": "experiment", "idleStop": "dev", "budget": "dev", "inference": "inference"}


def test_the_float_settings_are_found():
    """The walk below finds every float the spec has (the table is not hand-kept)."""
    assert {".".join(loc) for loc in FLOATS} >= {
        "spot.maxPrice",
        "idleStop.belowPercent",
        "budget.monthlyUsd",
        "inference.scaling.target",
    }
    assert ConfigFloat is not float


@pytest.mark.parametrize("loc", FLOATS, ids=[".".join(loc) for loc in FLOATS])
@pytest.mark.parametrize("spelling", SPELLINGS)
def test_infinity_and_nan_are_refused_with_a_problem_whose_fix_plans(loc, spelling):
    stack = HOSTS[loc[0]]
    overrides = [("--set-path", f"{'.'.join(loc)}={spelling}")]
    if loc[0] == "spot":
        overrides.insert(0, ("--set", "purchaseOption=spot"))
    config = stack_config(stack, overrides)
    with pytest.raises(ConfigError) as raised:
        load_spec(config, stack)
    (problem,) = raised.value.problems
    assert problem.path == "gpu-cluster:" + ".".join(loc)
    assert problem.received == spelling
    assert problem.problem.startswith("not a finite number")
    assert "finite" in problem.allowed
    fixed = apply_fix(config, problem.fix)
    load_spec(fixed, stack)  # plans: no problem left
    if loc == ("spot", "maxPrice") and spelling in ("inf", "+inf", "Infinity", "1e999"):
        assert "maxPrice" not in fixed["gpu-cluster:spot"]  # no cap: unset, not a made-up price


def test_the_yaml_readers_special_floats_are_exactly_the_non_finite_ones():
    for written in NON_FINITE:
        value = load(f"k: {written}")["k"]
        assert isinstance(value, float) and not math.isfinite(value)


def test_a_number_refused_as_read_says_how_the_stack_file_spelled_it(project):
    edited(
        project,
        "train",
        "gpu-cluster:nodes: 4",
        "gpu-cluster:nodes: 4\n  gpu-cluster:gangTimeoutMinutes: 011",
    )
    config = load_stack_config("train", project)
    with pytest.raises(ConfigError) as raised:
        load_spec(config, "train")
    (problem,) = raised.value.problems
    assert problem.path == "gpu-cluster:gangTimeoutMinutes" and problem.received == 9
    assert problem.problem.endswith(
        '(the stack file\'s 011 is 9 to Pulumi (octal); write "011" (quoted) or 11)'
    )
    assert load_spec(apply_fix(config, problem.fix), "train")  # and its fix plans
