"""ClusterSecurity: the cluster's KMS key and the nodes' IAM role and instance profile."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws
import pulumiverse_time

from gpu_cluster.components.images import repository_arns
from gpu_cluster.components.kms import create_cluster_key
from gpu_cluster.components.names import (
    StackIdentity,
    autoscaling_role_suffix,
    key_alias,
    log_group_prefixes,
    runtime_identity,
)
from gpu_cluster.components.naming import child_name
from gpu_cluster.components.policies import (
    SSM_MANAGED_POLICY,
    ec2_assume_role_policy,
    ecr_pull_policy,
    node_access_policy,
)
from gpu_cluster.components.secrets import secrets_path_arn


@dataclass
class ClusterSecurityArgs:
    account_id: pulumi.Input[str]
    partition: pulumi.Input[str]
    region: str
    data_bucket_arn: pulumi.Input[str]
    extra_key_arns: list[pulumi.Input[str]] = field(default_factory=list)
    protect_key: bool = True
    autoscaling: bool = False  # nodes launched by an Auto Scaling group
    identity: StackIdentity | None = None  # whose names (None: the running stack's)
    cluster: str | None = None  # a cluster's nodes report their health (by the stack-id tag)
    secrets_path: str | None = None  # the SSM hierarchy of the cluster's secrets, if any
    jobs_path: str | None = None  # the SSM hierarchy of its training jobs (`gpuc run`), if any
    alert_topic: bool = False  # an SNS topic under this key that Budgets and alarms publish to
    # ECR repositories the nodes may pull job images from (`gpuc run --image`): names in this
    # account and region, or repository ARNs; none: the role gets no ECR rights at all
    image_repositories: tuple[str, ...] = ()
    # more log groups the key encrypts (an inference stack's aws-waf-logs-... group)
    extra_log_group_prefixes: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)


# IAM is eventually consistent. The provider retries the key policy that names a new role
# (terraform-provider-aws kms/wait.go, waitIAMPropagation on MalformedPolicyDocumentException),
# but a group created with a role Auto Scaling cannot see yet fails, and the group create
# retries only "Invalid IAM Instance Profile" (autoscaling/group.go). The group takes the
# role's ARN from a wait that starts once the role exists, so it is created after it.
ROLE_PROPAGATION = "30s"


def role_after_propagation(
    name: str, role: aws.iam.ServiceLinkedRole, parent: pulumi.Resource
) -> pulumi.Output[str]:
    wait = pulumiverse_time.Sleep(
        name,
        create_duration=ROLE_PROPAGATION,
        triggers={"roleArn": role.arn},
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return wait.triggers.apply(lambda triggers: (triggers or {})["roleArn"])


class ClusterSecurity(pulumi.ComponentResource):
    key: aws.kms.Key
    role: aws.iam.Role
    instance_profile: aws.iam.InstanceProfile

    def __init__(
        self, name: str, args: ClusterSecurityArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:security:ClusterSecurity", name, None, opts)
        identity = args.identity or runtime_identity(args.cluster or name, args.region)
        self.autoscaling_role = None
        self.autoscaling_role_arn: pulumi.Output[str] | None = None
        if args.autoscaling:
            # A service-linked role of this cluster's own (custom suffix): the key policy can
            # name it before any group exists, and no other stack's groups share it.
            self.autoscaling_role = aws.iam.ServiceLinkedRole(
                child_name(name, "autoscaling-role"),
                aws_service_name="autoscaling.amazonaws.com",
                custom_suffix=autoscaling_role_suffix(identity),
                description=f"gpu-cluster {name}: launches the node group",
                tags=args.tags,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.autoscaling_role_arn = role_after_propagation(
                child_name(name, "autoscaling-role-propagation"), self.autoscaling_role, self
            )
        self.key, self.alias = create_cluster_key(
            name,
            account_id=args.account_id,
            partition=args.partition,
            region=args.region,
            tags=args.tags,
            protect=args.protect_key,
            parent=self,
            autoscaling_role_arn=self.autoscaling_role.arn if self.autoscaling_role else None,
            alias_name=key_alias(identity),
            # the stack's flow-log and node-event log groups (components/names.py)
            log_group_prefixes=(
                log_group_prefixes(identity) + args.extra_log_group_prefixes if args.cluster else ()
            ),
            alert_publishers=args.alert_topic,
        )
        child = pulumi.ResourceOptions(parent=self)
        self.role = aws.iam.Role(
            child_name(name, "node-role"),
            description=f"gpu-cluster {name} nodes",
            assume_role_policy=json.dumps(ec2_assume_role_policy()),
            tags=args.tags,
            opts=child,
        )
        ssm = aws.iam.RolePolicyAttachment(
            child_name(name, "node-ssm"),
            role=self.role.name,
            policy_arn=pulumi.Output.concat(
                "arn:", args.partition, ":iam::aws:policy/", SSM_MANAGED_POLICY
            ),
            opts=child,
        )
        access = pulumi.Output.all(
            args.data_bucket_arn,
            args.partition,
            args.account_id,
            self.key.arn,
            *args.extra_key_arns,
        ).apply(
            lambda values: json.dumps(
                node_access_policy(
                    values[0],
                    list(values[3:]),
                    identity.stack_id if args.cluster else None,
                    secrets_path_arn(values[1], args.region, values[2], args.secrets_path)
                    if args.secrets_path
                    else None,
                    secrets_path_arn(values[1], args.region, values[2], args.jobs_path)
                    if args.jobs_path
                    else None,
                )
            )
        )
        access_policy = aws.iam.RolePolicy(
            child_name(name, "node-access"), role=self.role.id, policy=access, opts=child
        )
        self.instance_profile = aws.iam.InstanceProfile(
            child_name(name, "node-profile"), role=self.role.name, tags=args.tags, opts=child
        )
        # A node's first boot calls SSM, EC2 and S3 with these permissions.
        self.boot_dependencies: list[pulumi.Resource] = [ssm, access_policy]
        if args.image_repositories:
            # a node that joins later starts the running jobs at boot: their images first
            self.boot_dependencies.append(self._image_pull_access(name, args, child))
        self.register_outputs(
            {
                "keyArn": self.key.arn,
                "roleArn": self.role.arn,
                "instanceProfileArn": self.instance_profile.arn,
            }
        )

    def _image_pull_access(
        self, name: str, args: ClusterSecurityArgs, child: pulumi.ResourceOptions
    ) -> aws.iam.RolePolicy:
        """Pull rights on exactly the named repositories (policies.ecr_pull_policy)."""
        return aws.iam.RolePolicy(
            child_name(name, "image-pull-access"),
            role=self.role.id,
            policy=pulumi.Output.all(args.partition, args.account_id).apply(
                lambda values: json.dumps(
                    ecr_pull_policy(
                        repository_arns(args.image_repositories, values[0], args.region, values[1])
                    )
                )
            ),
            opts=child,
        )
