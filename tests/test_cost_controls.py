"""Stop paying for idle GPUs: idle stop, schedules, maximum lifetime, budget, resume."""

from __future__ import annotations

import json
import shlex

import boto3
import pytest
from conftest import ROOT, plan_config
from moto import mock_aws

from gpu_cluster.components.cost_controls import WorkSchedule
from gpu_cluster.components.user_data import decoded_user_data
from gpu_cluster.infra import cli
from gpu_cluster.infra.aws.resume import resume
from gpu_cluster.infra.outcome import OK
from gpu_cluster.infra.stack_files import load_stack_config

ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
SCHEDULE = "aws:scheduler/schedule:Schedule"
BUDGET = "aws:budgets/budget:Budget"
DEV = load_stack_config("dev", ROOT)
TRAIN = load_stack_config("train", ROOT)
WORKING_HOURS = json.dumps(
    {"days": "MON-FRI", "start": "08:00", "stop": "18:00", "timezone": "UTC"}
)
TRAIN_ID = "gpu-cluster/train/us-east-1"  # the stack-id tag: project/stack/region


def planned(config: dict, stack: str, **extra: str):
    plan = plan_config({**config, **{f"gpu-cluster:{k}": v for k, v in extra.items()}}, stack)
    assert plan.error is None, plan.error
    return plan


def policy_of(plan, name: str) -> dict:
    return json.loads(plan.named(name).inputs["policy"])


def test_the_dev_box_stops_after_30_idle_minutes_and_keeps_its_disk():
    plan = planned(DEV, "dev")
    (alarm,) = plan.of_type(ALARM)
    inputs = alarm.inputs
    # the node's own metric: its busiest GPU, or 100 while a job runs (test_idle_stop_jobs.py)
    assert (inputs["namespace"], inputs["metricName"]) == ("gpu-cluster", "Activity")
    assert inputs["statistic"] == "Maximum" and inputs["period"] == 300
    assert inputs["evaluationPeriods"] == inputs["datapointsToAlarm"] == 6  # 30 min
    assert inputs["threshold"] == 5 and inputs["comparisonOperator"] == "LessThanThreshold"
    assert inputs["treatMissingData"] == "missing"  # no metrics never stops a box, it alerts
    topic = plan.state(plan.named("dev-cost-alerts"))["arn"]
    assert inputs["insufficientDataActions"] == [topic]
    box = plan.state(plan.of_type("aws:ec2/instance:Instance")[0])
    assert inputs["dimensions"] == {"InstanceId": box["id"]}
    assert inputs["alarmActions"][0] == "arn:aws:automate:us-east-1:ec2:stop"


def test_a_cluster_scales_to_zero_after_an_idle_hour():
    plan = planned(TRAIN, "train")
    (alarm,) = plan.of_type(ALARM)
    # what every node of the group puts (boot/gpu-cluster-gpu-metrics.sh --activity)
    assert alarm.inputs["dimensions"] == {"Cluster": "train", "Stack": "train"}
    assert alarm.inputs["evaluationPeriods"] == 12  # 60 min
    (policy,) = plan.of_type("aws:autoscaling/policy:Policy")
    assert policy.inputs["adjustmentType"] == "ExactCapacity"
    assert policy.inputs["scalingAdjustment"] == 0
    topic = plan.state(plan.named("train-cost-alerts"))["arn"]  # the gang stop's topic
    assert alarm.inputs["alarmActions"] == [plan.state(policy)["arn"], topic]
    assert plan.of_type("aws:autoscaling/group:Group")[0].inputs["minSize"] == 0


def test_idle_stop_can_be_tuned_or_switched_off():
    plan = planned(TRAIN, "train", idleStop=json.dumps({"minutes": 90, "belowPercent": 10}))
    (alarm,) = plan.of_type(ALARM)
    assert alarm.inputs["evaluationPeriods"] == 18 and alarm.inputs["threshold"] == 10
    off = planned(TRAIN, "train", idleStop=json.dumps({"enabled": False}))
    assert off.of_type(ALARM) == [] and off.of_type("aws:autoscaling/policy:Policy") == []
    group = off.of_type("aws:autoscaling/group:Group")[0]
    assert group.inputs["minSize"] == 4


