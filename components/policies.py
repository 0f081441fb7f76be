"""IAM, KMS and S3 policy documents as pure functions (JSON-ready dicts)."""

from __future__ import annotations

from typing import Any

from gpu_cluster.components.images import PULL_ACTIONS, TOKEN_ACTION
from gpu_cluster.components.naming import HEALTH_TAG, STACK_ID_TAG

SSM_MANAGED_POLICY = "AmazonSSMManagedInstanceCore"
MIN_TLS_VERSION = "1.2"
NODE_WRITE_PREFIXES = ("checkpoints", "outputs")


def kms_key_policy(
    partition: str,
    account_id: str,
    region: str,
    autoscaling_role_arn: str | None = None,
    log_group_prefixes: tuple[str, ...] = (),
    trail_arn: str | None = None,
    alert_publishers: bool = False,
) -> dict[str, Any]:
    """Explicit key policy: the account administers the key through IAM (AWS's default
    statement, which prevents an unmanageable key); CloudWatch Logs in this region may use it
    only for this account's log groups (flow logs); and, for clusters whose nodes an Auto
    Scaling group launches, the group's service-linked role may encrypt the nodes' volumes
    (AWS's documented key policy for encrypted volumes: the role's own IAM policy grants no
    KMS access, so without it launches fail with Client.InternalError)."""
    account_root = f"arn:{partition}:iam::{account_id}:root"
    policy: dict[str, Any] = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "EnableIamPolicies",
                "Effect": "Allow",
                "Principal": {"AWS": account_root},
                "Action": "kms:*",
                "Resource": "*",
            },
        ],
    }
    if log_group_prefixes:  # only this stack's log groups, not every log group of the account
        policy["Statement"].append(
            {
                "Sid": "AllowCloudWatchLogsForThisStack",
                "Effect": "Allow",
                "Principal": {"Service": f"logs.{region}.amazonaws.com"},
                "Action": [
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                "Resource": "*",
                "Condition": {
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": [
                            f"arn:{partition}:logs:{region}:{account_id}:log-group:{prefix}*"
                            for prefix in log_group_prefixes
                        ]
                    }
                },
            }
        )
    # FSx for Lustre reads and writes the bucket through a service-linked role per file system
    # (AWSServiceRoleForFSxS3Access_fs-...), which has no KMS permission of its own.
    policy["Statement"].append(
        {
            "Sid": "AllowFsxLustreDataRepositories",
            "Effect": "Allow",
            "Principal": {"AWS": "*"},
            "Action": ["kms:Decrypt", "kms:GenerateDataKey*", "kms:DescribeKey"],
            "Resource": "*",
            "Condition": {
                "StringEquals": {
                    "kms:CallerAccount": account_id,
                    "kms:ViaService": f"s3.{region}.amazonaws.com",
                },
                "ArnLike": {
                    "aws:PrincipalArn": f"arn:{partition}:iam::{account_id}:role/aws-service-role/"
                    "s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"
                },
            },
        }
    )
    if autoscaling_role_arn:
        policy["Statement"] += [
            {
                "Sid": "AllowAutoScalingToEncryptNodeVolumes",
                "Effect": "Allow",
                "Principal": {"AWS": autoscaling_role_arn},
                "Action": [
                    "kms:Encrypt",
                    "kms:Decrypt",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:DescribeKey",
                ],
                "Resource": "*",
            },
            {
                "Sid": "AllowAutoScalingToAttachNodeVolumes",
                "Effect": "Allow",
                "Principal": {"AWS": autoscaling_role_arn},
                "Action": "kms:CreateGrant",
                "Resource": "*",
                "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
            },
        ]
    if trail_arn:
        policy["Statement"] += cloudtrail_key_statements(partition, account_id, trail_arn)
    if alert_publishers:
        # The stack's alert topic is encrypted with this key: AWS Budgets and CloudWatch alarms
        # publish to it only if they may use the key (SNS encryption at rest docs).
        policy["Statement"].append(
            {
                "Sid": "AllowAlertsToEncryptedTopic",
                "Effect": "Allow",
                "Principal": {"Service": ["budgets.amazonaws.com", "cloudwatch.amazonaws.com"]},
                "Action": ["kms:GenerateDataKey*", "kms:Decrypt"],
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
            }
        )
    return policy


