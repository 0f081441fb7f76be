"""Property test: any malformed stack config fails as one readable ConfigError, creates nothing.

Each example starts from a valid config (TRAIN_LIKE or a bundled stack file) and applies one
or more mutations. Every mutation makes the config invalid on its own, whatever else was
mutated: it writes a value that is wrong in any context (or, for the meaning checks that only
a cluster runs, is applied to cluster stacks only)."""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import yaml
from conftest import ROOT, TRAIN_LIKE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.infra.cli import EXIT_CONFIG
from gpu_cluster.infra.config import NESTED_KEYS, REGION_KEY, load_spec
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.plan.engine import STACK_TYPE, run_plan
from gpu_cluster.infra.spec import CONFIG_KEYS, OBJECT_KEYS, PROJECT
from gpu_cluster.infra.stack_files import load_stack_config

CATALOG = load_catalog()
EXAMPLES = 1000

BASES: dict[str, dict[str, str]] = {
    "trainlike": dict(TRAIN_LIKE),
    **{stack: load_stack_config(stack, ROOT) for stack in ("data", "dev", "experiment", "train")},
}
DATA_BASES = frozenset({"data"})

ZONES = frozenset(z for region in CATALOG.regions for z in CATALOG.zones(region))
GPU_COUNTS = frozenset(f.gpu_count for f in CATALOG.instance_types.values())
NOT_A_MODEL_COUNT = sorted(set(range(1, 65)) - GPU_COUNTS)
VALID_KMS_ARN = "arn:aws:kms:us-east-1:123456789012:key/12345678-1234-1234-1234-123456789012"
VALID_NAME = re.compile(r"[a-z][a-z0-9-]{0,18}[a-z0-9]")
# Keys accepted at the top level of the gpu-cluster: namespace.
ACCEPTED_TOP_KEYS = CONFIG_KEYS


def key(name: str) -> str:
    return f"{PROJECT}:{name}"


# ------------------------------------------------------------------------------ mutations

Config = dict[str, str]


@dataclass(frozen=True)
class Mutation:
    """Set top-level keys, drop keys, and/or merge fields into one object-valued key."""

    name: str
    values: tuple[tuple[str, str], ...] = ()
    drop: tuple[str, ...] = ()
    merge_into: str | None = None
    fields: tuple[tuple[str, object], ...] = ()

    def apply(self, config: Config) -> Config:
        result = {k: v for k, v in config.items() if k not in self.drop}
        result.update(self.values)
        if self.merge_into is not None:
            full = key(self.merge_into)
            try:
                current = json.loads(result.get(full, "{}"))
            except json.JSONDecodeError:
                current = {}
            if not isinstance(current, dict):
                current = {}
            result[full] = json.dumps({**current, **dict(self.fields)})
        return result


def sets(name: str, **values: str) -> Mutation:
    return Mutation(name, values=tuple((key(k), v) for k, v in values.items()))


def merges(name: str, obj: str, **fields: object) -> Mutation:
    return Mutation(name, merge_into=obj, fields=tuple(fields.items()))


def rejects(adapter: TypeAdapter, value: object) -> bool:
    try:
        adapter.validate_python(value)
    except ValidationError:
        return True
    return False


INT, BOOL = TypeAdapter(int), TypeAdapter(bool)


def int_or_none(value: object) -> int | None:
    try:
        return INT.validate_python(value)
    except ValidationError:
        return None


def is_cidr(text: str) -> bool:
    try:
        ipaddress.IPv4Network(text, strict=True)
    except ValueError:
        return False
    return True


garbage = st.one_of(
    st.text(max_size=30),
    st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=10),
    st.sampled_from(["", " ", "null", "None", "NaN", "-0", "1e309", "[]", "{", "\x00", "💥"]),
    st.integers().map(str),
    st.floats(allow_nan=True).map(str),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False),
    st.text(max_size=10),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


def typo(word: str) -> st.SearchStrategy[str]:
    return st.one_of(
        st.just(word + "s"),
        st.just(word[:-1]),
        st.just(word.upper()),
        st.just(word.capitalize()),
        st.just(re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), word)),
        st.just(word + "\u200b"),
    ).filter(lambda w: w != word)


