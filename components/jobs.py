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
        "EXPECTED_BUSBW_TABLE",
        "BUSBW_PASS_TABLE",
        "BENCH_MAX_BYTES",
        "TOPOLOGY",
        "SECRETS_PATH",
        "JOB_USER",
        "JOBS_LOG_GROUP",
        "JOB_LOG_DIR",
        "STACK",
        "STACK_ID",
        "JOBS_PATH",
        "ALERTS_PARAMETER",
        "REPLACEMENTS_PATH",
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


JOB_LOG_DIR = "/var/log/gpu-cluster/jobs"  # each job's output, one file per job, on the node
JOB_LOG_RETENTION_DAYS = 365  # Security Hub CloudWatch.16: at least a year


def workdir_key(sha256: str) -> str:
    """Where `gpuc run --workdir` keeps a job's code in the stack's bucket: content-addressed
    (the archive's SHA-256), so an unchanged folder is uploaded once and every node verifies
    what it fetched against the digest in the job's spec. Nodes may read, not write, it
    (components/policies.py: they write only under checkpoints/ and outputs/)."""
    return f"code/{sha256}.tar.gz"
