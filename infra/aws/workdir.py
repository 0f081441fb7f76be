"""Upload a packed `--workdir` (infra/workdir.py) to the stack's bucket, once per content.

AWS behaviour relied on (Amazon S3 API reference):
- HeadObject is authorized by s3:GetObject; a key that does not exist answers 404 Not Found to
  a caller with s3:ListBucket on the bucket and 403 Forbidden to one without it. A HEAD error
  has no body, so botocore's error code is the bare status ("404", "403").
- PutObject with x-amz-checksum-sha256 (ChecksumSHA256: the base64 of the raw 32-byte digest):
  S3 computes the object's SHA-256 and refuses the upload (BadDigest) when they differ, so what
  is stored is what was packed ("Checking object integrity"). botocore sends a checksum given
  this way as a header and adds none of its own (botocore/httpchecksum.py, has_checksum_header).
- Encryption: a PutObject without x-amz-server-side-encryption gets the bucket's default
  encryption (ServerSideEncryptionByDefault; components/datastore.py sets SSE-KMS with the
  cluster key, bucket key on). Sending `aws:kms` without x-amz-server-side-encryption-aws-kms-
  key-id would encrypt with the AWS managed key aws/s3 instead (PutObject, SSEKMSKeyId), so no
  SSE header is sent. The uploader needs kms:GenerateDataKey on the bucket's key.
- The bucket policy (components/policies.py, tls_only_bucket_policy) denies requests without
  TLS or with TLS older than 1.2, and requires no other header. boto3 speaks HTTPS (TLS 1.2+) to
  S3's endpoints by default.
- One PutObject holds up to 5 GB; infra/workdir.py keeps an archive far below that."""

from __future__ import annotations

import base64
from typing import Any

from gpu_cluster.components.jobs import workdir_key
from gpu_cluster.infra.aws import call
from gpu_cluster.infra.problems import AwsError
from gpu_cluster.infra.workdir import PackedWorkdir

CONTENT_TYPE = "application/gzip"
DIGEST_METADATA = "gpuc-sha256"  # x-amz-meta-gpuc-sha256: the archive's hex digest
NOT_FOUND = ("404", "NoSuchKey", "NotFound")
FORBIDDEN = ("403", "AccessDenied", "Forbidden")


def stored(s3: Any, bucket: str, packed: PackedWorkdir) -> bool:
    """Whether the bucket already holds this archive (same key, size and digest)."""
    key = workdir_key(packed.sha256)
    try:
        head = call(s3, "s3", "HeadObject", Bucket=bucket, Key=key)
    except AwsError as error:
        if error.code in NOT_FOUND:
            return False
        if error.code in FORBIDDEN:
            raise AwsError(
                f"s3:GetObject on s3://{bucket}/{key} was refused (HeadObject: 403 Forbidden), "
                f"so gpuc cannot tell whether the job's code is already there. The caller needs "
                f"s3:GetObject on arn:aws:s3:::{bucket}/code/* and s3:ListBucket on "
                f"arn:aws:s3:::{bucket} (without it S3 answers 403 for a missing key), and "
                "s3:PutObject to upload it; nothing was uploaded",
                error.code,
            ) from error
        raise
    metadata = {name.lower(): value for name, value in (head.get("Metadata") or {}).items()}
    return head.get("ContentLength") == packed.size and metadata.get(DIGEST_METADATA) == (
        packed.sha256
    )


def upload_workdir(s3: Any, bucket: str, packed: PackedWorkdir) -> bool:
    """Put the archive at code/<sha256>.tar.gz: True when uploaded, False when the bucket
    already held it (an unchanged folder is uploaded once). AwsError names what was refused."""
    if stored(s3, bucket, packed):
        return False
    key = workdir_key(packed.sha256)
    checksum = base64.b64encode(bytes.fromhex(packed.sha256)).decode("ascii")
    try:
        call(
            s3,
            "s3",
            "PutObject",
            Bucket=bucket,
            Key=key,
            Body=packed.archive,
            ContentType=CONTENT_TYPE,
            ChecksumSHA256=checksum,
            Metadata={DIGEST_METADATA: packed.sha256},
        )
    except AwsError as error:
        if error.code in FORBIDDEN:
            raise AwsError(
                f"{error} Uploading s3://{bucket}/{key} needs s3:PutObject on "
                f"arn:aws:s3:::{bucket}/code/* and kms:GenerateDataKey on the bucket's KMS key "
                "(its default encryption)",
                error.code,
            ) from error
        raise
    return True
