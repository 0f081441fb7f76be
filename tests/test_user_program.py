"""A user's own Pulumi program: its failures are theirs (their file and line, exit 3), a duplicate
URN is refused as the engine refuses it, and the public Args check their Python values."""

from __future__ import annotations

import json
import re
import textwrap
import types
import typing
from pathlib import Path

import pulumi
import pytest

from gpu_cluster.infra import api, api_settings
from gpu_cluster.infra.api_arguments import (
    OWNED,
    _is_output,
    hints,
    is_input,
    settings_problems,
    value_problems,
)
from gpu_cluster.infra.blame import owner
from gpu_cluster.infra.cli import main as gpuc
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.plan.urns import DuplicateUrns
from gpu_cluster.infra.problems import INPUT, INTERNAL
from gpu_cluster.infra.suggest import edits

HEADER = "import pulumi\nimport pulumi_aws as aws\nfrom gpu_cluster import *\n"
# a dev box that plans (the project's dev stage, in the Args' words)
DEV = 'instance_type="g5.xlarge", nodes=1, availability_zone="us-east-1a"'


def project(folder: Path, body: str, **modules: str) -> Path:
    """A Pulumi Python project: Pulumi.yaml, a dev stack and __main__.py (header + body)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "Pulumi.yaml").write_text("name: mine\nruntime: python\n")
    (folder / "Pulumi.dev.yaml").write_text("config:\n  aws:region: us-east-1\n")
    (folder / "__main__.py").write_text(HEADER + textwrap.dedent(body))
    for name, text in modules.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(text))
    return folder


def plan_output(folder: Path, capsys, *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = gpuc(["plan", "--program", str(folder), "--stack", "dev", *extra])
    captured = capsys.readouterr()
    return code, captured.err + captured.out


# (case, program body, extra modules, the line the message must name, words it must say)
USER_FAILURES = [
    ("syntax error", "x = (\n", {}, 4, "SyntaxError"),
    (
        "syntax error in their module",
        "import helpers\n",
        {"helpers": "def f(:\n"},
        1,
        "SyntaxError",
    ),
    ("import error", "from gpu_cluster import NoSuchThing\n", {}, 4, "ImportError"),
    ("module not found", "import not_installed_anywhere\n", {}, 4, "ModuleNotFoundError"),
    ("name error", "print(undefined_name)\n", {}, 4, "NameError"),
    ("sys.exit", "import sys\nsys.exit(2)\n", {}, 5, "it called sys.exit(2)"),
    (
        "their own raise",
        "def check():\n    raise ValueError('budget too small')\ncheck()\n",
        {},
        5,
        "ValueError: budget too small",
    ),
    (
        "a raise in their module",
        "import helpers\nhelpers.boom()\n",
        {"helpers": "def boom():\n    raise KeyError('zone')\n"},
        2,
        "KeyError",
    ),
    (
        "a missing config key",
        "pulumi.Config().require('domain')\n",
        {},
        4,
        "ConfigMissingError",
    ),
    (
        "a raise in their apply",
        "store = DataStore('vault', DataStoreArgs())\n"
        "def boom(name):\n    raise RuntimeError('in apply: ' + name)\n"
        "pulumi.export('x', store.bucket_name.apply(boom))\n",
        {},
        6,
        "RuntimeError: in apply",
    ),
]


@pytest.mark.parametrize(
    ("body", "modules", "line", "words"),
    [case[1:] for case in USER_FAILURES],
    ids=[case[0] for case in USER_FAILURES],
)
def test_a_failure_of_the_users_program_is_theirs(tmp_path, capsys, body, modules, line, words):
    folder = project(tmp_path / "mine", body, **modules)
    code, text = plan_output(folder, capsys)
    assert code == INPUT, text
    assert text.startswith(f"error: your program failed: {words.split(':')[0]}"), text
    assert words in text
    file = next(
        f for f in [folder / "__main__.py", *folder.glob("helpers.py")] if f"{f}, line" in text
    )
    assert f"{file}, line {line}" in text or (modules and f"{folder / 'helpers.py'}, line" in text)
    assert "bug in gpuc" not in text and "internal error" not in text


def test_a_users_failure_in_json_names_their_file_and_line(tmp_path, capsys):
    folder = project(tmp_path / "mine", "raise ValueError('no')\n")
    code, text = plan_output(folder, capsys, "--json")
    assert code == INPUT
    error = json.loads(text)["error"]
    assert error["code"] == INPUT
    (problem,) = error["problems"]
    assert problem["path"] == f"{folder / '__main__.py'}:4"
    assert problem["received"] == "no"


def test_a_failure_inside_this_package_is_ours(tmp_path, capsys, monkeypatch):
    """The same program, with a bug planted in the package (a call of None in infra/api.py):
    the message asks for a report."""
    monkeypatch.setattr(api.program, "vault_args", None)
    folder = project(tmp_path / "mine", "DataStore('vault', DataStoreArgs())\n")
    code, text = plan_output(folder, capsys)
    assert code == INTERNAL, text
    assert "internal error (TypeError: 'NoneType' object is not callable)" in text
    assert "bug in gpuc" in text


def test_frames_are_owned_by_whose_file_they_are(tmp_path):
    assert owner(api.__file__) == "ours"
    assert owner(pulumi.__file__) == "library"
    assert owner(json.__file__) == "library"
    assert owner("<frozen importlib._bootstrap>") == "library"
    assert owner(str(tmp_path / "__main__.py")) == "user"


# --- the Args object, the name, opts ----------------------------------------------------------

WRONG_OBJECTS = [
    ("DataStore('vault', {'bucket': 'abc'})", "DataStore('vault').args", "a dict"),
    ("DataStore('vault', GpuClusterArgs())", "DataStore('vault').args", "GpuClusterArgs"),
    ("GpuCluster('train', None)", "GpuCluster('train').args", "None"),
    (f"GpuCluster(3, GpuClusterArgs({DEV}))", "GpuCluster(name)", "3"),
    (
        f"GpuCluster('train', GpuClusterArgs({DEV}), opts={{'protect': True}})",
        "GpuCluster('train').opts",
        "a dict",
    ),
]


@pytest.mark.parametrize(("call", "path", "received"), WRONG_OBJECTS)
def test_what_a_component_takes_is_checked_with_the_callers_line(tmp_path, call, path, received):
    main = project(tmp_path / "mine", f"{call}\n") / "__main__.py"
    plan = run_plan("dev", {"aws:region": "us-east-1"}, program=main, project="mine")
    assert isinstance(plan.error, api.ArgumentError), plan.error
    (problem,) = plan.error.problems
    assert problem.path == path
    assert received in str(problem.received)
    assert f"(at {main}:4)" in str(plan.error).splitlines()[0]
    assert [r.type for r in plan.resources] == ["pulumi:pulumi:Stack"]


# --- every keyword of every Args: unknown ones, and values of the wrong kind ---------------------

ARGS_KEYWORDS = {
    api.GpuClusterArgs: api_settings.ClusterSettings,
    api.InferenceServiceArgs: api_settings.ServingSettings,
    api.DataStoreArgs: api_settings.DataSettings,
    api.GpuNodeGroupArgs: api_settings.NodeGroupSettings,
}


def test_each_args_class_checks_the_keywords_its_types_declare():
    for args, typed in ARGS_KEYWORDS.items():
        assert args.keywords is typed


def wrong_kind(hint) -> object:
    """A value of another kind than the hint's."""
    if hint is bool:
        return "yes"
    if hint in (int, float):
        return "four"
    if hint is str:
        return 123
    origin = typing.get_origin(hint)
    if origin is typing.Literal:
        return 7 if isinstance(typing.get_args(hint)[0], str) else "x"
    return 42 if origin is not None or typing.is_typeddict(hint) else 123


