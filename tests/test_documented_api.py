"""What the README, the docs and the public docstrings show of the components exists: every
documented program plans, every ``XArgs(...)`` in a docstring plans, every keyword a docstring
names is one the Args take, and every output it names is an attribute of the component."""

from __future__ import annotations

import inspect
import re
import textwrap
from pathlib import Path

import pytest
from docs_text import ROOT

from gpu_cluster.infra import api, api_settings
from gpu_cluster.infra.api_arguments import hints
from gpu_cluster.infra.plan.engine import run_plan

# What a documented snippet leaves to the reader: the imports, and the VPC and subnet it names
PREAMBLE = """\
import pulumi
import pulumi_aws as aws
from gpu_cluster import *

vpc = aws.ec2.Vpc("docs-vpc", cidr_block="10.8.0.0/16")
subnet = aws.ec2.Subnet(
    "docs-subnet", vpc_id=vpc.id, cidr_block="10.8.0.0/20", availability_zone="us-east-1a"
)
"""

FENCE = re.compile(r"(<!-- [^>]* -->\n)?( *)```python\n(.*?)\n *```", re.S)


def documented_programs() -> list[tuple[str, str]]:
    """(where, code) of each Python block in the README and docs that uses the components,
    except a block shown for the error it stops with (<!-- program -->)."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for number, (marker, indent, code) in enumerate(FENCE.findall(page.read_text()), 1):
            if "Args(" not in code or (marker or "").startswith("<!-- program -->"):
                continue
            lines = [line.removeprefix(indent) for line in code.splitlines()]
            found.append((f"{page.relative_to(ROOT)} block {number}", "\n".join(lines)))
    return found


def plan(tmp_path: Path, code: str):
    main = tmp_path / "__main__.py"
    main.write_text(PREAMBLE + textwrap.dedent(code) + "\n")
    return run_plan("dev", {"aws:region": "us-east-1"}, program=main, project="mine")


def test_the_docs_show_a_program():
    assert any("docs/guides/own-program.md" in where for where, _ in documented_programs())


@pytest.mark.parametrize(("where", "code"), documented_programs(), ids=lambda v: v[:60])
def test_every_documented_program_plans(tmp_path, where, code):
    result = plan(tmp_path, code)
    assert result.error is None, f"{where}:\n{result.error}"


# --- the docstrings -----------------------------------------------------------------------------

COMPONENTS = {
    api.GpuCluster: api.GpuClusterArgs,
    api.InferenceService: api.InferenceServiceArgs,
    api.DataStore: api.DataStoreArgs,
    api.GpuNodeGroup: api.GpuNodeGroupArgs,
}
DOUBLE_TICKS = re.compile(r"``(.+?)``", re.S)


def calls_in(text: str, name: str) -> list[str]:
    """Each whole ``name(...)`` call in a docstring's code spans (balanced parentheses)."""
    calls = []
    for span in DOUBLE_TICKS.findall(text):
        start = span.find(f"{name}(")
        if start < 0:
            continue
        depth = 0
        for end, char in enumerate(span[start:], start):
            depth += {"(": 1, ")": -1}.get(char, 0)
            if char == ")" and depth == 0:
                calls.append(" ".join(span[start : end + 1].split()))
                break
    return calls


DOCSTRING_CALLS = [
    (component.__name__, call)
    for component, args in COMPONENTS.items()
    for source in (args, component, api)
    for call in calls_in(inspect.getdoc(source) or "", args.__name__)
]


def test_the_docstrings_show_an_args_call():
    assert any(name == "GpuCluster" for name, _ in DOCSTRING_CALLS)


@pytest.mark.parametrize(("component", "call"), DOCSTRING_CALLS, ids=lambda v: v[:50])
def test_every_args_call_in_a_docstring_plans(tmp_path, component, call):
    result = plan(tmp_path, f'{component}("docs", {call})')
    assert result.error is None, f"{call}:\n{result.error}"


def keywords(typed) -> set[str]:
    """Every keyword of an Args TypedDict, nested ones included."""
    names = set()
    for key, hint in hints(typed).items():
        names.add(key)
        for inner in (hint, *getattr(hint, "__args__", ())):
            if isinstance(inner, type) and hasattr(inner, "__annotations__") and inner is not str:
                names |= keywords(inner)
    return names


IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")


@pytest.mark.parametrize("args", list(COMPONENTS.values()), ids=lambda a: a.__name__)
def test_an_args_docstring_names_only_its_keywords(args):
    parameters = set(inspect.signature(args.__init__).parameters) - {"self", "settings"}
    known = keywords(args.keywords) | parameters
    named = {
        word
        for span in DOUBLE_TICKS.findall(inspect.getdoc(args) or "")
        for word in [*re.findall(r"\b([a-z_][a-z0-9_]*)\s*=", span), span]
        if IDENTIFIER.match(word)
    }
    assert named, f"{args.__name__}'s docstring names no keyword"
    assert named <= known, f"{args.__name__} documents {sorted(named - known)}, not arguments"


def test_the_module_docstring_names_only_keywords():
    known = keywords(api_settings.ServingSettings) | keywords(api_settings.DataSettings)
    named = {
        word
        for span in DOUBLE_TICKS.findall(inspect.getdoc(api) or "")
        for word in re.findall(r"\b([a-z_][a-z0-9_]*)\s*[=:]|^([a-z_][a-z0-9_]*)$", span)
        for word in word
        if word
    }
    assert named and named <= known | {"vpc_id", "subnet_ids"}, sorted(named - known)


