"""What the engine and the provider do on a later `pulumi up` that the mock engine does not: each
rule a registration must follow so that a replacement applies and a no-op `up` stays a no-op.
The plan engine checks every registration against them (engine.py), so `gpuc plan`, `gpuc diff`
and every test see a program that breaks one.

Sources: pulumi/pulumi pkg/resource/deploy/step_generator.go (create-first replacement unless
deleteBeforeReplace; processIgnoreChanges), terraform-provider-aws internal/service/ec2
(ec2_instance.go: flattenInstanceLaunchTemplate, resourceInstanceUpdate ending with a Read, the
CustomizeDiff ForceNew on launch_template.0.version; vpc_subnet.go; vpc_nat_gateway.go),
internal/service/autoscaling/group.go (waitGroupCapacitySatisfied, wait_for_capacity_timeout)
and the EC2 API errors named below."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from gpu_cluster.infra.errors import ConfigError, Problem


class Registration(Protocol):
    """What the rules read of a registration (the engine's PlannedResource), so this module
    needs nothing of the engine that checks against it."""

    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def custom(self) -> bool: ...
    @property
    def inputs(self) -> dict[str, Any]: ...
    @property
    def ignore_changes(self) -> tuple[str, ...]: ...
    @property
    def replacement_trigger(self) -> Any: ...
    @property
    def delete_before_replace(self) -> bool: ...
    @property
    def replace_on_changes(self) -> tuple[str, ...]: ...


TEMPLATE_ALIASES = ("$Default", "$Latest")


@dataclass(frozen=True)
class UpdateRule:
    type: str
    applies: Callable[[Registration], bool]  # the registration breaks the rule
    problem: str
    source: str


def _alias_version_not_ignored(r: Registration) -> bool:
    template = r.inputs.get("launchTemplate") or {}
    ignored = {"launchTemplate", "launchTemplate.version"} & set(r.ignore_changes)
    return template.get("version") in TEMPLATE_ALIASES and not ignored


def _create_first(r: Registration) -> bool:
    return not r.delete_before_replace


def _private_dns_endpoint_create_first(r: Registration) -> bool:
    return bool(r.inputs.get("privateDnsEnabled")) and not r.delete_before_replace


def _waits_for_capacity(r: Registration) -> bool:
    """A group may wait only as the serving group does (components/serving_group.py): for its
    minimum of healthy targets on create (min_elb_capacity, so a create-first replacement
    serves before the old group drains), with failed launches retried, not fatal."""
    if r.inputs.get("waitForCapacityTimeout") == "0":
        return False
    serving = bool(r.inputs.get("minElbCapacity")) and bool(
        r.inputs.get("ignoreFailedScalingActivities")
    )
    return not serving


def _waits_for_exact_elb_capacity(r: Registration) -> bool:
    return bool(r.inputs.get("waitForElbCapacity"))


def _rolls_back_to_an_alias(r: Registration) -> bool:
    refresh = r.inputs.get("instanceRefresh") or {}
    if not (refresh.get("preferences") or {}).get("autoRollback"):
        return False
    spec = (
        ((r.inputs.get("mixedInstancesPolicy") or {}).get("launchTemplate") or {}).get(
            "launchTemplateSpecification"
        )
        or r.inputs.get("launchTemplate")
        or {}
    )
    return spec.get("version") in TEMPLATE_ALIASES


def _replaced_for_its_type(r: Registration) -> bool:
    trigger = r.replacement_trigger
    type_ = r.inputs.get("instanceType")
    in_trigger = isinstance(trigger, str) and bool(type_) and type_ in trigger.split("/")
    return "instanceType" in r.replace_on_changes or in_trigger


# A replaced template (components/node_group.py template_trigger: the file system the nodes
# mount changed) must replace the group, or its running nodes stay on the old one.
NEW_TEMPLATE_PATHS = (
    "launchTemplate.id",
    "mixedInstancesPolicy.launchTemplate.launchTemplateSpecification.launchTemplateId",
)


def _keeps_nodes_of_a_replaced_template(r: Registration) -> bool:
    # the cluster's node groups (a replacementTrigger: what running nodes cannot change); the
    # inference group's template has no trigger and is never replaced
    nodes = r.replacement_trigger is not None
    return nodes and not set(NEW_TEMPLATE_PATHS) <= set(r.replace_on_changes)


RULES = (
    UpdateRule(
        "aws:ec2/instance:Instance",
        _alias_version_not_ignored,
        "a later `pulumi up` replaces the instance and loses its root disk: the provider's Read "
        "stores the numeric launch-template version in place of the alias, and its diff then "
        "forces a new instance; ignore launchTemplate.version",
        "terraform-provider-aws ec2_instance.go: flattenInstanceLaunchTemplate, CustomizeDiff",
    ),
    UpdateRule(
        "aws:ec2/subnet:Subnet",
        _create_first,
        "a create-first replacement (a new zone) calls CreateSubnet with the CIDR the old "
        "subnet still holds: InvalidSubnet.Conflict; replace it delete-first",
        "EC2 API CreateSubnet; step_generator.go (create-first unless deleteBeforeReplace)",
    ),
    UpdateRule(
        "aws:ec2/natGateway:NatGateway",
        _create_first,
        "a create-first replacement gives the new gateway the Elastic IP the old one holds: "
        "Resource.AlreadyAssociated; replace it delete-first",
        "EC2 API CreateNatGateway; step_generator.go",
    ),
    UpdateRule(
        "aws:ec2/vpcEndpoint:VpcEndpoint",
        _private_dns_endpoint_create_first,
        "a create-first replacement of an interface endpoint with private DNS fails while the "
        "old one holds the service's private DNS name; replace it delete-first",
        "EC2 API CreateVpcEndpoint (private DNS conflict); step_generator.go",
    ),
    UpdateRule(
        "aws:wafv2/webAclAssociation:WebAclAssociation",
        _create_first,
        "a create-first replacement (a new web ACL) associates the new one, then deletes the old "
        "association with DisassociateWebACL on the same load balancer, which removes the new "
        "one: the load balancer is left without a web ACL; replace it delete-first",
        "terraform-provider-aws wafv2/web_acl_association.go: resourceWebACLAssociationDelete "
        "(DisassociateWebACL by ResourceArn only); step_generator.go",
    ),
    UpdateRule(
        "aws:wafv2/webAclLoggingConfiguration:WebAclLoggingConfiguration",
        _create_first,
        "a create-first replacement (a new log group) puts the new configuration, then deletes "
        "the old one with DeleteLoggingConfiguration on the same web ACL, which removes the new "
        "one: the web ACL stops logging; replace it delete-first",
        "terraform-provider-aws wafv2/web_acl_logging_configuration.go: "
        "resourceWebACLLoggingConfigurationDelete (by the web ACL's ARN); step_generator.go",
    ),
    UpdateRule(
        "aws:ec2/instance:Instance",
        _replaced_for_its_type,
        "a new instanceType would replace the box and lose its root disk, while the provider "
        "changes it in place (stop, ModifyInstanceAttribute, start); keep the type out of its "
        "replaceOnChanges and replacementTrigger",
        "terraform-provider-aws ec2_instance.go: resourceInstanceUpdate, "
        "modifyInstanceAttributeWithStopStart (instance_type is not ForceNew)",
    ),
    UpdateRule(
        "aws:autoscaling/group:Group",
        _keeps_nodes_of_a_replaced_template,
        "a replaced launch template (the file system the nodes mount was replaced) would only "
        "update the group: its running nodes keep mounting a file system deleted at the end of "
        f"the update; replace the group on {' and '.join(NEW_TEMPLATE_PATHS)}",
        "step_generator.go (replaceOnChanges; deletes after every create); autoscaling/group.go "
        "(launch_template is not ForceNew)",
    ),
    UpdateRule(
        "aws:autoscaling/group:Group",
        _waits_for_capacity,
        "the provider waits for every node (10 minutes by default) and fails `pulumi up` on any "
        "failed launch, and the engine then skips the cost controls that wait on the group; "
        'set waitForCapacityTimeout "0", or wait only for minElbCapacity with '
        "ignoreFailedScalingActivities (a service's create-first replacement)",
        "terraform-provider-aws autoscaling/group.go: waitGroupCapacitySatisfied",
    ),
    UpdateRule(
        "aws:autoscaling/group:Group",
        _waits_for_exact_elb_capacity,
        "on an update that changes minSize the provider waits for exactly waitForElbCapacity "
        "healthy targets, which a group scaled out by its policy never has: the update waits "
        "out the timeout and fails; use minElbCapacity (create only)",
        "terraform-provider-aws autoscaling/group.go: resourceGroupUpdate (want exactly)",
    ),
    UpdateRule(
        "aws:autoscaling/group:Group",
        _rolls_back_to_an_alias,
        "an instance refresh with autoRollback is refused when the group uses the launch "
        "template's $Latest or $Default version: the provider's StartInstanceRefresh fails "
        "on the update that rolls a new version; give the numbered version",
        "Auto Scaling API Reference, RefreshPreferences AutoRollback and "
        "RollbackInstanceRefresh (not supported with $Latest or $Default)",
    ),
)


class UpdateHazard(ConfigError):
    """A registration a later `pulumi up` would trip over (update_rules.RULES)."""

    @staticmethod
    def header(stack: str, count: int) -> str:
        return (
            f"stack '{stack}': the program breaks {count} rule(s) of how Pulumi and AWS update "
            "it; nothing was created:"
        )


def hazards(resource: Registration) -> list[Problem]:
    return [
        Problem(
            path=f"{resource.name} ({resource.type})",
            received="the program's registration",
            problem=rule.problem,
            allowed=f"see {rule.source}",
            fix="report it: gpu-cluster builds this resource",
        )
        for rule in RULES
        if rule.type == resource.type and resource.custom and rule.applies(resource)
    ]