def test_nodes_publish_gpu_utilization_at_boot():
    plan = planned(DEV, "dev")
    (template,) = plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    script = decoded_user_data(template.inputs["userData"])
    assert "boot_unit gpu-cluster-gpu-metrics" in script
    # the CloudWatch agent's profile (components/cloudwatch_agent.py): GPU utilization rolled
    # up per node of the stack (the idle alarm's and the dashboard's series)
    profile = json.loads(
        script.split("cloudwatch-agent.json\" <<'SCRIPT'\n", 1)[1].split("\nSCRIPT\n", 1)[0]
    )
    assert ["StackId", "InstanceId"] in profile["metrics"]["aggregation_dimensions"]
    assert "utilization_gpu" in profile["metrics"]["metrics_collected"]["nvidia_gpu"]["measurement"]
    access = policy_of(plan, "dev-security-node-access")
    actions = {
        a
        for s in access["Statement"]
        for a in [s["Action"]]
        for a in (a if isinstance(a, list) else [a])
    }
    assert "ec2:DescribeTags" in actions and "cloudwatch:PutMetricData" in actions


def test_working_hours_schedule_with_a_role_scoped_to_the_box():
    plan = planned(DEV, "dev", schedule=WORKING_HOURS)
    schedules = {s.name: s.inputs for s in plan.of_type(SCHEDULE)}
    start, stop = schedules["dev-cost-schedule-start"], schedules["dev-cost-schedule-stop"]
    assert start["scheduleExpression"] == "cron(0 8 ? * MON-FRI *)"
    assert stop["scheduleExpression"] == "cron(0 18 ? * MON-FRI *)"
    box = plan.state(plan.of_type("aws:ec2/instance:Instance")[0])
    assert stop["target"]["arn"] == "arn:aws:scheduler:::aws-sdk:ec2:stopInstances"
    assert json.loads(stop["target"]["input"]) == {"InstanceIds": [box["id"]]}
    access = policy_of(plan, "dev-cost-scheduler-access")
    statements = {s["Sid"]: s for s in access["Statement"]}
    assert statements["StartStopTheBox"]["Resource"] == box["arn"]
    assert set(statements) == {
        "StartStopTheBox",
        "StartWithEncryptedVolumes",
        "WarnBeforeExpiry",
        "PublishEncrypted",
        "CheckpointBeforeStop",  # the jobs checkpoint before the schedule stops the box
        "CheckpointThisStacksNodes",
    }
    trust = json.loads(plan.named("dev-cost-scheduler-role").inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "scheduler.amazonaws.com"}


def test_a_clusters_schedule_resizes_only_its_group():
    plan = planned(TRAIN, "train", schedule=WORKING_HOURS)
    group = plan.state(plan.of_type("aws:autoscaling/group:Group")[0])
    schedules = {s.name: s.inputs for s in plan.of_type(SCHEDULE)}
    start = json.loads(schedules["train-cost-schedule-start"]["target"]["input"])
    stop = json.loads(schedules["train-cost-schedule-stop"]["target"]["input"])
    assert stop == {"AutoScalingGroupName": group["name"], "MinSize": 0, "DesiredCapacity": 0}
    assert start["DesiredCapacity"] == 4 and start["MaxSize"] == 4
    assert start["MinSize"] == 0  # the group's own minimum: the idle stop may empty it
    off = planned(TRAIN, "train", schedule=WORKING_HOURS, idleStop='{"enabled": false}')
    schedules = {s.name: s.inputs for s in off.of_type(SCHEDULE)}
    assert json.loads(schedules["train-cost-schedule-start"]["target"]["input"])["MinSize"] == 4
    access = policy_of(plan, "train-cost-scheduler-access")
    statements = {s["Sid"]: s for s in access["Statement"]}
    assert statements["ResizeTheGroup"]["Action"] == "autoscaling:UpdateAutoScalingGroup"
    assert statements["ResizeTheGroup"]["Resource"] == group["arn"]
    # the schedule's stop is a planned stop too: the jobs checkpoint first (as before expiry)
    assert "CheckpointThisStacksNodes" in statements
    assert "train-cost-schedule-checkpoint" in schedules


