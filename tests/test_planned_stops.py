"""The working-hours schedule's stop is a planned stop like the maximum lifetime's: the jobs are
told to checkpoint 15 minutes before it (issue 25, 1)."""

from __future__ import annotations

import json
import shlex
import subprocess
from datetime import timedelta

import pytest
from boot_fakes import FakeImds
from boot_harness import BootNode
from conftest import ROOT, TRAIN_LIKE, plan_config

from gpu_cluster.components.cost_controls import SCHEDULED_TIME, WorkSchedule
from gpu_cluster.components.jobs import JOB_COMMAND
from gpu_cluster.components.user_data import BootConfig, render_user_data
from gpu_cluster.infra.stack_files import load_stack_config

SCHEDULE = "aws:scheduler/schedule:Schedule"
BERLIN_HOURS = json.dumps(
    {"days": "MON-FRI", "start": "08:00", "stop": "18:00", "timezone": "Europe/Berlin"}
)


def schedules(plan) -> dict[str, dict]:
    return {s.name: s.inputs for s in plan.of_type(SCHEDULE)}


def statements(plan, name: str) -> dict[str, dict]:
    policy = json.loads(plan.named(name).inputs["policy"])
    return {s["Sid"]: s for s in policy["Statement"]}


def test_the_schedules_stop_tells_the_clusters_jobs_to_checkpoint_first():
    plan = plan_config({**TRAIN_LIKE, "gpu-cluster:schedule": BERLIN_HOURS}, "train")
    assert plan.error is None, plan.error
    found = schedules(plan)
    stop, checkpoint = found["train-cost-schedule-stop"], found["train-cost-schedule-checkpoint"]
    assert stop["scheduleExpression"] == "cron(0 18 ? * MON-FRI *)"
    assert checkpoint["scheduleExpression"] == "cron(45 17 ? * MON-FRI *)"  # 15 min before
    assert checkpoint["scheduleExpressionTimezone"] == stop["scheduleExpressionTimezone"]
    assert checkpoint["scheduleExpressionTimezone"] == "Europe/Berlin"
    assert checkpoint["target"]["arn"] == "arn:aws:scheduler:::aws-sdk:ssm:sendCommand"
    assert checkpoint["target"]["roleArn"] == stop["target"]["roleArn"]
    request = json.loads(checkpoint["target"]["input"])
    assert request["DocumentName"] == "AWS-RunShellScript"
    assert request["Targets"] == [
        {"Key": "tag:gpu-cluster:stack-id", "Values": ["gpu-cluster/train/us-east-1"]}
    ]
    (command,) = request["Parameters"]["commands"]
    assert shlex.split(command)[:2] == [JOB_COMMAND, "checkpoint"]
    access = statements(plan, "train-cost-scheduler-access")
    nodes = access["CheckpointThisStacksNodes"]
    assert nodes["Action"] == "ssm:SendCommand"
    stack_id = {"ssm:resourceTag/gpu-cluster:stack-id": "gpu-cluster/train/us-east-1"}
    assert nodes["Condition"] == {"StringEquals": stack_id}
    document = access["CheckpointBeforeStop"]["Resource"]
    assert document == "arn:aws:ssm:us-east-1::document/AWS-RunShellScript"


def test_the_dev_boxs_schedule_checkpoints_its_jobs_too():
    dev = load_stack_config("dev", ROOT)
    plan = plan_config({**dev, "gpu-cluster:schedule": BERLIN_HOURS}, "dev")
    assert plan.error is None, plan.error
    checkpoint = schedules(plan)["dev-cost-schedule-checkpoint"]
    assert checkpoint["scheduleExpression"] == "cron(45 17 ? * MON-FRI *)"
    request = json.loads(checkpoint["target"]["input"])
    assert request["Targets"] == [
        {"Key": "tag:gpu-cluster:stack-id", "Values": ["gpu-cluster/dev/us-east-1"]}
    ]


def test_a_service_on_a_schedule_has_no_checkpoint():
    inference = load_stack_config("inference", ROOT)
    plan = plan_config({**inference, "gpu-cluster:schedule": BERLIN_HOURS}, "inference")
    assert plan.error is None, plan.error
    names = set(schedules(plan))
    assert "inference-cost-schedule-stop" in names
    assert not [n for n in names if n.endswith("checkpoint")]  # no training jobs to save


@pytest.mark.parametrize(
    ("days", "stop", "expected"),
    [
        ("MON-FRI", "18:00", "cron(45 17 ? * MON-FRI *)"),
        ("MON-FRI", "09:05", "cron(50 8 ? * MON-FRI *)"),
        ("*", "00:10", "cron(55 23 ? * * *)"),
        ("MON-FRI", "00:10", "cron(55 23 ? * MON,TUE,WED,THU,SUN *)"),  # the evening before
        ("SAT,SUN", "00:00", "cron(45 23 ? * FRI,SAT *)"),
        ("FRI-MON", "00:05", "cron(50 23 ? * THU,FRI,SAT,SUN *)"),  # a range across the week
    ],
)
def test_the_checkpoint_is_the_lead_before_the_stop_on_the_right_days(days, stop, expected):
    schedule = WorkSchedule(days, "00:00" if stop != "00:00" else "06:00", stop)
    assert schedule.cron_before(stop, timedelta(minutes=15)) == expected


def test_the_notice_names_the_schedules_stop_time(tmp_path):
    """What runs on the node: EventBridge Scheduler puts the time the checkpoint schedule was
    due in place of its context keyword, SSM runs the command with `sh -c`; the jobs' notice
    then holds the stop's own time, 15 minutes later."""
    plan = plan_config({**TRAIN_LIKE, "gpu-cluster:schedule": BERLIN_HOURS}, "train")
    checkpoint = schedules(plan)["train-cost-schedule-checkpoint"]
    (command,) = json.loads(checkpoint["target"]["input"])["Parameters"]["commands"]
    assert SCHEDULED_TIME in command
    with FakeImds() as imds:
        node = BootNode(
            tmp_path, render_user_data(BootConfig("train", "us-east-1", 1, 0, 0, "b")), imds
        )
        assert node.install_only().returncode == 0
        delivered = command.replace(SCHEDULED_TIME, "2031-01-06T16:45:00Z")  # 17:45 in Berlin
        delivered = delivered.replace(JOB_COMMAND, str(node.file(JOB_COMMAND)), 1)
        done = subprocess.run(
            ["sh", "-c", delivered], env=node.env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        notice = json.loads(node.read("/run/gpu-cluster/checkpoint-now"))
    assert notice == {"action": "stop", "time": "2031-01-06T17:00:00Z", "reason": "schedule"}
