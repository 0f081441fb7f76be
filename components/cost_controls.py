"""Stop paying for idle GPUs: an idle stop on node activity, working-hours schedules, a
maximum lifetime, and a monthly budget with alerts - each scoped to this stack's nodes.

- Idle stop. Every minute each training node publishes `Activity` in the `gpu-cluster`
  namespace (boot/gpu-cluster-gpu-metrics.sh --activity): its busiest GPU's utilization, or 100
  while one of its jobs runs (a job staging data at 0% GPU is not idle), per instance and per
  cluster and stack. An alarm on its Maximum below the threshold for N minutes stops the dev
  box (EC2's stop alarm action, which AWS allows on custom metrics with an InstanceId dimension:
  CloudWatch User Guide, "Create alarms to stop, terminate, reboot, or recover an EC2
  instance" - hence one metric the node computes, not a metric-math alarm) or sets a cluster's
  group to 0 nodes (a simple scaling policy, ExactCapacity 0; the group's minimum is 0 for
  that). Missing data never stops anything: no data for the whole window (no node publishes:
  stopped, or the publisher is broken) is INSUFFICIENT_DATA, which tells the alert topic
  (CloudWatch User Guide, "Configuring how CloudWatch alarms treat missing data": `missing`).
- Schedules and the maximum lifetime are EventBridge Scheduler schedules calling EC2
  StartInstances/StopInstances or Auto Scaling UpdateAutoScalingGroup through a role that may
  touch only this stack's instance or group. Before the maximum lifetime, a Capacity Block's
  end or the working-hours stop takes the nodes, a schedule tells their jobs to checkpoint (SSM
  Run Command). Starting an instance whose volumes use a customer key needs kms:CreateGrant on
  that key (EBS creates the grant for the instance).
- The budget is an AWS Budgets cost budget filtered on the stack's cost-allocation tag
  (user:gpu-cluster:stack-id$<project>/<stack>/<region>), alerting at 80 % and 100 % to the
  stack's KMS-encrypted SNS topic; on a dev box it can also stop the box at 100 % (a
  RUN_SSM_DOCUMENTS budget action, which needs explicit instance ids - hence not for groups,
  whose instances come and go)."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from gpu_cluster.components.naming import STACK_ID_TAG

if TYPE_CHECKING:
    import pulumi_aws as aws

METRIC_NAMESPACE = "gpu-cluster"
GPU_METRIC = "nvidia_smi_utilization_gpu"  # the CloudWatch agent's (dashboards, serving)
ACTIVITY_METRIC = "Activity"  # the idle stop's: busiest GPU %, or 100 while a job runs
PERIOD_SECONDS = 300
WARNING_BEFORE_EXPIRY = timedelta(hours=1)
# "Checkpoint now" to the running jobs before a planned stop (a Capacity Block's end, the
# maximum lifetime, the working-hours stop): a large model's sharded checkpoint to S3 takes
# minutes, not seconds.
CHECKPOINT_BEFORE_STOP = timedelta(minutes=15)
# EventBridge Scheduler replaces this keyword in a target's input with the time the schedule
# was due, e.g. 2022-03-22T18:59:43Z (Scheduler User Guide, "Adding context attributes").
SCHEDULED_TIME = "<aws.scheduler.scheduled-time>"
DAYS = ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")


@dataclass(frozen=True)
class IdleStop:
    minutes: int
    below_percent: float


@dataclass(frozen=True)
class WorkSchedule:
    days: str  # "MON-FRI", "MON,WED,FRI" or "*"
    start: str  # HH:MM
    stop: str  # HH:MM
    timezone: str = "UTC"

    def cron(self, at: str) -> str:
        hour, minute = at.split(":")
        return f"cron({int(minute)} {int(hour)} ? * {self.days} *)"

    def cron_before(self, at: str, lead: timedelta) -> str:
        """cron() ``lead`` before ``at`` on the same days, or on the day before each of them
        when that falls before midnight (a 00:10 stop on MON-FRI: 23:55 on SUN-THU)."""
        hour, minute = (int(part) for part in at.split(":"))
        total = hour * 60 + minute - lead // timedelta(minutes=1)
        days = self.days
        if total < 0:
            total += 24 * 60
            if days != "*":
                days = ",".join(DAYS[i] for i in sorted((i - 1) % 7 for i in self.day_indices()))
        return f"cron({total % 60} {total // 60} ? * {days} *)"

    def day_indices(self) -> list[int]:
        """The schedule's days as indices into DAYS, in week order (a range may wrap)."""
        found: set[int] = set()
        for part in self.days.split(","):
            first, _, last = part.partition("-")
            start = DAYS.index(first)
            length = (DAYS.index(last) - start) % 7 + 1 if last else 1
            found |= {(start + offset) % 7 for offset in range(length)}
        return sorted(found)

    def day_count(self) -> int:
        return 7 if self.days == "*" else len(self.day_indices())

    def hours_per_day(self) -> float:
        """Average hours a day the nodes run (over a week)."""
        start, stop = (int(t[:2]) * 60 + int(t[3:]) for t in (self.start, self.stop))
        daily = ((stop - start) % (24 * 60)) / 60
        return round(daily * self.day_count() / 7, 2)


