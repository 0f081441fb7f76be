"""The CloudWatch agent's profile on a node: which documented measurements it collects."""

from __future__ import annotations

# Published as nvidia_smi_<name> / efa_<name> in the gpu-cluster namespace, dimensions
# {StackId, InstanceId} and {StackId} (and {AutoScalingGroupName}); per-device series dropped.
GPU_MEASUREMENTS: tuple[str, ...] = (
    "utilization_gpu",
    "utilization_memory",
    "memory_used",
    "memory_total",
    "power_draw",
    "temperature_gpu",
)
EFA_MEASUREMENTS: tuple[str, ...] = (
    "rx_bytes",
    "tx_bytes",
    "rx_drops",
    "rdma_read_wr_err",
    "rdma_write_wr_err",
    "retrans_pkts",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
)
