"""The docs site's reference pages are generated from the code (infra/reference/,
docs/hooks/reference.py): each page covers everything its source holds, the stack file schema
accepts every stack file of the repository and refuses what the config loader refuses, and the
site builds in strict mode."""

from __future__ import annotations

import argparse
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel
from test_stage_keys import STACK_OF_STAGE  # a stack file of each stage

from gpu_cluster.infra import pulumi_yaml, reference
from gpu_cluster.infra.cli import parser as gpuc_parser
from gpu_cluster.infra.config import load_spec, parse_spec
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.reference.commands import _metavar
from gpu_cluster.infra.reference.keys import ROLES, stages_of
from gpu_cluster.infra.reference.markdown import slug
from gpu_cluster.infra.spec import CONFIG_KEYS, PROJECT, StackSpec
from gpu_cluster.infra.stack_files import load_stack_config, project_root, to_config_value
from gpu_cluster.policy.pack import CONTROLS

ROOT = project_root()


def spec_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Every key of the spec, dotted (``network.vpcCidr``), found independently of the pages."""
    paths = []
    for name, field in model.model_fields.items():
        if model is StackSpec and name == "region":
            continue
        path = prefix + (field.alias or name)
        paths.append(path)
        annotation = field.annotation
        for candidate in (annotation, *getattr(annotation, "__args__", ())):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                paths += spec_paths(candidate, f"{path}.")
    return paths


def test_every_config_key_is_on_the_config_page():
    page = reference.config_markdown()
    paths = spec_paths(StackSpec)
    assert len(paths) > 80  # the walk reached the nested settings
    missing = [p for p in paths if f"| `{p}` |" not in page]
    assert not missing
    assert "| `aws:region` |" in page
    for path in ("network", "inference.server", "capacityReservation"):
        assert f"\n## {path}\n" in page  # each mapping's own table


def test_config_rows_say_type_default_allowed_and_description():
    rows = {
        line.split("|")[1].strip(" `"): [cell.strip() for cell in line.split("|")[2:-1]]
        for line in reference.config_markdown().splitlines()
        if line.startswith("| `")
    }
    assert rows["nodes"] == [
        "whole number",
        "`1`",
        ">= 1",
        "dev box, experiment, train",
        "the number of GPU nodes",
    ]
    assert rows["purchaseOption"][2] == (
        "`on-demand`, `spot`, `capacity-reservation`, `capacity-block`"
    )
    assert rows["auditTrail"][3] == "data"
    assert rows["fsx"][3] == "dev box, experiment, train"
    assert rows["gangTimeoutMinutes"][3] == "train"
    assert rows["budget.stopAtLimit"][3] == "dev box"
    assert rows["tags"][3] == "all"
    assert rows["rootVolume.sizeGib"][:3] == ["whole number", "`200`", ">= 8, <= 65536"]
    assert rows["inference.scaling.metric"][2] == "`requestCount`, `gpuUtilization`, `queueTime`"
    undescribed = [path for path, cells in rows.items() if not cells[-1]]
    assert not undescribed, "every key has a description (Field(description=...) in spec.py)"


# A shape-valid value for each top-level key that differs from its default.
SAMPLES: dict[str, Any] = {
    "clusterName": "probe",
    "availabilityZone": "us-east-1a",
    "instanceType": "g5.xlarge",
    "gpu": "A10G",
    "gpusPerNode": 4,
    "nodes": 2,
    "purchaseOption": "spot",
    "spot": {"onDemandBase": 1},
    "capacityReservation": {"create": True},
    "capacityBlock": {"id": "cr-0123456789abcdef0"},
    "commitment": {"savingsPlan": "1y"},
    "efa": False,
    "rootVolume": {"sizeGib": 300},
    "network": {"natGateway": False},
    "storage": {"source": "existing"},
    "ami": {"release": "latest"},
    "fsx": {"storageCapacityGib": 1200},
    "containerNetwork": "bridge",
    "secrets": {"WANDB_API_KEY": {"secure": "v1:abc"}},
    "jobs": {"repositories": ["train"]},
    "inference": {"minNodes": 2},
    "idleStop": {"minutes": 45},
    "schedule": {"start": "08:00", "stop": "20:00"},
    "expiresAt": "2030-01-01T00:00:00Z",
    "gangTimeoutMinutes": 20,
    "budget": {"monthlyUsd": 100},
    "alertEmails": ["team@example.com"],
    "auditTrail": True,
    "ebsEncryptionByDefault": True,
    "snapshotBlockPublicAccess": True,
    "tags": {"owner": "probe"},
}


def refused_on_stage(key: str, stage: str) -> bool:
    """Whether the meaning checks refuse the key on a stack of this stage as one the stage
    ignores (not for the sample's value or another key)."""
    stack = STACK_OF_STAGE[stage]
    config = load_stack_config(stack, ROOT)
    config[f"{PROJECT}:{key}"] = to_config_value(SAMPLES[key])
    try:
        load_spec(config, stack)
    except ConfigError as error:
        return any(
            p.path.split(":", 1)[-1] == key and " stage (" in p.problem and "ignores" in p.problem
            for p in error.problems
        )
    return False


def test_samples_cover_every_settable_key():
    assert set(SAMPLES) == CONFIG_KEYS - {"role"}


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_the_stages_column_is_what_the_checks_enforce(key):
    """A sample that moves a stack to another stage (nodes: 2 makes the dev box a train
    stack) is judged there, as the checks judge it."""
    refused = {stage for stage in ROLES if refused_on_stage(key, stage)}
    assert set(stages_of(key)) == set(ROLES) - refused


def subcommands(parser: argparse.ArgumentParser, prefix: str = "gpuc"):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from subcommands(sub, f"{prefix} {name}")


def test_every_command_and_flag_is_on_the_cli_page():
    page = reference.cli_markdown()
    sections = {
        part.split("\n", 1)[0]: part for part in page.split("\n## ")[1:]
    }  # "gpuc plan" -> its section
    commands = list(subcommands(gpuc_parser()))
    assert len(commands) >= 20
    for name, sub in commands:
        assert name in sections, name
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction | argparse._SubParsersAction):
                continue
            names = action.option_strings or [_metavar(action)]
            for option in names:
                assert f"`{option}`" in sections[name], (name, option)
            if action.help and action.help != argparse.SUPPRESS:
                assert action.help.replace("|", "\\|") in sections[name], (name, action.help)
        assert f"[`{name}`](#{slug(name)})" in page  # the command table links it
    assert "`--version`" in page.split("\n## ")[0]


