"""Limits AWS enforces on what the program sends, each with the document it comes from.

Written once here (the lowest room): the plan engine's mocks refuse every input over its limit,
for every stack and every test, as the API would refuse it at create time. A limit found later
goes into this table, never into a one-off check."""

from __future__ import annotations

import base64
import binascii
import gzip
import json
import re
from dataclasses import dataclass, replace

from gpu_cluster.components import waf_limits

# EC2 User Guide, "Work with instance user data": "User data is limited to 16 KB, in raw form,
# before it is base64-encoded." CreateLaunchTemplate/RunInstances refuse more.
USER_DATA_MAX_BYTES = 16384
# What this project allows itself, so a later step added to the boot still fits: 2 KiB under
# the limit (12 KiB until the training jobs' supervisor took 1.5 KiB of it).
USER_DATA_BUDGET_BYTES = 14 * 1024
GZIP_MAGIC = b"\x1f\x8b"
# "AWSServiceRoleForAutoScaling_" + a custom suffix within IAM's 64 characters of a role name
SLR_SUFFIX_MAX = 64 - len("AWSServiceRoleForAutoScaling_")
USER_DATA_SOURCE = "EC2 User Guide, 'Work with instance user data': 16 KB in raw form"
USER_DATA_FIX = (
    "turn off a feature the stack does not need (fsx, secrets, spot), or report it: "
    "gpu-cluster keeps every stack inside AWS's limits"
)
NAME_FIX = "a shorter clusterName: pulumi config set clusterName <2-20 characters>"
REPORT_FIX = "report it: gpu-cluster builds this value and must keep it inside AWS's limits"
TAG_FIX = "fewer or shorter tags, none beginning with aws: (pulumi config set --path tags.KEY ...)"


@dataclass(frozen=True, slots=True)
class Limit:
    """One AWS limit on one input of one resource type: a size, and the characters allowed."""

    resource_type: str
    input_name: str
    maximum: int
    unit: str
    source: str
    minimum: int = 0
    pattern: str = ""  # a regular expression the whole value must match ("" = any)
    allowed: str = ""  # the pattern in words, for the message
    fix: str = ""  # what a user can do ("" = REPORT_FIX: the program itself went over)


DASHBOARD = "aws:cloudwatch/dashboard:Dashboard"
METRIC_FILTER_SOURCE = "CloudWatch Logs API Reference, PutMetricFilter"
SG_TEXT = r"[a-zA-Z0-9. _\-:/()#,@\[\]+=&;{}!$*]*"
SG_TEXT_WORDS = "a-z, A-Z, 0-9, spaces and ._-:/()#,@[]+=&;{}!$*"
IAM_NAME, IAM_NAME_WORDS = r"[\w+=,.@-]+", "letters, digits and +=,.@_-"