def union_members(hint) -> tuple:
    """A union's members (Optional[X] included); any other hint alone."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def leaves(typed, path=""):
    """(path, hint) of every keyword of a TypedDict, nested ones included."""
    for key, hint in hints(typed).items():
        where = f"{path}.{key}" if path else key
        yield where, hint
        inner = next((h for h in union_members(hint) if typing.is_typeddict(h)), None)
        if inner is not None:
            yield from leaves(inner, where)


def hints_at(typed, path: str):
    return dict(leaves(typed))[path]


def nest(path: str, value: object) -> dict:
    head, _, rest = path.partition(".")
    return {head: nest(rest, value) if rest else value}


CASES = [
    (typed.__name__, path, hint) for typed in ARGS_KEYWORDS.values() for path, hint in leaves(typed)
]


@pytest.mark.parametrize(("typed_name", "path", "hint"), CASES, ids=lambda v: str(v)[:40])
def test_every_keyword_refuses_a_value_of_another_kind(typed_name, path, hint):
    typed = getattr(api_settings, typed_name)
    plain = [h for h in union_members(hint) if h is not type(None) and not _is_output(h)]
    value = wrong_kind(plain[0])
    problems = settings_problems(nest(path, value), typed)
    assert [p.path for p in problems] == [path], (path, value, problems)
    assert "belongs" in problems[0].problem and problems[0].allowed


@pytest.mark.parametrize("typed", list(ARGS_KEYWORDS.values()), ids=lambda t: t.__name__)
def test_an_unknown_keyword_is_refused_with_the_nearest_known_one(typed):
    known = list(hints(typed))
    for key in known:
        typo = key[:-1] + ("x" if key[-1] != "x" else "y")
        if typo in known:
            continue
        (problem,) = settings_problems({typo: 1}, typed)
        assert problem.path == typo and problem.problem == f"unknown argument '{typo}'"
        (suggested,) = re.findall(r"'(\w+)'", problem.fix)  # the one typed, or as near
        assert suggested in known and edits(suggested, typo) <= edits(key, typo)
    for key in OWNED:
        (problem,) = settings_problems({key: "x"}, typed)
        assert problem.problem.startswith("is not an argument"), problem


@pytest.mark.parametrize(
    ("typed_name", "path"),
    [(t.__name__, p) for t in ARGS_KEYWORDS.values() for p, h in leaves(t) if is_input(h)],
)
def test_an_output_is_accepted_where_the_types_say_input_and_refused_elsewhere(typed_name, path):
    typed = getattr(api_settings, typed_name)
    output = pulumi.Output.from_input("x")
    sequence = typing.get_origin(hints_at(typed, path)) is not None and not is_input(
        hints_at(typed, path)
    )
    assert settings_problems(nest(path, [output] if sequence else output), typed) == []
    elsewhere = [p for p, h in leaves(typed) if not is_input(h) and "." not in p]
    (problem,) = settings_problems({elsewhere[0]: output}, typed)
    assert "must be a plain value" in problem.problem


def test_a_number_for_a_subnet_id_names_the_argument_in_the_plan(tmp_path):
    main = (
        project(
            tmp_path / "mine",
            f"GpuCluster('train', GpuClusterArgs({DEV}, "
            "network={'vpc_id': 'vpc-0a1b2c3d4e5f60789', 'subnet_ids': [123]}))\n",
        )
        / "__main__.py"
    )
    plan = run_plan("dev", {"aws:region": "us-east-1"}, program=main, project="mine")
    assert isinstance(plan.error, api.ArgumentError), plan.error
    paths = [p.path for p in plan.error.problems]
    assert paths == ["GpuClusterArgs.network.subnet_ids[0]"], plan.error
    assert plan.error.problems[0].received == 123


def test_value_problems_leave_a_right_value_alone():
    assert value_problems(["subnet-0a1b2c3d"], typing.Sequence[pulumi.Input[str]], "x") == []
    assert value_problems(4, int, "nodes") == [] and value_problems(2.5, float, "p") == []
    assert value_problems(True, int, "nodes")  # a bool is not a count


NODE_GROUP = """
GpuNodeGroup("workers", GpuNodeGroupArgs(
    subnet_id={subnet}, security_group_id="sg-0a1b2c3d4e5f60789",
    instance_profile_arn="arn:aws:iam::123456789012:instance-profile/gpu",
    kms_key_arn={key},
    instance_type="p5.48xlarge", nodes=2, availability_zone="us-east-1a",
))
"""
KEY = '"arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"'


@pytest.mark.parametrize(
    ("subnet", "key", "path", "problem"),
    [
        ("5", KEY, "GpuNodeGroupArgs.subnet_id", "is a number"),
        ('"subnet-1"', KEY, "GpuNodeGroupArgs.subnet_id", "is not a subnet id"),
        ('"subnet-0a1b2c3d4e5f60789"', "None", "GpuNodeGroupArgs.kms_key_arn", "is None"),
        ('"subnet-0a1b2c3d4e5f60789"', '"alias/x"', "GpuNodeGroupArgs.kms_key_arn", "is not a KMS"),
    ],
)
def test_a_node_groups_ids_are_checked(tmp_path, subnet, key, path, problem):
    body = NODE_GROUP.format(subnet=subnet, key=key)
    main = project(tmp_path / "mine", body) / "__main__.py"
    plan = run_plan("dev", {"aws:region": "us-east-1"}, program=main, project="mine")
    assert isinstance(plan.error, api.ArgumentError), plan.error
    (found,) = plan.error.problems
    assert found.path == path and found.problem.startswith(problem), found


# --- secrets ------------------------------------------------------------------------------------


def test_a_plain_string_secret_is_wrapped_as_a_secret_with_a_warning(tmp_path, capsys, caplog):
    body = f"""
    GpuCluster("train", GpuClusterArgs({DEV}, secrets={{"HF_TOKEN": "hf_plain_text_0042"}}))
    """
    folder = project(tmp_path / "mine", body)
    capsys.readouterr()
    assert gpuc(["plan", "--program", str(folder), "--stack", "dev", "--json"]) == 0
    captured = capsys.readouterr()
    warned = caplog.text  # pulumi.log.warn, as `gpuc plan` and `pulumi up` print it
    assert "GpuClusterArgs.secrets['HF_TOKEN'] is a plain string" in warned
    assert "require_secret('HF_TOKEN')" in warned
    assert "hf_plain_text_0042" not in captured.out  # the plan shows the parameter as a secret
    plan = run_plan(
        "dev", {"aws:region": "us-east-1"}, program=folder / "__main__.py", project="mine"
    )
    (parameter,) = [r for r in plan.of_type("aws:ssm/parameter:Parameter") if "hf-token" in r.name]
    assert parameter.inputs["type"] == "SecureString" and parameter.inputs["value"] == "[secret]"


def test_a_secret_that_is_not_a_string_is_refused(tmp_path):
    main = (
        project(
            tmp_path / "mine",
            f"GpuCluster('train', GpuClusterArgs({DEV}, secrets={{'HF_TOKEN': 42}}))\n",
        )
        / "__main__.py"
    )
    plan = run_plan("dev", {"aws:region": "us-east-1"}, program=main, project="mine")
    assert isinstance(plan.error, api.ArgumentError), plan.error
    assert [p.path for p in plan.error.problems] == ["GpuClusterArgs.secrets['HF_TOKEN']"]


# --- duplicate URNs -------------------------------------------------------------------------


def test_two_components_with_one_name_are_refused_as_the_engine_refuses_them(tmp_path):
    body = """
    DataStore("vault", DataStoreArgs())
    DataStore("vault", DataStoreArgs())
    """
    main = project(tmp_path / "mine", body) / "__main__.py"
    plan = run_plan("dev", {"aws:region": "us-east-1"}, program=main, project="mine")
    assert isinstance(plan.error, DuplicateUrns), plan.error
    (problem,) = plan.error.problems  # the component, not each of its children again
    assert problem.path == "urn:pulumi:dev::mine::gpu-cluster:storage:DataVault::vault"
    assert problem.problem == (
        f"Duplicate resource URN '{problem.path}'; try giving it a unique name"
    )
    assert problem.received == f"registered at {main}:5 and at {main}:6"
    assert not plan.outputs


def test_two_resources_of_one_type_and_name_are_refused_and_other_names_plan(tmp_path):
    body = """
    aws.s3.Bucket("logs")
    aws.s3.Bucket("logs")
    aws.s3.Bucket("logs2")
    aws.sqs.Queue("logs")
    """
    main = project(tmp_path / "mine", body) / "__main__.py"
    plan = run_plan("dev", {"aws:region": "us-east-1"}, program=main, project="mine")
    assert isinstance(plan.error, DuplicateUrns), plan.error
    assert [p.path for p in plan.error.problems] == [
        "urn:pulumi:dev::mine::aws:s3/bucket:Bucket::logs"
    ]
    fine = project(
        tmp_path / "fine", body.replace('Bucket("logs")\n    aws.s3', 'Bucket("logs")\n    #')
    )
    plan = run_plan(
        "dev", {"aws:region": "us-east-1"}, program=fine / "__main__.py", project="mine"
    )
    assert plan.error is None, plan.error


# --- a user's own resources -----------------------------------------------------------------

SUBNET = (
    'aws.ec2.Subnet("mine", vpc_id="vpc-0a1b2c3d", cidr_block="10.0.0.0/24", '
    'availability_zone="us-east-1a"{opts})\n'
)


def test_a_users_own_resource_that_a_later_up_could_not_replace_is_a_warning(tmp_path, capsys):
    """The update rules (infra/plan/update_rules.py) refuse what this package builds; a user's
    own subnet is theirs to decide: a warning with the rule, and the plan stands."""
    folder = project(tmp_path / "mine", SUBNET.format(opts=""))
    code, text = plan_output(folder, capsys)
    assert code == 0, text
    assert "warning: your mine (aws:ec2/subnet:Subnet): a create-first replacement" in text
    assert "report it" not in text
    opts = ", opts=pulumi.ResourceOptions(delete_before_replace=True)"
    folder = project(tmp_path / "fixed", SUBNET.format(opts=opts))
    code, text = plan_output(folder, capsys)
    assert code == 0 and "warning: your" not in text, text


def test_a_warning_names_the_subnet_an_output_gives_not_the_plans_stand_in(tmp_path, caplog):
    body = """
    vpc = aws.ec2.Vpc("v", cidr_block="10.8.0.0/16")
    subnet = aws.ec2.Subnet(
        "s", vpc_id=vpc.id, cidr_block="10.8.0.0/20", availability_zone="us-east-1a",
        opts=pulumi.ResourceOptions(delete_before_replace=True),
    )
    GpuCluster("train", GpuClusterArgs(
        instance_type="g5.xlarge", nodes=1, network={"vpc_id": vpc.id, "subnet_ids": [subnet.id]}
    ))
    """
    main = project(tmp_path / "mine", body) / "__main__.py"
    plan = run_plan("dev", {"aws:region": "us-east-1"}, program=main, project="mine")
    assert plan.error is None, plan.error
    assert "availabilityZone: the zone of the subnet your Output gives" in caplog.text
    assert api.STAND_INS["network.subnetIds"].format(index=1) not in caplog.text
