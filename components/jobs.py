"""Where a cluster's training jobs live: one SSM parameter per job (its spec, a SecureString
under the cluster key) and one per node running it (that node's report), so `gpuc run` can
reach nodes that join later and `gpuc jobs` can read every node's state without a session."""

from __future__ import annotations

JOB_COMMAND = "/usr/local/sbin/gpu-cluster-jobs"  # boot/gpu-cluster-jobs.sh on training nodes
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


def alerts_topic_parameter(cluster: str) -> str:
    """Where a node finds the stack's alert topic (the topic is created after the nodes'
    launch template, so its ARN cannot be in the user data)."""
    return f"/gpu-cluster/{cluster}/alerts-topic"
