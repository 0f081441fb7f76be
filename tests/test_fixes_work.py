"""Every suggested fix works when followed: for each problem a bad config produces, apply its
fix (the `pulumi config` command, and the stack-file line) and validate again: that problem is
gone and no new one appears."""

from __future__ import annotations

import json

import pytest
from conftest import ROOT

from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.errors import ConfigError, Problem, render_problem, yaml_fix
from gpu_cluster.infra.fixes import actionable, apply_fix
from gpu_cluster.infra.pulumi_yaml import config_string, load
from gpu_cluster.infra.stack_files import load_stack_config

STACKS = {name: load_stack_config(name, ROOT) for name in ("dev", "train", "inference")}


def bad(stack: str, **values: object) -> dict[str, str]:
    """The stack's config with `gpu-cluster:<name>` set as a stack file would give it."""
    config = dict(STACKS[stack])
    for name, value in values.items():
        full = name if ":" in name else f"gpu-cluster:{name}"
        if value is None:
            config.pop(full, None)
        else:
            config[full] = value if isinstance(value, str) else config_string(value)
    return config


def merged(stack: str, name: str, **fields: object) -> dict[str, str]:
    current = json.loads(STACKS[stack].get(f"gpu-cluster:{name}", "{}"))
    return bad(stack, **{name: {**current, **fields}})


# Realistic mistakes, one problem kind each (more may follow from one mistake).
CASES = {
    "size with a unit": merged("train", "rootVolume", sizeGib="500GB"),
    "nodes as words": bad("train", nodes="four"),
    "nodes zero": bad("train", nodes="0"),
    "efa yes": bad("train", efa="yes"),
    "unknown key": bad("train", nodez="3"),
    "bad instance type": bad("train", instanceType="p4d.24xl"),
    "zone of another region": bad("train", availabilityZone="eu-west-1a"),
    "idle minutes with a unit": merged("dev", "idleStop", minutes="30m"),
    "schedule start equals stop": bad(
        "dev", schedule={"days": "MON-FRI", "start": "08:00", "stop": "08:00", "timezone": "UTC"}
    ),
    "schedule 24h with am": bad(
        "dev", schedule={"days": "MON-FRI", "start": "8am", "stop": "20:00", "timezone": "UTC"}
    ),
    "timezone abbreviation": bad(
        "dev", schedule={"days": "MON-FRI", "start": "08:00", "stop": "20:00", "timezone": "CEST"}
    ),
    "timezone offset": bad(
        "dev", schedule={"days": "MON-FRI", "start": "08:00", "stop": "20:00", "timezone": "UTC+2"}
    ),
    "budget as text": bad("dev", budget={"monthlyUsd": "lots"}),
    "expiry in the past": bad("dev", expiresAt="2020-01-01T00:00:00Z"),
    "expiry without zone": bad("dev", expiresAt="2027-01-01T00:00:00"),
    "vpc cidr too small": merged("train", "network", vpcCidr="10.0.0.0/28"),
    "vpc cidr not a cidr": merged("train", "network", vpcCidr="10.0.0.0"),
    "purchase option typo": bad("train", purchaseOption="spott"),
    "spot fallback types as a string": bad(
        "train", purchaseOption="spot", spot={"fallbackTypes": "p4de.24xlarge"}
    ),
    "reservation without option": bad("train", capacityReservation={"create": True}),
    "fsx with a unit": bad("train", fsx={"storageCapacityGib": "1.2TB"}),
    "fsx too small": bad("train", fsx={"storageCapacityGib": 100}),
    "inference min nodes zero": merged("inference", "inference", minNodes=0),
    "inference warmup with a unit": merged("inference", "inference", warmupSeconds="10m"),
    "queue time target in seconds": merged(
        "inference", "inference", scaling={"metric": "queueTime", "target": 0.05}
    ),
    "queue time target in microseconds": merged(
        "inference", "inference", scaling={"metric": "queueTime", "target": 250000}
    ),
    "rollout with no node in service": merged(
        "inference", "inference", rollout={"minHealthyPercent": 0}
    ),
    "inference zones duplicated": merged(
        "inference", "inference", availabilityZones=["us-east-1a", "us-east-1a"]
    ),
    "inference server kind typo": merged(
        "inference", "inference", server={"kind": "trito", "image": "nvcr.io/x:1"}
    ),
    "container network typo": bad("dev", containerNetwork="bridged"),
    "region missing": bad("train", **{"aws:region": None}),
    "tags with aws prefix": bad("train", tags={"aws:owner": "me"}),
    "instanceType and gpu": bad("train", gpu="A100"),
    "gpusPerNode without gpu": bad("train", gpusPerNode="8"),
    "unknown gpu": bad("train", instanceType=None, gpu="A10O"),
    "gpu not in the catalog": bad("train", instanceType=None, gpu="A1000"),
    "instance type not in the catalog": bad("train", instanceType="p7.48xlarge"),
    "ami id and ssm parameter": bad(
        "train", ami={"id": "ami-0123456789abcdef0", "ssmParameter": "/x", "architecture": "x86_64"}
    ),
    "ami release typo": bad("train", ami={"release": "2026-10-09"}),
    "ami id malformed": bad("train", ami={"id": "ami-123", "architecture": "x86_64"}),
    "ssm parameter without slash": bad("train", ami={"ssmParameter": "aws/service/x"}),
    "ami id without architecture": bad("train", ami={"id": "ami-0123456789abcdef0"}),
    "budget stop on a cluster": bad("train", budget={"monthlyUsd": 100, "stopAtLimit": True}),
    "alert email malformed": bad("dev", alertEmails=["ml-platform.example.com"]),
    "idle stop period": merged("dev", "idleStop", minutes=7),
    "schedule days typo": bad(
        "dev", schedule={"days": "MON-FRY", "start": "08:00", "stop": "20:00", "timezone": "UTC"}
    ),
    "too many tags": bad("train", tags={f"t{i}": "x" for i in range(60)}),
    "capacity block without id": bad("train", purchaseOption="capacity-block"),
    "reservation with two targets": bad(
        "train",
        purchaseOption="capacity-reservation",
        capacityReservation={"id": "cr-0123456789abcdef0", "create": True},
    ),
    "reservation group arn malformed": bad(
        "train",
        purchaseOption="capacity-reservation",
        capacityReservation={"resourceGroupArn": "arn:aws:iam::1:role/x"},
    ),
    "end date without create": bad(
        "train",
        purchaseOption="capacity-reservation",
        capacityReservation={"id": "cr-0123456789abcdef0", "endDate": "2027-01-31T00:00:00Z"},
    ),
    "end date passed": bad(
        "train",
        purchaseOption="capacity-reservation",
        capacityReservation={"create": True, "endDate": "2020-01-31T00:00:00Z"},
    ),
    "inference settings on a cluster": bad("train", inference={"minNodes": 2}),
    "fsx size not a multiple": bad("train", fsx={"storageCapacityGib": 3000}),
    "fsx throughput tier": bad("train", fsx={"storageCapacityGib": 1200, "throughputPerTib": 300}),
    "storage stack malformed": bad("train", storage={"source": "stack", "stack": "data stack"}),
    "existing storage without bucket": bad("train", storage={"source": "existing"}),
    "bucket name malformed": bad("train", storage={"source": "existing", "bucket": "My_Bucket"}),
    "kms key arn malformed": bad(
        "train", storage={"source": "existing", "bucket": "my-bucket", "kmsKeyArn": "key/1"}
    ),
    "nested unknown key": merged("train", "rootVolume", sizeGb=500),
    "schedule start equals stop late": bad(
        "dev", schedule={"days": "MON-FRI", "start": "20:00", "stop": "20:00", "timezone": "UTC"}
    ),
    "schedule across midnight on weekdays": bad(
        "dev", schedule={"days": "MON-FRI", "start": "20:00", "stop": "06:00", "timezone": "UTC"}
    ),
    "idle stop on a service": bad("inference", idleStop={"enabled": True}),
    "timezone misspelt city": bad(
        "dev",
        schedule={"days": "MON-FRI", "start": "08:00", "stop": "20:00", "timezone": "Europe/Berln"},
    ),
}


