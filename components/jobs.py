"""Where a cluster's training jobs live: one SSM parameter per job (its spec, a SecureString
under the cluster key) and one per node running it (that node's report), so `gpuc run` can
reach nodes that join later and `gpuc jobs` can read every node's state without a session."""

from __future__ import annotations

JOB_COMMAND = "/usr/local/sbin/gpu-cluster-jobs"  # boot/gpu-cluster-jobs.sh on training nodes
# What `gpuc run --env` may not set (boot/gpu-cluster-jobs.sh drops them too): the node's own
# cluster.env (tests check every rendered key is here) and the boot scripts' globals; names
# with these prefixes; and anything not upper case.
NODE_ENV_NAMES = frozenset(
    [
        "CLUSTER",
        "REGION",
        "GPUS_PER_NODE",
        "NVME_DISKS",
        "DATA_BUCKET",
        "SCRATCH",
        "EFA_INTERFACES",
        "DATA_MOUNT",
        "LUSTRE_MOUNT",
        "LUSTRE_TARGET",
        "SPOT",
        "NVSWITCH",
        "NVSWITCH_PCI_ID",
        "ROW_REMAP",
        "INTERNET",
        "EXPECTED_BUSBW_GBPS",
        "SECRETS_PATH",
        "JOB_USER",
        "JOBS_LOG_GROUP",
        "JOB_LOG_DIR",
        "STACK",
        "GANG_TIMEOUT",
        "BUNDLE_KEY",
        "BUNDLE_SHA256",
        "MODEL_PREFIX",
        "SERVER_KIND",
        "SERVER_IMAGE",
        "SERVER_PORT",
        "SERVER_ARGS",
        "READINESS_PATH",
        "BATCH_SIZES",
        "QUEUE_DELAY_US",
        "WARMUP_SECONDS",
        "LIFECYCLE_HOOK",
        "MODEL_METRICS_PORT",
        "MODEL_METRICS_LOG_GROUP",
        "R",
        "ETC",
        "RUN",
        "STATE",
        "IMDS",
        "JOBS",
        "SPECS",
        "PROC",
        "STEP",
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "IFS",
    ]
)
NODE_ENV_PREFIXES = ("AWS_", "GPUC_", "TORCHELASTIC_")
# read by the job's network check; torchrun's rendezvous settings (gpuc-torchrun: e.g.
# join_timeout=900,last_call_timeout=10, torch's c10d rendezvous configuration keys)
JOB_ENV_ALLOWED = frozenset({"GPUC_ALLOW_SLOW_NETWORK", "GPUC_RDZV_CONF"})
JOB_USER_UNIT = "gpu-cluster-job@"  # systemd template unit: one instance per job


def jobs_path(cluster: str) -> str:
    return f"/gpu-cluster/{cluster}/jobs"


def job_parameter(cluster: str, name: str) -> str:
    return f"{jobs_path(cluster)}/{name}"


def cluster_key_alias(cluster: str) -> str:
    """The cluster key's alias (components/kms.py), which encrypts the job specs."""
    return f"alias/gpu-cluster/{cluster}-security"


JOB_LOG_DIR = "/var/log/gpu-cluster/jobs"  # each job's output, one file per job, on the node
JOB_LOG_RETENTION_DAYS = 365  # Security Hub CloudWatch.16: at least a year


def jobs_log_group(cluster: str) -> str:
    """Every node's job output (the CloudWatch agent ships JOB_LOG_DIR, a stream per node);
    under the /gpu-cluster/<cluster>- prefix the cluster key's policy lets Logs use."""
    return f"/gpu-cluster/{cluster}-jobs"


def workdir_key(sha256: str) -> str:
    """Where `gpuc run --workdir` keeps a job's code in the stack's bucket: content-addressed
    (the archive's SHA-256), so an unchanged folder is uploaded once and every node verifies
    what it fetched against the digest in the job's spec. Nodes may read, not write, it
    (components/policies.py: they write only under checkpoints/ and outputs/)."""
    return f"code/{sha256}.tar.gz"


def job_bucket_parameter(cluster: str, stack: str) -> str:
    """Where `gpuc run` finds the stack's bucket (the program writes it at `pulumi up`: the
    bucket may be the data stack's, which gpuc cannot read without Pulumi state)."""
    return f"/gpu-cluster/{cluster}/{stack}/bucket"


def alerts_topic_parameter(cluster: str, stack: str) -> str:
    """Where a node finds its stack's alert topic (the topic is created after the nodes'
    launch template, so its ARN cannot be in the user data); two stacks may share a cluster
    name."""
    return f"/gpu-cluster/{cluster}/{stack}/alerts-topic"


def replacements_parameter(cluster: str, stack: str) -> str:
    """Where the nodes count, per failure, the nodes the health check had replaced in the last
    hour (boot/gpu-cluster-health.sh: replacements/<cause>, a String parameter each)."""
    return f"/gpu-cluster/{cluster}/{stack}/replacements"
