"""Where the cluster's data lives: a data stack, a bucket of this stack, or an existing one."""

from __future__ import annotations

import re

from gpu_cluster.infra.problems import NOT_SET, Problem
from gpu_cluster.infra.spec import (
    FsxSpec,
    StorageSpec,
)
from gpu_cluster.infra.validation.common import key

BUCKET_NAME = re.compile(r"^(?!xn--)(?!.*--ol-s3$)[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]\Z")
KMS_KEY_ARN = re.compile(r"^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[0-9a-f-]{36}\Z")
STACK_REF = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+){0,2}\Z")


FSX_THROUGHPUTS = (125, 250, 500, 1000)  # PERSISTENT_2, MB/s per TiB of storage
FSX_FIRST_GIB, FSX_STEP_GIB = 1200, 2400


def check_fsx(fsx: FsxSpec | None) -> list[Problem]:
    """FSx for Lustre as AWS sizes it, encrypted with the cluster key (PERSISTENT_2 only)."""
    if fsx is None:
        return []
    problems = []
    if fsx.deployment_type != "PERSISTENT_2":
        problems.append(
            Problem(
                path=key("fsx.deploymentType"),
                received=fsx.deployment_type,
                problem="SCRATCH_2 file systems are encrypted with a key AWS owns; the cluster's "
                "KMS key needs PERSISTENT_2",
                allowed="PERSISTENT_2",
                fix="pulumi config set --path fsx.deploymentType PERSISTENT_2",
            )
        )
    size = fsx.storage_capacity_gib
    if size != FSX_FIRST_GIB and size % FSX_STEP_GIB:
        nearest = max(FSX_STEP_GIB, round(size / FSX_STEP_GIB) * FSX_STEP_GIB)
        problems.append(
            Problem(
                path=key("fsx.storageCapacityGib"),
                received=size,
                problem="FSx for Lustre (PERSISTENT_2, SSD) comes in 1200 GiB or multiples of "
                "2400 GiB",
                allowed="1200, 2400, 4800, 7200, ...",
                fix=f"pulumi config set --path fsx.storageCapacityGib {nearest}",
            )
        )
    if fsx.throughput_per_tib not in FSX_THROUGHPUTS:
        problems.append(
            Problem(
                path=key("fsx.throughputPerTib"),
                received=fsx.throughput_per_tib,
                problem="not a PERSISTENT_2 throughput tier",
                allowed=", ".join(str(t) for t in FSX_THROUGHPUTS) + " (MB/s per TiB)",
                fix="pulumi config set --path fsx.throughputPerTib "
                f"{min(FSX_THROUGHPUTS, key=lambda t: (abs(t - fsx.throughput_per_tib), -t))}",
            )
        )
    return problems


def check_storage(storage: StorageSpec, role: str) -> list[Problem]:
    problems = []
    if role == "data" and storage.source != "create":
        return [
            Problem(
                path=key("storage.source"),
                received=storage.source,
                problem="the data stack creates the bucket other stacks use",
                allowed="create",
                fix="pulumi config set --path storage.source create",
            )
        ]
    if role == "inference" and storage.source == "create":
        problems.append(
            Problem(
                path=key("storage.source"),
                received=storage.source,
                problem="an inference stack creates no bucket: it serves the models of the data "
                "stack's bucket (or of one you name), and a bucket of its own would be protected "
                "data in a stack `pulumi destroy` must delete",
                allowed="stack (the data stack's bucket), existing (+ bucket, kmsKeyArn)",
                fix="pulumi config set --path storage.source stack",
            )
        )
    if storage.source == "stack":
        if storage.stack is not None and not STACK_REF.match(storage.stack):
            problems.append(
                Problem(
                    path=key("storage.stack"),
                    received=storage.stack,
                    problem="not a stack reference",
                    allowed="a stack reference: <organization>/gpu-cluster/<stack>",
                    fix="pulumi config set --path storage.stack organization/gpu-cluster/data",
                )
            )
    elif storage.stack is not None:
        problems.append(
            Problem(
                path=key("storage.stack"),
                received=storage.stack,
                problem=f"storage.stack is only read when storage.source is 'stack', not "
                f"'{storage.source}'",
                allowed="unset",
                fix="pulumi config rm --path storage.stack",
            )
        )
    if storage.source == "existing" and not storage.bucket:
        problems.append(
            Problem(
                path=key("storage.bucket"),
                received=NOT_SET,
                problem="storage.source is 'existing' but no bucket is named",
                allowed="the name of an S3 bucket in this account",
                fix="pulumi config set --path storage.bucket <bucket-name>",
            )
        )
    if storage.bucket and storage.source == "stack":
        problems.append(
            Problem(
                path=key("storage.bucket"),
                received=storage.bucket,
                problem="the bucket comes from the data stack when storage.source is 'stack'",
                allowed="unset",
                fix="pulumi config rm --path storage.bucket",
            )
        )
    if storage.bucket and not BUCKET_NAME.match(storage.bucket):
        problems.append(
            Problem(
                path=key("storage.bucket"),
                received=storage.bucket,
                problem="not a valid S3 bucket name",
                allowed="3-63 lowercase letters, digits, '.' and '-', starting and ending "
                "with a letter or digit",
                fix="pulumi config set --path storage.bucket <valid-name>",
            )
        )
    if storage.kms_key_arn and not KMS_KEY_ARN.match(storage.kms_key_arn):
        problems.append(
            Problem(
                path=key("storage.kmsKeyArn"),
                received=storage.kms_key_arn,
                problem="not a KMS key ARN",
                allowed="arn:aws:kms:<region>:<account>:key/<key-id>",
                fix="pulumi config set --path storage.kmsKeyArn <key arn>",
            )
        )
    return problems
