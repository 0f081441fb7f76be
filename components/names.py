"""Every physical name the project gives an AWS resource, path, alias or suffix: one function
each, computed from the stack's identity, with the scope in which AWS needs it unique.

A stack's identity is (project, stack, region, cluster). Pulumi stack names allow letters of
both cases, digits, ``-``, ``_`` and ``.``, up to 100 characters
(pulumi/pulumi sdk/go/common/tokens/stack_name.go), which many AWS names refuse; cluster names
are checked (2-20 of ``a-z0-9-``, infra/validation/names.py). So no name is built from a raw
stack or project name: the stack's part is a sanitised, bounded slug plus a digest of the
exact identity, and two stacks that differ in any part of it get different names.

Scopes, as AWS keeps names unique:
- regional: among all stacks of one account and region (KMS aliases, log groups, SSM
  parameters, load balancers, REGIONAL web ACLs, trails, Logs resource policies);
- account: among all stacks of one account, every region (IAM and service-linked role names,
  budgets);
- global: among all accounts (S3 bucket names).

The default stack (this project, stack name = cluster name) keeps the regional names earlier
versions gave it, so an upgrade replaces none of them; every other identity adds its digest.
Account-wide names always carry the region (which earlier versions left out: the service-linked
role and the budget get new names once). IAM roles and instance profiles are named by Pulumi
(logical name plus a random suffix): unique, and matched by the stack-id tag.

`NAME_KINDS` lists every kind with its scope and the AWS limit (components/aws_limits.py) it
must meet; tests/test_names.py checks them over generated
identities: distinct stacks never share a name, and every name is within its limits."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

DEFAULT_PROJECT = "gpu-cluster"  # Pulumi.yaml's name
NAME_PREFIX = "gpu-cluster"  # every path, alias and account-wide name starts with it
STACK_SLUG_MAX = 12  # the readable part of the stack name in a regional name

Scope = Literal["regional", "account", "global"]


def digest(*parts: str, length: int = 8) -> str:
    """A short, stable digest of the exact parts (case and every character count)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:length]


def slug(text: str, limit: int = STACK_SLUG_MAX) -> str:
    """``text`` in lower-case letters, digits and single hyphens, at most ``limit`` long."""
    words = re.split(r"[^a-z0-9]+", text.lower())
    return "-".join(w for w in words if w)[:limit].strip("-")


@dataclass(frozen=True, slots=True)
class StackIdentity:
    """Who owns a name: the Pulumi project and stack, the stack's region and its cluster."""

    project: str
    stack: str
    region: str
    cluster: str

    @property
    def is_default(self) -> bool:
        return self.project == DEFAULT_PROJECT and self.stack == self.cluster

    @property
    def regional(self) -> str:
        """The stack's part of every regional name: the cluster name for the default stack,
        else the cluster, the stack's slug and a digest of (project, stack). Letters, digits
        and single or double hyphens only, at most 20 + 1 + 12 + 1 + 8 = 42 characters."""
        if self.is_default:
            return self.cluster
        parts = [self.cluster, slug(self.stack), digest(self.project, self.stack)]
        return "-".join(p for p in parts if p)

    @property
    def account_wide(self) -> str:
        """The stack's part of every account-wide name: unique per region too (at most 29)."""
        return f"{self.cluster}-{digest(self.project, self.stack, self.region)}"

    @property
    def stack_id(self) -> str:
        """The value of STACK_ID_TAG: the project, stack and region, exactly."""
        return f"{self.project}/{self.stack}/{self.region}"


def runtime_identity(cluster: str, region: str = "") -> StackIdentity:
    """The identity of the stack a program runs as (a component used on its own)."""
    import pulumi  # the names stay importable without the SDK's runtime

    return StackIdentity(pulumi.get_project(), pulumi.get_stack(), region, cluster)


def role_in(identity: StackIdentity, component: str) -> str:
    """A child component's role: its name without the cluster's (``train-nodes`` -> ``nodes``)."""
    return component.removeprefix(f"{identity.cluster}-") if component != identity.cluster else ""


# --- regional names -----------------------------------------------------------------------


def scoped(identity: StackIdentity, role: str = "") -> str:
    """``<regional>-<role>``: a component's name with the cluster made the stack's own."""
    return f"{identity.regional}-{role}" if role else identity.regional


