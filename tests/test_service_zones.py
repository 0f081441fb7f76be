"""A serving stack's zones: a further zone's subnets are named and addressed by its zone letter
(components/cidr.py zone_slots), so swapping a further zone applies in one update; the first
zone and a move into your own VPC are refused by `gpuc diff` with two steps that each apply
(infra/diff/service_moves.py); validation says when a letter has no room
(infra/validation/service_zones.py)."""

from __future__ import annotations

import dataclasses
import ipaddress
import json

import pytest
from conftest import plan_config, plan_stack
from docs_text import docs_text
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_cluster.components.cidr import (
    LOAD_BALANCER_SUBNET_PREFIX,
    MAX_VPC_PREFIX,
    MIN_VPC_PREFIX,
    PLACE_LETTERS,
    ZONE_LETTERS,
    default_layout,
    service_layout,
    zone_slots,
)
from gpu_cluster.infra import cli
from gpu_cluster.infra.diff.collisions import collisions
from gpu_cluster.infra.diff.model import diff_plans
from gpu_cluster.infra.diff.service_moves import (
    MOVE_FIX,
    NODE_REPLACEMENT_MARGIN_SECONDS,
    heartbeat,
    seconds,
)
from gpu_cluster.infra.outcome import FINDINGS, OK
from gpu_cluster.infra.plan.engine import Plan

SUBNET = "aws:ec2/subnet:Subnet"
GROUP = "aws:autoscaling/group:Group"
ALB = "aws:lb/loadBalancer:LoadBalancer"
REGION_ZONES = "us-east-1"
OWN_VPC = {
    "vpcId": "vpc-0a1b2c3d4e5f60789",
    "subnetIds": ["subnet-0a1b2c3d4e5f60789", "subnet-0a1b2c3d4e5f60780"],
    "loadBalancerSubnetIds": ["subnet-0a1b2c3d4e5f60781", "subnet-0a1b2c3d4e5f60782"],
}
# Which letters have room, by VPC prefix (the default layout): a-f from /16 to /20.
LETTERS_BY_PREFIX = {
    **{p: set(ZONE_LETTERS) for p in range(16, 21)},
    21: set("bcd"),
    22: set("bcd"),
    23: {"b"},
    24: set(),
}


# --- the CIDR slots ------------------------------------------------------------------------


def positional_slots(layout):
    """How further zones were addressed before letters (by place k = 1..3): kept for b, c, d."""
    second_half = list(layout.vpc.subnets(prefixlen_diff=1))[1]
    blocks = list(second_half.subnets(prefixlen_diff=2))
    publics = list(blocks[0].subnets(new_prefix=layout.public.prefixlen))
    return {k: (blocks[k], publics[k]) for k in range(1, 4) if k < len(publics)}


vpcs = st.builds(
    lambda prefix, address: ipaddress.ip_network(
        f"{ipaddress.IPv4Address(address)}/{prefix}", strict=False
    ),
    st.integers(MIN_VPC_PREFIX, MAX_VPC_PREFIX),
    st.integers(0, 2**32 - 1),
)


@settings(max_examples=300, deadline=None)
@given(vpcs)
def test_every_letters_slot_is_inside_the_vpc_and_clear_of_every_other(vpc):
    layout = service_layout(default_layout(str(vpc)))
    slots = zone_slots(layout)
    assert set(slots) == LETTERS_BY_PREFIX[vpc.prefixlen]
    subnets = [layout.private, layout.public] + [s for pair in slots.values() for s in pair]
    for i, one in enumerate(subnets):
        assert one.subnet_of(vpc)
        assert one.prefixlen <= 28  # AWS's smallest subnet
        for other in subnets[i + 1 :]:
            assert not one.overlaps(other), (vpc, one, other)
    for private, public in slots.values():
        assert public.prefixlen <= LOAD_BALANCER_SUBNET_PREFIX  # ALB: a /27 or larger per zone
        assert private.prefixlen <= 26  # 59 node addresses at least


@pytest.mark.parametrize("prefix", range(MIN_VPC_PREFIX, MAX_VPC_PREFIX + 1))
def test_b_c_and_d_keep_the_cidrs_their_place_gave_them(prefix):
    layout = service_layout(default_layout(f"10.42.0.0/{prefix}"))
    slots, places = zone_slots(layout), positional_slots(layout)
    for place, slot in places.items():
        assert slots[PLACE_LETTERS[place - 1]] == slot


