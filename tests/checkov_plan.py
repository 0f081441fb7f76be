"""A plan as the Terraform plan JSON (`terraform show -json`) that Checkov reads, and Checkov run
on it, so Checkov's AWS checks (graph checks included) judge what `pulumi up` would create.

How Checkov reads a plan (checkov/terraform/plan_parser.py, 3.3.30): each
`planned_values.root_module.resources[]` entry's `values` become the resource's attributes (a
nested block is a list of objects, a map such as `tags` an object); where a value is unknown
until apply (absent or null), `configuration.root_module.resources[].expressions.<attr>` supplies
its first `references` entry (`aws_lb.name.arn`) instead, and the graph builder
(checkov/terraform/graph_builder/local_graph.py, _build_edges) connects two resources when one's
attribute holds such a reference. That is how CKV2_AWS_28 finds the web ACL association of a
load balancer.

What comes from where: the engine records, for each input, the resources it depends on
(PlannedResource.property_dependencies, as infra/diff/model.py reads them). A value that is
exactly an output of one of those (the load balancer's `arn`, a bucket's `id`) is a reference;
when that output is computed by AWS (not one of the upstream resource's inputs) it is unknown
at plan time, as in a real Terraform plan. A value composed from outputs (a policy document
holding an ARN) stays the value it plans to.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpu_cluster.infra.plan.engine import Plan, PlannedResource

# Pulumi type token -> Terraform resource type. pulumi-aws's tokens are not a regular transform
# of the Terraform names (aws:lb/loadBalancer is aws_lb, aws:s3/bucket is aws_s3_bucket since
# pulumi-aws 7 renamed BucketV2): the table is pulumi-aws's provider/resources.go, by hand.
TERRAFORM_TYPES: dict[str, str] = {
    "aws:acm/certificate:Certificate": "aws_acm_certificate",
    "aws:acm/certificateValidation:CertificateValidation": "aws_acm_certificate_validation",
    "aws:autoscaling/group:Group": "aws_autoscaling_group",
    "aws:autoscaling/policy:Policy": "aws_autoscaling_policy",
    "aws:budgets/budget:Budget": "aws_budgets_budget",
    "aws:cloudwatch/dashboard:Dashboard": "aws_cloudwatch_dashboard",
    "aws:cloudwatch/eventRule:EventRule": "aws_cloudwatch_event_rule",
    "aws:cloudwatch/eventTarget:EventTarget": "aws_cloudwatch_event_target",
    "aws:cloudwatch/logGroup:LogGroup": "aws_cloudwatch_log_group",
    "aws:cloudwatch/logMetricFilter:LogMetricFilter": "aws_cloudwatch_log_metric_filter",
    "aws:cloudwatch/logResourcePolicy:LogResourcePolicy": "aws_cloudwatch_log_resource_policy",
    "aws:cloudwatch/metricAlarm:MetricAlarm": "aws_cloudwatch_metric_alarm",
    "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup": "aws_default_security_group",
    "aws:ec2/eip:Eip": "aws_eip",
    "aws:ec2/flowLog:FlowLog": "aws_flow_log",
    "aws:ec2/instance:Instance": "aws_instance",
    "aws:ec2/internetGateway:InternetGateway": "aws_internet_gateway",
    "aws:ec2/launchTemplate:LaunchTemplate": "aws_launch_template",
    "aws:ec2/natGateway:NatGateway": "aws_nat_gateway",
    "aws:ec2/placementGroup:PlacementGroup": "aws_placement_group",
    "aws:ec2/routeTable:RouteTable": "aws_route_table",
    "aws:ec2/routeTableAssociation:RouteTableAssociation": "aws_route_table_association",
    "aws:ec2/securityGroup:SecurityGroup": "aws_security_group",
    "aws:ec2/subnet:Subnet": "aws_subnet",
    "aws:ec2/vpc:Vpc": "aws_vpc",
    "aws:ec2/vpcEndpoint:VpcEndpoint": "aws_vpc_endpoint",
    "aws:iam/instanceProfile:InstanceProfile": "aws_iam_instance_profile",
    "aws:iam/role:Role": "aws_iam_role",
    "aws:iam/rolePolicy:RolePolicy": "aws_iam_role_policy",
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": "aws_iam_role_policy_attachment",
    "aws:iam/serviceLinkedRole:ServiceLinkedRole": "aws_iam_service_linked_role",
    "aws:kms/alias:Alias": "aws_kms_alias",
    "aws:kms/key:Key": "aws_kms_key",
    "aws:lb/listener:Listener": "aws_lb_listener",
    "aws:lb/listenerRule:ListenerRule": "aws_lb_listener_rule",
    "aws:lb/loadBalancer:LoadBalancer": "aws_lb",
    "aws:lb/targetGroup:TargetGroup": "aws_lb_target_group",
    "aws:route53/record:Record": "aws_route53_record",
    "aws:s3/bucket:Bucket": "aws_s3_bucket",
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration": (
        "aws_s3_bucket_lifecycle_configuration"
    ),
    "aws:s3/bucketLogging:BucketLogging": "aws_s3_bucket_logging",
    "aws:s3/bucketObjectv2:BucketObjectv2": "aws_s3_object",
    "aws:s3/bucketOwnershipControls:BucketOwnershipControls": "aws_s3_bucket_ownership_controls",
    "aws:s3/bucketPolicy:BucketPolicy": "aws_s3_bucket_policy",
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": "aws_s3_bucket_public_access_block",
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration": (
        "aws_s3_bucket_server_side_encryption_configuration"
    ),
    "aws:s3/bucketVersioning:BucketVersioning": "aws_s3_bucket_versioning",
    "aws:secretsmanager/secret:Secret": "aws_secretsmanager_secret",
    "aws:secretsmanager/secretVersion:SecretVersion": "aws_secretsmanager_secret_version",
    "aws:sns/topic:Topic": "aws_sns_topic",
    "aws:sns/topicPolicy:TopicPolicy": "aws_sns_topic_policy",
    "aws:sns/topicSubscription:TopicSubscription": "aws_sns_topic_subscription",
    "aws:ssm/parameter:Parameter": "aws_ssm_parameter",
    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule": (
        "aws_vpc_security_group_egress_rule"
    ),
    "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule": (
        "aws_vpc_security_group_ingress_rule"
    ),
    "aws:wafv2/webAcl:WebAcl": "aws_wafv2_web_acl",
    "aws:wafv2/webAclAssociation:WebAclAssociation": "aws_wafv2_web_acl_association",
    "aws:wafv2/webAclLoggingConfiguration:WebAclLoggingConfiguration": (
        "aws_wafv2_web_acl_logging_configuration"
    ),
}

# Types a plan holds that are not AWS resources Checkov could judge.
UNMAPPED: dict[str, str] = {
    "pulumi:pulumi:Stack": "the stack itself",
    "pulumi:pulumi:StackReference": "a read of another stack's outputs",
    "pulumi:providers:aws": "a provider",
    "time:index/sleep:Sleep": "a wait, not an AWS resource",
}
COMPONENT_PREFIX = "gpu-cluster:"  # the library's ComponentResources: only their children are AWS

# Where pulumi-aws names a Terraform block in the plural (tfbridge pluralizes a repeated block,
# `default_action` -> defaultActions) or renames it; camelCase -> snake_case does the rest.
BLOCK_NAMES: dict[str, str] = {
    "aliases": "alias",
    "defaultActions": "default_action",
    "excludedRules": "excluded_rule",
    "initialLifecycleHooks": "initial_lifecycle_hook",
    "inlinePolicies": "inline_policy",
    "metricDimensions": "metric_dimension",
    "routes": "route",
    "ruleActionOverrides": "rule_action_override",
    "rules": "rule",
    "vpcZoneIdentifiers": "vpc_zone_identifier",
}
# ... and where the same Pulumi name is a different block for one Terraform type
BLOCK_NAMES_BY_TYPE: dict[tuple[str, str], str] = {
    ("aws_autoscaling_group", "tags"): "tag",
}
MAPS = frozenset({"tags", "tagsAll"})  # Terraform maps: an object, its keys as typed
PROVIDER = "registry.terraform.io/hashicorp/aws"


def snake(name: str) -> str:
    """camelCase -> snake_case, as Terraform spells attributes (sslPolicy -> ssl_policy)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