def key_alias(identity: StackIdentity, role: str = "security") -> str:
    """A stack's KMS key alias (components/kms.py): ``security`` for a cluster's key (`gpuc run`
    encrypts job specs with it), ``data`` for the data stack's. Every alias ends with its role,
    so a cluster named like another's alias (``x-security``) cannot take it."""
    return f"alias/{NAME_PREFIX}/{scoped(identity, role)}"


def flow_logs_group(identity: StackIdentity) -> str:
    return f"/{NAME_PREFIX}/{scoped(identity, 'network')}/vpc-flow-logs"


def node_events_group(identity: StackIdentity, role: str = "nodes") -> str:
    """EventBridge may write to any log group its resource policy allows; /aws/events/ is the
    convention the console uses."""
    return f"/aws/events/{NAME_PREFIX}/{scoped(identity, role)}"


def node_events_policy(identity: StackIdentity, role: str = "nodes") -> str:
    """The Logs resource policy letting EventBridge write there (per account and region)."""
    return f"{NAME_PREFIX}-{scoped(identity, role)}-events"


def jobs_log_group(identity: StackIdentity) -> str:
    """Every node's job output (the CloudWatch agent ships it, a stream per node)."""
    return f"/{NAME_PREFIX}/{scoped(identity, 'jobs')}"


def node_log_group(identity: StackIdentity) -> str:
    """Every node's gpu-cluster unit log lines (boot steps, health; the agent ships them)."""
    return f"/{NAME_PREFIX}/{scoped(identity, 'node-log')}"


def metric_filter_name(identity: StackIdentity, metric: str) -> str:
    """A log metric filter's name: unique per log group, and the stack's own anyway."""
    return f"{NAME_PREFIX}-{scoped(identity, metric)}"


def model_metrics_log_group(identity: StackIdentity, role: str) -> str:
    return f"/{NAME_PREFIX}/{scoped(identity, role)}-model-server-metrics"


def log_group_prefixes(identity: StackIdentity) -> tuple[str, ...]:
    """Every log group of the stack starts with one of these (the key policy's Logs grant)."""
    regional = identity.regional
    return (f"/{NAME_PREFIX}/{regional}-", f"/aws/events/{NAME_PREFIX}/{regional}-")


WAF_LOG_PREFIX = "aws-waf-logs-"  # WAF logs only to a log group whose name starts with it


def waf_log_group(identity: StackIdentity, role: str = "waf") -> str:
    """The web ACL's log group: AWS WAF delivers to CloudWatch Logs only into a group whose name
    begins with ``aws-waf-logs-`` (WAF Developer Guide, "Sending web ACL traffic logs to an
    Amazon CloudWatch Logs log group"), so it cannot live under /gpu-cluster/."""
    return f"{waf_log_group_prefix(identity)}{role}"


def waf_log_group_prefix(identity: StackIdentity) -> str:
    """What every WAF log group of the stack starts with (the key policy's Logs grant)."""
    return f"{WAF_LOG_PREFIX}{NAME_PREFIX}-{identity.regional}-"


def web_acl_name(identity: StackIdentity, role: str = "") -> str:
    """A REGIONAL web ACL's name: unique per account, region and scope (WAF keeps names per
    scope), 1-128 of letters, digits, _ and - (CreateWebACL's Name, ``^[\\w\\-]+$``): the
    regional part is letters, digits and hyphens, at most 11 + 1 + 42 + 1 + a role."""
    return f"{NAME_PREFIX}-{scoped(identity, role or 'waf')}"


def parameter_root(identity: StackIdentity) -> str:
    """The SSM hierarchy the stack's parameters live under: no other stack's is inside it
    (its segment has no '/', and distinct identities have distinct segments)."""
    return f"/{NAME_PREFIX}/{identity.regional}"


def jobs_path(identity: StackIdentity) -> str:
    """One SecureString parameter per job, read by the stack's nodes only."""
    return f"{parameter_root(identity)}/jobs"


def job_parameter(identity: StackIdentity, job: str) -> str:
    return f"{jobs_path(identity)}/{job}"


def secrets_path(identity: StackIdentity) -> str:
    """The stack's secrets, one SecureString parameter each (components/secrets.py)."""
    return f"{parameter_root(identity)}/secrets"