def validate(config: dict[str, str]) -> list[Problem]:
    try:
        load_spec(config, "test")
    except ConfigError as error:
        return error.problems
    return []


def followed(config: dict[str, str], text: str) -> dict[str, str]:
    """The config after pasting the stack-file lines `key: value` (a `delete key` line
    removes that key)."""
    result = dict(config)
    for line in text.splitlines():
        if line.startswith("delete "):
            result.pop(line.removeprefix("delete "), None)
            continue
        for full, value in load(line).items():
            result[full] = config_string(value)
    return result


def new_problems(config: dict[str, str], fixed: Problem, after: list[Problem]) -> set[str]:
    """Problems the fix brought that were not there, other than checks of the value it set
    that could not run before (a list's items once it is a list)."""
    before = {p.path for p in validate(config)}
    return {
        p.path
        for p in after
        if p.path not in before and not p.path.startswith((f"{fixed.path}[", f"{fixed.path}."))
    }


# Fixes that need a value only the user has: a purchased block, their bucket, their key, their
# resource group. Their fix names what to put there (a <placeholder>), never a made-up value.
USERS_OWN_VALUE = {
    "capacity block without id",
    "existing storage without bucket",
    "bucket name malformed",
    "kms key arn malformed",
    "reservation group arn malformed",
}
# A GPU or type the catalog does not hold: no other model or family is made up for it; the fix
# says how to refresh the catalog, or to pick one it has.
NOT_IN_CATALOG = {"gpu not in the catalog", "instance type not in the catalog"}
PROBLEMS = [(name, problem) for name, config in CASES.items() for problem in validate(config)]
FOLLOWABLE = [
    (name, problem) for name, problem in PROBLEMS if name not in USERS_OWN_VALUE | NOT_IN_CATALOG
]
IDS = [f"{name}:{problem.path}" for name, problem in FOLLOWABLE]