LIMITS: tuple[Limit, ...] = (
    Limit(
        "aws:ec2/launchTemplate:LaunchTemplate",
        "userData",
        USER_DATA_MAX_BYTES,
        "bytes of user data before base64",
        USER_DATA_SOURCE,
        fix=USER_DATA_FIX,
    ),
    Limit(
        "aws:ec2/instance:Instance",
        "userDataBase64",
        USER_DATA_MAX_BYTES,
        "bytes of user data before base64",
        USER_DATA_SOURCE,
        fix=USER_DATA_FIX,
    ),
    Limit(
        "aws:ec2/instance:Instance",
        "userData",
        USER_DATA_MAX_BYTES,
        "bytes of user data",
        USER_DATA_SOURCE,
        fix=USER_DATA_FIX,
    ),
    Limit(
        "aws:ec2/launchTemplate:LaunchTemplate",
        "name",
        128,
        "characters",
        "EC2 API Reference, CreateLaunchTemplate: LaunchTemplateName, 3-128 characters",
        minimum=3,
        pattern=r"[a-zA-Z0-9().\-/_]+",
        allowed="letters, digits and ()./-_",
    ),
    Limit(
        "aws:ec2/securityGroup:SecurityGroup",
        "description",
        255,
        "characters",
        "EC2 API Reference, CreateSecurityGroup: GroupDescription, 255 characters of "
        + SG_TEXT_WORDS,
        pattern=SG_TEXT,
        allowed=SG_TEXT_WORDS,
    ),
    Limit(
        "aws:ec2/securityGroup:SecurityGroup",
        "name",
        255,
        "characters",
        "EC2 API Reference, CreateSecurityGroup: GroupName, 255 characters",
    ),
    *(
        Limit(
            rule,
            "description",
            255,
            "characters",
            "EC2 API Reference, IpRange/SecurityGroupRule: Description, 255 characters of "
            + SG_TEXT_WORDS,
            pattern=SG_TEXT,
            allowed=SG_TEXT_WORDS,
        )
        for rule in (
            "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
            "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        )
    ),
    Limit(
        "aws:iam/role:Role",
        "name",
        64,
        "characters",
        "IAM API Reference, CreateRole: RoleName, 1-64 characters",
        minimum=1,
        pattern=IAM_NAME,
        allowed=IAM_NAME_WORDS,
    ),
    Limit(
        "aws:iam/role:Role",
        "description",
        1000,
        "characters",
        "IAM API Reference, CreateRole: Description, 1000 characters",
    ),
    Limit(
        "aws:iam/instanceProfile:InstanceProfile",
        "name",
        128,
        "characters",
        "IAM API Reference, CreateInstanceProfile: InstanceProfileName, 1-128 characters",
        minimum=1,
        pattern=IAM_NAME,
        allowed=IAM_NAME_WORDS,
    ),
    Limit(
        "aws:iam/rolePolicy:RolePolicy",
        "policy",
        10240,
        "characters without whitespace",
        "IAM User Guide, 'IAM and AWS STS quotas': inline role policies, 10,240 characters",
    ),
    Limit(
        "aws:kms/key:Key",
        "policy",
        32768,
        "bytes",
        "KMS Developer Guide, 'Quotas': key policy document size, 32 KB",
    ),
    Limit(
        "aws:kms/key:Key",
        "description",
        8192,
        "characters",
        "KMS API Reference, CreateKey: Description, 0-8192 characters",
    ),
    Limit(
        "aws:kms/alias:Alias",
        "name",
        256,
        "characters",
        "KMS API Reference, CreateAlias: AliasName, 1-256 characters, alias/ then "
        "letters, digits and /_- (alias/aws/ is reserved)",
        minimum=7,
        pattern=r"alias/(?!aws/)[a-zA-Z0-9/_-]+",
        allowed="alias/ then letters, digits and /_- (not alias/aws/)",
    ),
    Limit(
        "aws:s3/bucket:Bucket",
        "bucket",
        63,
        "characters",
        "S3 User Guide, 'General purpose bucket naming rules': 3-63 characters, lowercase "
        "letters, digits, dots and hyphens, beginning and ending with a letter or digit",
        minimum=3,
        pattern=r"[a-z0-9][a-z0-9.-]*[a-z0-9]",
        allowed="lowercase letters, digits, . and -, a letter or digit at each end",
    ),
    Limit(
        "aws:s3/bucketPolicy:BucketPolicy",
        "policy",
        20480,
        "bytes",
        "S3 User Guide, 'Bucket policies': a bucket policy is limited to 20 KB",
    ),
    Limit(
        "aws:sns/topicPolicy:TopicPolicy",
        "policy",
        30720,
        "bytes",
        "SNS API Reference, SetTopicAttributes: Policy, at most 30 KB",
    ),
    *(
        Limit(
            kind,
            "name",
            32,
            "characters",
            f"ELB API Reference, {api}: Name, 32 characters of letters, digits and hyphens, "
            "not beginning or ending with a hyphen",
            minimum=1,
            pattern=r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?",
            allowed="letters, digits and hyphens, no hyphen at either end",
        )
        for kind, api in (
            ("aws:lb/loadBalancer:LoadBalancer", "CreateLoadBalancer"),
            ("aws:lb/targetGroup:TargetGroup", "CreateTargetGroup"),
        )
    ),
    Limit(
        waf_limits.WEB_ACL,
        "name",
        128,
        "characters",
        "WAF API Reference, CreateWebACL: Name, 1-128 characters of ^[\\w\\-]+$ (the rules, "
        "their capacity and the logging destination: components/waf_limits.py)",
        minimum=1,
        pattern=r"[\w-]+",
        allowed="letters, digits, _ and -",
    ),
    Limit(
        waf_limits.WEB_ACL,
        "description",
        256,
        "characters",
        "WAF API Reference, CreateWebACL: Description, 1-256 characters of letters, digits, "
        "spaces and +=:#@/-,. (not beginning or ending with a space)",
        minimum=1,
        pattern=r"[\w+=:#@/\-,.][\w+=:#@/\-,.\s]+[\w+=:#@/\-,.]",
        allowed="letters, digits, spaces and +=:#@/-,. (no space at either end)",
    ),
    Limit(
        "aws:autoscaling/group:Group",
        "name",
        255,
        "characters",
        "Auto Scaling API Reference, CreateAutoScalingGroup: AutoScalingGroupName, 1-255",
        minimum=1,
    ),
    Limit(
        "aws:cloudwatch/metricAlarm:MetricAlarm",
        "name",
        255,
        "characters",
        "CloudWatch API Reference, PutMetricAlarm: AlarmName, 1-255 characters",
        minimum=1,
    ),
    Limit(
        DASHBOARD,
        "dashboardName",
        255,
        "characters",
        "CloudWatch API Reference, PutDashboard: DashboardName, at most 255 characters of "
        "A-Z, a-z, 0-9, - and _ (terraform-provider-aws cloudwatch/validate.go "
        "validDashboardName: 1-255)",
        minimum=1,
        pattern=r"[A-Za-z0-9_-]+",
        allowed="letters, digits, - and _",
    ),
    Limit(
        "aws:cloudwatch/logGroup:LogGroup",
        "name",
        512,
        "characters",
        "CloudWatch Logs API Reference, CreateLogGroup: logGroupName, 1-512 characters of "
        "letters, digits and ._-/#",
        minimum=1,
        pattern=r"[.\-_/#A-Za-z0-9]+",
        allowed="letters, digits and ._-/#",
    ),
    Limit(
        "aws:cloudwatch/eventRule:EventRule",
        "name",
        64,
        "characters",
        "EventBridge API Reference, PutRule: Name, 1-64 characters of letters, digits and .-_",
        minimum=1,
        pattern=r"[.\-_A-Za-z0-9]+",
        allowed="letters, digits and .-_",
    ),
    Limit(
        "aws:cloudwatch/eventRule:EventRule",
        "description",
        512,
        "characters",
        "EventBridge API Reference, PutRule: Description, 512 characters",
    ),
    Limit(
        "aws:scheduler/schedule:Schedule",
        "name",
        64,
        "characters",
        "EventBridge Scheduler API Reference, CreateSchedule: Name, 1-64 characters of "
        "letters, digits and -_.",
        minimum=1,
        pattern=r"[0-9a-zA-Z\-_.]+",
        allowed="letters, digits and -_.",
    ),
    Limit(
        "aws:budgets/budget:Budget",
        "name",
        100,
        "characters",
        "Budgets API Reference, Budget: BudgetName, 1-100 characters, no ':' or '\\'",
        minimum=1,
        pattern=r"[^:\\]+",
        allowed="any characters but : and \\",
    ),
    Limit(
        "aws:ssm/parameter:Parameter",
        "value",
        4096,
        "characters",
        "Systems Manager User Guide, 'Parameter tiers': a standard parameter value is up to 4 KB",
    ),
    Limit(
        "aws:ssm/parameter:Parameter",
        "name",
        2048,
        "characters",
        "Systems Manager API Reference, PutParameter: Name, 1-2048 characters, but 'the maximum "
        "length for a parameter name, including the full length of the parameter ARN, is 1011 "
        "characters' (arn:aws-us-gov:ssm:<region>:<account>:parameter takes up to 58 of them); "
        "'a-zA-Z0-9_.-' and '/' for a hierarchy",
        minimum=1,
        pattern=r"/?[a-zA-Z0-9_.\-/]+",
        allowed="a-z, A-Z, 0-9, _.- and / between the hierarchy's levels",
    ),
    Limit(
        "aws:iam/serviceLinkedRole:ServiceLinkedRole",
        "customSuffix",
        SLR_SUFFIX_MAX,
        "characters",
        "IAM API Reference, CreateServiceLinkedRole: CustomSuffix [\\w+=,.@-]+; the role name "
        "AWSServiceRoleForAutoScaling_<suffix> is at most 64 ('IAM and AWS STS quotas'); "
        "terraform-provider-aws iam/service_linked_role.go DecodeServiceLinkedRoleID splits the "
        "role name on '_' and reads a suffix with one back as '' (a replacement every update)",
        minimum=1,
        pattern=r"[a-zA-Z0-9+=,.@-]+",
        allowed="letters, digits and +=,.@- (no _)",
    ),
    Limit(
        "aws:cloudwatch/logMetricFilter:LogMetricFilter",
        "name",
        512,
        "characters",
        METRIC_FILTER_SOURCE + ": filterName, 1-512 characters, no ':' or '*'",
        minimum=1,
        pattern=r"[^:*]*",
        allowed="any characters but : and *",
    ),
    Limit(
        "aws:cloudwatch/logMetricFilter:LogMetricFilter",
        "pattern",
        1024,
        "characters",
        METRIC_FILTER_SOURCE + ": filterPattern, at most 1024 characters "
        "(terraform-provider-aws logs/metric_filter.go: StringUTF8LenBetween(0, 1024))",
    ),
    Limit(
        "aws:cloudtrail/trail:Trail",
        "name",
        128,
        "characters",
        "CloudTrail API Reference, CreateTrail: Name, 3-128 characters, letters, digits, '.', "
        "'_' and '-', starting and ending with a letter or digit, no two of '._-' adjacent",
        minimum=3,
        pattern=r"[a-zA-Z0-9](?:[._-]?[a-zA-Z0-9])*",
        allowed="letters, digits and single ._- between them",
    ),
)
# Amazon VPC User Guide, "Amazon VPC quotas" (security groups): 60 inbound rules per security
# group by default (adjustable), and "when you reference a managed prefix list in a security group
# rule, the maximum number of entries for the prefix list counts as the same number of rules".
# AuthorizeSecurityGroupIngress beyond it fails with RulesPerSecurityGroupLimitExceeded. Not an
# input's size, so not a row of LIMITS: the plan engine's mocks count each group's inbound rules
# (infra/plan/mocks.py) and the config check counts what inference.access asks for.
SECURITY_GROUP_INBOUND_RULES = 60
SECURITY_GROUP_RULES_SOURCE = (
    "Amazon VPC User Guide, 'Amazon VPC quotas': 60 inbound rules per security group (default); "
    "a referenced prefix list counts as its maximum entries"
)


def inbound_rules_violation(group: str, rules: int) -> Violation | None:
    """A security group's inbound rules over the default quota (a prefix list counted as one
    rule here: its maximum entries are known only to AWS)."""
    if rules <= SECURITY_GROUP_INBOUND_RULES:
        return None
    return Violation(
        f"inbound rules of {group}",
        rules,
        SECURITY_GROUP_INBOUND_RULES,
        "rules",
        SECURITY_GROUP_RULES_SOURCE,
        fix="fewer rules: put the CIDRs in a managed prefix list (inference.access.prefixLists), "
        "or ask for a higher 'Inbound or outbound rules per security group' quota",
    )


# EC2 User Guide, 'Tag your Amazon EC2 resources' (tag restrictions, the same in every service
# this project tags): 50 tags per resource, keys 1-128 and values 0-256 characters, and keys
# beginning with aws: are reserved for AWS.
MAX_TAGS, MAX_TAG_KEY, MAX_TAG_VALUE = 50, 128, 256
TAG_SOURCE = "EC2 User Guide, 'Tag your Amazon EC2 resources': tag restrictions"


def raw_user_data(value: str, base64_encoded: bool) -> bytes:
    """The bytes EC2 counts: the decoded payload (gzip stays compressed: cloud-init inflates it)."""
    if not base64_encoded:
        return value.encode()
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return value.encode()


def user_data_text(encoded: str) -> str:
    """The script a node runs, from a template's base64 user data (gzip or not)."""
    raw = raw_user_data(encoded, base64_encoded=True)
    if raw.startswith(GZIP_MAGIC):
        raw = gzip.decompress(raw)
    return raw.decode()


def measured(limit: Limit, value: str) -> int:
    """The size AWS would measure for ``value`` under ``limit``."""
    if limit.input_name.startswith("userData"):
        encoded = limit.input_name == "userDataBase64" or limit.resource_type.endswith(
            "LaunchTemplate"
        )
        return len(raw_user_data(value, base64_encoded=encoded))
    if limit.unit == "bytes":
        return len(value.encode())
    if "without whitespace" in limit.unit:
        return len(re.sub(r"\s", "", value))
    return len(value)


@dataclass(frozen=True, slots=True)
class Violation:
    """An input over its limit (or outside its characters): what AWS would measure, and why."""

    input_name: str
    size: int
    maximum: int
    unit: str
    source: str
    why: str = ""  # set when the characters, the minimum or a reserved prefix are the problem
    fix: str = REPORT_FIX

    def message(self) -> str:
        if self.why:
            return f"{self.input_name}: {self.why} ({self.source})"
        return (
            f"{self.input_name} is {self.size:,} {self.unit}; AWS allows at most "
            f"{self.maximum:,} ({self.source})"
        )


def check(limit: Limit, value: str) -> Violation | None:
    """``value`` against one limit."""
    size = measured(limit, value)
    fix = limit.fix or (NAME_FIX if limit.input_name in ("name", "bucket") else REPORT_FIX)
    found = Violation(limit.input_name, size, limit.maximum, limit.unit, limit.source, fix=fix)
    if size > limit.maximum:
        return found
    if size < limit.minimum:
        return replace(found, why=f"{size} {limit.unit}; AWS needs at least {limit.minimum}")
    if limit.pattern and not re.fullmatch(limit.pattern, value):
        why = f"{value!r} has characters AWS refuses; allowed: {limit.allowed}"
        return replace(found, why=why)
    return None


def tag_pairs(tags: object) -> list[tuple[str, str]]:
    """Tags as (key, value) pairs, from a map or an Auto Scaling group's list of {key, value}."""
    if isinstance(tags, dict):
        return [(str(k), str(v)) for k, v in tags.items()]
    if isinstance(tags, list):
        return [
            (str(t.get("key", "")), str(t.get("value", ""))) for t in tags if isinstance(t, dict)
        ]
    return []


def tag_violations(tags: object) -> list[Violation]:
    def over(path: str, size: int, maximum: int, unit: str, why: str = "") -> Violation:
        return Violation(path, size, maximum, unit, TAG_SOURCE, why, TAG_FIX)

    pairs = tag_pairs(tags)
    found = [over("tags", len(pairs), MAX_TAGS, "tags")] if len(pairs) > MAX_TAGS else []
    for key, value in pairs:
        if not 1 <= len(key) <= MAX_TAG_KEY:
            found.append(over(f"tags key {key!r}", len(key), MAX_TAG_KEY, "chars"))
        if len(value) > MAX_TAG_VALUE:
            found.append(over(f"tags.{key}", len(value), MAX_TAG_VALUE, "chars"))
        if key.lower().startswith("aws:"):
            why = "keys beginning with aws: are reserved for AWS"
            found.append(over(f"tags.{key}", len(key), MAX_TAG_KEY, "chars", why))
    return found


def violations(resource_type: str, inputs: dict) -> list[Violation]:
    """Every limit ``inputs`` break (values that are not known strings are not judged)."""
    found = []
    for limit in LIMITS:
        value = inputs.get(limit.input_name)
        if limit.resource_type != resource_type or not isinstance(value, str):
            continue
        if (violation := check(limit, value)) is not None:
            found.append(violation)
    found += [
        Violation(f.input_name, f.size, f.maximum, f.unit, f.source, f.why)
        for f in waf_limits.findings(resource_type, inputs)
    ]
    return (
        found
        + tag_violations(inputs.get("tags"))
        + healthy_percentage_violations(resource_type, inputs)
        + metric_filter_violations(resource_type, inputs)
        + dashboard_violations(resource_type, inputs)
    )


# Auto Scaling API Reference, InstanceMaintenancePolicy and RefreshPreferences:
# MinHealthyPercentage 0-100, MaxHealthyPercentage 100-200, both given, and "the difference
# between them cannot be greater than 100" (CreateAutoScalingGroup, UpdateAutoScalingGroup and
# StartInstanceRefresh refuse the pair otherwise). Two inputs together, so not a row of LIMITS:
# violations() checks the group's maintenance policy and its instance refresh's preferences.
HEALTHY_PERCENT_SOURCE = (
    "Auto Scaling API Reference, InstanceMaintenancePolicy/RefreshPreferences: minimum 0-100, "
    "maximum 100-200, at most 100 apart"
)


def healthy_percentage_violations(resource_type: str, inputs: dict) -> list[Violation]:
    """A group's minimum and maximum healthy percentages AWS would refuse."""
    if resource_type != "aws:autoscaling/group:Group":
        return []
    refresh = inputs.get("instanceRefresh")
    pairs = {
        "instanceMaintenancePolicy": inputs.get("instanceMaintenancePolicy"),
        "instanceRefresh.preferences": (
            refresh.get("preferences") if isinstance(refresh, dict) else None
        ),
    }
    found = []
    for path, pair in pairs.items():
        if not isinstance(pair, dict):
            continue
        low, high = pair.get("minHealthyPercentage"), pair.get("maxHealthyPercentage")
        if not isinstance(low, int | float) or not isinstance(high, int | float):
            continue
        why = ""
        if not 0 <= low <= 100:
            why = f"minHealthyPercentage {low:g} is outside 0-100"
        elif not 100 <= high <= 200:
            why = f"maxHealthyPercentage {high:g} is outside 100-200"
        elif high - low > 100:
            why = f"maxHealthyPercentage {high:g} is more than 100 above the minimum {low:g}"
        if why:
            found.append(
                Violation(path, int(high - low), 100, "points", HEALTHY_PERCENT_SOURCE, why)
            )
    return found


# PutMetricFilter's MetricTransformation: metricName and metricNamespace at most 255 characters
# without ':', '*' or '$', metricValue at most 100; "One metric filter can include as many as
# three dimensions", and dimensions only with JSON or space-delimited patterns (CloudWatch Logs
# User Guide, "Filter pattern syntax for metric filters": "You can specify dimensions only for
# metric filters that use JSON or space-delimited patterns"). Nested inputs, so not LIMITS rows.
METRIC_NAME_MAX, METRIC_VALUE_MAX, METRIC_FILTER_DIMENSIONS = 255, 100, 3
METRIC_NAME_TEXT = r"[^:*$]*"


def metric_filter_violations(resource_type: str, inputs: dict) -> list[Violation]:
    """A log metric filter's transformation AWS would refuse."""
    transformation = inputs.get("metricTransformation")
    if resource_type != "aws:cloudwatch/logMetricFilter:LogMetricFilter" or not isinstance(
        transformation, dict
    ):
        return []
    found = []

    def refuse(field: str, size: int, maximum: int, unit: str, why: str = "") -> None:
        path = f"metricTransformation.{field}"
        found.append(Violation(path, size, maximum, unit, METRIC_FILTER_SOURCE, why))

    for field in ("name", "namespace"):
        value = transformation.get(field)
        if not isinstance(value, str):
            continue
        if len(value) > METRIC_NAME_MAX:
            refuse(field, len(value), METRIC_NAME_MAX, "characters")
        elif not re.fullmatch(METRIC_NAME_TEXT, value):
            refuse(field, len(value), METRIC_NAME_MAX, "characters", f"{value!r} has : * or $")
    value = transformation.get("value")
    if isinstance(value, str) and len(value) > METRIC_VALUE_MAX:
        refuse("value", len(value), METRIC_VALUE_MAX, "characters")
    dimensions = transformation.get("dimensions") or {}
    if isinstance(dimensions, dict) and dimensions:
        if len(dimensions) > METRIC_FILTER_DIMENSIONS:
            refuse("dimensions", len(dimensions), METRIC_FILTER_DIMENSIONS, "dimensions")
        if not str(inputs.get("pattern", "")).strip().startswith(("{", "[")):
            why = "dimensions need a JSON ({...}) or space-delimited ([...]) filter pattern"
            refuse("dimensions", len(dimensions), METRIC_FILTER_DIMENSIONS, "dimensions", why)
    return found


# A dashboard body's structure, which no size alone bounds (PutDashboard's API reference and
# botocore's model give DashboardBody no length; AWS documents these instead):
# - "Dashboard Body Structure and Syntax": a JSON object with a widgets array of 0-500 widgets;
#   a widget's x is 0-23, its width 1-24 and its height 1-1000 grid units;
# - "CloudWatch service quotas", Dashboards: up to 500 metrics per widget and 2,500 per
#   dashboard, "including all metrics retrieved for use in metric math functions" (each entry
#   of a widget's metrics array counted once: a query's own series are capped at 500 by
#   Metrics Insights);
# - "Metrics Insights quotas": a GetMetricData (a widget's graph) holds one Metrics Insights
#   query; GetMetricData's MetricDataQuery.Expression is 1-2,048 characters (botocore).
# PutDashboard refuses an invalid body with InvalidParameterInput ("Some part of the dashboard
# data is invalid"); terraform-provider-aws checks dashboard_body with StringIsJSON first.
DASHBOARD_WIDGETS, DASHBOARD_WIDGET_METRICS, DASHBOARD_METRICS = 500, 500, 2500
DASHBOARD_EXPRESSION_CHARS = 2048
DASHBOARD_SOURCE = (
    "CloudWatch 'Dashboard Body Structure and Syntax' (0-500 widgets, x 0-23, width 1-24, "
    "height 1-1000), 'CloudWatch service quotas' (500 metrics per widget, 2,500 per "
    "dashboard), 'Metrics Insights quotas' (one query per widget) and GetMetricData "
    "(expressions of at most 2,048 characters)"
)


def is_insights_query(expression: str) -> bool:
    return expression.lstrip().upper().startswith("SELECT ")


Problem = tuple[str, int, int, str, str]  # what, size, maximum, unit, why


def widget_problems(index: int, widget: object) -> list[Problem]:
    """What AWS would refuse in one widget: its place on the grid and its metrics."""
    if not isinstance(widget, dict):
        return [(f"widgets[{index}]", 0, 0, "", "a widget must be a JSON object")]
    found = []
    for key, low, high in (("x", 0, 23), ("width", 1, 24), ("height", 1, 1000)):
        value = widget.get(key)
        if value is not None and not (isinstance(value, int) and low <= value <= high):
            why = f"{value!r} is not {low}-{high}"
            found.append((f"widgets[{index}].{key}", 0, high, "grid units", why))
    props = widget.get("properties")
    metrics = props.get("metrics", []) if isinstance(props, dict) else []
    if not isinstance(metrics, list):
        return [*found, (f"widgets[{index}].properties.metrics", 0, 0, "", "not an array")]
    if len(metrics) > DASHBOARD_WIDGET_METRICS:
        size, most = len(metrics), DASHBOARD_WIDGET_METRICS
        found.append((f"widgets[{index}] metrics", size, most, "metrics", ""))
    options = [o for m in metrics if isinstance(m, list) for o in m if isinstance(o, dict)]
    expressions = [str(o["expression"]) for o in options if "expression" in o]
    for expression in expressions:
        if len(expression) > DASHBOARD_EXPRESSION_CHARS:
            what = f"widgets[{index}] expression"
            found.append((what, len(expression), DASHBOARD_EXPRESSION_CHARS, "characters", ""))
    if (queries := sum(map(is_insights_query, expressions))) > 1:
        why = f"{queries} Metrics Insights queries; a widget holds one"
        found.append((f"widgets[{index}] queries", queries, 1, "queries", why))
    return found


def dashboard_violations(resource_type: str, inputs: dict) -> list[Violation]:
    """A dashboard body AWS would refuse: not a JSON object with a widgets array, or over the
    documented counts (a body that is not yet known is not judged)."""
    body = inputs.get("dashboardBody")
    if resource_type != DASHBOARD or not isinstance(body, str):
        return []

    def refused(what: str, size: int, maximum: int, unit: str, why: str = "") -> Violation:
        what = f"dashboardBody {what}".rstrip()
        return Violation(what, size, maximum, unit, DASHBOARD_SOURCE, why)

    try:
        document = json.loads(body)
    except ValueError as error:
        return [refused("", 0, 0, "", f"not JSON ({error})")]
    widgets = document.get("widgets") if isinstance(document, dict) else None
    if not isinstance(widgets, list):
        return [refused("", 0, 0, "", "a dashboard body is a JSON object with a widgets array")]
    found = []
    if len(widgets) > DASHBOARD_WIDGETS:
        found.append(refused("widgets", len(widgets), DASHBOARD_WIDGETS, "widgets"))
    metrics = 0
    for index, widget in enumerate(widgets):
        found += [refused(*problem) for problem in widget_problems(index, widget)]
        props = widget.get("properties") if isinstance(widget, dict) else None
        entries = props.get("metrics") if isinstance(props, dict) else None
        metrics += len(entries) if isinstance(entries, list) else 0
    if metrics > DASHBOARD_METRICS:
        found.append(refused("metrics", metrics, DASHBOARD_METRICS, "metrics"))
    return found
