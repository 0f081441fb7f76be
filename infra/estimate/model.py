"""Training-time arithmetic (pure): ring all-reduce of the gradients over the inter-node
network, reading the dataset from S3 / FSx for Lustre / the NVMe RAID, and compute at a model
FLOPs utilisation — each from documented throughputs (infra/data/throughput.json).

Units: decimal (1 GB = 1e9 bytes, 1 Gbps = 1e9 bits/s), as AWS and disk makers quote them."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from gpu_cluster.components.catalog import InstanceFacts
from gpu_cluster.components.nic_layout import node_network_gbps

THROUGHPUT_PATH = Path(__file__).resolve().parent.parent / "data" / "throughput.json"
GRADIENT_BYTES = {"bf16": 2, "fp32": 4}
FLOPS_PER_PARAM_TOKEN = 6  # forward + backward, dense transformer


@cache
def throughput() -> dict:
    return json.loads(THROUGHPUT_PATH.read_text())


def ring_allreduce_seconds(gradient_bytes: float, nodes: int, gbps: float) -> float:
    """2(n-1)/n x gradient bytes over each node's link (ring all-reduce, bandwidth term)."""
    if nodes < 2:
        return 0.0
    return 2 * (nodes - 1) / nodes * gradient_bytes * 8 / (gbps * 1e9)


def flat_ring_allreduce_seconds(gradient_bytes: float, ranks: float, gbps: float) -> float:
    """One ring over every GPU of the cluster: each node's link carries 2(P-1)/P x gradient
    bytes for P ranks (NCCL spreads its rings over the node's NICs, which share that link)."""
    if ranks < 2:
        return 0.0
    return 2 * (ranks - 1) / ranks * gradient_bytes * 8 / (gbps * 1e9)


def busbw_allreduce_seconds(gradient_bytes: float, ranks: int, busbw_gbytes: float) -> float:
    """nccl-tests' definition read backwards: busbw = algbw x 2(P-1)/P and algbw = bytes / time,
    so time = bytes x 2(P-1)/P / busbw."""
    if ranks < 2 or busbw_gbytes <= 0:
        return 0.0
    return gradient_bytes * 2 * (ranks - 1) / ranks / (busbw_gbytes * 1e9)


# Mixed-precision Adam (the ZeRO paper's accounting, Rajbhandari et al. 2020, section 3.1):
# bf16 weights 2 + bf16 gradients 2 + fp32 master weights 4 + Adam momentum 4 + variance 4.
TRAINING_BYTES_PER_PARAM = 16


@dataclass(frozen=True)
class MemoryFit:
    per_gpu_gib_replicated: float  # every GPU holds everything (DDP)
    per_gpu_gib_sharded: float  # states sharded over every GPU (FSDP full shard / ZeRO-3)
    gpu_gib: float

    @property
    def fits_replicated(self) -> bool:
        return self.per_gpu_gib_replicated <= self.gpu_gib

    @property
    def fits_sharded(self) -> bool:
        return self.per_gpu_gib_sharded <= self.gpu_gib


def memory_fit(facts: InstanceFacts, nodes: int, model_params: float) -> MemoryFit:
    """Weights, gradients and optimizer states per GPU (activations not counted)."""
    states = model_params * TRAINING_BYTES_PER_PARAM / 2**30
    gpus = max(facts.gpu_count * nodes, 1)
    return MemoryFit(states, states / gpus, facts.gpu_memory_mib / 1024)


def transfer_seconds(size_bytes: float, bytes_per_second: float) -> float:
    return size_bytes / bytes_per_second


def nvme_read_bytes_per_second(facts: InstanceFacts) -> tuple[float, str]:
    data = throughput()
    documented = data["nvme_read_gbytes_per_s"].get(facts.instance_type)
    if documented:
        return documented * 1e9, "documented"
    per_disk = data["nvme_read_gbytes_per_s_per_disk_assumed"]
    return facts.nvme_disk_count * per_disk * 1e9, f"assumed {per_disk} GB/s per disk"