@dataclass(frozen=True)
class Budget:
    monthly_usd: float
    stop_at_limit: bool = False
    activate_cost_allocation_tag: bool = False


@dataclass(frozen=True)
class CostControls:
    idle_stop: IdleStop | None = None
    schedule: WorkSchedule | None = None
    expires_at: datetime | None = None  # UTC
    budget: Budget | None = None
    alert_emails: tuple[str, ...] = ()
    # why the nodes stop at expires_at: the stack's expiresAt, or the end of its Capacity Block
    expiry_reason: str = "expiresAt"
    # the capacity bills whether nodes run or not (a Capacity Block, a capacity reservation):
    # stopping nodes frees them, it does not stop the bill
    prepaid: bool = False
    # all or nothing: a multi-node group short of its size this long after its first node
    # booted scales to 0 (boot/gpu-cluster-nodes.sh); 0: off
    gang_timeout_minutes: int = 0

    @property
    def alerts(self) -> bool:
        """A topic is needed: budget notifications, the lifetime warning, a partial gang's
        stop or an idle stop that sees no data go there; and on prepaid capacity, where neither
        stop is on by default, the nodes' own alerts (a failure that keeps replacing nodes, a
        full root disk), which waste hours already paid for."""
        return (
            self.budget is not None
            or self.expires_at is not None
            or self.gang_timeout_minutes > 0
            or self.idle_stop is not None
            or self.prepaid
        )

    def describe(self) -> list[str]:
        lines = []
        bills_anyway = " (the capacity bills anyway: this stops nodes, not the bill)"
        if self.idle_stop:
            lines.append(
                f"idle stop after {self.idle_stop.minutes} min under "
                f"{self.idle_stop.below_percent:g}% GPU utilization and no job running"
                + (bills_anyway if self.prepaid else "")
            )
        if self.schedule:
            s = self.schedule
            lines.append(
                f"runs {s.days} {s.start}-{s.stop} {s.timezone} (~{s.hours_per_day():g} h/day)"
                + (bills_anyway if self.prepaid else "")
            )
        if self.expires_at:
            lines.append(f"nodes stop at {self.expires_at:%Y-%m-%dT%H:%MZ} (maximum lifetime)")
        if self.gang_timeout_minutes:
            lines.append(
                f"all or nothing: a partial gang after {self.gang_timeout_minutes} min scales "
                "to 0 (the alert topic says why)" + (bills_anyway if self.prepaid else "")
            )
        if self.budget:
            stop = ", stops the box at 100%" if self.budget.stop_at_limit else ""
            lines.append(
                f"budget ${self.budget.monthly_usd:,.0f}/month, alerts at 80% and 100%{stop}"
            )
        return lines


def checkpoint_command(
    stack_id: str,
    stop: datetime | None,
    reason: str,
    job_command: str,
    lead: timedelta = CHECKPOINT_BEFORE_STOP,
) -> str:
    """The SendCommand request (EventBridge Scheduler's universal target ssm:sendCommand takes
    the API's own parameters) that tells every running node of the stack, by its stack-id tag, to
    checkpoint its jobs now (boot/gpu-cluster-jobs.sh checkpoint). ``stop`` None: a recurring
    stop (the working-hours schedule), whose time the node's shell computes from the time the
    checkpoint schedule was due (SCHEDULED_TIME) plus ``lead``: AWS-RunShellScript runs the
    commands with `sh -c` (amazon-ssm-agent agent/plugins/runscript/runshellscript.go) and
    the node's date is GNU date."""
    if stop is not None:
        notice = {"action": "stop", "time": f"{stop:%Y-%m-%dT%H:%M:%SZ}", "reason": reason}
        argument = shlex.quote(json.dumps(notice))
    else:
        minutes = lead // timedelta(minutes=1)
        template = json.dumps({"action": "stop", "time": "@", "reason": reason})
        argument = '"{}"'.format(
            template.replace('"', '\\"').replace(
                "@", f"$(date -u -d '{SCHEDULED_TIME} {minutes} minutes' +%FT%TZ)"
            )
        )
    return json.dumps(
        {
            "DocumentName": "AWS-RunShellScript",
            "Targets": [{"Key": f"tag:{STACK_ID_TAG}", "Values": [stack_id]}],
            "Parameters": {"commands": [f"{job_command} checkpoint {argument}"]},
            "Comment": f"gpu-cluster {stack_id}: checkpoint before the nodes stop"[:100],
            "TimeoutSeconds": 600,
        }
    )


