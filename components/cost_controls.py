"""Stop paying for idle GPUs: an idle stop on GPU utilization, working-hours schedules, a
maximum lifetime, and a monthly budget with alerts - each scoped to this stack's nodes.

- Idle stop. The nodes publish `nvidia_smi_utilization_gpu` (the CloudWatch agent, boot step
  gpu-cluster-gpu-metrics) in the `gpu-cluster` namespace, rolled up per instance and per Auto
  Scaling group. An alarm on the busiest GPU (Maximum) below the threshold for N minutes stops
  the dev box (EC2's stop alarm action, which AWS allows on custom metrics with an InstanceId
  dimension; its disk survives) or sets a cluster's group to 0 nodes (a simple scaling policy,
  ExactCapacity 0; the group's minimum is 0 for that). Missing data never stops anything.
- Schedules and the maximum lifetime are EventBridge Scheduler schedules calling EC2
  StartInstances/StopInstances or Auto Scaling UpdateAutoScalingGroup through a role that may
  touch only this stack's instance or group. Starting an instance whose volumes use a customer
  key needs kms:CreateGrant on that key (EBS creates the grant for the instance).
- The budget is an AWS Budgets cost budget filtered on the stack's cost-allocation tag
  (user:gpu-cluster:stack$<stack>), alerting at 80 % and 100 % to the stack's KMS-encrypted SNS
  topic; on a dev box it can also stop the box at 100 % (a RUN_SSM_DOCUMENTS budget action, which
  needs explicit instance ids - hence not for groups, whose instances come and go)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pulumi
import pulumi_aws as aws

from components.naming import child_name
from components.policies import assume_role_policy

METRIC_NAMESPACE = "gpu-cluster"
GPU_METRIC = "nvidia_smi_utilization_gpu"
PERIOD_SECONDS = 300
WARNING_BEFORE_EXPIRY = timedelta(hours=1)
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

    def day_count(self) -> int:
        if self.days == "*":
            return 7
        count = 0
        for part in self.days.split(","):
            first, _, last = part.partition("-")
            count += DAYS.index(last) - DAYS.index(first) + 1 if last else 1
        return count

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

    @property
    def alerts(self) -> bool:
        """A topic is needed: budget notifications or the lifetime warning go there."""
        return self.budget is not None or self.expires_at is not None

    def describe(self) -> list[str]:
        lines = []
        if self.idle_stop:
            lines.append(
                f"idle stop after {self.idle_stop.minutes} min under "
                f"{self.idle_stop.below_percent:g}% GPU utilization"
            )
        if self.schedule:
            s = self.schedule
            lines.append(
                f"runs {s.days} {s.start}-{s.stop} {s.timezone} (~{s.hours_per_day():g} h/day)"
            )
        if self.expires_at:
            lines.append(f"nodes stop at {self.expires_at:%Y-%m-%dT%H:%MZ} (maximum lifetime)")
        if self.budget:
            stop = ", stops the box at 100%" if self.budget.stop_at_limit else ""
            lines.append(
                f"budget ${self.budget.monthly_usd:,.0f}/month, alerts at 80% and 100%{stop}"
            )
        return lines


@dataclass
class CostControlArgs:
    controls: CostControls
    stack: str  # the gpu-cluster:stack tag value the budget filters on
    region: str
    account_id: pulumi.Input[str]
    partition: pulumi.Input[str]
    kms_key_arn: pulumi.Input[str]
    node_count: int  # a group's size when it runs (a service: its maximum)
    instance: aws.ec2.Instance | None = None  # the dev box, or
    group: aws.autoscaling.Group | None = None  # the cluster's node group
    serving_min: int | None = None  # a service: its minimum (scaling sizes it from there)
    tags: dict[str, str] = field(default_factory=dict)


def scheduler_policy(
    instance_arn: str | None, group_arn: str | None, key_arn: str, topic_arn: str | None
) -> dict[str, Any]:
    """Exactly this stack's nodes: start/stop its instance, or resize its group."""
    statements: list[dict[str, Any]] = []
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


def budget_filter(stack: str) -> list[dict[str, Any]]:
    return [{"name": "TagKeyValue", "values": [f"user:gpu-cluster:stack${stack}"]}]


