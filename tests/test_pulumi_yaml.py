"""Stack files read as Pulumi reads them (gopkg.in/yaml.v3, then object.MarshalString): each
case below is what the CLI hands the program, and what the offline plan now does with it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT

from gpu_cluster.infra import cli
from gpu_cluster.infra.overrides import typed
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.pulumi_yaml import config_string, load
from gpu_cluster.infra.stack_files import StackFileError, load_stack_config


@pytest.mark.parametrize(
    ("written", "received"),
    [
        # YAML 1.1 booleans are strings to yaml.v3 (resolve.go: only true/True/TRUE, false/...)
        ("yes", "yes"),
        ("no", "no"),
        ("off", "off"),
        ("On", "On"),
        ("NO", "NO"),
        ("True", "true"),
        ("FALSE", "false"),
        # no sexagesimal in YAML 1.2
        ("20:00", "20:00"),
        # numbers as encoding/json writes them after the re-encode
        ("4", "4"),
        ("1.50", "1.5"),
        ("1e3", "1000"),
        ("0x10", "16"),
        ("1_000", "1000"),
        ("0777", "511"),
        ("1.5e30", "1.5e+30"),
        ("0.0000001", "1e-7"),
        # timestamps reach the program as Go's time.Time.String()
        ("2027-01-31T00:00:00Z", "2027-01-31 00:00:00 +0000 UTC"),
        ("2026-12-01", "2026-12-01 00:00:00 +0000 UTC"),
        ("2026-12-01T18:30:00+02:00", "2026-12-01 18:30:00 +0200 +0200"),
        ("2026-13-01", "2026-13-01"),  # not a date Go can parse: a string
        # quoted is always a string; an empty value is ""
        ('"yes"', "yes"),
        ("'2027-01-31T00:00:00Z'", "2027-01-31T00:00:00Z"),
        ("", ""),
        ("~", ""),
    ],
)
def test_a_top_level_value_reaches_the_program_as_pulumi_hands_it(written, received):
    assert config_string(load(f"key: {written}\n")["key"]) == received


def test_a_mapping_reaches_the_program_as_gos_compact_sorted_json():
    value = load(
        "key: {endDate: 2027-01-31T00:00:00Z, create: yes, release: 20261009, size: 8.0,"
        " note: '<a&b>', none: null}\n"
    )["key"]
    assert config_string(value) == (
        '{"create":"yes","endDate":"2027-01-31 00:00:00 +0000 UTC","none":null,'
        '"note":"\\u003ca\\u0026b\\u003e","release":20261009,"size":8}'
    )


def test_a_key_given_twice_is_refused_as_yaml_v3_does():
    with pytest.raises(Exception, match="given twice"):
        load("a: 1\na: 2\n")


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("20261009", 20261009),
        ("true", True),
        ("True", "True"),
        ("0123", "0123"),
        ("1.5", "1.5"),
        ("+7", 7),
        ("-0", 0),
        ("0", 0),
        ("99999999999999999999", "99999999999999999999"),
    ],
)
def test_set_path_stores_what_pulumi_config_set_path_stores(value, stored):
    assert typed(value) == stored


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    return tmp_path


def with_lines(project: Path, stack: str, *lines: str) -> dict[str, str]:
    """The stack file with these `key: value` lines written as given (unquoted), each
    replacing that key's line and the lines indented under it."""
    path = project / "stacks" / f"Pulumi.{stack}.yaml"
    replaced = {line.split(": ", 1)[0] for line in lines}
    kept, skipping = [], False
    for line in path.read_text().splitlines():
        indent = len(line) - len(line.lstrip())
        if skipping and (indent > 2 or not line.strip()):
            continue
        skipping = indent == 2 and any(line.strip().startswith(f"{key}:") for key in replaced)
        if not skipping:
            kept.append(line)
    path.write_text("\n".join([*kept, *(f"  {line}" for line in lines)]) + "\n")
    return load_stack_config(stack, project)


def test_efa_yes_in_the_stack_file_is_the_string_pulumi_hands_over(project):
    config = with_lines(project, "train", "gpu-cluster:efa: yes")
    assert config["gpu-cluster:efa"] == "yes"
    plan = run_plan("train", config)
    assert plan.error is not None
    (problem,) = plan.error.problems
    assert problem.path == "gpu-cluster:efa" and "YAML is 1.2" in problem.problem
    assert problem.fix == "pulumi config set efa true"