def checkpoint_command_statements(
    partition: str, region: str, account_id: str, stack_id: str
) -> list[dict[str, Any]]:
    """Run Command on this stack's instances only (SSM User Guide, "Restricting Run Command
    access based on instance tags": the document and the instances, by ssm:resourceTag)."""
    return [
        {
            "Sid": "CheckpointBeforeStop",
            "Effect": "Allow",
            "Action": "ssm:SendCommand",
            "Resource": f"arn:{partition}:ssm:{region}::document/AWS-RunShellScript",
        },
        {
            "Sid": "CheckpointThisStacksNodes",
            "Effect": "Allow",
            "Action": "ssm:SendCommand",
            "Resource": f"arn:{partition}:ec2:{region}:{account_id}:instance/*",
            "Condition": {"StringEquals": {f"ssm:resourceTag/{STACK_ID_TAG}": stack_id}},
        },
    ]


def scheduler_policy(
    instance_arn: str | None,
    group_arn: str | None,
    key_arn: str,
    topic_arn: str | None,
    checkpoint: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Exactly this stack's nodes: start/stop its instance, or resize its group (and tell its
    jobs to checkpoint first: checkpoint_command_statements)."""
    statements: list[dict[str, Any]] = list(checkpoint or [])
    if instance_arn:
        statements += [
            {
                "Sid": "StartStopTheBox",
                "Effect": "Allow",
                "Action": ["ec2:StartInstances", "ec2:StopInstances"],
                "Resource": instance_arn,
            },
            {
                "Sid": "StartWithEncryptedVolumes",
                "Effect": "Allow",
                "Action": "kms:CreateGrant",
                "Resource": key_arn,
                "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
            },
        ]
    if group_arn:
        statements.append(
            {
                "Sid": "ResizeTheGroup",
                "Effect": "Allow",
                "Action": "autoscaling:UpdateAutoScalingGroup",
                "Resource": group_arn,
            }
        )
    if topic_arn:
        statements += [
            {
                "Sid": "WarnBeforeExpiry",
                "Effect": "Allow",
                "Action": "sns:Publish",
                "Resource": topic_arn,
            },
            {
                "Sid": "PublishEncrypted",
                "Effect": "Allow",
                "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
                "Resource": key_arn,
            },
        ]
    return {"Version": "2012-10-17", "Statement": statements}


def budget_action_policy(instance_arn: str) -> dict[str, Any]:
    """What the budget action's SSM automation (stop EC2 instances) needs, for this box only."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "StopTheBox",
                "Effect": "Allow",
                "Action": "ec2:StopInstances",
                "Resource": instance_arn,
            },
            {
                "Sid": "RunTheStopAutomation",
                "Effect": "Allow",
                "Action": ["ssm:StartAutomationExecution", "ec2:DescribeInstanceStatus"],
                "Resource": "*",
            },
        ],
    }


def alerts_topic_policy(
    topic_arn: str, account_id: str, partition: str, region: str
) -> dict[str, Any]:
    """AWS Budgets (AWS's documented SNS policy for Budgets) and this account's CloudWatch
    alarms may publish to the stack's topic; the policy replaces the topic's default one."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "BudgetsPublish",
                "Effect": "Allow",
                "Principal": {"Service": "budgets.amazonaws.com"},
                "Action": "SNS:Publish",
                "Resource": topic_arn,
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account_id},
                    "ArnLike": {"aws:SourceArn": f"arn:{partition}:budgets::{account_id}:*"},
                },
            },
            {
                "Sid": "AlarmsPublish",
                "Effect": "Allow",
                "Principal": {"Service": "cloudwatch.amazonaws.com"},
                "Action": "SNS:Publish",
                "Resource": topic_arn,
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account_id},
                    "ArnLike": {
                        "aws:SourceArn": f"arn:{partition}:cloudwatch:{region}:{account_id}:alarm:*"
                    },
                },
            },
        ],
    }


def stop_target(instance_id: str | None, group_name: str | None) -> tuple[str, str]:
    if instance_id:
        return "ec2:stopInstances", json.dumps({"InstanceIds": [instance_id]})
    return "autoscaling:updateAutoScalingGroup", json.dumps(
        {"AutoScalingGroupName": group_name, "MinSize": 0, "DesiredCapacity": 0}
    )


def start_target(
    instance_id: str | None,
    group_name: str | None,
    nodes: int,
    minimum: int,
    desired: int | None = None,
) -> tuple[str, str]:
    """``minimum``: the group's own minimum (0 when the idle stop may empty it); ``desired``
    None leaves the size to the group's scaling (a service starts at its minimum)."""
    if instance_id:
        return "ec2:startInstances", json.dumps({"InstanceIds": [instance_id]})
    update: dict[str, Any] = {
        "AutoScalingGroupName": group_name,
        "MinSize": minimum,
        "MaxSize": nodes,
    }
    if desired is not None:
        update["DesiredCapacity"] = desired
    return "autoscaling:updateAutoScalingGroup", json.dumps(update)


def at_expression(moment: datetime) -> str:
    return f"at({moment:%Y-%m-%dT%H:%M:%S})"


def budget_filter(stack_id: str) -> list[aws.budgets.BudgetCostFilterArgsDict]:
    """This stack's costs: its stack-id tag (the stack name alone is shared across regions)."""
    return [{"name": "TagKeyValue", "values": [f"user:{STACK_ID_TAG}${stack_id}"]}]