# Mutations that are wrong on every stack, cluster or data.
unknown_top_key = st.builds(
    lambda name, value: sets("unknown key", **{name: value}),
    st.one_of(st.text(max_size=20), st.sampled_from(sorted(CONFIG_KEYS)).flatmap(typo)).filter(
        lambda name: name not in ACCEPTED_TOP_KEYS
    ),
    garbage,
)
unknown_nested_key = st.sampled_from(sorted(NESTED_KEYS)).flatmap(
    lambda obj: st.builds(
        lambda name, value: merges("unknown nested key", obj, **{name: value}),
        st.one_of(
            st.text(max_size=15), st.sampled_from(sorted(NESTED_KEYS[obj])).flatmap(typo)
        ).filter(lambda name: name not in NESTED_KEYS[obj]),
        json_values,
    )
)


def not_an_object(text: str) -> bool:
    try:
        return not isinstance(json.loads(text), dict)
    except json.JSONDecodeError:
        return True


object_not_a_mapping = st.builds(
    lambda obj, value: sets("object not a mapping", **{obj: value}),
    st.sampled_from(sorted(OBJECT_KEYS)),
    st.one_of(garbage, json_values.map(json.dumps)).filter(not_an_object),
)
bad_nodes = st.one_of(
    garbage.filter(lambda text: (n := int_or_none(text)) is None or n < 1 or n >= 10**6),
    st.integers(max_value=0).map(str),
    st.integers(min_value=10**6, max_value=10**40).map(str),  # no subnet holds that many
).map(lambda value: sets("bad nodes", nodes=value))
bad_bool = st.builds(
    lambda name, value: sets(f"bad {name}", **{name: value}),
    st.just("efa"),
    garbage.filter(lambda text: rejects(BOOL, text)),
)


def not_in(*allowed: str) -> Callable[[str], bool]:
    return lambda value: value not in allowed