def stack_parameter(identity: StackIdentity, leaf: str) -> str:
    """A parameter the program writes for `gpuc` or the nodes (bucket, alerts-topic,
    replacements/...): stack names are within SSM's characters (a-zA-Z0-9_.-)."""
    return f"{parameter_root(identity)}/{identity.stack}/{leaf}"


def job_bucket_parameter(identity: StackIdentity) -> str:
    """Where `gpuc run` finds the stack's bucket (it may be the data stack's)."""
    return stack_parameter(identity, "bucket")


def alerts_topic_parameter(identity: StackIdentity) -> str:
    """Where a node finds its stack's alert topic (created after the launch template)."""
    return stack_parameter(identity, "alerts-topic")


def replacements_parameter(identity: StackIdentity) -> str:
    """Where the nodes count the replacements the health check asked for, per cause."""
    return stack_parameter(identity, "replacements")


def bundle_folder(identity: StackIdentity) -> str:
    """The boot bundle's folder in the stack's bucket (a bucket may be shared by stacks)."""
    return f"{identity.regional}/{identity.stack}"


def load_balancer_name(identity: StackIdentity, role: str) -> str:
    return bounded_name(f"gpuc-{scoped(identity, role)}")


def target_group_name(identity: StackIdentity, role: str, port: int) -> str:
    """The port is in the name: a new port is a new target group, created before the old one
    is deleted (a fixed name would collide)."""
    return bounded_name(f"gpuc-{scoped(identity, role)}-{port}")


def trail_name(identity: StackIdentity) -> str:
    """CloudTrail: 3-128 of letters, digits, '.', '_' and '-', no two of those adjacent
    (CreateTrail's Name): a cluster name's '--' is folded, and the digest keeps it apart from
    the cluster name it folds into."""
    regional = identity.regional
    if "--" in regional:
        regional = f"{re.sub('-+', '-', regional)}-{digest(regional, length=6)}"
    return f"{NAME_PREFIX}-{regional}-audit"


def schedule_description(component: str, identity: StackIdentity, text: str) -> str:
    """A schedule's description: EventBridge Scheduler schedules carry no tags, so `gpuc sweep`
    knows a stack's schedules by this prefix (the stack id: the cluster name alone may be
    another stack's)."""
    return f"{schedule_description_prefix(component, identity)} {text}"


def schedule_description_prefix(component: str, identity: StackIdentity) -> str:
    return f"{NAME_PREFIX} {component} [{identity.stack_id}]:"


# --- account-wide names -------------------------------------------------------------------


def autoscaling_role_suffix(identity: StackIdentity) -> str:
    """The service-linked role's custom suffix: no '_' (terraform-provider-aws
    DecodeServiceLinkedRoleID splits the role's id on '_' and would read it back as ""),
    within aws_limits.SLR_SUFFIX_MAX characters, and unique per account: it carries the region."""
    return identity.account_wide


def budget_name(identity: StackIdentity) -> str:
    return f"{NAME_PREFIX}-{identity.account_wide}"


def dashboard_name(identity: StackIdentity) -> str:
    """A CloudWatch dashboard's name: "All dashboards in your account are global, not
    region-specific" (PutDashboard), so it carries the account-wide part, and the region for
    whoever reads the console's list; at most 11 + 1 + 29 + 1 + 14 of PutDashboard's 255 of
    A-Za-z0-9-_."""
    return f"{NAME_PREFIX}-{identity.account_wide}-{identity.region}"


# --- global names -------------------------------------------------------------------------


def default_bucket_name(identity: StackIdentity, account_id: str) -> str:
    """A data bucket's name when the stack names none: globally unique and predictable, so
    IAM policies can name it before it exists (at most 5 + 20 + 7 + 13 + 15 = 60 of 63)."""
    middle = (
        identity.cluster
        if identity.is_default
        else (f"{identity.cluster}-{digest(identity.project, identity.stack, length=6)}")
    )
    return f"gpuc-{middle}-{account_id}-{identity.region}"