def test_the_maximum_lifetime_stops_the_nodes_after_a_warning():
    plan = planned(DEV, "dev", expiresAt="2031-01-02T18:00:00Z")
    schedules = {s.name: s.inputs for s in plan.of_type(SCHEDULE)}
    assert schedules["dev-cost-expiry-stop"]["scheduleExpression"] == "at(2031-01-02T18:00:00)"
    warning = schedules["dev-cost-expiry-warning"]
    assert warning["scheduleExpression"] == "at(2031-01-02T17:00:00)"
    topic = plan.state(plan.named("dev-cost-alerts"))["arn"]
    assert warning["target"]["arn"] == topic
    assert "2031-01-02 18:00 UTC" in warning["target"]["input"]


def test_the_jobs_checkpoint_before_the_maximum_lifetime_stops_the_cluster():
    plan = planned(TRAIN, "train", expiresAt="2031-01-02T18:00:00Z")
    schedules = {s.name: s.inputs for s in plan.of_type(SCHEDULE)}
    checkpoint = schedules["train-cost-expiry-checkpoint"]
    assert checkpoint["scheduleExpression"] == "at(2031-01-02T17:45:00)"  # 15 min before
    assert checkpoint["target"]["arn"] == "arn:aws:scheduler:::aws-sdk:ssm:sendCommand"
    request = json.loads(checkpoint["target"]["input"])
    assert request["DocumentName"] == "AWS-RunShellScript"
    assert request["Targets"] == [{"Key": "tag:gpu-cluster:stack-id", "Values": [TRAIN_ID]}]
    (command,) = request["Parameters"]["commands"]
    program, verb, notice = shlex.split(command)
    assert (program, verb) == ("/usr/local/sbin/gpu-cluster-jobs", "checkpoint")
    assert json.loads(notice) == {
        "action": "stop",
        "time": "2031-01-02T18:00:00Z",
        "reason": "expiresAt",
    }
    (group,) = plan.of_type("aws:autoscaling/group:Group")
    stack_tag = {"key": "gpu-cluster:stack-id", "value": TRAIN_ID, "propagateAtLaunch": True}
    assert stack_tag in group.inputs["tags"]  # what the command targets
    access = policy_of(plan, "train-cost-scheduler-access")
    statements = {s["Sid"]: s for s in access["Statement"]}
    nodes = statements["CheckpointThisStacksNodes"]
    assert nodes["Action"] == "ssm:SendCommand"
    assert nodes["Resource"] == "arn:aws:ec2:us-east-1:123456789012:instance/*"
    condition = {"StringEquals": {"ssm:resourceTag/gpu-cluster:stack-id": TRAIN_ID}}
    assert nodes["Condition"] == condition
    document = statements["CheckpointBeforeStop"]["Resource"]
    assert document == "arn:aws:ssm:us-east-1::document/AWS-RunShellScript"


def test_the_budget_filters_on_the_stack_tag_and_alerts_the_topic():
    plan = planned(DEV, "dev")
    (budget,) = plan.of_type(BUDGET)
    assert budget.inputs["limitAmount"] == "300.00" and budget.inputs["timeUnit"] == "MONTHLY"
    assert budget.inputs["costFilters"] == [
        {"name": "TagKeyValue", "values": ["user:gpu-cluster:stack-id$gpu-cluster/dev/us-east-1"]}
    ]
    topic = plan.state(plan.named("dev-cost-alerts"))["arn"]
    thresholds = {(n["threshold"], n["notificationType"]) for n in budget.inputs["notifications"]}
    assert thresholds == {(80, "ACTUAL"), (100, "ACTUAL"), (100, "FORECASTED")}
    assert all(n["subscriberSnsTopicArns"] == [topic] for n in budget.inputs["notifications"])
    topic_policy = json.loads(plan.named("dev-cost-alerts-policy").inputs["policy"])
    assert topic_policy["Statement"][0]["Principal"] == {"Service": "budgets.amazonaws.com"}
    key = policy_of(plan, "dev-security-key")
    assert "AllowAlertsToEncryptedTopic" in {s["Sid"] for s in key["Statement"]}
    assert (
        plan.named("dev-cost-alerts").inputs["kmsMasterKeyId"]
        == plan.state(plan.named("dev-security-key"))["arn"]
    )