bad_enum = st.one_of(
    st.builds(
        lambda v: sets("bad role", role=v),
        st.one_of(garbage, st.sampled_from(["Cluster", "DATA", "data "])).filter(
            not_in("cluster", "data")
        ),
    ),
    st.builds(
        lambda v: sets("bad purchaseOption", purchaseOption=v),
        st.one_of(garbage, st.sampled_from(["On-Demand", "spot ", "reserved"])).filter(
            not_in("on-demand", "spot", "capacity-reservation", "capacity-block")
        ),
    ),
    st.builds(
        lambda v: merges("bad storage.source", "storage", source=v),
        st.one_of(garbage, st.sampled_from(["s3", "Create", "existing "])).filter(
            not_in("stack", "create", "existing")
        ),
    ),
    st.builds(
        lambda v: merges("bad ami.architecture", "ami", architecture=v),
        st.one_of(garbage, st.sampled_from(["amd64", "x86-64", "aarch64", "ARM64"])).filter(
            not_in("x86_64", "arm64")
        ),
    ),
)
bad_gpus_per_node = st.one_of(
    garbage.filter(lambda text: (n := int_or_none(text)) is None or n < 1),
    st.sampled_from(NOT_A_MODEL_COUNT).map(str),
    st.integers(min_value=10**3, max_value=10**30).map(str),
).map(lambda value: sets("bad gpusPerNode", gpusPerNode=value))
bad_root_volume = st.one_of(
    st.builds(
        lambda v: merges("sizeGib out of range", "rootVolume", sizeGib=v),
        st.one_of(st.integers(max_value=7), st.integers(min_value=65537)),
    ),
    st.builds(
        lambda v: merges("iops out of range", "rootVolume", iops=v),
        st.one_of(st.integers(max_value=2999), st.integers(min_value=80001)),
    ),
    st.builds(
        lambda v: merges("throughput out of range", "rootVolume", throughput=v),
        st.one_of(st.integers(max_value=124), st.integers(min_value=2001)),
    ),
    st.builds(
        lambda f, v: merges("rootVolume not a number", "rootVolume", **{f: v}),
        st.sampled_from(["sizeGib", "iops", "throughput"]),
        st.one_of(
            st.text(max_size=5).filter(lambda t: int_or_none(t) is None),
            st.floats().filter(lambda x: not float(x).is_integer()),
            st.lists(st.integers(), max_size=2),
        ),
    ),
)
bad_network_shape = st.one_of(
    st.builds(
        lambda f, v: merges(f"bad network.{f}", "network", **{f: v}),
        st.sampled_from(["natGateway", "publicIp"]),
        st.one_of(st.text(max_size=8), st.integers(2, 99), st.lists(st.booleans())).filter(
            lambda v: rejects(BOOL, v)
        ),
    ),
    st.builds(
        lambda v: merges("avoidCidrs not a list of strings", "network", avoidCidrs=v),
        st.one_of(st.text(max_size=12), st.integers(), st.lists(st.integers(), min_size=1)),
    ),
    st.builds(
        lambda f, v: merges(f"network.{f} not a string", "network", **{f: v}),
        st.sampled_from(["vpcCidr", "privateSubnetCidr", "publicSubnetCidr"]),
        st.one_of(st.integers(), st.booleans(), st.lists(st.text(max_size=3))),
    ),
)
bad_tags = st.one_of(
    st.builds(
        lambda k, v: merges("reserved tag prefix", "tags", **{k: v}),
        st.builds(
            lambda p, rest: p + rest,
            st.sampled_from(["aws:", "AWS:", "Aws:"]),
            st.text(max_size=10),
        ),
        st.text(max_size=10),
    ),
    st.builds(
        lambda k: merges("tag key too long", "tags", **{k: "x"}),
        st.text(min_size=129, max_size=200),
    ),
    st.builds(
        lambda v: merges("tag value too long", "tags", team=v), st.text(min_size=257, max_size=300)
    ),
    st.just(merges("empty tag key", "tags", **{"": "x"})),
    st.builds(
        lambda k: merges("tag key invalid in instance metadata", "tags", **{k: "x"}),
        st.builds(
            lambda a, sep, b: a + sep + b,
            st.text(max_size=5),
            st.sampled_from([" ", "/", "\n", "\t", "#"]),
            st.text(max_size=5),
        ),
    ),
    st.builds(
        lambda n: merges("too many tags", "tags", **{f"gpuc-t{i}": "v" for i in range(n)}),
        st.integers(min_value=46, max_value=60),
    ),
    st.builds(
        lambda v: merges("tag value not a string", "tags", team=v),
        st.one_of(  # a number is its digits (a cost center), as the program receives it
            st.booleans(),
            st.lists(st.text(max_size=3)),
            st.dictionaries(st.text(max_size=3), st.text(max_size=3)),
        ),
    ),
)
bad_storage = st.one_of(
    # source=existing needs a bucket; on a data stack the source must be create.
    st.just(
        Mutation("existing without bucket", values=((key("storage"), '{"source": "existing"}'),))
    ),
    st.just(
        Mutation(
            "malformed stack ref",
            values=((key("storage"), '{"source": "stack", "stack": "a/b/c/d"}'),),
        )
    ),
    st.builds(
        lambda b: merges("invalid bucket name", "storage", bucket=b),
        st.one_of(
            st.sampled_from(["My_Bucket", "ab", "-x-", "UPPER", "x" * 64]),
            st.text(min_size=1, max_size=70).filter(
                lambda b: not re.fullmatch(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]", b)
            ),
        ),
    ),
    st.builds(
        lambda a: merges("invalid kms key arn", "storage", kmsKeyArn=a),
        st.one_of(
            st.text(min_size=1, max_size=40).filter(lambda a: not a.startswith("arn:")),
            st.just(f"{VALID_KMS_ARN}\n"),
        ),
    ),
    st.sampled_from(
        [
            Mutation(
                f"trailing newline in {field}", values=((key("storage"), json.dumps(storage)),)
            )
            for field, storage in (
                ("storage.bucket", {"source": "existing", "bucket": "my-bucket\n"}),
                ("storage.stack", {"source": "stack", "stack": "organization/gpu-cluster/data\n"}),
            )
        ]
    ),
)
bad_cluster_name = (
    st.one_of(
        st.text(min_size=1, max_size=30),
        st.sampled_from(["A", "x", "1abc", "train_1", "Train", "a" * 21, "trailing-", "café"]),
        st.sampled_from(["train\n", "dev\n", "\ntrain"]),
    )
    .filter(lambda name: not VALID_NAME.fullmatch(name))
    .map(lambda name: sets("bad clusterName", clusterName=name))
)
bad_region = st.one_of(
    st.just(Mutation("region missing", drop=(REGION_KEY,))),
    st.builds(
        lambda region: Mutation("unknown region", values=((REGION_KEY, region),)),
        st.one_of(garbage, st.sampled_from(["us-east-9", "US-EAST-1", "us-east-1a", "mars-1"])),
    ).filter(lambda m: m.values[0][1] not in CATALOG.regions),
)
unknown_instance_type = (
    st.one_of(
        st.text(min_size=1, max_size=25),
        st.sampled_from(sorted(CATALOG.instance_types)).flatmap(typo),
        st.sampled_from(["m5.large", "t3.micro", "inf2.xlarge", "trn1.32xlarge", "P4D.24XLARGE"]),
    )
    .filter(lambda name: name not in CATALOG.instance_types)
    .map(lambda name: sets("unknown instanceType", instanceType=name))
)
unknown_gpu = (
    st.one_of(
        st.text(min_size=1, max_size=20),
        st.sampled_from(CATALOG.gpu_models).flatmap(typo),
        st.sampled_from(["A10O", "H10O", "RTX 4090", "MI300X", "Gaudi2"]),
    )
    .filter(lambda name: not CATALOG.types_for_gpu(name))
    .map(lambda name: sets("unknown gpu", gpu=name))
)
garbage_zone = (
    st.one_of(st.text(min_size=1, max_size=15), st.sampled_from(["us-east-1z", "us-east-1", "a"]))
    .filter(lambda zone: zone not in ZONES)
    .map(lambda zone: sets("unknown availabilityZone", availabilityZone=zone))
)
non_efa_types = sorted(t for t, f in CATALOG.instance_types.items() if not f.efa_supported)
efa_on_non_efa_type = st.sampled_from(non_efa_types).map(
    lambda t: Mutation(
        "efa on a non-EFA type",
        values=((key("instanceType"), t), (key("efa"), "true")),
        drop=(key("gpu"), key("gpusPerNode")),
    )
)