def attribute(tf_type: str, key: str) -> str:
    """The Terraform attribute or block name of a pulumi-aws input of a `tf_type` resource."""
    return BLOCK_NAMES_BY_TYPE.get((tf_type, key)) or BLOCK_NAMES.get(key) or snake(key)


def addresses(resources: list[PlannedResource]) -> dict[str, str]:
    """urn -> `type.name`, a Terraform address per mapped resource (unique, identifier chars)."""
    taken: set[str] = set()
    found: dict[str, str] = {}
    for resource in resources:
        tf_type = TERRAFORM_TYPES.get(resource.type)
        if tf_type is None:
            continue
        base = f"{tf_type}.{re.sub(r'[^A-Za-z0-9_]', '_', resource.name)}"
        address, n = base, 1
        while address in taken:
            n += 1
            address = f"{base}_{n}"
        taken.add(address)
        found[resource.urn] = address
    return found


@dataclass(frozen=True)
class Upstream:
    """A resource an input depends on: its address, its state, and which outputs it computes."""

    address: str
    state: dict[str, Any]
    inputs: dict[str, Any]

    def output_named(self, value: str) -> str | None:
        """The output holding exactly `value` (arn and id first), or None."""
        keys = sorted(self.state, key=lambda k: (k not in ("arn", "id"), k != "arn", k))
        return next(
            (k for k in keys if k not in MAPS and self.state[k] == value and k != "urn"), None
        )