def bounded_name(text: str, limit: int = 32) -> str:
    """A physical name within an AWS length limit (load balancers and target groups: 32),
    kept unique by a short hash of the whole name when it has to be cut."""
    safe = re.sub(r"[^a-zA-Z0-9-]", "-", text)  # ELB names: letters, digits and hyphens
    if len(safe) <= limit and safe == text:
        return safe
    return f"{safe[: limit - 7].rstrip('-')}-{digest(text, length=6)}"


# --- the table the tests walk -------------------------------------------------------------


# Each namespace AWS keeps names unique in, and the resource input (a row of
# components/aws_limits.LIMITS) whose limits its names must meet.
NAMESPACES: dict[str, tuple[str, str]] = {
    "kms-alias": ("aws:kms/alias:Alias", "name"),
    "log-group": ("aws:cloudwatch/logGroup:LogGroup", "name"),
    # no limit in the Logs model or docs: only uniqueness is checked
    "logs-resource-policy": ("aws:cloudwatch/logResourcePolicy:LogResourcePolicy", "policyName"),
    "ssm-parameter": ("aws:ssm/parameter:Parameter", "name"),
    "load-balancer": ("aws:lb/loadBalancer:LoadBalancer", "name"),
    "web-acl": ("aws:wafv2/webAcl:WebAcl", "name"),
    "target-group": ("aws:lb/targetGroup:TargetGroup", "name"),
    "cloudtrail": ("aws:cloudtrail/trail:Trail", "name"),
    "iam-role": ("aws:iam/serviceLinkedRole:ServiceLinkedRole", "customSuffix"),
    "budget": ("aws:budgets/budget:Budget", "name"),
    "dashboard": ("aws:cloudwatch/dashboard:Dashboard", "dashboardName"),
    "s3-bucket": ("aws:s3/bucket:Bucket", "bucket"),
}


@dataclass(frozen=True)
class NameKind:
    """One kind of name: how it is made, where AWS needs it unique, and its namespace."""

    make: Callable[[StackIdentity], str]
    scope: Scope
    namespace: str  # names of one namespace must differ (e.g. all SSM parameters)

    @property
    def resource_type(self) -> str:
        return NAMESPACES[self.namespace][0]

    @property
    def input_name(self) -> str:
        return NAMESPACES[self.namespace][1]


NAME_KINDS: dict[str, NameKind] = {
    "key alias": NameKind(key_alias, "regional", "kms-alias"),
    "data key alias": NameKind(lambda i: key_alias(i, "data"), "regional", "kms-alias"),
    "flow logs": NameKind(flow_logs_group, "regional", "log-group"),
    "node events": NameKind(node_events_group, "regional", "log-group"),
    "jobs log": NameKind(jobs_log_group, "regional", "log-group"),
    "node log": NameKind(node_log_group, "regional", "log-group"),
    "model metrics": NameKind(lambda i: model_metrics_log_group(i, ""), "regional", "log-group"),
    "node events policy": NameKind(node_events_policy, "regional", "logs-resource-policy"),
    "job": NameKind(lambda i: job_parameter(i, "pretrain"), "regional", "ssm-parameter"),
    "secret": NameKind(lambda i: f"{secrets_path(i)}/HF_TOKEN", "regional", "ssm-parameter"),
    "job bucket": NameKind(job_bucket_parameter, "regional", "ssm-parameter"),
    "alerts topic": NameKind(alerts_topic_parameter, "regional", "ssm-parameter"),
    "replacements": NameKind(
        lambda i: f"{replacements_parameter(i)}/xid-79", "regional", "ssm-parameter"
    ),
    "load balancer": NameKind(lambda i: load_balancer_name(i, ""), "regional", "load-balancer"),
    "web acl": NameKind(web_acl_name, "regional", "web-acl"),
    "waf log": NameKind(waf_log_group, "regional", "log-group"),
    "target group": NameKind(lambda i: target_group_name(i, "", 8000), "regional", "target-group"),
    "audit trail": NameKind(trail_name, "regional", "cloudtrail"),
    "autoscaling role": NameKind(autoscaling_role_suffix, "account", "iam-role"),
    "budget": NameKind(budget_name, "account", "budget"),
    "dashboard": NameKind(dashboard_name, "account", "dashboard"),
    "bucket": NameKind(lambda i: default_bucket_name(i, "123456789012"), "global", "s3-bucket"),
}