EVERY_STACK = [
    unknown_top_key,
    unknown_nested_key,
    object_not_a_mapping,
    bad_nodes,
    bad_bool,
    bad_enum,
    bad_gpus_per_node,
    bad_root_volume,
    bad_network_shape,
    bad_tags,
    bad_storage,
    bad_cluster_name,
    bad_region,
    unknown_instance_type,  # a data stack rejects any instanceType
    unknown_gpu,  # ... and any gpu
    garbage_zone,  # ... and any availabilityZone
    efa_on_non_efa_type,
]


# Meaning checks a cluster runs but a data stack (no compute, no network) does not.
def _not_offered() -> list[tuple[str, str, str]]:
    """(type, region, zone): a zone of the region that does not offer the type."""
    return [
        (name, region, zone)
        for region in CATALOG.regions
        for name in sorted(CATALOG.instance_types)
        for zone in CATALOG.zones(region)
        if zone not in CATALOG.zones_offering(region, name)
    ]


not_offered = st.sampled_from(_not_offered()).map(
    lambda t: Mutation(
        "type not offered there",
        values=((REGION_KEY, t[1]), (key("availabilityZone"), t[2]), (key("instanceType"), t[0])),
        drop=(key("gpu"), key("gpusPerNode")),
    )
)
zone_of_another_region = st.sampled_from(
    [(r, z) for r in CATALOG.regions for z in sorted(ZONES) if z not in CATALOG.zones(r)]
).map(
    lambda pair: Mutation(
        "zone of another region",
        values=((REGION_KEY, pair[0]), (key("availabilityZone"), pair[1])),
    )
)
no_gpu_requested = st.just(
    Mutation("no GPU requested", drop=(key("instanceType"), key("gpu"), key("gpusPerNode")))
)
both_type_and_gpu = st.just(
    sets("both instanceType and gpu", instanceType="p4d.24xlarge", gpu="A100")
)
gpus_per_node_with_type = st.just(
    Mutation(
        "gpusPerNode with instanceType",
        values=((key("instanceType"), "p4d.24xlarge"), (key("gpusPerNode"), "8")),
        drop=(key("gpu"),),
    )
)
zone_missing = st.just(Mutation("availabilityZone missing", drop=(key("availabilityZone"),)))
# Each stays invalid whatever other purchase mutation it is combined with: a settings object
# that another purchaseOption leaves stray is rejected too.
bad_purchase = st.sampled_from(
    [
        sets(
            "capacity-block id malformed",
            purchaseOption="capacity-block",
            capacityBlock='{"id": "cr-1"}',
        ),
        sets(
            "reservation id malformed",
            purchaseOption="capacity-reservation",
            capacityReservation='{"id": "cr-1"}',
        ),
        sets("capacity-reservation without settings", purchaseOption="capacity-reservation"),
        sets(
            "spot fallback with other GPUs",
            purchaseOption="spot",
            spot='{"fallbackTypes": ["p5.48xlarge"]}',
        ),
        sets("spot base above the nodes", purchaseOption="spot", spot='{"onDemandBase": 100000}'),
    ]
)
bad_cidr_text = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["10.42.0.0/33", "10.42.0.1/16", "256.0.0.0/16", "fd00::/16", "10.42.0.0"]),
).filter(lambda text: not is_cidr(text))
bad_network_meaning = st.one_of(
    st.builds(
        lambda f, v: merges(f"invalid {f}", "network", **{f: v}),
        st.sampled_from(["vpcCidr", "privateSubnetCidr", "publicSubnetCidr"]),
        bad_cidr_text,
    ),
    st.builds(
        lambda v: merges("invalid avoidCidrs entry", "network", avoidCidrs=["10.0.0.0/16", v]),
        bad_cidr_text,
    ),
    st.builds(
        lambda p: merges("vpc prefix out of range", "network", vpcCidr=f"10.0.0.0/{p}"),
        st.one_of(st.integers(8, 15), st.integers(25, 32)),
    ),
    st.builds(
        lambda f: merges(f"{f} outside the vpc", "network", **{f: "192.168.0.0/24"}),
        st.sampled_from(["privateSubnetCidr", "publicSubnetCidr"]),
    ),
    st.just(
        merges(
            "overlapping subnets",
            "network",
            privateSubnetCidr="10.42.0.0/20",
            publicSubnetCidr="10.42.0.0/28",
        )
    ),
    st.just(merges("vpc overlaps avoidCidrs", "network", avoidCidrs=["0.0.0.0/0"])),
)
public_ip_with_efa = st.just(
    Mutation(
        "publicIp with EFA",
        values=(
            (REGION_KEY, "us-east-1"),
            (key("availabilityZone"), "us-east-1a"),
            (key("instanceType"), "p4d.24xlarge"),
            (key("nodes"), "2"),
            (key("efa"), "true"),
            (key("network"), json.dumps({"publicIp": True})),
        ),
        drop=(key("gpu"), key("gpusPerNode")),
    )
)
gp3_ratio = st.sampled_from(
    [
        merges("iops above 500 per GiB", "rootVolume", sizeGib=8, iops=4001, throughput=125),
        merges("throughput above iops/4", "rootVolume", sizeGib=200, iops=3000, throughput=751),
    ]
)
bad_ami_meaning = st.one_of(
    st.builds(
        lambda v: merges("invalid ami id", "ami", id=v, architecture="x86_64"),
        st.text(max_size=20).filter(
            lambda v: v and not re.fullmatch(r"ami-[0-9a-f]{8}([0-9a-f]{9})?", v)
        ),
    ),
    st.builds(
        lambda v: merges("ssm parameter without /", "ami", ssmParameter=v),
        st.text(min_size=1, max_size=20).filter(lambda v: not v.startswith("/")),
    ),
    # A whole-object write: merging would keep an architecture set by an earlier mutation.
    st.just(
        Mutation(
            "ami id without architecture",
            values=((key("ami"), json.dumps({"id": "ami-0123456789abcdef0"})),),
        )
    ),
    st.just(
        merges("ami id with newline", "ami", id="ami-0123456789abcdef0\n", architecture="x86_64")
    ),
)
arm64_ami_on_x86 = st.sampled_from(
    sorted(t for t, f in CATALOG.instance_types.items() if "arm64" not in f.architectures)
).map(
    lambda t: Mutation(
        "arm64 AMI on an x86 type",
        values=((key("instanceType"), t), (key("ami"), json.dumps({"architecture": "arm64"}))),
        drop=(key("gpu"), key("gpusPerNode")),
    )
)