@dataclass(frozen=True)
class Workload:
    model_params: float
    dataset_gb: float
    tokens_per_step: float
    bytes_per_token: float
    mfu: float
    fsx_tib: float
    fsx_deployment: str


@dataclass(frozen=True)
class StepTimes:
    compute_s: float
    allreduce_s: dict[str, float]  # by gradient precision
    read_s: dict[str, float]  # by data source, per step, whole cluster reading in parallel

    def bound(self, source: str, precision: str = "bf16") -> str:
        parts = {
            "compute": self.compute_s,
            f"all-reduce ({precision})": self.allreduce_s[precision],
            f"reading from {source}": self.read_s[source],
        }
        return max(parts, key=lambda k: parts[k])

    def step_seconds(self, source: str, precision: str = "bf16") -> float:
        """Without overlap: the sum (overlap brings it down to the largest part)."""
        return self.compute_s + self.allreduce_s[precision] + self.read_s[source]


def step_times(
    facts: InstanceFacts, nodes: int, efa: bool, work: Workload
) -> tuple[StepTimes, dict[str, float]]:
    """Per-step times and the per-source cluster read rates (bytes/s)."""
    data = throughput()
    gpus = facts.gpu_count * nodes
    peak = data["gpu_tflops_bf16_dense"].get(facts.gpu_model)
    flops = FLOPS_PER_PARAM_TOKEN * work.model_params * work.tokens_per_step
    compute = flops / (gpus * peak * 1e12 * work.mfu) if peak and gpus else float("nan")
    gbps = node_network_gbps(facts, efa)
    allreduce = {
        precision: ring_allreduce_seconds(work.model_params * size, nodes, gbps)
        for precision, size in GRADIENT_BYTES.items()
    }
    s3_per_node = min(gbps, data["s3_gbps_per_instance_max"]) * 1e9 / 8
    fsx = work.fsx_tib * data["fsx_lustre_mbps_per_tib"][work.fsx_deployment] * 1e6
    nvme, _ = nvme_read_bytes_per_second(facts)
    rates = {"S3": nodes * s3_per_node, "FSx for Lustre": fsx, "NVMe RAID": nodes * nvme}
    step_bytes = work.tokens_per_step * work.bytes_per_token
    read = {source: step_bytes / rate for source, rate in rates.items() if rate}
    return StepTimes(compute, allreduce, read), rates


@dataclass(frozen=True)
class Claim:
    text: str
    quoted_seconds: float
    computed_seconds: float
    reading: str

    @property
    def holds(self) -> bool:
        return abs(self.quoted_seconds - self.computed_seconds) <= 0.05 * self.quoted_seconds


def published_claims() -> list[Claim]:
    """The figures the issue quotes, recomputed."""
    gradients = 500e6
    return [
        Claim(
            "500 MB of gradients take 4 s on 10 Gbps",
            4.0,
            transfer_seconds(gradients, 10e9 / 8),
            "one transfer of 500 MB (4 Gbit) at 10 Gbps is 0.4 s; 4 s is 1 Gbps (a ring "
            "all-reduce moves 2(n-1)/n of it: 0.8 s at 10 Gbps for large n)",
        ),
        Claim(
            "500 MB of gradients take 0.4 s on 100 Gbps",
            0.4,
            transfer_seconds(gradients, 100e9 / 8),
            "one transfer is 0.04 s at 100 Gbps (0.08 s as a ring all-reduce); 0.4 s is 10 Gbps",
        ),
        Claim(
            "1 TB takes 1.8 h from a 150 MB/s HDD",
            1.8 * 3600,
            transfer_seconds(1e12, 150e6),
            "1e12 B / 150e6 B/s = 6,667 s = 1.85 h: right (decimal units)",
        ),
        Claim(
            "1 TB takes 5.6 min from a 3 GB/s NVMe SSD",
            5.6 * 60,
            transfer_seconds(1e12, 3e9),
            "1e12 B / 3e9 B/s = 333 s = 5.6 min: right",
        ),
    ]