def test_the_example_stacks_subnets_keep_their_cidrs():
    """The CIDRs the inference example was deployed with before zones were addressed by letter."""
    plan = plan_stack("inference")
    cidrs = {r.name: r.inputs["cidrBlock"] for r in plan.resources if r.type == SUBNET}
    assert cidrs == {
        "inference-network-private": "10.42.0.0/17",
        "inference-network-public": "10.42.128.0/27",
        "inference-network-private-b": "10.42.160.0/19",
        "inference-network-public-b": "10.42.128.32/27",
    }


# --- a further zone swapped: one update -----------------------------------------------------


def with_zones(base: Plan, zones: list[str], **network) -> Plan:
    inference = json.loads(base.config["gpu-cluster:inference"])
    inference["availabilityZones"] = zones
    config = {**base.config, "gpu-cluster:inference": json.dumps(inference)}
    if network:
        config["gpu-cluster:network"] = json.dumps(network)
    plan = plan_config(config, "inference")
    assert plan.error is None, plan.error
    return plan


def z(letters: str) -> list[str]:
    return [f"{REGION_ZONES}{letter}" for letter in letters]


# (zones before, position swapped, new letter): every further position, several letters
# (g4dn.xlarge is offered in us-east-1 a, b, c, d and f)
SWAPS = [
    ("ab", 1, "c"),
    ("ab", 1, "f"),
    ("ba", 1, "d"),
    ("abc", 2, "d"),
    ("abcd", 1, "f"),
    ("abcd", 2, "f"),
    ("abcd", 3, "f"),
    ("fab", 2, "c"),
]


@pytest.fixture(scope="module")
def example() -> Plan:
    return plan_stack("inference")


@pytest.mark.parametrize(("zones", "place", "letter"), SWAPS, ids=lambda v: str(v))
def test_a_further_zone_swapped_creates_first_moves_in_place_and_deletes_last(
    example, zones, place, letter
):
    before = with_zones(example, z(zones))
    after = with_zones(example, z(zones[:place] + letter + zones[place + 1 :]))
    gone = zones[place]
    changes = diff_plans(before, after)
    kinds = {(c.type, c.role): c.kind for c in changes}
    assert {k: v for k, v in kinds.items() if k[0] == SUBNET} == {
        (SUBNET, f"network-private-{gone}"): "remove",
        (SUBNET, f"network-public-{gone}"): "remove",
        (SUBNET, f"network-private-{letter}"): "add",
        (SUBNET, f"network-public-{letter}"): "add",
    }
    assert kinds[(ALB, "service-alb")] == "update"  # SetSubnets, same DNS name
    assert kinds[(GROUP, "service-group")] == "update"  # vpcZoneIdentifiers, nodes rebalanced
    assert not [c for c in changes if c.kind == "replace"]
    assert collisions(before, after, changes) == []
    # the removed zone's subnets wait long enough for the group to replace its nodes there
    group = next(r for r in before.resources if r.type == GROUP)
    for role in ("private", "public"):
        subnet = before.named(f"inference-network-{role}-{gone}")
        timeout = seconds(subnet.custom_timeouts.get("delete"))
        assert timeout is not None
        assert timeout >= heartbeat(group) + NODE_REPLACEMENT_MARGIN_SECONDS


def test_the_longest_warmup_still_fits_the_subnets_delete_timeout(example):
    inference = json.loads(example.config["gpu-cluster:inference"])
    slow = plan_config(
        {
            **example.config,
            "gpu-cluster:inference": json.dumps({**inference, "warmupSeconds": 3600}),
        },
        "inference",
    )
    assert slow.error is None, slow.error
    group = next(r for r in slow.resources if r.type == GROUP)
    assert heartbeat(group) == 3600
    subnet = slow.named("inference-network-private-b")
    timeout = seconds(subnet.custom_timeouts["delete"])
    assert timeout is not None and timeout >= 3600 + NODE_REPLACEMENT_MARGIN_SECONDS