CLUSTER_ONLY = [
    not_offered,
    zone_of_another_region,
    no_gpu_requested,
    both_type_and_gpu,
    gpus_per_node_with_type,
    zone_missing,
    bad_purchase,
    bad_network_meaning,
    public_ip_with_efa,
    gp3_ratio,
    bad_ami_meaning,
    arm64_ami_on_x86,
]


@st.composite
def malformed_configs(draw: Callable) -> tuple[str, Config, list[str]]:
    stack = draw(st.sampled_from(sorted(BASES)))
    pool = EVERY_STACK if stack in DATA_BASES else EVERY_STACK + CLUSTER_ONLY
    mutations = draw(st.lists(st.one_of(pool), min_size=1, max_size=4))
    config = dict(BASES[stack])
    for mutation in mutations:
        config = mutation.apply(config)
    return stack, config, [m.name for m in mutations]


# -------------------------------------------------------------------------------- checks


def assert_readable(error: ConfigError, stack: str) -> None:
    text = str(error)
    assert text.startswith(f"stack '{stack}' has "), text
    assert "Traceback" not in text
    assert error.problems, "a ConfigError must carry at least one problem"
    count = len(error.problems)
    assert f"has {count} configuration problem{'s' if count != 1 else ''};" in text
    for problem in error.problems:
        for field in ("path", "problem", "allowed", "fix"):
            value = getattr(problem, field)
            assert isinstance(value, str), (field, value)
            assert value.strip(), f"empty {field}: {problem}"
        assert problem.path.startswith((f"{PROJECT}:", REGION_KEY)), problem.path
        assert f"  - {problem.path}: {problem.problem}" in text