OUTPUTS = re.compile(r"Outputs(?: \(attributes\))?: (.*)", re.S)

# A component of each kind, planned, with each output the docstring names checked to exist
OUTPUT_PROGRAMS = {
    api.GpuCluster: [
        'GpuClusterArgs(instance_type="g5.xlarge", nodes=1, availability_zone="us-east-1a")',
        'GpuClusterArgs(instance_type="p4d.24xlarge", nodes=2, availability_zone="us-east-1a")',
    ],
    api.InferenceService: [
        'InferenceServiceArgs(instance_type="g5.xlarge", inference={"availability_zones": '
        '["us-east-1a", "us-east-1b"], "model_repository": "models/", "tls": {"certificate_arn": '
        '"arn:aws:acm:us-east-1:123456789012:certificate/12345678-1234-1234-1234-123456789012"}, '
        '"access": {"cidrs": ["203.0.113.0/24"]}})'
    ],
    api.DataStore: ["DataStoreArgs()"],
    api.GpuNodeGroup: [
        'GpuNodeGroupArgs(subnet_id="subnet-0a1b2c3d4e5f60789", '
        'security_group_id="sg-0a1b2c3d4e5f60789", '
        'instance_profile_arn="arn:aws:iam::123456789012:instance-profile/gpu", '
        'kms_key_arn="arn:aws:kms:us-east-1:123456789012:key/'
        '1234abcd-12ab-34cd-56ef-1234567890ab", '
        'instance_type="p5.48xlarge", nodes=2, availability_zone="us-east-1a")'
    ],
}


def documented_outputs(component) -> list[str]:
    (text,) = OUTPUTS.findall(inspect.getdoc(component) or "")
    spans = [s for s in DOUBLE_TICKS.findall(text) if re.match(r"^[a-z_][a-z0-9_.]*$", s)]
    # "``service`` (its ``group``)": a word in parentheses after an output is its attribute
    nested = re.findall(r"``(\w+)`` \(its ``(\w+)``\)", text)
    inner = {child for _, child in nested}
    return [s for s in spans if s not in inner] + [f"{a}.{b}" for a, b in nested]


@pytest.mark.parametrize("component", list(OUTPUT_PROGRAMS), ids=lambda c: c.__name__)
def test_a_components_docstring_names_only_its_outputs(tmp_path, component):
    names = documented_outputs(component)
    assert names
    found: set[str] = set()
    for number, args in enumerate(OUTPUT_PROGRAMS[component]):
        code = (
            f'made = {component.__name__}("docs{number}", {args})\n'
            "def has(obj, path):\n"
            "    for part in path.split('.'):\n"
            "        if not hasattr(obj, part):\n"
            "            return False\n"
            "        obj = getattr(obj, part)\n"
            "    return True\n"
            f"pulumi.export('has', [n for n in {names!r} if has(made, n)])\n"
        )
        result = plan(tmp_path, code)
        assert result.error is None, result.error
        found |= set(result.outputs["has"])
    # a single dev box has private_ips instead of a node group: "instance" likewise for a group
    optional = {"private_ips", "instance"}
    assert set(names) - optional <= found, sorted(set(names) - found)


# --- the config keys the README and docs tell a reader to set ------------------------------------

SET_COMMANDS = re.compile(
    r"pulumi config set (?:--path |--secret |--plaintext )*(?:gpu-cluster:)?([A-Za-z][\w.]*)"
    r"|--set(?:-path)? ([A-Za-z][\w.]*)="
    r"|gpu-cluster:([a-z][A-Za-z]*(?:\.[A-Za-z]\w*)*)(?![\w:/$-])"
    r"|gpu-cluster:([a-z][A-Za-z]*):(?=\s)"  # a stack file's key, in a YAML block
)
# what a page names on purpose that is not a key: a typo an error block shows, placeholders, the
# nodes' health tag (gpu-cluster:health; gpu-cluster:stack-id is skipped by the pattern)
NOT_KEYS = {"nodez", "K", "KEY", "NAME", "health"}


def key_exists(path: str) -> bool:
    """A dotted camelCase path names a field of the stack's spec (a mapping's own keys: any)."""
    from pydantic import BaseModel

    from gpu_cluster.infra.spec import StackSpec

    model: type[BaseModel] | None = StackSpec
    for part in path.split("."):
        if model is None:  # inside a mapping (tags, secrets): any key
            return True
        fields = {f.alias or name: f for name, f in model.model_fields.items()}
        if part not in fields:
            return False
        annotation = fields[part].annotation
        options = (annotation, *getattr(annotation, "__args__", ()))
        model = next((o for o in options if isinstance(o, type) and issubclass(o, BaseModel)), None)
    return True


def documented_keys() -> list[tuple[str, str]]:
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for match in SET_COMMANDS.finditer(page.read_text()):
            key = next(group for group in match.groups() if group)
            if key.split(".")[0] not in NOT_KEYS:
                found.append((str(page.relative_to(ROOT)), key))
    return sorted(set(found))


def test_the_pages_name_config_keys():
    assert len(documented_keys()) > 20


@pytest.mark.parametrize(("page", "key"), documented_keys(), ids=lambda v: v)
def test_every_config_key_a_page_names_exists(page, key):
    # gpu-cluster:<room>:<Type> is a component's type token, not a key (no ':' after a key)
    assert key_exists(key), f"{page} names gpu-cluster:{key}, which is not a stack key"