def test_a_state_without_the_delete_timeout_is_told_to_update_once_first(example):
    """A stack deployed by an older version: its subnet's delete waits 20 minutes (the
    provider's default), less than a node's replacement may take."""
    after = with_zones(example, z("ac"))
    old = dataclasses.replace(
        example,
        resources=[
            dataclasses.replace(r, custom_timeouts={}) if r.type == SUBNET else r
            for r in example.resources
        ],
    )
    found = collisions(old, after, diff_plans(old, after))
    # the group's nodes are in the private subnet; the load balancer's node leaves the public
    # one as SetSubnets returns
    assert {c.role for c in found} == {"network-private-b"}
    for collision in found:
        assert "DependencyViolation" in collision.why and "20 minutes" in collision.why
        assert collision.fix.startswith("run `pulumi up` once without this change first")


@pytest.mark.parametrize("letter", ["c", "d", "f"])
def test_gpuc_diff_says_a_further_zone_swap_applies(letter, capsys):
    argv = ["diff", "--stack", "inference", "--set-path"]
    code = cli.main([*argv, f"inference.availabilityZones[1]={REGION_ZONES}{letter}"])
    out = capsys.readouterr().out
    assert code == OK, out
    assert "The change applies as planned." in out
    assert f"network-private-{letter}  add" in out and "network-private-b  remove" in out


# --- the first zone and your own VPC: refused with two steps ---------------------------------

MOVES = {
    "first zone": ["--set-path", f"inference.availabilityZones[0]={REGION_ZONES}c"],
    "own VPC": ["--set", f"network={json.dumps(OWN_VPC)}"],
}


@pytest.mark.parametrize("move", MOVES)
def test_gpuc_diff_refuses_a_service_move_with_the_two_steps(move, capsys):
    assert cli.main(["diff", "--stack", "inference", *MOVES[move], "--json"]) == FINDINGS
    document = json.loads(capsys.readouterr().out)
    assert document["applies"] is False
    refused = document["cannotApply"]
    assert refused and all(c["fix"] == MOVE_FIX for c in refused)
    assert "service-alb" in {c["role"] for c in refused}
    assert not any(c["fix"].startswith("report it") for c in refused)


def moved(example: Plan, move: str) -> Plan:
    if move == "first zone":
        return with_zones(example, z("cb"))
    return with_zones(example, z("ab"), **OWN_VPC)


EMPTY = Plan(stack="inference", resources=[], outputs={}, config={})


@pytest.mark.parametrize("move", MOVES)
def test_each_step_of_the_procedure_applies(example, move):
    """Step 1: deletion protection off (an update in place), then `pulumi destroy` (everything
    goes; nothing of the stack is left to collide with); step 2: the change, on nothing."""
    inference = json.loads(example.config["gpu-cluster:inference"])
    unprotected = plan_config(
        {
            **example.config,
            "gpu-cluster:inference": json.dumps({**inference, "deletionProtection": False}),
        },
        "inference",
    )
    assert unprotected.error is None, unprotected.error
    changes = diff_plans(example, unprotected)
    assert [(c.type, c.kind) for c in changes] == [(ALB, "update")]
    assert collisions(example, unprotected, changes) == []
    alb = next(r for r in unprotected.resources if r.type == ALB)
    assert alb.inputs["enableDeletionProtection"] is False  # DeleteLoadBalancer allowed
    destroyed = diff_plans(unprotected, EMPTY)
    assert {c.kind for c in destroyed} == {"remove"}
    assert collisions(unprotected, EMPTY, destroyed) == []
    target = moved(example, move)
    created = diff_plans(EMPTY, target)
    assert {c.kind for c in created} == {"add"}
    assert collisions(EMPTY, target, created) == []
    # and the one-update move is what gpuc diff refuses
    assert collisions(example, target, diff_plans(example, target))


def test_the_docs_give_the_procedure_the_fix_names():
    docs = " ".join(docs_text().split())
    assert "Move the service" in docs
    for command in (
        "pulumi config set --path inference.deletionProtection false",
        "pulumi destroy",
        "pulumi config rm --path inference.deletionProtection",
    ):
        assert command in MOVE_FIX and command in docs


# --- validation: a letter without room, a zone twice, the first zone's CIDRs -----------------


def problems(example: Plan, zones: list[str], network: dict | None = None) -> dict:
    inference = json.loads(example.config["gpu-cluster:inference"])
    config = {
        **example.config,
        "gpu-cluster:inference": json.dumps({**inference, "availabilityZones": zones}),
    }
    if network is not None:
        config["gpu-cluster:network"] = json.dumps(network)
    plan = plan_config(config, "inference")
    assert plan.error is not None
    return {p.path: p for p in plan.error.problems}