def test_base_configs_are_valid():
    for stack, config in BASES.items():
        load_spec(config, stack)  # raises ConfigError if a base is itself invalid


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(malformed_configs())
def test_malformed_config_fails_readably_and_creates_nothing(case):
    stack, config, applied = case
    plan = run_plan(stack, config)
    assert isinstance(plan.error, ConfigError), f"mutations {applied} left a valid config: {config}"
    assert_readable(plan.error, stack)
    created = [r.urn for r in plan.resources if r.type != STACK_TYPE]
    assert created == [], created
    assert plan.outputs == {}


# --------------------------------------------------------------------------- CLI (subprocess)


def gpuc_command() -> list[str]:
    script = Path(sys.executable).with_name("gpuc")
    if script.is_file():
        return [str(script)]
    found = shutil.which("gpuc")
    return [found] if found else [sys.executable, "-m", "gpu_cluster.infra.cli"]


def test_cli_plan_of_a_malformed_stack_prints_a_message_not_a_traceback(tmp_path):
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    (tmp_path / "stacks").mkdir()
    bad = {
        "config": {
            "aws:region": "us-east-1",
            "gpu-cluster:availabilityZone": "us-east-1a",
            "gpu-cluster:instanceType": "p4d.24xlarg",
            "gpu-cluster:nodez": 4,
            "gpu-cluster:network": {"vpcCidr": "10.42.0.0/33"},
            "gpu-cluster:storage": {"source": "stack", "stack": "organization/gpu-cluster/data"},
        }
    }
    (tmp_path / "stacks" / "Pulumi.bad.yaml").write_text(yaml.safe_dump(bad))
    result = subprocess.run(
        [*gpuc_command(), "plan", "--stack", "bad"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == EXIT_CONFIG, result.stderr
    assert "Traceback" not in result.stderr + result.stdout
    assert result.stdout == ""
    assert result.stderr.startswith(
        "error: stack 'bad' has 3 configuration problems; nothing was planned or created:"
    )
    assert "gpu-cluster:instanceType: not an NVIDIA GPU instance type" in result.stderr
    assert "did you mean 'p4d.24xlarge'?" in result.stderr
    assert "gpu-cluster:nodez: unknown key 'nodez'" in result.stderr
    assert "did you mean 'nodes'?" in result.stderr
    assert "gpu-cluster:network.vpcCidr: not a valid IPv4 CIDR block" in result.stderr