def test_a_fix_that_needs_the_users_own_value_says_which():
    own = [(name, problem) for name, problem in PROBLEMS if name in USERS_OWN_VALUE]
    assert {name for name, _ in own} == USERS_OWN_VALUE
    for name, problem in own:
        assert not actionable(problem.fix) and "<" in problem.fix, (name, problem.fix)


def test_a_gpu_or_type_not_in_the_catalog_says_how_to_refresh_it_and_suggests_no_other():
    found = [(name, problem) for name, problem in PROBLEMS if name in NOT_IN_CATALOG]
    assert {name for name, _ in found} == NOT_IN_CATALOG
    for name, problem in found:
        assert "gpuc catalog refresh --region us-east-1" in problem.fix, (name, problem.fix)
        assert "did you mean" not in problem.fix and not actionable(problem.fix), problem.fix


def test_every_case_is_a_mistake():
    assert {name for name, _ in PROBLEMS} == set(CASES)


@pytest.mark.parametrize(("case", "problem"), FOLLOWABLE, ids=IDS)
def test_the_fix_command_works_when_followed(case, problem):
    assert actionable(problem.fix), f"not a command a user can follow: {problem.fix}"
    after = validate(apply_fix(CASES[case], problem.fix))
    assert problem.path not in {p.path for p in after}, (problem.fix, after)
    assert not new_problems(CASES[case], problem, after), (
        problem.fix,
        [render_problem(p) for p in after],
    )


@pytest.mark.parametrize(("case", "problem"), FOLLOWABLE, ids=IDS)
def test_the_stack_file_line_works_when_pasted(case, problem):
    line = yaml_fix(problem.fix, CASES[case])
    assert line, f"no stack-file form for {problem.fix}"
    after = validate(followed(CASES[case], line))
    assert problem.path not in {p.path for p in after}, (line, after)
    assert not new_problems(CASES[case], problem, after), (line, [render_problem(p) for p in after])


@pytest.mark.parametrize(
    ("case", "meant"),
    [
        ("container network typo", "pulumi config set containerNetwork bridge"),
        ("timezone abbreviation", "pulumi config set --path schedule.timezone Europe/Berlin"),
        ("timezone offset", "pulumi config set --path schedule.timezone Etc/GMT-2"),
        ("schedule start equals stop late", "pulumi config set --path schedule.stop 23:59"),
        ("size with a unit", "pulumi config set --path rootVolume.sizeGib 500"),
        ("idle minutes with a unit", "pulumi config set --path idleStop.minutes 30"),
        ("inference warmup with a unit", "pulumi config set --path inference.warmupSeconds 600"),
        ("fsx with a unit", "pulumi config set --path fsx.storageCapacityGib 1200"),
        ("queue time target in seconds", "pulumi config set --path inference.scaling.target 50"),
        (
            "queue time target in microseconds",
            "pulumi config set --path inference.scaling.target 250",
        ),
    ],
)
def test_the_fix_keeps_what_the_user_meant(case, meant):
    """Not the nearest spelling (CEST -> EST, UTC+2 -> UTC, bridged -> host) nor a generic
    example (e.g. 4 for a disk of at least 8 GiB)."""
    (problem,) = [p for n, p in PROBLEMS if n == case]
    assert problem.fix.startswith(meant), problem.fix


def test_a_fix_for_a_mapping_field_keeps_the_other_fields_in_the_stack_file_line():
    (problem,) = [p for n, p in PROBLEMS if n == "size with a unit"]
    line = yaml_fix(problem.fix, CASES["size with a unit"])
    assert line == "gpu-cluster:rootVolume: {iops: 6000, sizeGib: 500, throughput: 500}"


DID_YOU_MEAN = [
    (name, problem) for name, problem in PROBLEMS if problem.fix.startswith("did you mean '")
]


@pytest.mark.parametrize(
    ("case", "problem"), DID_YOU_MEAN, ids=[f"{n}:{p.path}" for n, p in DID_YOU_MEAN]
)
def test_a_did_you_mean_is_close_to_what_was_typed(case, problem):
    """A did-you-mean names a value of the same kind, a few edits from the one typed (or the
    key typed), never another model, family or example (tests/test_fix_intent.py: the value
    the fix sets is the one meant, for every kind of fix)."""
    import difflib

    meant = problem.fix.split("'")[1]
    typed = str(problem.received) if "unknown key" not in problem.problem else problem.path
    typed = (
        typed.rsplit(".", 1)[-1].rsplit(":", 1)[-1] if "unknown key" in problem.problem else typed
    )
    similar = difflib.SequenceMatcher(None, typed.lower(), meant.lower()).ratio()
    assert similar >= 0.6, (case, typed, meant)