def test_every_exit_code_is_on_the_exit_codes_page():
    from gpu_cluster.infra import outcome

    page = reference.exit_codes_markdown()
    codes = {
        name: getattr(outcome, name)
        for name in outcome.__all__
        if name.isupper() and isinstance(getattr(outcome, name), int)
    }
    assert set(codes) == {"OK", "INTERNAL", "USAGE", "INPUT", "AWS", "FINDINGS"}
    for name, code in codes.items():
        assert f"| {code} | `{name}` | " in page


def test_every_audit_control_is_on_the_audit_page():
    page = reference.audit_markdown()
    assert len(CONTROLS) > 30
    for control in CONTROLS:
        row = next(line for line in page.splitlines() if f"| `{control.name}`" in line)
        assert row.startswith(f"| {control.id} | {control.severity} | ")
        assert control.fix.replace("|", "\\|") in row
        for kind in control.types:
            assert f"`{kind}`" in row


# --- the stack file schema ------------------------------------------------------------------


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    document = reference.stack_schema()
    jsonschema.Draft7Validator.check_schema(document)
    return document


def stack_document(path: Path) -> Any:
    """A stack file as the Pulumi CLI reads it, in JSON's types (a timestamp as its text)."""
    return json.loads(json.dumps(pulumi_yaml.load(path.read_text()), default=str))


STACK_FILES = sorted(
    p for folder in ("stacks", "examples") for p in (ROOT / folder).rglob("Pulumi.*.yaml")
)


def test_there_are_stack_files_to_check():
    names = {p.relative_to(ROOT).as_posix() for p in STACK_FILES}
    assert "stacks/Pulumi.train.yaml" in names
    assert any(name.startswith("examples/") for name in names)