def test_a_budget_action_can_stop_the_box_with_a_role_for_that_box_only():
    budget = json.dumps({"monthlyUsd": 300, "stopAtLimit": True})
    plan = planned(DEV, "dev", budget=budget)
    (action,) = plan.of_type("aws:budgets/budgetAction:BudgetAction")
    box = plan.state(plan.of_type("aws:ec2/instance:Instance")[0])
    definition = action.inputs["definition"]["ssmActionDefinition"]
    assert definition["actionSubType"] == "STOP_EC2_INSTANCES"
    assert definition["instanceIds"] == [box["id"]]
    access = policy_of(plan, "dev-cost-budget-action-access")
    assert access["Statement"][0]["Resource"] == box["arn"]


@pytest.mark.parametrize(
    ("stack", "key", "value", "path", "words"),
    [
        (
            "train",
            "budget",
            {"monthlyUsd": 9000, "stopAtLimit": True},
            "budget.stopAtLimit",
            "node group",
        ),
        (
            "dev",
            "schedule",
            {"start": "8am", "stop": "18:00"},
            "schedule.start",
            "not a time of day",
        ),
        (
            "dev",
            "schedule",
            {"start": "08:00", "stop": "08:00"},
            "schedule.stop",
            "stop the minute",
        ),
        (
            "dev",
            "schedule",
            {"start": "08:00", "stop": "18:00", "days": "MO-FR"},
            "schedule.days",
            "weekdays",
        ),
        (
            "dev",
            "schedule",
            {"start": "08:00", "stop": "18:00", "timezone": "Europe/Berlinn"},
            "schedule.timezone",
            "IANA",
        ),
        ("dev", "idleStop", {"minutes": 33}, "idleStop.minutes", "5-minute"),
        ("dev", "expiresAt", "2020-01-01T00:00:00Z", "expiresAt", "has passed"),
        ("dev", "expiresAt", "next friday", "expiresAt", "not a date"),
        ("dev", "alertEmails", ["not-an-address"], "alertEmails[0]", "not an e-mail"),
    ],
)
def test_bad_cost_controls_are_clear_problems(stack, key, value, path, words):
    config = {**(DEV if stack == "dev" else TRAIN)}
    config[f"gpu-cluster:{key}"] = value if isinstance(value, str) else json.dumps(value)
    plan = plan_config(config, stack)
    assert plan.error is not None
    problems = {p.path: p for p in plan.error.problems}
    assert words in problems[f"gpu-cluster:{path}"].problem
    assert problems[f"gpu-cluster:{path}"].fix


def test_schedule_hours_per_day():
    assert WorkSchedule("MON-FRI", "08:00", "18:00").hours_per_day() == pytest.approx(50 / 7, 0.01)
    assert WorkSchedule("*", "22:00", "06:00").hours_per_day() == 8
    assert WorkSchedule("MON,WED,FRI", "09:00", "17:00").day_count() == 3


def test_gpuc_cost_follows_the_schedule_unless_told(capsys, monkeypatch):
    config = {**DEV, "gpu-cluster:schedule": WORKING_HOURS}
    monkeypatch.setattr("gpu_cluster.infra.stack_files.load_stack_config", lambda *a, **k: config)
    assert cli.main(["cost", "--stack", "dev", "--json"]) == OK
    scheduled = json.loads(capsys.readouterr().out)
    assert scheduled["usage"]["hoursPerDay"] == pytest.approx(7.14, 0.01)
    assert cli.main(["cost", "--stack", "dev", "--hours-per-day", "8", "--json"]) == OK
    assert json.loads(capsys.readouterr().out)["usage"]["hoursPerDay"] == 8


def test_plan_shows_the_idle_stop_and_the_budget(capsys):
    assert cli.main(["plan", "--stack", "dev"]) == OK
    out = capsys.readouterr().out
    assert "Stop paying: idle stop after 30 min under 5% GPU utilization" in out
    assert "Stop paying: budget $300/month, alerts at 80% and 100%" in out


