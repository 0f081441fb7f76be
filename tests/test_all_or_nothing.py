"""All or nothing: a multi-node group that has not launched all its nodes within the stack's
gangTimeoutMinutes scales to 0 and tells the stack's alert topic why (boot/gpu-cluster-nodes.sh
in the boot harness; the topic, its parameter and the nodes' rights in the plan)."""

from __future__ import annotations

import json
from dataclasses import replace

from conftest import TRAIN_LIKE, only, plan_config
from test_boot_harness import GROUP, SELF, TRAIN
from test_boot_harness import make_node as make_node  # the fixture

from gpu_cluster.components.aws_limits import user_data_text

# DescribeScalingActivities' StatusMessage for an on-demand launch short of capacity, as AWS
# writes it (EC2 Auto Scaling API reference, Activity; the text from real activities).
NO_CAPACITY = (
    "We currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you "
    "requested (us-east-1a). Our system will be working on provisioning additional capacity. "
    "You can currently get p4d.24xlarge capacity by not specifying an Availability Zone in "
    "your request or choosing us-east-1b, us-east-1c. Launching EC2 instance failed."
)
TOPIC = "arn:aws:sns:us-east-1:123456789012:train-cost-alerts-1a2b3c4"
TWO_OF_FOUR = (
    f"2026-12-01T08:00:00+00:00\t{SELF}\t10.42.0.30\tgpu-cluster/train/us-east-1\n"
    "2026-12-01T08:01:00+00:00\ti-0bbb\t10.42.0.31\tgpu-cluster/train/us-east-1\n"
)


def gang_node(make_node, rows: str = TWO_OF_FOUR, gang_seconds: int = 10, down=()):
    """A first boot of a 4-node group; the wait is `gang_seconds` (two polls for 10)."""
    node = make_node(replace(TRAIN, stack="train", gang_timeout_seconds=gang_seconds))
    node.install_only()
    node.answer_aws(
        [
            GROUP,
            ("describe-auto-scaling-groups", "4"),
            ("describe-instances", rows),
            ("describe-scaling-activities", NO_CAPACITY),
            ("update-auto-scaling-group", ""),
            ("ssm get-parameter", TOPIC),
            ("sns publish", '{"MessageId": "m-1"}'),
        ],
        down=down,
    )
    return node


def calls(node, verb: str) -> list[list[str]]:
    return [c for c in node.aws_calls() if verb in c]


def argument(call: list[str], name: str) -> str:
    return call[call.index(name) + 1]


def test_the_oldest_node_of_a_partial_gang_scales_the_group_to_zero_and_says_why(make_node):
    node = gang_node(make_node)
    done = node.step("gpu-cluster-nodes", "--wait")
    assert done.returncode == 1 and "scaled to 0" in done.stderr
    assert not node.file("/etc/gpu-cluster/torchrun.env").exists()  # no job on a partial gang
    (update,) = calls(node, "update-auto-scaling-group")
    assert argument(update, "--auto-scaling-group-name") == "train-nodes-group"
    assert argument(update, "--min-size") == "0" and argument(update, "--desired-capacity") == "0"
    (activities,) = calls(node, "describe-scaling-activities")
    assert argument(activities, "--auto-scaling-group-name") == "train-nodes-group"
    (publish,) = calls(node, "publish")
    assert argument(publish, "--topic-arn") == TOPIC
    message = argument(publish, "--message")
    assert "2 of 4 nodes launched" in message and "in us-east-1a" in message
    assert "scaling the group train-nodes-group to 0" in message
    assert NO_CAPACITY in message  # the capacity error, word for word
    assert "gpuc resume --stack train" in message
    assert len(argument(publish, "--subject")) <= 100  # SNS Publish: Subject under 100 chars
    (parameter,) = calls(node, "get-parameter")
    assert argument(parameter, "--name") == "/gpu-cluster/train/train/alerts-topic"
    # the alert goes out first: once the group is at 0 this node is being terminated
    verbs = [c[1] for c in node.aws_calls() if c[0] in ("autoscaling", "sns")]
    assert verbs.index("publish") < verbs.index("update-auto-scaling-group")
    # one page of activities: --max-items would add a "None" line for the next token
    assert "--no-paginate" in activities and "--max-items" not in activities


