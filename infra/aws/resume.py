"""`gpuc resume --stack NAME`: bring back what the idle stop, a schedule or the maximum lifetime
stopped - start the stack's stopped dev box, or set its node group back to the stack's size."""

from __future__ import annotations

from typing import Any

from gpu_cluster.components.naming import STACK_TAG
from gpu_cluster.infra.aws import call, client, paginate
from gpu_cluster.infra.json_doc import dump
from gpu_cluster.infra.outcome import OK, load_cluster_spec


def stopped_instances(ec2: Any, stack: str) -> list[str]:
    reservations = paginate(
        ec2,
        "ec2",
        "DescribeInstances",
        "Reservations",
        Filters=[
            {"Name": f"tag:{STACK_TAG}", "Values": [stack]},
            {"Name": "instance-state-name", "Values": ["stopped", "stopping"]},
        ],
    )
    return sorted(i["InstanceId"] for r in reservations for i in r["Instances"])


def stack_groups(autoscaling: Any, stack: str) -> list[dict[str, Any]]:
    groups = paginate(
        autoscaling,
        "autoscaling",
        "DescribeAutoScalingGroups",
        "AutoScalingGroups",
        Filters=[{"Name": f"tag:{STACK_TAG}", "Values": [stack]}],
    )
    return list(groups)


def resume(
    stack: str,
    region: str,
    nodes: int,
    ec2: Any,
    autoscaling: Any,
    minimum: int | None = None,
    maximum: int | None = None,
) -> list[str]:
    """What was brought back, one line each. ``nodes``: the size to run at; ``minimum`` and
    ``maximum``: the group's own bounds (a service scales between them)."""
    done = []
    for group in stack_groups(autoscaling, stack):
        name = group["AutoScalingGroupName"]
        if group["DesiredCapacity"] >= nodes:
            done.append(f"group {name} already wants {group['DesiredCapacity']} node(s)")
            continue
        call(
            autoscaling,
            "autoscaling",
            "UpdateAutoScalingGroup",
            AutoScalingGroupName=name,
            MinSize=group["MinSize"] if minimum is None else minimum,
            MaxSize=max(nodes, group["MaxSize"] if maximum is None else maximum),
            DesiredCapacity=nodes,
        )
        done.append(f"group {name}: {group['DesiredCapacity']} -> {nodes} node(s)")
    stopped = stopped_instances(ec2, stack)
    if stopped:
        call(ec2, "ec2", "StartInstances", InstanceIds=stopped)
        done.append(f"started {', '.join(stopped)}")
    return done


def run_resume(stack: str, as_json: bool = False) -> int:
    spec = load_cluster_spec(stack)
    if spec.inference is not None:  # a service comes back at its minimum, scaling from there
        nodes = minimum = spec.inference.min_nodes
        maximum = spec.inference.max_nodes
    else:
        nodes, maximum = spec.node_count, spec.node_count
        minimum = 0 if spec.cost_controls.idle_stop else spec.node_count
    done = resume(
        spec.stack,
        spec.region,
        nodes,
        client("ec2", spec.region),
        client("autoscaling", spec.region),
        minimum,
        maximum,
    )
    if as_json:
        dump({"stack": stack, "region": spec.region, "resumed": done})
    else:
        print("\n".join(done) or f"nothing of stack '{stack}' is stopped in {spec.region}")
    return OK