@pytest.mark.parametrize("path", STACK_FILES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_schema_accepts_every_stack_file(schema, path):
    jsonschema.validate(stack_document(path), schema, cls=jsonschema.Draft7Validator)


def test_the_schema_knows_every_config_key(schema):
    known = schema["properties"]["config"]["properties"]
    ours = {key for key in known if not key.startswith("aws:")}
    assert {f"{PROJECT}:{key}" for key in CONFIG_KEYS} == ours
    assert {"aws:region", "aws:profile", "aws:defaultTags"} <= set(known)
    assert all(value.get("description") for value in known.values())


def train() -> dict[str, Any]:
    return stack_document(ROOT / "stacks" / "Pulumi.train.yaml")


def renamed(document: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    document = copy.deepcopy(document)
    config = document["config"]
    config[new] = config.pop(old)
    return document


def with_value(document: dict[str, Any], key: str, value: Any) -> dict[str, Any]:
    document = copy.deepcopy(document)
    document["config"][key] = value
    return document


def nested(document: dict[str, Any], key: str, field: str, value: Any) -> dict[str, Any]:
    document = copy.deepcopy(document)
    document["config"][key] = {**document["config"][key], field: value}
    return document


MISTAKES = {
    "misspelled key": lambda: renamed(train(), "gpu-cluster:nodes", "gpu-cluster:nodez"),
    "misspelled field": lambda: nested(train(), "gpu-cluster:network", "vpcCidrr", "10.0.0.0/16"),
    "key without namespace": lambda: with_value(train(), "nodes", 2),
    "unknown aws key": lambda: with_value(train(), "aws:regionn", "us-east-1"),
    "words for a number": lambda: with_value(train(), "gpu-cluster:nodes", "four"),
    "below the minimum": lambda: with_value(train(), "gpu-cluster:nodes", 0),
    "yes for a boolean": lambda: with_value(train(), "gpu-cluster:efa", "yes"),
    "not a choice": lambda: with_value(train(), "gpu-cluster:purchaseOption", "spots"),
    "a list for a mapping": lambda: with_value(train(), "gpu-cluster:rootVolume", [500]),
    "plain-text secret": lambda: with_value(train(), "gpu-cluster:secrets", {"TOKEN": "x"}),
    "no region": lambda: {"config": {"gpu-cluster:nodes": 2}},
    "settings outside config": lambda: {**train(), "gpu-cluster:nodes": 2},
}


def config_map(document: dict[str, Any]) -> dict[str, str]:
    return {key: to_config_value(value) for key, value in document["config"].items()}


@pytest.mark.parametrize("mistake", sorted(MISTAKES))
def test_the_schema_refuses_what_the_loader_refuses(schema, mistake):
    document = MISTAKES[mistake]()
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(document, schema, cls=jsonschema.Draft7Validator)
    if mistake != "settings outside config":  # refused by stack_files.load_stack_config
        _, problems, _ = parse_spec(config_map(document))
        assert problems, "the config loader refuses it too"


ACCEPTED = {
    "a quoted whole number": lambda: with_value(train(), "gpu-cluster:nodes", "4"),
    "a number where text is expected": lambda: nested(
        train(), "gpu-cluster:tags", "cost-center", 1234
    ),
    "another provider's key": lambda: with_value(train(), "kubernetes:context", "dev"),
    "an encrypted secret": lambda: with_value(
        train(), "gpu-cluster:secrets", {"WANDB_API_KEY": {"secure": "v1:abc"}}
    ),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_the_schema_accepts_what_the_loader_accepts(schema, case):
    document = ACCEPTED[case]()
    jsonschema.validate(document, schema, cls=jsonschema.Draft7Validator)
    _, problems, _ = parse_spec(config_map(document))
    assert not [p for p in problems if "secret" not in p.path]


def test_python_m_prints_the_schema(schema, capsys):
    assert reference.main(["schema"]) == 0
    assert json.loads(capsys.readouterr().out) == schema
    assert reference.main([]) == 2


def test_the_published_address_goes_into_the_schema_and_its_page():
    url = "https://docs.example.org/gpu-cluster/"
    assert reference.stack_schema(url)["$id"] == f"{url}schema/stack.schema.json"
    page = reference.schema_markdown(url)
    assert f"# yaml-language-server: $schema={url}schema/stack.schema.json" in page
    assert f'"{url}schema/stack.schema.json": ["stacks/Pulumi.*.yaml"]' in page
    assert "$schema=<site>/schema/stack.schema.json" in reference.schema_markdown()


def test_the_project_file_declares_the_spec_defaults():
    """Pulumi.yaml's typed declarations apply before the program runs: the defaults on the
    config page (the spec's) must be theirs."""
    declared = pulumi_yaml.load((ROOT / "Pulumi.yaml").read_text())["config"]
    fields = {field.alias: field for field in StackSpec.model_fields.values()}
    assert declared
    for key, declaration in declared.items():
        assert fields[key].get_default(call_default_factory=True) == declaration["default"], key


# --- the site -------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_site_builds_strict_with_the_generated_pages(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for page in ("config", "cli", "exit-codes", "audit-controls", "stack-schema"):
        assert (site / "reference" / page / "index.html").is_file(), page
    published = json.loads((site / "schema" / "stack.schema.json").read_text())
    published.pop("$id", None)  # mkdocs.yml's site_url, when it has one
    assert published == reference.stack_schema()
    html = (site / "reference" / "config" / "index.html").read_text()
    assert "network.vpcCidr" in html
    for page in ("config", "cli"):  # the pages' links to their own sections resolve
        html = (site / "reference" / page / "index.html").read_text()
        anchors = set(re.findall(r'href="#([^"]+)"', html))
        assert anchors and anchors <= set(re.findall(r'id="([^"]+)"', html)), page
    assert not (site / "hooks").exists()
