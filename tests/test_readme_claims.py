"""The docs' table of what a change does to running nodes, NVMe scratch and data, held
against the diff engine: each row is read from the docs (docs/guides/scale.md; README.md and
every page under docs/ are searched), each change it names is made to a
stack's config, planned, diffed and checked for collisions (infra/diff), and each cell must be
what the engine says. A row or a cell this test cannot read fails it, so a new row is tested
as soon as it is written. The example `gpuc diff` output in the docs is checked the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from conftest import ROOT
from docs_text import docs_text

import gpu_cluster.components.cluster
from gpu_cluster.infra import cli
from gpu_cluster.infra.diff.collisions import Collision, collisions
from gpu_cluster.infra.diff.model import Change, diff_plans, running_jobs
from gpu_cluster.infra.diff.service_moves import MOVE_FIX
from gpu_cluster.infra.plan.engine import Plan, run_plan
from gpu_cluster.infra.stack_files import load_stack_config

DOCS = docs_text()
HEADER = "| change | running nodes | NVMe scratch | data |"
GROUP = "aws:autoscaling/group:Group"
INSTANCE = "aws:ec2/instance:Instance"
SUBNET = "aws:ec2/subnet:Subnet"
LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"
BUCKET = "aws:s3/bucket:Bucket"
NODES = (GROUP, INSTANCE)
FSX = json.dumps({"storageCapacityGib": 4800, "throughputPerTib": 250})


def table_rows() -> list[list[str]]:
    lines = DOCS.splitlines()
    start = lines.index(HEADER)  # the table is gone or renamed: fix this test with it
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def items(cell: str) -> list[str]:
    """The changes a row names: `a`, `b`, c or d -> [a, b, c, d] (no backticks)."""
    text = cell.replace("`", "")
    return [i.strip() for i in re.split(r",\s*|\s+or\s+(?![^(]*\))", text) if i.strip()]


# --- the changes: the docs' wording -> (stack, config before, config after) ------------------

Config = dict[str, str]
Variant = tuple[str, Config, Config]


def stack(name: str, **extra: str) -> Config:
    return {**load_stack_config(name, ROOT), **{f"gpu-cluster:{k}": v for k, v in extra.items()}}


def change(name: str, base: Config | None = None, **values: str) -> list[Variant]:
    before = base if base is not None else stack(name)
    return [(name, before, {**before, **{f"gpu-cluster:{k}": v for k, v in values.items()}})]


def serving_zones(*zones: str) -> Config:
    base = stack("inference")
    serving = {**json.loads(base["gpu-cluster:inference"]), "availabilityZones": list(zones)}
    return {**base, "gpu-cluster:inference": json.dumps(serving)}


TRAIN_FSX = stack("train", fsx=FSX)
OWN_VPC = json.dumps({"vpcId": "vpc-0a1b2c3d4e5f60789", "subnetIds": ["subnet-0a1b2c3d4e5f60789"]})
TAGS = json.dumps({"stage": "train", "team": "ml-platform", "project": "llm"})
BOOT_SCRIPTS = "boot scripts"  # a new gpu-cluster release's scripts: see variants()

CHANGES: dict[str, Callable[[], list[Variant]]] = {
    "nodes up": lambda: change("train", nodes="8"),
    "nodes down": lambda: change("train", nodes="2"),
    "tags": lambda: change("train", tags=TAGS),
    "root volume size": lambda: change("train", rootVolume=json.dumps({"sizeGib": 400})),
    "a new AMI (ami.*)": lambda: change(
        "train", ami=json.dumps({"id": "ami-0123456789abcdef0", "architecture": "x86_64"})
    ),
    "secrets": lambda: change("train", secrets=json.dumps({"WANDB_API_KEY": "x" * 40})),
    BOOT_SCRIPTS: lambda: [("train", stack("train"), stack("train"))],
    "instanceType": lambda: change("train", instanceType="p5.48xlarge"),
    "EFA layout": lambda: change("train", efa="false"),
    "purchaseOption": lambda: change("train", purchaseOption="spot"),
    "the reservation": lambda: change(
        "train",
        purchaseOption="capacity-reservation",
        capacityReservation=json.dumps({"id": "cr-0123456789abcdef0"}),
    ),
    "block": lambda: change(
        "train",
        purchaseOption="capacity-block",
        capacityBlock=json.dumps({"id": "cr-0123456789abcdef1"}),
    ),
    "availabilityZone": lambda: [
        *change("train", availabilityZone="us-east-1b"),
        *change("train", TRAIN_FSX, availabilityZone="us-east-1b"),
    ],
    "network.*Cidr": lambda: change("train", network=json.dumps({"vpcCidr": "10.50.0.0/16"})),
    "network.vpcId/subnetIds (moving into or out of your own VPC)": lambda: [
        *change("train", network=OWN_VPC),
        *[("train", stack("train", network=OWN_VPC), stack("train"))],
    ],
    "inference.availabilityZones (a further zone swapped)": lambda: [
        ("inference", stack("inference"), serving_zones("us-east-1a", "us-east-1c")),
        ("inference", stack("inference"), serving_zones("us-east-1a", "us-east-1f")),
    ],
    "dev box instanceType of the same architecture": lambda: change(
        "dev", instanceType="g5.2xlarge"
    ),
    "dev box instanceType of another architecture": lambda: change(
        "dev", instanceType="g5g.xlarge"
    ),
    "fsx added": lambda: change("train", fsx=FSX),
    "fsx removed": lambda: [("train", TRAIN_FSX, stack("train"))],
    "fsx.storageCapacityGib down": lambda: change(
        "train", TRAIN_FSX, fsx=json.dumps({"storageCapacityGib": 2400, "throughputPerTib": 250})
    ),
    "fsx.storageCapacityGib up": lambda: change(
        "train", TRAIN_FSX, fsx=json.dumps({"storageCapacityGib": 7200, "throughputPerTib": 250})
    ),
}


# --- what the engine says -------------------------------------------------------------------


@dataclass
class Outcome:
    before: Plan
    changes: list[Change]
    found: list[Collision]

    def of(self, *types: str, kinds: tuple[str, ...] = ()) -> list[Change]:
        return [c for c in self.changes if c.type in types and (not kinds or c.kind in kinds)]

    @property
    def interrupted(self) -> bool:
        return running_jobs(self.changes)[0]

    def impacts(self, *types: str) -> str:
        return " ".join(i for c in self.of(*types) for i in c.impact)


def outcome(variant: Variant, monkeypatch: pytest.MonkeyPatch, boot: bool) -> Outcome:
    name, old, new = variant
    secret = [k for k in (*old, *new) if k == "gpu-cluster:secrets"]  # Pulumi secrets
    before = run_plan(name, old, secret_keys=secret)
    if boot:
        render = gpu_cluster.components.cluster.render_user_data
        monkeypatch.setattr(
            gpu_cluster.components.cluster,
            "render_user_data",
            lambda config: render(config) + "\n# a new release's boot scripts\n",
        )
    after = run_plan(name, new, secret_keys=secret)
    assert before.error is None and after.error is None, (before.error, after.error)
    changes = diff_plans(before, after)
    return Outcome(before, changes, collisions(before, after, changes))


def nodes_untouched(o: Outcome) -> bool:
    return not o.of(*NODES, kinds=("replace", "remove")) and not o.interrupted


def group_replaced_old_first(o: Outcome) -> bool:
    return any(c.kind == "replace" and c.delete_before_replace for c in o.of(GROUP))


def box_stopped_and_started(o: Outcome) -> bool:
    (box,) = o.of(INSTANCE)
    return box.kind == "update" and "instanceType" in box.changed and "root disk" in box.impact[0]


def network_rebuilt(o: Outcome) -> bool:
    subnets = o.of(SUBNET)
    return (
        bool(subnets)
        and all(c.kind == "replace" and c.delete_before_replace for c in subnets)
        and group_replaced_old_first(o)
        and all(c.kind == "replace" for c in o.of("aws:ec2/natGateway:NatGateway"))
        and all(c.kind == "replace" for c in o.of("aws:ec2/vpcEndpoint:VpcEndpoint"))
    )


def nodes_follow_the_file_system(o: Outcome) -> bool:
    fs = o.of(LUSTRE)
    return (
        bool(fs)
        and all(c.kind in ("add", "replace", "remove") for c in fs)
        and (group_replaced_old_first(o) or bool(o.of(INSTANCE, kinds=("replace",))))
    )


def scratch_gone(o: Outcome) -> bool:
    return bool(o.of(*NODES, kinds=("replace", "remove"))) or "NVMe scratch is wiped" in o.impacts(
        INSTANCE
    )


def data_kept(o: Outcome) -> bool:
    return not o.of(BUCKET, LUSTRE, kinds=("replace", "remove"))


def lustre_renewed_when_there(o: Outcome) -> bool:
    had = any(r.type == LUSTRE for r in o.before.resources)
    return not o.of(BUCKET, kinds=("replace", "remove")) and (
        not had or [c.kind for c in o.of(LUSTRE)] == ["replace"]
    )


def unexported_files_lost(o: Outcome) -> bool:
    (fs,) = o.of(LUSTRE, kinds=("replace", "remove"))
    return "files not exported to the bucket are lost" in fs.impact[0] and data_kept_in_bucket(o)


def data_kept_in_bucket(o: Outcome) -> bool:
    return not o.of(BUCKET, kinds=("replace", "remove"))


def zone_swapped(o: Outcome) -> bool:
    """A further serving zone swapped: its subnets removed and another zone's added, the group
    (its subnets: rebalanced, new nodes first) and the load balancer updated in place."""
    subnets = o.of(SUBNET)
    group, balancer = o.of(GROUP), o.of("aws:lb/loadBalancer:LoadBalancer")
    return (
        {c.kind for c in subnets} == {"add", "remove"}
        and [c.kind for c in group] == ["update"]
        and any(p.startswith("vpcZoneIdentifiers") for p in group[0].changed)
        and [c.kind for c in balancer] == ["update"]
        and not o.of(*NODES, kinds=("replace", "remove"))
    )


def stops(o: Outcome) -> bool:
    return o.interrupted


# Each cell's wording (a regular expression matched at its start) -> what the engine must say.
RUNNING_NODES: dict[str, Callable[[Outcome], bool]] = {
    r"untouched": nodes_untouched,
    r"the group terminates the extra nodes: a job on them stops": lambda o: (
        "terminates" in o.impacts(GROUP) and o.interrupted and not o.of(GROUP, kinds=("replace",))
    ),
    r"the group is replaced, old nodes first: a running job stops": lambda o: (
        group_replaced_old_first(o) and stops(o)
    ),
    r"the nodes, endpoints and NAT gateway are deleted, then the subnets": network_rebuilt,
    r"the box is stopped, changed and started again: a running job stops; its root disk stays": (
        lambda o: box_stopped_and_started(o) and stops(o)
    ),
    r"the box is replaced: a running job stops, its root disk is lost": lambda o: (
        [c.kind for c in o.of(INSTANCE)] == ["replace"] and stops(o)
    ),
    r"the group is replaced, old nodes first, in the other network; the network the stack "
    r"created is deleted at the end of the update": lambda o: (
        group_replaced_old_first(o)
        and stops(o)
        and [c.kind for c in o.of("aws:ec2/vpc:Vpc")] in (["add"], ["remove"])
    ),
    r"the group launches nodes in the new zone before it terminates those in the removed "
    r"one, and the load balancer moves in place; the removed zone's subnets are deleted at the "
    r"end of the update": lambda o: zone_swapped(o),
    r"the nodes go with the file system they mount": lambda o: (
        nodes_follow_the_file_system(o) and stops(o)
    ),
}
NVME: dict[str, Callable[[Outcome], bool]] = {
    r"kept$": lambda o: not scratch_gone(o),
    r"gone on those nodes$": lambda o: "terminates" in o.impacts(GROUP),
    r"gone on the removed zone's nodes$": lambda o: zone_swapped(o),
    r"gone$": scratch_gone,
}
DATA: dict[str, Callable[[Outcome], bool]] = {
    r"kept$": data_kept,
    r"kept \(FSx for Lustre: a new, empty file system\)$": lustre_renewed_when_there,
    r"files not exported to the bucket are lost": unexported_files_lost,
}
COLUMNS = (("running nodes", RUNNING_NODES), ("NVMe scratch", NVME), ("data", DATA))


def cell_check(cell: str, vocabulary: dict) -> Callable[[Outcome], bool]:
    matches = [check for pattern, check in vocabulary.items() if re.match(pattern, cell)]
    assert len(matches) == 1, f"cannot read {cell!r}: it must start with one of {list(vocabulary)}"
    return matches[0]


ROWS = table_rows()
CASES = [
    pytest.param(row, item, id=f"{item}")
    for row in ROWS
    for item in (items(row[0]) if len(row) == 4 else [row[0]])
]


def test_the_table_has_rows_and_every_one_reads():
    assert len(ROWS) >= 8
    for row in ROWS:
        assert len(row) == 4, f"a row of 4 cells: {row}"
        for item in items(row[0]):
            assert item in CHANGES, f"no config change for {item!r} (row {row[0]!r})"
        for cell, (_, vocabulary) in zip(row[1:], COLUMNS, strict=True):
            cell_check(cell, vocabulary)


@pytest.mark.parametrize(("row", "item"), CASES)
def test_each_change_does_what_the_readme_says(row, item, monkeypatch):
    assert item in CHANGES, f"no config change for {item!r}"
    for variant in CHANGES[item]():
        result = outcome(variant, monkeypatch, boot=item == BOOT_SCRIPTS)
        assert result.changes, f"{item}: the engine sees no change"
        assert not result.found, f"{item}: the docs say it applies; {result.found}"
        for cell, (column, vocabulary) in zip(row[1:], COLUMNS, strict=True):
            assert cell_check(cell, vocabulary)(result), (
                f"docs row {row[0]!r}, {column}: {cell!r} - but the engine says "
                f"{[(c.kind, c.type, c.role, c.impact) for c in result.changes]}"
            )


def test_the_example_diff_output_is_what_gpuc_diff_prints(capsys):
    """The `gpuc diff --stack train --set nodes=8` example in docs/guides/scale.md."""
    block = DOCS.split("$ gpuc diff --stack train --set nodes=8\n", 1)[1].split("```", 1)[0]
    assert cli.main(["diff", "--stack", "train", "--set", "nodes=8"]) == 0
    printed = capsys.readouterr().out
    assert block.strip() in printed, printed


# Sentences promising what an update keeps (whitespace-normalized docs text), each with the
# change it speaks of and what the engine must say about it.
SENTENCES: list[tuple[str, Callable[[], list[Variant]], Callable[[Outcome], bool]]] = [
    (
        "Changing `nodes` resizes the Auto Scaling group in place: running nodes stay",
        CHANGES["nodes up"],
        nodes_untouched,
    ),
    (
        "a template change never replaces a running node",
        CHANGES["a new AMI (ami.*)"],
        nodes_untouched,
    ),
    (
        "Spot `maxPrice`, `onDemandBase` and `fallbackTypes` change in place and shape later "
        "launches only",
        lambda: change(
            "experiment",
            spot=json.dumps({"maxPrice": 3.5, "onDemandBase": 1, "fallbackTypes": []}),
        ),
        nodes_untouched,
    ),
    (
        "template changes never replace it on `pulumi up`",
        lambda: change("dev", rootVolume=json.dumps({"sizeGib": 300})),
        lambda o: not o.of(INSTANCE, kinds=("replace", "remove")),
    ),
    (
        "A new `instanceType` of the same architecture stops the box, changes its type and starts "
        "it again: the root disk and its files stay",
        CHANGES["dev box instanceType of the same architecture"],
        box_stopped_and_started,
    ),
    (
        "no node keeps a mount of a deleted file system",
        CHANGES["fsx.storageCapacityGib down"],
        nodes_follow_the_file_system,
    ),
]


@pytest.mark.parametrize(("sentence", "variants", "check"), SENTENCES, ids=lambda v: "")
def test_each_sentence_promising_what_an_update_keeps_holds(sentence, variants, check, monkeypatch):
    assert sentence in " ".join(DOCS.split()), f"the docs no longer say: {sentence!r}"
    for variant in variants():
        result = outcome(variant, monkeypatch, boot=False)
        assert result.changes and not result.found, (sentence, result.found)
        assert check(result), (
            f"docs: {sentence!r} - but the engine says "
            f"{[(c.kind, c.type, c.role, c.impact) for c in result.changes]}"
        )


def test_the_service_move_the_docs_warn_about_is_reported():
    sentence = (
        "Moving a service (its first zone, `network.vpcCidr`, or into your own VPC) is such a "
        "case: the load balancer and the group would still hold interfaces in subnets deleted "
        "first, and a load balancer cannot change VPC; `gpuc diff` gives the two steps that do it"
    )
    assert sentence in " ".join(DOCS.split())
    base = stack("inference")
    own_vpc = json.dumps(
        {
            "vpcId": "vpc-0a1b2c3d4e5f60789",
            "subnetIds": ["subnet-0a1b2c3d4e5f60789", "subnet-0a1b2c3d4e5f60780"],
            "loadBalancerSubnetIds": ["subnet-0a1b2c3d4e5f60781", "subnet-0a1b2c3d4e5f60782"],
        }
    )
    for after in (
        serving_zones("us-east-1c", "us-east-1b"),
        {**base, "gpu-cluster:network": json.dumps({"vpcCidr": "10.50.0.0/16"})},
        {**base, "gpu-cluster:network": own_vpc},
    ):
        result = outcome(("inference", base, after), pytest.MonkeyPatch(), boot=False)
        assert result.found and all(c.fix == MOVE_FIX for c in result.found), result.found