@mock_aws
def test_resume_starts_the_box_and_sizes_the_group_back():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    autoscaling = boto3.client("autoscaling", region_name="us-east-1")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    tags = [{"Key": "gpu-cluster:stack", "Value": "train"}]
    box = ec2.run_instances(
        ImageId=image,
        InstanceType="g5.xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )["Instances"][0]["InstanceId"]
    ec2.stop_instances(InstanceIds=[box])
    ec2.create_launch_template(LaunchTemplateName="tpl", LaunchTemplateData={"ImageId": image})
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="train-nodes",
        LaunchTemplate={"LaunchTemplateName": "tpl"},
        MinSize=0,
        MaxSize=4,
        DesiredCapacity=0,
        AvailabilityZones=["us-east-1a"],
        Tags=[{"Key": "gpu-cluster:stack", "Value": "train", "PropagateAtLaunch": True}],
    )
    done = resume("train", "us-east-1", 4, ec2, autoscaling)
    assert done == ["group train-nodes: 0 -> 4 node(s)", f"started {box}"]
    (group,) = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]
    assert group["DesiredCapacity"] == 4
    state = ec2.describe_instances(InstanceIds=[box])["Reservations"][0]["Instances"][0]["State"]
    assert state["Name"] in ("pending", "running")
    assert resume("train", "us-east-1", 4, ec2, autoscaling) == [
        "group train-nodes already wants 4 node(s)"
    ]


def test_a_services_schedule_starts_it_at_its_minimum_and_lets_scaling_size_it():
    config = {**load_stack_config("inference", ROOT), "gpu-cluster:schedule": WORKING_HOURS}
    plan = planned(config, "inference")
    schedules = {s.name: s.inputs for s in plan.of_type(SCHEDULE)}
    start = json.loads(schedules["inference-cost-schedule-start"]["target"]["input"])
    assert start["MinSize"] == 2 and start["MaxSize"] == 6
    assert "DesiredCapacity" not in start  # target tracking decides between 2 and 6
    assert plan.of_type(ALARM) == []  # no idle stop for a service


def test_the_alert_topic_admits_this_accounts_alarms_and_budgets():
    plan = planned(DEV, "dev")
    statements = {
        s["Sid"]: s
        for s in json.loads(plan.named("dev-cost-alerts-policy").inputs["policy"])["Statement"]
    }
    alarms = statements["AlarmsPublish"]
    assert alarms["Principal"] == {"Service": "cloudwatch.amazonaws.com"}
    assert alarms["Condition"]["ArnLike"]["aws:SourceArn"] == (
        "arn:aws:cloudwatch:us-east-1:123456789012:alarm:*"
    )
    assert statements["BudgetsPublish"]["Principal"] == {"Service": "budgets.amazonaws.com"}


@mock_aws
def test_resume_restores_the_groups_own_minimum():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    autoscaling = boto3.client("autoscaling", region_name="us-east-1")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.create_launch_template(LaunchTemplateName="tpl", LaunchTemplateData={"ImageId": image})
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="svc",
        LaunchTemplate={"LaunchTemplateName": "tpl"},
        MinSize=0,
        MaxSize=6,
        DesiredCapacity=0,
        AvailabilityZones=["us-east-1a"],
        Tags=[{"Key": "gpu-cluster:stack", "Value": "inference", "PropagateAtLaunch": True}],
    )
    assert resume("inference", "us-east-1", 2, ec2, autoscaling, 2, 6) == [
        "group svc: 0 -> 2 node(s)"
    ]
    (group,) = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"]
    assert (group["MinSize"], group["MaxSize"], group["DesiredCapacity"]) == (2, 6, 2)


def test_a_schedule_across_midnight_needs_every_day():
    late = json.dumps({"days": "MON-FRI", "start": "20:00", "stop": "02:00"})
    plan = plan_config({**DEV, "gpu-cluster:schedule": late}, "dev")
    assert plan.error is not None
    (problem,) = plan.error.problems
    assert problem.path == "gpu-cluster:schedule.days" and "midnight" in problem.problem
    nightly = json.dumps({"days": "*", "start": "20:00", "stop": "02:00"})
    assert plan_config({**DEV, "gpu-cluster:schedule": nightly}, "dev").error is None