def test_the_file_form_and_the_set_form_of_yes_get_the_same_answer(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    with_lines(project, "train", "gpu-cluster:efa: yes")
    assert cli.main(["plan", "--stack", "train"]) == 3
    from_file = capsys.readouterr().err
    shutil.copy(ROOT / "stacks" / "Pulumi.train.yaml", project / "stacks" / "Pulumi.train.yaml")
    assert cli.main(["plan", "--stack", "train", "--set", "efa=yes"]) == 3
    assert capsys.readouterr().err == from_file


def test_no_in_a_nested_boolean_says_false(project):
    config = with_lines(project, "dev", "gpu-cluster:idleStop: {enabled: no}")
    error = run_plan("dev", config).error
    assert error is not None
    (problem,) = error.problems
    assert problem.fix == "pulumi config set --path idleStop.enabled false"


def test_the_docs_created_reservation_example_plans(project):
    keys = (ROOT / "docs" / "concepts" / "configuration.md").read_text()
    example = "{create: true, endDate: 2027-01-31T00:00:00Z}"
    assert example in keys  # the example as the docs write it, unquoted
    config = with_lines(
        project,
        "train",
        "gpu-cluster:purchaseOption: capacity-reservation",
        f"gpu-cluster:capacityReservation: {example}",
    )
    assert json.loads(config["gpu-cluster:capacityReservation"])["endDate"] == (
        "2027-01-31 00:00:00 +0000 UTC"
    )
    plan = run_plan("train", config)
    assert plan.error is None, plan.error
    (reservation,) = plan.of_type("aws:ec2/capacityReservation:CapacityReservation")
    assert reservation.inputs["endDate"] == "2027-01-31T00:00:00Z"  # what AWS takes


def test_an_unquoted_schedule_time_and_a_numeric_tag_plan(project):
    config = with_lines(
        project,
        "dev",
        "gpu-cluster:schedule: {days: MON-FRI, start: 08:00, stop: 20:00, timezone: UTC}",
        "gpu-cluster:tags: {team: ml-platform, cost-center: 1234, country: NO}",
    )
    plan = run_plan("dev", config)
    assert plan.error is None, plan.error
    vpc = plan.of_type("aws:ec2/vpc:Vpc")[0]
    assert vpc.inputs["tags"]["cost-center"] == "1234" and vpc.inputs["tags"]["country"] == "NO"


def test_a_numeric_ami_release_from_set_path_plans(capsys):
    assert cli.main(["plan", "--stack", "dev", "--set-path", "ami.release=20261009", "--json"]) == 0
    outputs = json.loads(capsys.readouterr().out)["outputs"]
    assert outputs["amiName"].endswith("20261009")


def test_an_unquoted_date_in_tags_no_longer_crashes(project):
    config = with_lines(
        project, "dev", "gpu-cluster:tags: {team: ml-platform, created: 2026-12-01}"
    )
    plan = run_plan("dev", config)
    assert plan.error is None, plan.error
    vpc = plan.of_type("aws:ec2/vpc:Vpc")[0]
    assert vpc.inputs["tags"]["created"] == "2026-12-01 00:00:00 +0000 UTC"  # as Pulumi would
    warnings = (
        json.loads(plan.outputs["configWarnings"])
        if isinstance(plan.outputs["configWarnings"], str)
        else plan.outputs["configWarnings"]
    )
    assert any("tags.created" in w and "quote it" in w for w in warnings)


def test_a_stack_file_that_is_not_yaml_is_still_a_message(project):
    (project / "stacks" / "Pulumi.bad.yaml").write_text("config:\n  a: [\n")
    with pytest.raises(StackFileError, match="not valid YAML"):
        load_stack_config("bad", project)


def test_infinity_and_nan_are_written_as_yaml_spells_them():
    """Python's json reads Infinity and NaN (JSON has neither); a fix line keeps them readable."""
    from gpu_cluster.infra.pulumi_yaml import flow, top_level

    assert flow({"iops": float("inf"), "x": float("-inf"), "y": float("nan")}) == (
        "{iops: .inf, x: -.inf, y: .nan}"
    )
    assert top_level('{"sizeGib": 0, "iops": Infinity}') == "{sizeGib: 0, iops: .inf}"