def test_only_the_oldest_node_acts(make_node):
    rows = TWO_OF_FOUR.replace(SELF, "i-0aaa").replace("i-0bbb", SELF)
    node = gang_node(make_node, rows=rows)
    assert node.step("gpu-cluster-nodes", "--wait").returncode == 0
    assert calls(node, "update-auto-scaling-group") == [] and calls(node, "publish") == []


def test_a_group_resized_to_what_launched_while_waiting_is_not_stopped(make_node):
    """4 wanted, 2 launched, and the user sets the stack to 2 nodes meanwhile (pulumi up): the
    size is read again, so the now complete group is never scaled to 0."""
    node = gang_node(make_node)
    node.answer_aws(
        [
            GROUP,
            ("describe-auto-scaling-groups", ["4", "4", "2"]),
            ("describe-instances", TWO_OF_FOUR),
            ("update-auto-scaling-group", ""),
        ]
    )
    assert node.step("gpu-cluster-nodes", "--wait").returncode == 0
    assert calls(node, "update-auto-scaling-group") == []
    assert node.env_file("/etc/gpu-cluster/torchrun.env")["NNODES"] == "2"


def test_a_full_gang_is_left_alone(make_node):
    rows = TWO_OF_FOUR + (
        "2026-12-01T08:02:00+00:00\ti-0ccc\t10.42.0.32\tgpu-cluster/train/us-east-1\n"
        "2026-12-01T08:03:00+00:00\ti-0ddd\t10.42.0.33\tgpu-cluster/train/us-east-1\n"
    )
    node = gang_node(make_node, rows=rows)
    assert node.step("gpu-cluster-nodes", "--wait").returncode == 0
    assert node.env_file("/etc/gpu-cluster/torchrun.env")["NNODES"] == "4"
    assert calls(node, "update-auto-scaling-group") == []


def test_with_the_gang_timeout_off_a_partial_gang_trains_on(make_node):
    node = gang_node(make_node, gang_seconds=0)
    node.answer_aws(
        [GROUP, ("describe-auto-scaling-groups", "2"), ("describe-instances", TWO_OF_FOUR)]
    )
    assert node.step("gpu-cluster-nodes", "--wait").returncode == 0
    assert calls(node, "update-auto-scaling-group") == []


def test_a_refused_scale_in_is_still_reported(make_node):
    node = gang_node(make_node, down=["update-auto-scaling-group"])
    assert node.step("gpu-cluster-nodes", "--wait").returncode == 1
    first, second = calls(node, "publish")
    assert "scaling to 0" in argument(first, "--subject")
    assert "could not scale" in argument(second, "--subject")
    assert "Scaling train-nodes-group to 0 failed" in argument(second, "--message")


def test_no_launch_failure_recorded_and_no_topic_still_stops_the_group(make_node):
    node = gang_node(make_node, down=["describe-scaling-activities", "ssm get-parameter"])
    done = node.step("gpu-cluster-nodes", "--wait")
    assert done.returncode == 1 and "none recorded" in done.stderr
    assert len(calls(node, "update-auto-scaling-group")) == 1 and calls(node, "publish") == []


# --- the plan ------------------------------------------------------------------------------

PARAMETER = "aws:ssm/parameter:Parameter"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
LT = "aws:ec2/launchTemplate:LaunchTemplate"


def cluster_env(plan) -> dict[str, str]:
    text = user_data_text(only(plan, LT).inputs["userData"])
    env = text.split("cluster.env\" <<'ENV'\n", 1)[1].split("\nENV\n", 1)[0]
    return dict(line.split("=", 1) for line in env.splitlines())


def gang_access(plan) -> dict:
    (policy,) = [r for r in plan.of_type(ROLE_POLICY) if r.name.endswith("gang-stop-access")]
    return json.loads(policy.inputs["policy"])


def alert_access(plan) -> dict:
    (policy,) = [r for r in plan.of_type(ROLE_POLICY) if r.name.endswith("node-alerts-access")]
    return json.loads(policy.inputs["policy"])