class StackCostControls(pulumi.ComponentResource):
    """The idle alarm, schedules, lifetime, budget and alerts of one compute stack."""

    def __init__(
        self, name: str, args: CostControlArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:cost:StackCostControls", name, None, opts)
        self.args = args
        self.child = pulumi.ResourceOptions(parent=self)
        controls = args.controls
        self.topic = self._alerts(name) if controls.alerts else None
        if controls.idle_stop:
            self._idle_stop(name, controls.idle_stop)
        if controls.schedule or controls.expires_at:
            self._schedules(name)
        if controls.budget:
            self._budget(name, controls.budget)
        self.register_outputs({"topicArn": self.topic.arn if self.topic else None})

    def _service_role(
        self, prefix: str, service: str, description: str, policy: pulumi.Input[str]
    ) -> tuple[aws.iam.Role, aws.iam.RolePolicy]:
        """A role only `service` may assume for this account, and its one inline policy
        (`<prefix>-role`, `<prefix>-access`)."""
        role = aws.iam.Role(
            f"{prefix}-role",
            description=description,
            assume_role_policy=pulumi.Output.from_input(self.args.account_id).apply(
                lambda account: json.dumps(assume_role_policy(service, account))
            ),
            tags=self.args.tags,
            opts=self.child,
        )
        access = aws.iam.RolePolicy(
            f"{prefix}-access", role=role.id, policy=policy, opts=self.child
        )
        return role, access

    def _alerts(self, name: str) -> aws.sns.Topic:
        a = self.args
        topic = aws.sns.Topic(
            child_name(name, "alerts"),
            kms_master_key_id=a.kms_key_arn,
            tags=a.tags,
            opts=self.child,
        )
        aws.sns.TopicPolicy(
            child_name(name, "alerts-policy"),
            arn=topic.arn,
            policy=pulumi.Output.all(topic.arn, a.account_id, a.partition).apply(
                lambda v: json.dumps(alerts_topic_policy(*v, a.region))
            ),
            opts=self.child,
        )
        for index, email in enumerate(a.controls.alert_emails):
            aws.sns.TopicSubscription(
                child_name(name, f"alerts-email-{index}"),
                topic=topic.arn,
                protocol="email",
                endpoint=email,
                opts=self.child,
            )
        return topic

    def _idle_stop(self, name: str, idle: IdleStop) -> None:
        a = self.args
        common = {
            "namespace": METRIC_NAMESPACE,
            "metric_name": GPU_METRIC,
            "statistic": "Maximum",
            "period": PERIOD_SECONDS,
            "evaluation_periods": idle.minutes * 60 // PERIOD_SECONDS,
            "datapoints_to_alarm": idle.minutes * 60 // PERIOD_SECONDS,
            "threshold": idle.below_percent,
            "comparison_operator": "LessThanThreshold",
            "treat_missing_data": "notBreaching",
            "ok_actions": [],
            "tags": a.tags,
        }
        notify = [self.topic.arn] if self.topic else []
        if a.instance is not None:
            aws.cloudwatch.MetricAlarm(
                child_name(name, "idle-stop"),
                alarm_description=f"gpu-cluster {name}: stop the box after {idle.minutes} min "
                f"under {idle.below_percent:g}% GPU utilization (its disk survives)",
                dimensions={"InstanceId": a.instance.id},
                alarm_actions=[f"arn:aws:automate:{a.region}:ec2:stop", *notify],
                **common,
                opts=self.child,
            )
            return
        assert a.group is not None
        to_zero = aws.autoscaling.Policy(
            child_name(name, "idle-scale-to-zero"),
            autoscaling_group_name=a.group.name,
            policy_type="SimpleScaling",
            adjustment_type="ExactCapacity",
            scaling_adjustment=0,
            cooldown=PERIOD_SECONDS,
            opts=self.child,
        )
        aws.cloudwatch.MetricAlarm(
            child_name(name, "idle-stop"),
            alarm_description=f"gpu-cluster {name}: scale the node group to 0 after "
            f"{idle.minutes} min under {idle.below_percent:g}% GPU utilization",
            dimensions={"AutoScalingGroupName": a.group.name},
            alarm_actions=[to_zero.arn, *notify],
            **common,
            opts=self.child,
        )

    def _schedules(self, name: str) -> None:
        a, controls = self.args, self.args.controls
        instance_arn = a.instance.arn if a.instance is not None else None
        group_arn = a.group.arn if a.group is not None else None
        role, policy = self._service_role(
            f"{name}-scheduler",
            "scheduler.amazonaws.com",
            f"gpu-cluster {name}: start and stop this stack's nodes on schedule",
            pulumi.Output.all(
                instance_arn, group_arn, a.kms_key_arn, self.topic.arn if self.topic else None
            ).apply(lambda v: json.dumps(scheduler_policy(*v))),
        )
        instance_id = a.instance.id if a.instance is not None else None
        group_name = a.group.name if a.group is not None else None
        targets = pulumi.Output.all(instance_id, group_name)
        stop = targets.apply(lambda v: stop_target(v[0], v[1]))
        if a.serving_min is not None:
            minimum, desired = a.serving_min, None
        else:
            minimum, desired = (0 if controls.idle_stop else a.node_count), a.node_count
        start = targets.apply(lambda v: start_target(v[0], v[1], a.node_count, minimum, desired))
        opts = pulumi.ResourceOptions(parent=self, depends_on=[policy])

        def schedule(suffix: str, expression: str, timezone: str, target, description: str):
            return aws.scheduler.Schedule(
                child_name(name, suffix),
                description=f"gpu-cluster {name}: {description}",
                schedule_expression=expression,
                schedule_expression_timezone=timezone,
                flexible_time_window={"mode": "OFF"},
                target={
                    "arn": target.apply(lambda t: f"arn:aws:scheduler:::aws-sdk:{t[0]}"),
                    "role_arn": role.arn,
                    "input": target.apply(lambda t: t[1]),
                },
                opts=opts,
            )

        if controls.schedule:
            s = controls.schedule
            schedule("schedule-start", s.cron(s.start), s.timezone, start, f"start at {s.start}")
            schedule("schedule-stop", s.cron(s.stop), s.timezone, stop, f"stop at {s.stop}")
        if controls.expires_at:
            moment = controls.expires_at
            schedule("expiry-stop", at_expression(moment), "UTC", stop, "maximum lifetime reached")
            if self.topic is not None:
                warning = moment - WARNING_BEFORE_EXPIRY
                aws.scheduler.Schedule(
                    child_name(name, "expiry-warning"),
                    description=f"gpu-cluster {name}: warn an hour before the nodes stop",
                    schedule_expression=at_expression(warning),
                    schedule_expression_timezone="UTC",
                    flexible_time_window={"mode": "OFF"},
                    target={
                        "arn": self.topic.arn,
                        "role_arn": role.arn,
                        "input": json.dumps(
                            {
                                "stack": a.stack,
                                "message": f"gpu-cluster {a.stack}: nodes stop at "
                                f"{moment:%Y-%m-%d %H:%M} UTC (expiresAt); set a later "
                                "expiresAt and run pulumi up to keep them",
                            }
                        ),
                    },
                    opts=opts,
                )

    def _budget(self, name: str, budget: Budget) -> None:
        a = self.args
        assert self.topic is not None
        topic = [self.topic.arn]
        notifications = [
            {
                "comparison_operator": "GREATER_THAN",
                "threshold": threshold,
                "threshold_type": "PERCENTAGE",
                "notification_type": kind,
                "subscriber_sns_topic_arns": topic,
            }
            for threshold, kind in ((80, "ACTUAL"), (100, "ACTUAL"), (100, "FORECASTED"))
        ]
        if budget.activate_cost_allocation_tag:
            # Account-wide (management or standalone account only); kept when the stack goes.
            aws.costexplorer.CostAllocationTag(
                child_name(name, "cost-allocation-tag"),
                tag_key="gpu-cluster:stack",
                status="Active",
                opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),
            )
        created = aws.budgets.Budget(
            child_name(name, "budget"),
            name=f"gpu-cluster-{a.stack}",
            budget_type="COST",
            limit_amount=f"{budget.monthly_usd:.2f}",
            limit_unit="USD",
            time_unit="MONTHLY",
            cost_filters=budget_filter(a.stack),
            notifications=notifications,
            tags=a.tags,
            opts=self.child,
        )
        if budget.stop_at_limit and a.instance is not None:
            role, access = self._service_role(
                f"{name}-budget-action",
                "budgets.amazonaws.com",
                f"gpu-cluster {name}: the budget action stops this stack's box",
                a.instance.arn.apply(lambda arn: json.dumps(budget_action_policy(arn))),
            )
            aws.budgets.BudgetAction(
                child_name(name, "budget-stop"),
                budget_name=created.name,
                action_type="RUN_SSM_DOCUMENTS",
                approval_model="AUTOMATIC",
                notification_type="ACTUAL",
                action_threshold={
                    "action_threshold_type": "PERCENTAGE",
                    "action_threshold_value": 100,
                },
                definition={
                    "ssm_action_definition": {
                        "action_sub_type": "STOP_EC2_INSTANCES",
                        "instance_ids": [a.instance.id],
                        "region": a.region,
                    }
                },
                execution_role_arn=role.arn,
                subscribers=[{"address": self.topic.arn, "subscription_type": "SNS"}],
                opts=pulumi.ResourceOptions(parent=self, depends_on=[access]),
            )
