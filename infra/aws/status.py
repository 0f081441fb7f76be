"""`gpuc status`: what runs now in the account for this project, found by its tags - each
cluster's nodes and their hourly burn at the bundled prices, and nodes no stack file owns."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpu_cluster.components.ec2_topology import gang_span, id_batches, supports_topology
from gpu_cluster.components.names import DEFAULT_PROJECT, StackIdentity
from gpu_cluster.components.naming import (
    CLUSTER_TAG,
    HEALTH_TAG,
    MANAGED_BY_TAG,
    STACK_ID_TAG,
    STACK_TAG,
)
from gpu_cluster.infra.aws import AwsError, paginate
from gpu_cluster.infra.prices.commitment import Commitment, committed_hourly
from gpu_cluster.infra.prices.node_price import node_hourly


@dataclass(frozen=True)
class Node:
    instance_id: str
    cluster: str
    stack: str
    instance_type: str
    lifecycle: str  # EC2's InstanceLifecycle: on-demand (none given), spot, capacity-block, ...
    state: str
    zone: str
    uptime_hours: float
    usd_per_hour: float | None
    health: str = ""  # the node's own report (tag gpu-cluster:health): ok, degraded:..., failed:...
    stack_id: str = ""  # project/stack/region (tag gpu-cluster:stack-id; "" before 0.2)

    def belongs_to(self, identity: StackIdentity) -> bool:
        """This stack's node: by its stack id (the stack name alone is shared by the same stack
        of another project); a node launched before the tag existed, by its stack tag."""
        if self.stack_id:
            return self.stack_id == identity.stack_id
        return self.stack == identity.stack


def tag(instance: dict[str, Any], key: str) -> str:
    return next((t["Value"] for t in instance.get("Tags", []) if t["Key"] == key), "")


def list_nodes(
    ec2: Any,
    region: str,
    now: datetime | None = None,
    commitments: dict[str, Commitment] | None = None,
) -> list[Node]:
    """Every pending or running instance this project manages (tag managed-by=gpu-cluster);
    ``commitments``: stack id -> the Savings Plan or RIs its stack file says it holds, which
    price its on-demand nodes as `gpuc cost` does (infra/prices/commitment.py)."""
    ((managed_key, managed_value),) = MANAGED_BY_TAG.items()
    now = now or datetime.now(UTC)
    nodes = []
    for reservation in paginate(
        ec2,
        "ec2",
        "DescribeInstances",
        "Reservations",
        Filters=[
            {"Name": f"tag:{managed_key}", "Values": [managed_value]},
            {"Name": "instance-state-name", "Values": ["pending", "running"]},
        ],
    ):
        for instance in reservation.get("Instances", []):
            kind = instance["InstanceType"]
            lifecycle = instance.get("InstanceLifecycle") or "on-demand"
            zone = instance.get("Placement", {}).get("AvailabilityZone", "")
            price = node_price(region, kind, lifecycle, zone)
            commitment = (commitments or {}).get(tag(instance, STACK_ID_TAG))
            if commitment is not None and lifecycle == "on-demand":
                price = committed_hourly(region, kind, price, commitment).usd_per_hour
            launched = instance.get("LaunchTime") or now
            nodes.append(
                Node(
                    instance_id=instance["InstanceId"],
                    cluster=tag(instance, CLUSTER_TAG),
                    stack=tag(instance, STACK_TAG),
                    instance_type=kind,
                    lifecycle=lifecycle,
                    state=instance["State"]["Name"],
                    zone=zone,
                    uptime_hours=(now - launched).total_seconds() / 3600,
                    usd_per_hour=price,
                    health=tag(instance, HEALTH_TAG),
                    stack_id=tag(instance, STACK_ID_TAG),
                )
            )
    return sorted(nodes, key=lambda n: (n.stack, n.cluster, n.instance_id))


def node_price(region: str, kind: str, lifecycle: str, zone: str) -> float | None:
    """A node's hourly price as `gpuc cost` gives it: spot and on-demand from the snapshot; a
    Capacity Block's node none (prepaid when the block was bought, as infra/cost/model.py says).
    EC2's InstanceLifecycle: absent for on-demand, else spot, scheduled, capacity-block, ..."""
    if lifecycle not in ("on-demand", "spot"):
        return None
    return node_hourly(region, kind, lifecycle == "spot", zone)


def orphans(nodes: list[Node], known_stacks: list[str]) -> list[Node]:
    """Nodes whose stack has no stack file here (a forgotten or renamed stack still billing);
    another project's nodes are that project's (their stack id names it)."""
    ours = f"{DEFAULT_PROJECT}/"
    return [
        n
        for n in nodes
        if (n.stack or n.cluster) not in known_stacks
        and (not n.stack_id or n.stack_id.startswith(ours))
    ]


def node_sets(ec2: Any, nodes: list[Node]) -> dict[str, tuple[str, ...]]:
    """Each running node's network node set, top-down (DescribeInstanceTopology), for the types
    EC2 describes; ids in requests of at most 100 and no MaxResults beside them (botocore's
    model: "You can't specify this parameter and the instance IDs parameter in the same
    request"). Instances EC2 has no node set for yet are left out."""
    ids = sorted(
        n.instance_id for n in nodes if n.state == "running" and supports_topology(n.instance_type)
    )
    sets: dict[str, tuple[str, ...]] = {}
    for batch in id_batches(ids):
        pages = paginate(ec2, "ec2", "DescribeInstanceTopology", "Instances", InstanceIds=batch)
        for item in pages:
            if item.get("NetworkNodes"):
                sets[item["InstanceId"]] = tuple(item["NetworkNodes"])
    return sets


def gang_spans(ec2: Any, nodes: list[Node]) -> list[str]:
    """One line per stack whose running nodes sit under more than one network node at the layer
    closest to the instances (components/ec2_topology.py), or why the topology was not read.
    Never fails `gpuc status`: the node list stands without it."""
    stacks: dict[str, list[Node]] = {}
    for n in nodes:
        stacks.setdefault(n.stack_id or n.stack or n.cluster, []).append(n)
    lines = []
    for stack, members in sorted(stacks.items()):
        if sum(n.state == "running" and supports_topology(n.instance_type) for n in members) < 2:
            continue
        try:
            span = gang_span(node_sets(ec2, members))
        except (AwsError, NotImplementedError) as error:  # (moto in process lacks the API)
            lines.append(f"{stack}: network topology not read ({error})")
            continue
        if span:
            lines.append(f"{stack}: {span.describe()}")
    return lines