def test_a_training_cluster_stops_a_partial_gang_after_30_minutes_by_default():
    plan = plan_config({**TRAIN_LIKE}, stack="train")
    assert plan.error is None, plan.error
    env = cluster_env(plan)
    assert env["GANG_TIMEOUT"] == "1800" and env["STACK"] == "train"
    (parameter,) = [r for r in plan.of_type(PARAMETER) if r.name.endswith("alerts-topic")]
    assert parameter.inputs["name"] == "/gpu-cluster/train/train/alerts-topic"
    (topic,) = plan.of_type("aws:sns/topic:Topic")
    # the value is the topic's ARN (a secret input of the provider: the plan shows its source)
    assert list(parameter.property_dependencies["value"]) == [topic.urn]
    assert parameter.inputs["type"] == "SecureString"
    statements = {s["Sid"]: s for s in gang_access(plan)["Statement"]}
    stop = statements["StopOwnPartialGang"]
    assert stop["Action"] == "autoscaling:UpdateAutoScalingGroup"
    stack_id = "gpu-cluster/train/us-east-1"  # project/stack/region: this stack's group only
    assert stop["Condition"] == {
        "StringEquals": {"autoscaling:ResourceTag/gpu-cluster:stack-id": stack_id}
    }
    (group,) = plan.of_type("aws:autoscaling/group:Group")
    stack_tag = {"key": "gpu-cluster:stack-id", "value": stack_id, "propagateAtLaunch": True}
    assert stack_tag in group.inputs["tags"]  # the tag the condition reads
    alerts = {s["Sid"]: s for s in alert_access(plan)["Statement"]}  # every node may tell
    assert alerts["TellAlertTopic"]["Resource"] == plan.state(topic)["arn"]
    assert alerts["FindAlertTopic"]["Resource"] == plan.state(parameter)["arn"]


def test_the_gang_timeout_is_the_stacks_to_set_or_turn_off():
    plan = plan_config({**TRAIN_LIKE, "gpu-cluster:gangTimeoutMinutes": "45"}, stack="train")
    assert cluster_env(plan)["GANG_TIMEOUT"] == "2700"
    plan = plan_config({**TRAIN_LIKE, "gpu-cluster:gangTimeoutMinutes": "0"}, stack="train")
    assert plan.error is None, plan.error
    assert cluster_env(plan)["GANG_TIMEOUT"] == "0"
    assert not [r for r in plan.of_type(ROLE_POLICY) if r.name.endswith("gang-stop-access")]
    # the topic stays: the idle stop's missing data and the nodes' own alerts go there
    assert plan.of_type("aws:sns/topic:Topic") and alert_access(plan)


def test_one_node_is_no_gang():
    plan = plan_config({**TRAIN_LIKE, "gpu-cluster:nodes": "1"}, stack="solo")
    assert plan.error is None, plan.error
    assert cluster_env(plan)["GANG_TIMEOUT"] == "0"
    assert not [r for r in plan.of_type(ROLE_POLICY) if r.name.endswith("gang-stop-access")]


def test_a_gang_timeout_shorter_than_a_boot_is_refused():
    plan = plan_config({**TRAIN_LIKE, "gpu-cluster:gangTimeoutMinutes": "5"}, stack="train")
    assert plan.error is not None
    (problem,) = plan.error.problems
    assert problem.path == "gpu-cluster:gangTimeoutMinutes" and problem.received == 5
    assert "0 (off) or 10-1440" in problem.allowed
    assert problem.fix == "pulumi config set gangTimeoutMinutes 30"
    assert [r.type for r in plan.resources] == ["pulumi:pulumi:Stack"]  # nothing created


def test_a_gang_timeout_that_is_not_a_number_of_minutes_is_refused():
    for value, said in (("2000", "at most 1440"), ("soon", "whole number"), ("-1", "at least 0")):
        config = {**TRAIN_LIKE, "gpu-cluster:gangTimeoutMinutes": value}
        plan = plan_config(config, stack="train")
        assert plan.error is not None, value
        (problem,) = plan.error.problems
        assert problem.path == "gpu-cluster:gangTimeoutMinutes", value
        assert said in f"{problem.problem} {problem.allowed}", (value, problem)