def assume_role_policy(service: str, account_id: str) -> dict[str, Any]:
    """Trust exactly one AWS service principal, on behalf of this account only."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": service},
                "Action": "sts:AssumeRole",
                "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
            }
        ],
    }


def ec2_assume_role_policy() -> dict[str, Any]:
    """EC2 instance roles: trusted by ec2.amazonaws.com only (EC2 sets no SourceAccount)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": "ec2.amazonaws.com"},
                "Action": "sts:AssumeRole",
            }
        ],
    }


def node_access_policy(
    bucket_arn: str,
    key_arns: list[str],
    stack_id: str | None = None,
    secrets_arn: str | None = None,
    jobs_arn: str | None = None,
) -> dict[str, Any]:
    """Least privilege for a node: read the cluster bucket and write only under checkpoints/
    and outputs/, use its key(s), read the cluster's secrets (SSM decrypts them with the
    caller's kms:Decrypt on the cluster key), and list the cluster's instances and their
    group's size (for the node list; Describe* calls have no resource scope)."""
    policy: dict[str, Any] = {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ListClusterBucket",
                "Effect": "Allow",
                "Action": [
                    "s3:ListBucket",
                    "s3:GetBucketLocation",
                    "s3:ListBucketMultipartUploads",
                ],
                "Resource": bucket_arn,
            },
            {
                "Sid": "ReadClusterObjects",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": f"{bucket_arn}/*",
            },
            {
                # nodes write checkpoints and outputs; datasets are read-only to them
                "Sid": "WriteCheckpointsAndOutputs",
                "Effect": "Allow",
                "Action": [
                    "s3:PutObject",
                    "s3:DeleteObject",
                    "s3:AbortMultipartUpload",
                    "s3:ListMultipartUploadParts",
                ],
                "Resource": [f"{bucket_arn}/{prefix}/*" for prefix in NODE_WRITE_PREFIXES],
            },
            {
                "Sid": "UseClusterKeys",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"],
                "Resource": sorted(set(key_arns)),
            },
            {
                "Sid": "DiscoverClusterNodes",
                "Effect": "Allow",
                # DescribeTags: the CloudWatch agent resolves ${aws:AutoScalingGroupName};
                # DescribeInstanceTopology: rank order (boot/gpu-cluster-nodes.sh). EC2's
                # Describe* actions take no resource-level permissions (Service Authorization
                # Reference, Amazon EC2: no resource types), hence "*"
                "Action": [
                    "ec2:DescribeInstances",
                    "ec2:DescribeInstanceTopology",
                    "ec2:DescribeTags",
                    "autoscaling:DescribeAutoScalingGroups",
                ],
                "Resource": "*",
            },
        ],
    }
    if secrets_arn:
        policy["Statement"].append(
            {
                "Sid": "ReadClusterSecrets",
                "Effect": "Allow",
                "Action": ["ssm:GetParametersByPath", "ssm:GetParameters", "ssm:GetParameter"],
                "Resource": [secrets_arn, f"{secrets_arn}/*"],
            }
        )
    if jobs_arn:
        policy["Statement"] += [
            {
                # the job specs (`gpuc run`), decrypted with the cluster key above
                "Sid": "ReadClusterJobs",
                "Effect": "Allow",
                "Action": ["ssm:GetParametersByPath", "ssm:GetParameter"],
                "Resource": [jobs_arn, f"{jobs_arn}/*"],
            },
            {
                # each node's own report of each job: .../jobs/<job>/nodes/<instance id>
                "Sid": "ReportJobState",
                "Effect": "Allow",
                "Action": "ssm:PutParameter",
                "Resource": f"{jobs_arn}/*/nodes/*",
            },
        ]
    if stack_id:
        policy["Statement"] += health_reporting_statements(stack_id)
    return policy


def health_reporting_statements(stack_id: str) -> list[dict[str, Any]]:
    """A node reports its health check: its own health tag, a metric in the gpu-cluster
    namespace, and Unhealthy for an instance of its stack's group (both scoped by the stack-id
    tag: the cluster name may be another stack's, in this region, too)."""
    own_cluster = {"StringEquals": {f"aws:ResourceTag/{STACK_ID_TAG}": stack_id}}
    return [
        {
            "Sid": "TagOwnHealth",
            "Effect": "Allow",
            "Action": "ec2:CreateTags",
            "Resource": "arn:*:ec2:*:*:instance/*",
            "Condition": {
                **own_cluster,
                "ForAllValues:StringEquals": {"aws:TagKeys": [HEALTH_TAG]},
            },
        },
        {
            "Sid": "PublishHealthMetric",
            "Effect": "Allow",
            "Action": "cloudwatch:PutMetricData",
            "Resource": "*",
            "Condition": {"StringEquals": {"cloudwatch:namespace": "gpu-cluster"}},
        },
        {
            "Sid": "MarkOwnGroupInstancesUnhealthy",
            "Effect": "Allow",
            "Action": "autoscaling:SetInstanceHealth",
            "Resource": "*",
            "Condition": {"StringEquals": {f"autoscaling:ResourceTag/{STACK_ID_TAG}": stack_id}},
        },
    ]


ACCESS_LOG_PREFIX = "logs/"


def access_log_bucket_policy(
    log_bucket_arn: str,
    source_bucket_arn: str,
    account_id: str,
    trail_arn: str | None = None,
    trail_prefix: str = "cloudtrail",
) -> dict[str, Any]:
    """S3 server access logging may write the source bucket's logs, and the audit trail (if
    any) its log files (nothing else may reach the log bucket without TLS 1.2)."""
    policy = tls_only_bucket_policy(log_bucket_arn)
    if trail_arn:
        policy["Statement"][:0] = cloudtrail_bucket_statements(
            log_bucket_arn, account_id, trail_arn, trail_prefix
        )
    policy["Statement"].insert(
        0,
        {
            "Sid": "S3ServerAccessLogs",
            "Effect": "Allow",
            "Principal": {"Service": "logging.s3.amazonaws.com"},
            "Action": "s3:PutObject",
            "Resource": f"{log_bucket_arn}/{ACCESS_LOG_PREFIX}*",
            "Condition": {
                "ArnLike": {"aws:SourceArn": source_bucket_arn},
                "StringEquals": {"aws:SourceAccount": account_id},
            },
        },
    )
    return policy


def cloudtrail_bucket_statements(
    bucket_arn: str, account_id: str, trail_arn: str, prefix: str
) -> list[dict[str, Any]]:
    """AWS's bucket policy for CloudTrail, for one trail (aws:SourceArn) and one prefix."""
    service = {"Service": "cloudtrail.amazonaws.com"}
    return [
        {
            "Sid": "AWSCloudTrailAclCheck",
            "Effect": "Allow",
            "Principal": service,
            "Action": "s3:GetBucketAcl",
            "Resource": bucket_arn,
            "Condition": {"StringEquals": {"aws:SourceArn": trail_arn}},
        },
        {
            "Sid": "AWSCloudTrailWrite",
            "Effect": "Allow",
            "Principal": service,
            "Action": "s3:PutObject",
            "Resource": f"{bucket_arn}/{prefix}/AWSLogs/{account_id}/*",
            "Condition": {
                "StringEquals": {
                    "s3:x-amz-acl": "bucket-owner-full-control",
                    "aws:SourceArn": trail_arn,
                }
            },
        },
    ]


def cloudtrail_key_statements(partition: str, account_id: str, trail_arn: str) -> list[dict]:
    """AWS's key policy for a trail's log files: CloudTrail may generate data keys for this
    trail only; readers decrypt through IAM (the EnableIamPolicies statement)."""
    service = {"Service": "cloudtrail.amazonaws.com"}
    return [
        {
            "Sid": "AllowCloudTrailToEncryptLogs",
            "Effect": "Allow",
            "Principal": service,
            "Action": "kms:GenerateDataKey*",
            "Resource": "*",
            "Condition": {
                "StringEquals": {"aws:SourceArn": trail_arn},
                "StringLike": {
                    "kms:EncryptionContext:aws:cloudtrail:arn": (
                        f"arn:{partition}:cloudtrail:*:{account_id}:trail/*"
                    )
                },
            },
        },
        {
            "Sid": "AllowCloudTrailToDescribeKey",
            "Effect": "Allow",
            "Principal": service,
            "Action": "kms:DescribeKey",
            "Resource": "*",
            "Condition": {"StringEquals": {"aws:SourceArn": trail_arn}},
        },
    ]


def tls_only_bucket_policy(bucket_arn: str) -> dict[str, Any]:
    """Deny any request without TLS, and any request with TLS older than 1.2."""
    resources = [bucket_arn, f"{bucket_arn}/*"]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "DenyInsecureTransport",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": resources,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
            {
                "Sid": "DenyOutdatedTls",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": resources,
                "Condition": {"NumericLessThan": {"s3:TlsVersion": MIN_TLS_VERSION}},
            },
        ],
    }


def flow_logs_delivery_policy(log_group_arn: str) -> dict[str, Any]:
    """What the VPC Flow Logs service needs to write into one log group. logs:DescribeLogGroups
    takes no resource but `*` (Service Authorization Reference, CloudWatch Logs actions): on the
    log group alone it would never apply."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": [
                    "logs:CreateLogStream",
                    "logs:PutLogEvents",
                    "logs:DescribeLogStreams",
                ],
                "Resource": [log_group_arn, f"{log_group_arn}:*"],
            },
            {"Effect": "Allow", "Action": "logs:DescribeLogGroups", "Resource": "*"},
        ],
    }


def log_group_writer_policy(sid: str, log_group_arn: str) -> dict[str, Any]:
    """The CloudWatch agent on a node writes into this log group only."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": sid,
                "Effect": "Allow",
                "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                "Resource": [log_group_arn, f"{log_group_arn}:*"],
            }
        ],
    }


def gang_stop_policy(stack_id: str) -> dict[str, Any]:
    """All or nothing (boot/gpu-cluster-nodes.sh): the oldest node of a partial gang reads why
    the others did not launch and scales its own stack's group to 0 (scoped by the group's
    stack-id tag: Auto Scaling "Tags for security", autoscaling:ResourceTag); it says why through
    node_alerts_policy."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadWhyNodesDidNotLaunch",
                "Effect": "Allow",
                "Action": "autoscaling:DescribeScalingActivities",
                "Resource": "*",
            },
            {
                "Sid": "StopOwnPartialGang",
                "Effect": "Allow",
                "Action": "autoscaling:UpdateAutoScalingGroup",
                "Resource": "*",
                "Condition": {
                    "StringEquals": {f"autoscaling:ResourceTag/{STACK_ID_TAG}": stack_id}
                },
            },
        ],
    }


def node_alerts_policy(
    topic_arn: str, topic_parameter_arn: str, replacements_arn: str
) -> dict[str, Any]:
    """A node tells its stack's alert topic what needs a person (a partial gang's stop, a
    failure that keeps replacing nodes, a full root disk): it finds the topic in its parameter
    and publishes; the topic's key already lets it encrypt (UseClusterKeys: SNS needs
    kms:GenerateDataKey and kms:Decrypt of a publisher), and within one account the identity
    policy suffices without the topic policy naming the role. It also counts, per failure, the
    nodes the health check had replaced in the last hour: String parameters (no key) under
    ``replacements_arn``, its own stack's and no one else's (boot/gpu-cluster-health.sh)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "FindAlertTopic",
                "Effect": "Allow",
                "Action": "ssm:GetParameter",
                "Resource": topic_parameter_arn,
            },
            {
                "Sid": "TellAlertTopic",
                "Effect": "Allow",
                "Action": "sns:Publish",
                "Resource": topic_arn,
            },
            {
                "Sid": "CountReplacements",
                "Effect": "Allow",
                "Action": ["ssm:GetParameter", "ssm:PutParameter"],
                "Resource": f"{replacements_arn}/*",
            },
        ],
    }


def ecr_pull_policy(repository_arns: list[str]) -> dict[str, Any]:
    """`gpuc run --image`: the nodes pull job images from the named ECR repositories and no
    others. ecr:GetAuthorizationToken takes no resource but `*` (Service Authorization
    Reference, Amazon Elastic Container Registry: no resource type); the token alone reads
    nothing, each pull is authorized on the repository by the three read actions. A repository
    of another account also needs its own repository policy to allow this role."""
    if not repository_arns:
        raise ValueError("ecr_pull_policy needs at least one repository ARN")
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AuthenticateToEcr",
                "Effect": "Allow",
                "Action": TOKEN_ACTION,
                "Resource": "*",
            },
            {
                "Sid": "PullJobImages",
                "Effect": "Allow",
                "Action": list(PULL_ACTIONS),
                "Resource": sorted(set(repository_arns)),
            },
        ],
    }