@pytest.mark.parametrize(
    ("vpc", "zones", "fix"),
    [
        ("10.42.0.0/24", "ab", "pulumi config set --path network.vpcCidr 10.42.0.0/20"),
        ("10.42.0.0/21", "ba", "pulumi config set --path inference.availabilityZones[1] "),
        ("10.42.0.0/23", "ac", "pulumi config set --path inference.availabilityZones[1] "),
    ],
)
def test_a_zone_letter_without_room_in_the_vpc_is_refused(example, vpc, zones, fix):
    found = problems(example, z(zones), {"vpcCidr": vpc})
    problem = found["gpu-cluster:inference.availabilityZones[1]"]
    assert "letter's CIDRs" in problem.problem and problem.fix.startswith(fix)
    if "availabilityZones" in fix:  # another zone whose letter has room, not yet listed
        other = problem.fix.rsplit(" ", 1)[1]
        letters = LETTERS_BY_PREFIX[int(vpc.rsplit("/", 1)[1])]
        assert other[-1] in letters and other not in z(zones)


def test_a_zone_listed_twice_is_refused(example):
    found = problems(example, z("abb"))
    problem = found["gpu-cluster:inference.availabilityZones[2]"]
    assert "listed twice" in problem.problem
    assert problem.fix == f"pulumi config set --path inference.availabilityZones[2] {REGION_ZONES}c"


def test_a_first_zone_subnet_set_over_a_further_zones_slot_is_refused(example):
    found = problems(
        example, z("ab"), {"vpcCidr": "10.42.0.0/16", "privateSubnetCidr": "10.42.160.0/20"}
    )
    problem = found["gpu-cluster:network.privateSubnetCidr"]
    assert "10.42.160.0/19" in problem.problem and "(availabilityZones[1])" in problem.problem


@pytest.mark.parametrize(("max_nodes", "refused"), [(29, False), (30, True)])
def test_a_further_zone_too_small_for_every_node_twice_is_refused(example, max_nodes, refused):
    """[b, a] in a /20: zone a's private subnet is a /26, 59 usable addresses."""
    inference = json.loads(example.config["gpu-cluster:inference"])
    config = {
        **example.config,
        "gpu-cluster:inference": json.dumps(
            {**inference, "availabilityZones": z("ba"), "maxNodes": max_nodes}
        ),
        "gpu-cluster:network": json.dumps({"vpcCidr": "10.42.0.0/20"}),
    }
    plan = plan_config(config, "inference")
    paths = [p.path for p in plan.error.problems] if plan.error else []
    assert ("gpu-cluster:inference.maxNodes" in paths) is refused
    if refused:
        assert plan.error is not None
        (problem,) = [p for p in plan.error.problems if p.path.endswith("maxNodes")]
        assert "59 usable addresses" in problem.problem
        assert problem.fix == "pulumi config set --path inference.maxNodes 29"
    else:
        assert plan.error is None, plan.error


def test_a_stack_deployed_with_a_zone_out_of_its_letters_place_is_told_the_two_steps(example):
    """Before zones were addressed by letter, [a, c] put c on the second place's CIDRs (b's
    slot now): this version's first `pulumi up` replaces c's subnets delete-first under the load
    balancer and the group, so `gpuc diff --from` an old plan refuses it with the procedure."""
    current = with_zones(example, z("ac"))
    layout = service_layout(default_layout("10.42.0.0/16"))
    private, public = positional_slots(layout)[1]
    old = dataclasses.replace(
        current,
        resources=[
            dataclasses.replace(
                r,
                inputs={
                    **r.inputs,
                    "cidrBlock": str(private if r.name.endswith("private-c") else public),
                },
            )
            if r.type == SUBNET and r.name.endswith("-c")
            else r
            for r in current.resources
        ],
    )
    changes = diff_plans(old, current)
    replaced = {c.role for c in changes if c.kind == "replace" and c.type == SUBNET}
    assert replaced == {"network-private-c", "network-public-c"}
    found = collisions(old, current, changes)
    assert {c.role for c in found} >= {"service-alb", "service-group"}
    assert all(c.fix == MOVE_FIX for c in found)
