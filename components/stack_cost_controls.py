"""StackCostControls: the resources of a stack's cost controls (components/cost_controls.py
says what each one does and why): the alert topic, the idle alarm, the schedules and the
budget, with roles scoped to this stack's nodes."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.cost_controls import (
    ACTIVITY_METRIC,
    CHECKPOINT_BEFORE_STOP,
    METRIC_NAMESPACE,
    PERIOD_SECONDS,
    WARNING_BEFORE_EXPIRY,
    Budget,
    CostControls,
    IdleStop,
    alerts_topic_policy,
    at_expression,
    budget_action_policy,
    budget_filter,
    checkpoint_command,
    checkpoint_command_statements,
    scheduler_policy,
    start_target,
    stop_target,
)
from gpu_cluster.components.jobs import JOB_COMMAND
from gpu_cluster.components.names import (
    StackIdentity,
    budget_name,
    runtime_identity,
    schedule_description,
)
from gpu_cluster.components.naming import STACK_ID_TAG, child_name
from gpu_cluster.components.policies import assume_role_policy


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
    cluster: str = ""  # the cluster tag value its nodes publish Activity under
    identity: StackIdentity | None = None  # whose names and tags (None: the running stack's)
    tags: dict[str, str] = field(default_factory=dict)


class StackCostControls(pulumi.ComponentResource):
    """The idle alarm, schedules, lifetime, budget and alerts of one compute stack."""

    def __init__(
        self, name: str, args: CostControlArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:cost:StackCostControls", name, None, opts)
        self.identity = args.identity or runtime_identity(args.cluster or args.stack, args.region)
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
                lambda v: json.dumps(alerts_topic_policy(*v, region=a.region))
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
        notify = [self.topic.arn] if self.topic else []
        periods = idle.minutes * 60 // PERIOD_SECONDS
        common = {
            "namespace": METRIC_NAMESPACE,
            "metric_name": ACTIVITY_METRIC,
            "statistic": "Maximum",
            "period": PERIOD_SECONDS,
            "evaluation_periods": periods,
            "datapoints_to_alarm": periods,
            "threshold": idle.below_percent,
            "comparison_operator": "LessThanThreshold",
            # no data for the whole window is INSUFFICIENT_DATA: never a stop, always an alert
            "treat_missing_data": "missing",
            "insufficient_data_actions": notify,
            "ok_actions": [],
            "tags": a.tags,
        }
        if a.instance is not None:
            aws.cloudwatch.MetricAlarm(
                child_name(name, "idle-stop"),
                alarm_description=f"gpu-cluster {name}: stop the box after {idle.minutes} min "
                f"under {idle.below_percent:g}% GPU utilization with no job running (its disk "
                "survives); INSUFFICIENT_DATA: the box is stopped or publishes no Activity",
                dimensions={"InstanceId": a.instance.id},
                alarm_actions=[
                    pulumi.Output.from_input(a.partition).apply(
                        lambda partition: f"arn:{partition}:automate:{a.region}:ec2:stop"
                    ),
                    *notify,
                ],
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
            f"{idle.minutes} min under {idle.below_percent:g}% GPU utilization with no job "
            "running; INSUFFICIENT_DATA: no node runs or none publishes Activity",
            # each node's Activity for its cluster and stack (the boot step puts it without
            # asking EC2 for its group; two stacks may share a cluster name)
            dimensions={"Cluster": a.cluster, "Stack": a.stack},
            alarm_actions=[to_zero.arn, *notify],
            **common,
            opts=self.child,
        )

    def _schedules(self, name: str) -> None:
        a, controls = self.args, self.args.controls
        instance_arn = a.instance.arn if a.instance is not None else None
        group_arn = a.group.arn if a.group is not None else None
        # training jobs checkpoint before the maximum lifetime or the schedule stops their nodes
        checkpoint = a.serving_min is None and (
            controls.expires_at is not None or controls.schedule is not None
        )
        role, policy = self._service_role(
            f"{name}-scheduler",
            "scheduler.amazonaws.com",
            f"gpu-cluster {name}: start and stop this stack's nodes on schedule",
            pulumi.Output.all(
                instance_arn,
                group_arn,
                a.kms_key_arn,
                self.topic.arn if self.topic else None,
                a.partition,
                a.account_id,
            ).apply(
                lambda v: json.dumps(
                    scheduler_policy(
                        *v[:4],
                        checkpoint=checkpoint_command_statements(
                            v[4], a.region, v[5], self.identity.stack_id
                        )
                        if checkpoint
                        else None,
                    )
                )
            ),
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
                description=schedule_description(name, self.identity, description),
                schedule_expression=expression,
                schedule_expression_timezone=timezone,
                flexible_time_window={"mode": "OFF"},
                target={
                    "arn": pulumi.Output.all(target, a.partition).apply(
                        lambda v: f"arn:{v[1]}:scheduler:::aws-sdk:{v[0][0]}"
                    ),
                    "role_arn": role.arn,
                    "input": target.apply(lambda t: t[1]),
                },
                opts=opts,
            )

        def checkpoint_first(
            suffix: str, expression: str, timezone: str, stop_at: datetime | None, reason: str
        ) -> None:
            command = checkpoint_command(self.identity.stack_id, stop_at, reason, JOB_COMMAND)
            schedule(
                suffix,
                expression,
                timezone,
                pulumi.Output.from_input(("ssm:sendCommand", command)),
                f"checkpoint the jobs {CHECKPOINT_BEFORE_STOP.seconds // 60} min before the "
                "nodes stop",
            )

        if controls.schedule:
            s = controls.schedule
            schedule("schedule-start", s.cron(s.start), s.timezone, start, f"start at {s.start}")
            schedule("schedule-stop", s.cron(s.stop), s.timezone, stop, f"stop at {s.stop}")
            if checkpoint:
                before = s.cron_before(s.stop, CHECKPOINT_BEFORE_STOP)
                checkpoint_first("schedule-checkpoint", before, s.timezone, None, "schedule")
        if controls.expires_at:
            moment = controls.expires_at
            schedule("expiry-stop", at_expression(moment), "UTC", stop, controls.expiry_reason)
            if checkpoint:
                before = at_expression(moment - CHECKPOINT_BEFORE_STOP)
                reason = controls.expiry_reason
                checkpoint_first("expiry-checkpoint", before, "UTC", moment, reason)
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
                                f"{moment:%Y-%m-%d %H:%M} UTC ({controls.expiry_reason}); "
                                + (
                                    "set a later expiresAt and run pulumi up to keep them"
                                    if controls.expiry_reason == "expiresAt"
                                    else "checkpoint now"
                                ),
                            }
                        ),
                    },
                    opts=opts,
                )

    def _budget(self, name: str, budget: Budget) -> None:
        a = self.args
        assert self.topic is not None
        topic = [self.topic.arn]
        notifications: list[aws.budgets.BudgetNotificationArgsDict] = [
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
                tag_key=STACK_ID_TAG,
                status="Active",
                opts=pulumi.ResourceOptions(parent=self, retain_on_delete=True),
            )
        created = aws.budgets.Budget(
            child_name(name, "budget"),
            name=budget_name(self.identity),
            budget_type="COST",
            limit_amount=f"{budget.monthly_usd:.2f}",
            limit_unit="USD",
            time_unit="MONTHLY",
            cost_filters=budget_filter(self.identity.stack_id),
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
