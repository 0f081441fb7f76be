"""Fixes that keep what the user meant (issue 29, section 3): for every kind of fix the config
can propose, a mistake as a user types it, the fix followed (the `pulumi config` command, and
its stack-file form pasted), and then the stack plans AND holds the value the user meant:
$300 is 300, Berlin is Europe/Berlin, 8am is 08:00, off is 0 (or the switch off), a list is its
items, a duplicate zone is not suggested again, a mapping key keeps its mapping. A GPU or type
the catalog does not hold is never replaced by another one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from zoneinfo import available_timezones

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.errors import ConfigError, Problem, yaml_fix
from gpu_cluster.infra.fixes import actionable, apply_fix
from gpu_cluster.infra.meant import AREAS
from gpu_cluster.infra.overrides import config_key, parse_path, stack_config
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.pulumi_yaml import config_string, load

UNSET = object()  # the fix removes the value (e.g. no cap of its own)
CATALOG = load_catalog()


@dataclass(frozen=True)
class Case:
    kind: str  # the kind of fix: how the value meant is read from the value typed
    stack: str
    typed: tuple[tuple[str, str], ...]  # as `gpuc plan --set/--set-path` takes them
    path: str  # where the value meant lives after the fix
    meant: Any  # that value, as the program receives it (nested values JSON-decoded)

    @property
    def id(self) -> str:
        return f"{self.kind}: {' '.join(t for _, t in self.typed)}"


def case(kind: str, stack: str, *typed: str, path: str, meant: Any) -> Case:
    overrides = tuple(("--set-path" if "." in t.split("=")[0] else "--set", t) for t in typed)
    return Case(kind, stack, overrides, path, meant)


START_STOP = ("schedule.start=08:00", "schedule.stop=18:00")
CASES = [
    # numbers as people write them
    case("money", "dev", "budget.monthlyUsd=$300", path="budget.monthlyUsd", meant=300),
    case("money", "dev", "budget.monthlyUsd=300 USD", path="budget.monthlyUsd", meant=300),
    case("money", "dev", "budget.monthlyUsd=$1,500", path="budget.monthlyUsd", meant=1500),
    case("money", "experiment", "spot.maxPrice=$1.50/h", path="spot.maxPrice", meant="1.5"),
    case("percent", "dev", "idleStop.belowPercent=5%", path="idleStop.belowPercent", meant=5),
    case("size unit", "train", "rootVolume.sizeGib=500GB", path="rootVolume.sizeGib", meant=500),
    case(
        "size unit",
        "train",
        'fsx={"storageCapacityGib": "1.2TB"}',
        path="fsx.storageCapacityGib",
        meant=1200,
    ),
    case("duration unit", "dev", "idleStop.minutes=45m", path="idleStop.minutes", meant=45),
    case(
        "duration unit",
        "inference",
        "inference.warmupSeconds=10m",
        path="inference.warmupSeconds",
        meant=600,
    ),
    case("number word", "train", "nodes=four", path="nodes", meant="4"),
    case("whole number", "train", "nodes=4.0", path="nodes", meant="4"),
    case("multiple of 5", "dev", "idleStop.minutes=47", path="idleStop.minutes", meant=45),
    case(
        "fraction as percent",
        "inference",
        "inference.scaling.metric=gpuUtilization",
        "inference.scaling.target=0.7",
        path="inference.scaling.target",
        meant=70,
    ),
    # off, none, no cap
    case("off is 0", "train", "gangTimeoutMinutes=off", path="gangTimeoutMinutes", meant="0"),
    case("off is 0", "experiment", "spot.onDemandBase=none", path="spot.onDemandBase", meant=0),
    case("off is the switch", "dev", "idleStop.minutes=off", path="idleStop.enabled", meant=False),
    case("off is the switch", "dev", "idleStop.minutes=0", path="idleStop.enabled", meant=False),
    case("no cap", "experiment", "spot.maxPrice=inf", path="spot.maxPrice", meant=UNSET),
    case("no cap", "experiment", "spot.maxPrice=Infinity", path="spot.maxPrice", meant=UNSET),
    # times, zones, dates
    case(
        "clock",
        "dev",
        "schedule.start=8am",
        "schedule.stop=18:00",
        path="schedule.start",
        meant="08:00",
    ),
    case(
        "clock",
        "dev",
        "schedule.start=08:00",
        "schedule.stop=6pm",
        path="schedule.stop",
        meant="18:00",
    ),
    case(
        "clock",
        "dev",
        "schedule.start=7:30 am",
        "schedule.stop=18:00",
        path="schedule.start",
        meant="07:30",
    ),
    case(
        "time zone city",
        "dev",
        *START_STOP,
        "schedule.timezone=Berlin",
        path="schedule.timezone",
        meant="Europe/Berlin",
    ),
    case(
        "time zone city",
        "dev",
        *START_STOP,
        "schedule.timezone=new york",
        path="schedule.timezone",
        meant="America/New_York",
    ),
    case(
        "time zone city",
        "dev",
        *START_STOP,
        "schedule.timezone=Europe/Berln",
        path="schedule.timezone",
        meant="Europe/Berlin",
    ),
    case(
        "time zone abbreviation",
        "dev",
        *START_STOP,
        "schedule.timezone=CEST",
        path="schedule.timezone",
        meant="Europe/Berlin",
    ),
    case(
        "time zone offset",
        "dev",
        *START_STOP,
        "schedule.timezone=UTC+2",
        path="schedule.timezone",
        meant="Etc/GMT-2",
    ),
    case(
        "time zone case",
        "dev",
        *START_STOP,
        "schedule.timezone=europe/berlin",
        path="schedule.timezone",
        meant="Europe/Berlin",
    ),
    case(
        "date in UTC",
        "dev",
        "expiresAt=2099-01-01T00:00:00",
        path="expiresAt",
        meant="2099-01-01T00:00:00Z",
    ),
    case(
        "date in UTC",
        "train",
        "purchaseOption=capacity-reservation",
        "capacityReservation.create=true",
        "capacityReservation.endDate=2099-01-31",
        path="capacityReservation.endDate",
        meant="2099-01-31T00:00:00Z",
    ),
    case(
        "nearest tier",
        "train",
        'fsx={"storageCapacityGib": 1200, "throughputPerTib": 300}',
        path="fsx.throughputPerTib",
        meant=250,
    ),
    case(
        "nearest tier",
        "train",
        'fsx={"storageCapacityGib": 1200, "throughputPerTib": 450}',
        path="fsx.throughputPerTib",
        meant=500,
    ),
    case(
        "repository name",
        "train",
        "jobs.repositories[0]=ML/Trainer",
        path="jobs.repositories[0]",
        meant="ml/trainer",
    ),
    case(
        "repository name",
        "train",
        "jobs.repositories[0]=123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:latest",
        path="jobs.repositories[0]",
        meant="trainer",
    ),
    case(
        "weekdays",
        "dev",
        *START_STOP,
        "schedule.days=monday to friday",
        path="schedule.days",
        meant="MON-FRI",
    ),
    case(
        "weekdays",
        "dev",
        *START_STOP,
        "schedule.days=mo,we,fr",
        path="schedule.days",
        meant="MON,WED,FRI",
    ),
    case(
        "weekdays",
        "dev",
        *START_STOP,
        "schedule.days=weekends",
        path="schedule.days",
        meant="SAT-SUN",
    ),
    case("release date", "train", "ami.release=2026-10-09", path="ami.release", meant=20261009),
    case(
        "nearest count",
        "train",
        "instanceType=",
        "gpu=A100",
        "gpusPerNode=6",
        path="gpusPerNode",
        meant="8",
    ),
    case(
        "off is the switch",
        "dev",
        "idleStop.belowPercent=off",
        path="idleStop.enabled",
        meant=False,
    ),
    # choices
    case(
        "same meaning", "dev", "containerNetwork=bridged", path="containerNetwork", meant="bridge"
    ),
    case(
        "same meaning", "train", "ami.architecture=amd64", path="ami.architecture", meant="x86_64"
    ),
    case("choice spelling", "train", "purchaseOption=spott", path="purchaseOption", meant="spot"),
    case("choice case", "dev", "containerNetwork=Host", path="containerNetwork", meant="host"),
    case("boolean word", "dev", "idleStop.enabled=no", path="idleStop.enabled", meant=False),
    case("boolean word", "train", "efa=yes", path="efa", meant="true"),
    case("boolean word", "dev", "network.natGateway=off", path="network.natGateway", meant=False),
    # keys
    case("key spelling", "train", "nodes=1", "noodes=4", path="nodes", meant="4"),
    case("key spelling", "train", "rootVolume.sizeGb=500", path="rootVolume.sizeGib", meant=500),
    case(
        "key spelling, value read", "dev", "idleStop.minuts=45m", path="idleStop.minutes", meant=45
    ),
    case(
        "key spelling, value read",
        "dev",
        "idleStop.timeoutMinutes=off",
        path="idleStop.enabled",
        meant=False,
    ),
    case(
        "key spelling, value read",
        "dev",
        "idleStop.belowPercent=10",
        "idleStop.timeoutMinutes=45m",
        path="idleStop.minutes",
        meant=45,
    ),
    case("namespace", "train", "region=us-east-1", path="aws:region", meant="us-east-1"),
    case("mapping given a value", "dev", "budget=$300", path="budget.monthlyUsd", meant=300),
    case("mapping given a value", "dev", "budget=300", path="budget.monthlyUsd", meant=300),
    case("mapping given a value", "dev", "idleStop=off", path="idleStop.enabled", meant=False),
    case("mapping key spelling", "train", "budgett=300", path="budget.monthlyUsd", meant=300),
    case("mapping key spelling", "dev", "idleStp=off", path="idleStop.enabled", meant=False),
    # lists
    case(
        "list from a string",
        "experiment",
        "spot.fallbackTypes=g5.24xlarge",
        path="spot.fallbackTypes",
        meant=["g5.24xlarge"],
    ),
    case(
        "list from brackets",
        "experiment",
        "spot.fallbackTypes=[g5.24xlarge]",
        path="spot.fallbackTypes",
        meant=["g5.24xlarge"],
    ),
    case(
        "list from brackets",
        "train",
        "alertEmails=[a@example.com, b@example.com]",
        path="alertEmails",
        meant=["a@example.com", "b@example.com"],
    ),
    case(
        "empty list typed",
        "experiment",
        "spot.fallbackTypes=[]",
        path="spot.fallbackTypes",
        meant=UNSET,
    ),
    case(
        "no duplicate zone",
        "inference",
        "inference.availabilityZones[1]=us-east-1a",
        path="inference.availabilityZones",
        meant=["us-east-1a", "us-east-1b"],
    ),
    # names
    case(
        "zone spelling",
        "train",
        "availabilityZone=us-east1a",
        path="availabilityZone",
        meant="us-east-1a",
    ),
    case("region spelling", "train", "aws:region=us-east1", path="aws:region", meant="us-east-1"),
    case(
        "international domain",
        "inference",
        "inference.tls.domain=münchen.example.com",
        path="inference.tls.domain",
        meant="xn--mnchen-3ya.example.com",
    ),
    case(
        "domain form",
        "inference",
        "inference.tls.domain=https://API.Example.com/",
        path="inference.tls.domain",
        meant="api.example.com",
    ),
    case("gpu model spelling", "train", "instanceType=", "gpu=A10O", path="gpu", meant="A100"),
    case(
        "gpu model spelling", "train", "instanceType=", "gpu=nvidia a-100", path="gpu", meant="A100"
    ),
    case(
        "instance type spelling",
        "train",
        "instanceType=p4d.24xl",
        path="instanceType",
        meant="p4d.24xlarge",
    ),
    case(
        "instance type spelling",
        "train",
        "instanceType=P4D-24XLARGE",
        path="instanceType",
        meant="p4d.24xlarge",
    ),
    case(
        "cluster name", "train", "clusterName=My Cluster!", path="clusterName", meant="my-cluster"
    ),
]
IDS = [c.id for c in CASES]


def value_at(config: dict[str, str], path: str) -> Any:
    """The value at a `pulumi config --path` path: a top-level value as the string the
    program receives, a nested one JSON-decoded; UNSET where there is none."""
    head, *rest = parse_path(path)
    value: Any = config.get(config_key(str(head)), UNSET)
    if not rest or value is UNSET:  # a top-level list or mapping is JSON, like a nested one
        try:
            return json.loads(value) if str(value)[:1] in "[{" else value
        except json.JSONDecodeError:  # a plain string such as "[a, b]"
            return value
    value = json.loads(value)
    for part in rest:
        try:
            value = value[part]
        except (KeyError, IndexError, TypeError):
            return UNSET
    return value


def problems(config: dict[str, str], stack: str) -> list[Problem]:
    try:
        load_spec(config, stack)
    except ConfigError as error:
        return error.problems
    return []


def pasted(config: dict[str, str], lines: str) -> dict[str, str]:
    """The config after pasting the stack-file lines (`delete key` removes a key)."""
    result = dict(config)
    for line in lines.splitlines():
        if line.startswith("delete "):
            result.pop(line.removeprefix("delete "), None)
            continue
        result |= {key: config_string(value) for key, value in load(line).items()}
    return result


def the_problem(c: Case) -> tuple[dict[str, str], Problem]:
    config = stack_config(c.stack, c.typed)
    (problem,) = problems(config, c.stack)  # one mistake, one problem
    assert actionable(problem.fix), problem.fix
    return config, problem


def test_every_kind_of_fix_is_covered():
    kinds = {c.kind for c in CASES}
    assert len(kinds) >= 30, sorted(kinds)
    assert len(CASES) == len(set(IDS))


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_the_fix_command_keeps_what_was_meant(c: Case):
    config, problem = the_problem(c)
    fixed = apply_fix(config, problem.fix)
    assert value_at(fixed, c.path) == c.meant, problem.fix
    assert problems(fixed, c.stack) == [], problem.fix


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_the_stack_file_form_keeps_what_was_meant(c: Case):
    config, problem = the_problem(c)
    lines = yaml_fix(problem.fix, config)
    assert lines, problem.fix
    fixed = pasted(config, lines)
    assert value_at(fixed, c.path) == c.meant, lines
    assert problems(fixed, c.stack) == [], lines
    for line in lines.splitlines():  # a list's items are list items, not "[a" and "b]"
        for item in value_at(fixed, c.path) if isinstance(c.meant, list) else ():
            assert "[" not in item and "]" not in item, line
    assert other_fields(config, problem, c) == other_fields(fixed, problem, c), lines


def other_fields(config: dict[str, str], problem: Problem, c: Case) -> dict[str, Any]:
    """The fields of the mapping the fix changes, other than the one typed and the one meant:
    a fix keeps them (idleStop.belowPercent stays when idleStop.minutes is fixed)."""
    parent = c.path.rsplit(".", 1)[0] if "." in c.path.split("[")[0] else ""
    value = value_at(config, parent) if parent else None
    if not isinstance(value, dict):
        return {}
    touched = {path.rsplit(".", 1)[-1].split("[")[0] for path in (problem.path, c.path)}
    return {key: field for key, field in value.items() if key not in touched}


@pytest.mark.parametrize("c", CASES, ids=IDS)
def test_the_fixed_stack_plans(c: Case):
    config, problem = the_problem(c)
    plan = run_plan(c.stack, apply_fix(config, problem.fix))
    assert plan.error is None, (problem.fix, plan.error)
    assert len(plan.resources) > 1


# Property tests: the value meant is read from any value of its kind, not a few examples.
PROPERTY = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def fixed_value(stack: str, typed: str, path: str) -> Any:
    config = stack_config(stack, [("--set-path" if "." in typed.split("=")[0] else "--set", typed)])
    (problem,) = problems(config, stack)
    fixed = apply_fix(config, problem.fix)
    assert problems(fixed, stack) == [], problem.fix
    return value_at(fixed, path)


@PROPERTY
@given(st.integers(min_value=1, max_value=10**6), st.sampled_from(["${:,}", "{} USD", "$ {}"]))
def test_any_amount_of_money_is_that_amount(amount, form):
    typed = form.format(amount)
    assert fixed_value("dev", f"budget.monthlyUsd={typed}", "budget.monthlyUsd") == amount


@PROPERTY
@given(
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=0, max_value=59),
    st.sampled_from(["am", "pm", " AM", " p.m."]),
)
def test_any_twelve_hour_time_is_its_24_hour_time(hour, minute, half):
    typed = f"{hour}:{minute:02d}{half}"
    hour24 = hour % 12 + (12 if "p" in half.lower() else 0)
    stop = "23:59" if hour24 < 23 else "23:58"  # a stop after the start, the same day
    config = stack_config(
        "dev", [("--set-path", f"schedule.start={typed}"), ("--set-path", f"schedule.stop={stop}")]
    )
    (problem,) = problems(config, "dev")
    assert (
        value_at(apply_fix(config, problem.fix), "schedule.start") == f"{hour24:02d}:{minute:02d}"
    )


CITIES = sorted(
    {
        zone.rsplit("/", 1)[1]
        for zone in available_timezones()
        if zone.split("/", 1)[0] in AREAS and "/" in zone
    }
)


@PROPERTY
@given(st.sampled_from([c for c in CITIES if not c[-1].isdigit() and "GMT" not in c]))
def test_a_city_is_its_time_zone(city):
    typed = city.replace("_", " ")
    config = stack_config(
        "dev",
        [*(("--set-path", t) for t in START_STOP), ("--set-path", f"schedule.timezone={typed}")],
    )
    found = problems(config, "dev")
    if not found:  # the city is a zone name of its own (Cuba, Japan, ...)
        return
    (problem,) = found
    zone = value_at(apply_fix(config, problem.fix), "schedule.timezone")
    assert zone.rsplit("/", 1)[-1] == city, (city, zone)


def spellings(name: str) -> list[str]:
    return [name.upper(), name.replace(".", "-"), f" {name} "]


@PROPERTY
@given(st.sampled_from(sorted(CATALOG.instance_types)), st.integers(min_value=0, max_value=2))
def test_a_catalog_type_typed_another_way_is_that_type(kind, form):
    typed = spellings(kind)[form]
    config = stack_config("dev", [("--set", f"instanceType={typed}")])
    found = [p for p in problems(config, "dev") if p.path == "gpu-cluster:instanceType"]
    if found and "did you mean" in found[0].fix:
        assert apply_fix(config, found[0].fix)["gpu-cluster:instanceType"] == kind


@PROPERTY
@given(st.sampled_from(CATALOG.gpu_models), st.sampled_from(["{}", "nvidia {}", "{}s"]))
def test_a_catalog_gpu_typed_another_way_is_that_gpu(model, form):
    typed = form.format(model.lower().replace(" ", "-"))
    config = stack_config("train", [("--set", "instanceType="), ("--set", f"gpu={typed}")])
    found = [p for p in problems(config, "train") if p.path == "gpu-cluster:gpu"]
    if found and found[0].problem == "unknown GPU model":
        assert apply_fix(config, found[0].fix)["gpu-cluster:gpu"] == model, found[0].fix


NOT_IN_CATALOG = [
    ("gpu", "H300"),
    ("gpu", "A1000"),
    ("gpu", "MI300X"),
    ("gpu", "RTX4090"),
    ("gpu", "H20"),
    ("gpu", "GB300"),
    ("instanceType", "p7.48xlarge"),
    ("instanceType", "p5.96xlarge"),
    ("instanceType", "g7e.xlarge"),
]


@pytest.mark.parametrize(("key", "typed"), NOT_IN_CATALOG)
def test_a_gpu_or_type_not_in_the_catalog_is_never_replaced_by_another(key, typed):
    overrides = [("--set", "instanceType=")] if key == "gpu" else []
    config = stack_config("train", [*overrides, ("--set", f"{key}={typed}")])
    (problem,) = [p for p in problems(config, "train") if p.path == f"gpu-cluster:{key}"]
    assert "not in the catalog" in problem.fix and "gpuc catalog refresh --region us-east-1" in (
        problem.fix
    )
    assert "did you mean" not in problem.fix and not actionable(problem.fix)


def test_a_cpu_type_is_not_answered_with_a_gpu_type():
    config = stack_config("dev", [("--set", "instanceType=m5.large")])
    (problem,) = problems(config, "dev")
    assert "did you mean" not in problem.fix and "<type>" in problem.fix


# Several mistakes in one mapping: each stack-file line replaces the key's whole value, so each
# must carry every fix of that mapping, or pasting them in turn would undo the earlier ones.
SEVERAL = [
    (
        "dev",
        ("schedule.timezone=Berlin", "schedule.start=8am", "schedule.stop=6pm"),
        {"schedule.timezone": "Europe/Berlin", "schedule.start": "08:00", "schedule.stop": "18:00"},
    ),
    (
        "dev",
        ("budget.monthlyUsd=$300", "idleStop.belowPercent=5%", "idleStop.minutes=45m"),
        {"budget.monthlyUsd": 300, "idleStop.belowPercent": 5, "idleStop.minutes": 45},
    ),
]


@pytest.mark.parametrize(("stack", "typed", "meant"), SEVERAL, ids=lambda v: str(v)[:40])
def test_every_stack_file_line_followed_in_turn_plans_with_all_fixes(stack, typed, meant):
    from gpu_cluster.infra.errors import render_problems

    config = stack_config(stack, [("--set-path", t) for t in typed])
    found = problems(config, stack)
    assert len(found) == len(typed), [p.path for p in found]
    text = render_problems(stack, found, "header", config)
    lines = [
        line.split(": ", 1)[1]
        for line in text.splitlines()
        if line.strip().startswith(("or in stacks/", "and: "))
    ]
    assert len(lines) >= len(typed), text
    followed = dict(config)
    for line in lines:  # pasted one after the other, as a user reads them
        followed = pasted(followed, line)
    assert problems(followed, stack) == [], text
    for path, value in meant.items():
        assert value_at(followed, path) == value, (path, text)