def _convert(value: Any, tf_type: str, upstream: list[Upstream]) -> tuple[Any, Any]:
    """(planned value, expression): the value as Terraform plans it (None: unknown until
    apply), and its `references` expression (None when it refers to nothing)."""
    if isinstance(value, str):
        for up in upstream:
            output = up.output_named(value)
            if output is not None:
                refs = {"references": [f"{up.address}.{snake(output)}", up.address]}
                return (value if output in up.inputs else None), refs
        return value, None
    if isinstance(value, dict):  # a block: Terraform plans it as a list of one object
        planned, expressions = _block(value, tf_type, dict.fromkeys(value, upstream))
        return [planned], [expressions]
    if isinstance(value, list):
        pairs = [_convert(item, tf_type, upstream) for item in value]
        if value and all(isinstance(item, dict) for item in value):  # repeated blocks
            return [p[0] for p, _ in pairs], [e[0] for _, e in pairs]
        refs = [ref for _, e in pairs if e for ref in e["references"]]
        return [p for p, _ in pairs], ({"references": refs} if refs else None)
    return value, None


def _block(
    inputs: dict[str, Any], tf_type: str, upstream: dict[str, list[Upstream]]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A resource's (or a block's) planned values and configuration expressions, by attribute."""
    values: dict[str, Any] = {}
    expressions: dict[str, Any] = {}
    for key, value in inputs.items():
        name = attribute(tf_type, key)
        if key in MAPS and isinstance(value, dict):  # (an ASG's tags are `tag` blocks)
            values[name] = value
            continue
        planned, expression = _convert(value, tf_type, upstream.get(key, []))
        if planned is not None:
            values[name] = planned
        if refers(expression):
            expressions[name] = expression
    return values, expressions


def refers(expression: Any) -> bool:
    """Whether an expression (or a block's, at any depth) holds a reference."""
    if isinstance(expression, dict):
        return "references" in expression or any(map(refers, expression.values()))
    return isinstance(expression, list) and any(map(refers, expression))


def is_mapped(type_: str) -> bool:
    return type_ in TERRAFORM_TYPES or type_ in UNMAPPED or type_.startswith(COMPONENT_PREFIX)


def terraform_plan(plan: Plan) -> dict[str, Any]:
    """`plan` as `terraform show -json` prints a plan that creates every mapped resource."""
    named = addresses(plan.resources)
    by_urn = {r.urn: r for r in plan.resources}
    planned: list[dict[str, Any]] = []
    configured: list[dict[str, Any]] = []
    changes: list[dict[str, Any]] = []
    for resource in plan.resources:
        address = named.get(resource.urn)
        if address is None or resource.op == "read":
            continue
        tf_type, name = address.split(".", 1)
        upstream = {
            key: [
                Upstream(named[urn], plan.states.get(urn, {}), by_urn[urn].inputs)
                for urn in urns
                if urn in named
            ]
            for key, urns in resource.property_dependencies.items()
        }
        values, expressions = _block(resource.inputs, tf_type, upstream)
        common = {"address": address, "mode": "managed", "type": tf_type, "name": name}
        planned.append({**common, "provider_name": PROVIDER, "schema_version": 0, "values": values})
        configured.append({**common, "provider_config_key": "aws", "expressions": expressions})
        changes.append(
            {
                **common,
                "provider_name": PROVIDER,
                "change": {"actions": ["create"], "before": None, "after": values},
            }
        )
    region = plan.config.get("aws:region", "us-east-1")
    return {
        "format_version": "1.2",
        "terraform_version": "1.9.0",
        "planned_values": {"root_module": {"resources": planned}},
        "resource_changes": changes,
        "configuration": {
            "provider_config": {
                "aws": {
                    "name": "aws",
                    "full_name": PROVIDER,
                    "expressions": {"region": {"constant_value": region}},
                }
            },
            "root_module": {"resources": configured},
        },
    }


# Checkov, offline: no platform download (--skip-download, BC_SKIP_MAPPING) and no PyPI
# version check (CKV_SKIP_PACKAGE_UPDATE_CHECK): checkov/main.py, checkov/common/util/
# env_vars_config.py (3.3.30).
OFFLINE_ENV = {"BC_SKIP_MAPPING": "TRUE", "CKV_SKIP_PACKAGE_UPDATE_CHECK": "true"}
# every check's passes and failures as JSON (--quiet would drop the passes); exit 0 either way
CHECKOV_ARGS = ("--framework", "terraform_plan", "--skip-download", "-o", "json", "--soft-fail")
CHECKOV_VENV = ".venv-checkov"  # README's test command installs it there (tests/checkov.txt)


def checkov_command(root: Path, environ: Mapping[str, str] = os.environ) -> str | None:
    """The checkov executable: $CHECKOV, the checkout's own venv, or one on PATH."""
    for candidate in (environ.get("CHECKOV"), str(root / CHECKOV_VENV / "bin" / "checkov")):
        if candidate and Path(candidate).is_file():
            return candidate
    return shutil.which("checkov", path=environ.get("PATH", ""))


def require_checkov(root: Path, environ: Mapping[str, str] = os.environ) -> str:
    """The checkov executable; without one the test fails under CI (CI=true) and skips
    elsewhere, so CI never passes by leaving Checkov out."""
    command = checkov_command(root, environ)
    if command is not None:
        return command
    reason = f"checkov is not installed: README's test command puts it in {CHECKOV_VENV}"
    if environ.get("CI") == "true":
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def run_checkov(
    command: str, plans: dict[str, dict[str, Any]], folder: Path, checks: tuple[str, ...] = ()
) -> dict[str, dict[str, dict[str, str]]]:
    """{plan name: {check id: {resource address: PASSED or FAILED}}}, every check (or `checks`)
    on every plan in one Checkov run (its start-up is most of its time)."""
    files = []
    for name, document in plans.items():
        path = folder / f"{name}.json"
        path.write_text(json.dumps(document))
        files += ["-f", str(path)]
    completed = subprocess.run(
        [command, *CHECKOV_ARGS, *files, *(["--check", ",".join(checks)] if checks else [])],
        capture_output=True,
        text=True,
        env={**os.environ, **OFFLINE_ENV},
        check=False,
        timeout=600,
    )
    if completed.returncode != 0:
        raise RuntimeError(f"checkov failed ({completed.returncode}): {completed.stderr[-2000:]}")
    report = json.loads(completed.stdout)
    reports = report if isinstance(report, list) else [report]
    return results_by_plan(reports, set(plans))


def results_by_plan(
    reports: list[dict[str, Any]], names: set[str]
) -> dict[str, dict[str, dict[str, str]]]:
    """Per plan file, each check's resources and their outcome: {plan: {check: {address: ...}}}."""
    found: dict[str, dict[str, dict[str, str]]] = {name: {} for name in names}
    for report in reports:
        results = report.get("results", {})
        for outcome, key in (("PASSED", "passed_checks"), ("FAILED", "failed_checks")):
            for result in results.get(key, []):
                plan = Path(result["file_path"]).stem
                checks = found.setdefault(plan, {})
                checks.setdefault(result["check_id"], {})[result["resource"]] = outcome
    return found
