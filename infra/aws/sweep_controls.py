"""What a destroyed stack's cost controls and identity can leave: schedules, alarms, event rules,
topics, budgets, the dashboard, instance profiles, roles and KMS keys.

How each is matched: by the stack-id tag (project/stack/region) where the service lists tags
(alarms, rules, topics, roles, profiles, keys), after a name-prefix filter on the cluster name
where the list is account-wide (Pulumi names them `<logical name>-<7 random characters>`, and
the logical names start with the cluster name); budgets by their name, which carries a digest of
the stack id (components/names.py), and so does the dashboard's (dashboards carry no tags,
and are account-wide: the name also holds the region). EventBridge Scheduler schedules carry no
tags: they are matched by that prefix and by the description the program gives them, which holds
the stack id. The data stack's key is never listed here: `gpuc sweep` refuses a data stack
(infra/cli.py), and every other stack's tag names that stack only."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from gpu_cluster.components.names import (
    StackIdentity,
    budget_name,
    dashboard_name,
    schedule_description_prefix,
)
from gpu_cluster.infra.aws import PERMISSION_ERRORS, call, paginate
from gpu_cluster.infra.aws.sweep_kinds import Leftover, has_tag
from gpu_cluster.infra.prices.unit_prices import unit_prices
from gpu_cluster.infra.problems import AwsError

AUTOSCALING_ROLE_PATH = "/aws-service-role/autoscaling.amazonaws.com/"


class ControlsSweep:
    region: str
    stack: str
    cluster: str
    scheduler: Any
    cloudwatch: Any
    events: Any
    sns: Any
    budgets: Any
    iam: Any
    kms: Any
    sts: Any
    account_id: str | None
    keeps_data: bool  # the stack's own bucket is kept: so are its key and the linked role
    poll_delays: tuple[float, ...]  # seconds between checks that an asynchronous delete ended

    if TYPE_CHECKING:  # the Sweeper's (sweep.py)

        @property
        def identity(self) -> StackIdentity: ...

    @property
    def prefix(self) -> str:
        return f"{self.cluster}-"

    def schedules(self) -> Iterator[Leftover]:
        if self.scheduler is None:
            return
        for entry in paginate(
            self.scheduler, "scheduler", "ListSchedules", "Schedules", NamePrefix=self.prefix
        ):
            schedule = call(
                self.scheduler,
                "scheduler",
                "GetSchedule",
                Name=entry["Name"],
                GroupName=entry.get("GroupName", "default"),
            )
            # components/stack_cost_controls.py: "gpu-cluster <cluster>-cost [<stack id>]: ..."
            # (exact, so cluster "foo" never takes cluster "foo-bar"'s schedules, nor a stack of
            # another region or project with the same cluster name its own)
            if schedule.get("Description", "").startswith(
                schedule_description_prefix(f"{self.cluster}-cost", self.identity)
            ):
                yield Leftover(
                    "schedule", f"{entry.get('GroupName', 'default')}/{entry['Name']}", "", 0.0
                )

    def alarms(self) -> Iterator[Leftover]:
        if self.cloudwatch is None:
            return
        monthly = unit_prices(self.region)["cloudwatch_alarm_month"]
        hours = unit_prices(self.region).hours_per_month
        for alarm in paginate(
            self.cloudwatch,
            "cloudwatch",
            "DescribeAlarms",
            "MetricAlarms",
            AlarmNamePrefix=self.prefix,
        ):
            tags = call(
                self.cloudwatch, "cloudwatch", "ListTagsForResource", ResourceARN=alarm["AlarmArn"]
            ).get("Tags", [])
            if has_tag(tags, self.identity):
                yield Leftover("alarm", alarm["AlarmName"], "", monthly / hours)

    def event_rules(self) -> Iterator[Leftover]:
        if self.events is None:
            return
        for rule in paginate(self.events, "events", "ListRules", "Rules", NamePrefix=self.prefix):
            tags = call(self.events, "events", "ListTagsForResource", ResourceARN=rule["Arn"])
            if has_tag(tags.get("Tags", []), self.identity):
                yield Leftover("event rule", rule["Name"], "", 0.0)

    def topics(self) -> Iterator[Leftover]:
        if self.sns is None:
            return
        for topic in paginate(self.sns, "sns", "ListTopics", "Topics"):
            arn = topic["TopicArn"]
            if not arn.rsplit(":", 1)[-1].startswith(self.prefix):
                continue
            tags = call(self.sns, "sns", "ListTagsForResource", ResourceArn=arn).get("Tags", [])
            if has_tag(tags, self.identity):
                yield Leftover("topic", arn, "", 0.0)

    def cost_budgets(self) -> Iterator[Leftover]:
        if self.budgets is None or self.sts is None:
            return
        name = budget_name(self.identity)  # components/names.py, as the program names it
        try:
            call(
                self.budgets, "budgets", "DescribeBudget", AccountId=self.account(), BudgetName=name
            )
        except AwsError as error:
            if error.code == "NotFoundException":
                return
            raise
        yield Leftover("budget", name, "", 0.0)

    def dashboards(self) -> Iterator[Leftover]:
        if self.cloudwatch is None:
            return
        name = dashboard_name(self.identity)  # components/names.py, as the program names it
        try:
            call(self.cloudwatch, "cloudwatch", "GetDashboard", DashboardName=name)
        except AwsError as error:
            if error.code == "ResourceNotFound":  # botocore: DashboardNotFoundError
                return
            raise
        monthly = unit_prices(self.region)["cloudwatch_dashboard_month"]
        yield Leftover("dashboard", name, "", monthly / unit_prices(self.region).hours_per_month)

    def account(self) -> str:
        if self.account_id is None:
            account: str = call(self.sts, "sts", "GetCallerIdentity")["Account"]
            self.account_id = account
            return account
        return self.account_id

    def instance_profiles(self) -> Iterator[Leftover]:
        if self.iam is None:
            return
        for profile in paginate(self.iam, "iam", "ListInstanceProfiles", "InstanceProfiles"):
            name = profile["InstanceProfileName"]
            if not name.startswith(self.prefix):
                continue
            # the listing leaves tags out; GetInstanceProfile has them
            got = call(self.iam, "iam", "GetInstanceProfile", InstanceProfileName=name)
            if has_tag(got["InstanceProfile"].get("Tags", []), self.identity):
                yield Leftover("instance profile", name, "", 0.0)

    def roles(self) -> Iterator[Leftover]:
        if self.iam is None:
            return
        linked = f"AWSServiceRoleForAutoScaling_{self.prefix}"
        for role in paginate(self.iam, "iam", "ListRoles", "Roles"):
            name = role["RoleName"]
            if not name.startswith((self.prefix, linked)):
                continue
            if self.keeps_data and name.startswith(linked):
                continue  # the kept key's policy names it (destroy --exclude-protected keeps it)
            tags = call(self.iam, "iam", "ListRoleTags", RoleName=name).get("Tags", [])
            if has_tag(tags, self.identity):
                yield Leftover("IAM role", name, role.get("Path", "/"), 0.0)

    def kms_keys(self) -> Iterator[Leftover]:
        if self.kms is None or self.keeps_data:  # the key encrypts the stack's kept bucket
            return
        monthly = unit_prices(self.region)["kms_key_month"]
        hours = unit_prices(self.region).hours_per_month
        for key in paginate(self.kms, "kms", "ListKeys", "Keys"):
            try:
                tags = call(self.kms, "kms", "ListResourceTags", KeyId=key["KeyId"])
                metadata = call(self.kms, "kms", "DescribeKey", KeyId=key["KeyId"])["KeyMetadata"]
            except AwsError as error:
                # another tool's key whose policy keeps this caller out: not this stack's key,
                # whose policy gives the account full access (components/policies.py)
                if error.code in PERMISSION_ERRORS:
                    continue
                raise
            as_pairs = [{"Key": t["TagKey"], "Value": t["TagValue"]} for t in tags.get("Tags", [])]
            if not has_tag(as_pairs, self.identity):
                continue
            if metadata.get("KeyState") in ("PendingDeletion", "PendingReplicaDeletion"):
                continue
            yield Leftover(
                "KMS key",
                key["KeyId"],
                "retained by destroy; deletion waits 30 days",
                monthly / hours,
            )

    def delete_control(self, leftover: Leftover) -> bool:
        """Delete one leftover of these kinds; False when the kind is not one of them."""
        kind, key = leftover.kind, leftover.resource_id
        if kind == "schedule":
            group, name = key.split("/", 1)
            call(self.scheduler, "scheduler", "DeleteSchedule", Name=name, GroupName=group)
        elif kind == "alarm":
            call(self.cloudwatch, "cloudwatch", "DeleteAlarms", AlarmNames=[key])
        elif kind == "event rule":
            targets = call(self.events, "events", "ListTargetsByRule", Rule=key).get("Targets", [])
            if targets:
                call(
                    self.events, "events", "RemoveTargets", Rule=key, Ids=[t["Id"] for t in targets]
                )
            call(self.events, "events", "DeleteRule", Name=key)
        elif kind == "dashboard":
            call(self.cloudwatch, "cloudwatch", "DeleteDashboards", DashboardNames=[key])
        elif kind == "topic":
            call(self.sns, "sns", "DeleteTopic", TopicArn=key)
        elif kind == "budget":  # DeleteBudget removes notifications and subscribers, not actions
            for action in self._budget_actions(key):
                call(
                    self.budgets,
                    "budgets",
                    "DeleteBudgetAction",
                    AccountId=self.account(),
                    BudgetName=key,
                    ActionId=action["ActionId"],
                )
            call(self.budgets, "budgets", "DeleteBudget", AccountId=self.account(), BudgetName=key)
        elif kind == "instance profile":
            self._empty_profile(key)
            call(self.iam, "iam", "DeleteInstanceProfile", InstanceProfileName=key)
        elif kind == "IAM role":
            self._delete_role(key, leftover.detail)
        elif kind == "KMS key":  # its alias goes with the key (and comes back if cancelled)
            call(self.kms, "kms", "ScheduleKeyDeletion", KeyId=key, PendingWindowInDays=30)
        else:
            return False
        return True

    def _budget_actions(self, budget: str) -> list[dict[str, Any]]:
        try:
            return list(
                paginate(
                    self.budgets,
                    "budgets",
                    "DescribeBudgetActionsForBudget",
                    "Actions",
                    AccountId=self.account(),
                    BudgetName=budget,
                )
            )
        except NotImplementedError:  # an emulator without budget actions holds none
            return []

    def _empty_profile(self, name: str) -> None:
        profile = call(self.iam, "iam", "GetInstanceProfile", InstanceProfileName=name)
        for role in profile["InstanceProfile"].get("Roles", []):
            call(
                self.iam,
                "iam",
                "RemoveRoleFromInstanceProfile",
                InstanceProfileName=name,
                RoleName=role["RoleName"],
            )

    def _delete_role(self, name: str, path: str) -> None:
        if path.startswith("/aws-service-role/"):
            # asynchronous, and refused while Auto Scaling still has a group using the role
            task = call(self.iam, "iam", "DeleteServiceLinkedRole", RoleName=name)
            self._wait_role_deleted(task["DeletionTaskId"])
            return
        for profile in paginate(
            self.iam, "iam", "ListInstanceProfilesForRole", "InstanceProfiles", RoleName=name
        ):
            call(
                self.iam,
                "iam",
                "RemoveRoleFromInstanceProfile",
                InstanceProfileName=profile["InstanceProfileName"],
                RoleName=name,
            )
        for policy in paginate(
            self.iam, "iam", "ListAttachedRolePolicies", "AttachedPolicies", RoleName=name
        ):
            call(self.iam, "iam", "DetachRolePolicy", RoleName=name, PolicyArn=policy["PolicyArn"])
        for policy in paginate(self.iam, "iam", "ListRolePolicies", "PolicyNames", RoleName=name):
            call(self.iam, "iam", "DeleteRolePolicy", RoleName=name, PolicyName=policy)
        call(self.iam, "iam", "DeleteRole", RoleName=name)

    def _wait_role_deleted(self, task: str) -> None:
        for delay in (*self.poll_delays, 0):
            status = call(
                self.iam, "iam", "GetServiceLinkedRoleDeletionStatus", DeletionTaskId=task
            )
            if status["Status"] == "SUCCEEDED":
                return
            if status["Status"] == "FAILED":
                reason = status.get("Reason", {}).get("Reason", "no reason given")
                raise AwsError(f"iam:DeleteServiceLinkedRole failed: {reason}", "DeletionFailed")
            time.sleep(delay)
        raise AwsError("iam:DeleteServiceLinkedRole is still in progress", "DeletionPending")
