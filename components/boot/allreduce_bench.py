# gpu-cluster: measure all-reduce bus bandwidth across the cluster with NCCL (through PyTorch,
# so it runs with the same rendezvous as training: `gpuc-torchrun <this file>`).
# Bus bandwidth is what nccl-tests reports: algorithm bandwidth x 2(n-1)/n, n = ranks.
# (Comments, not docstrings: the node's user data carries this file without its comments.)

from __future__ import annotations

import os
import time

SIZES = [2**p for p in range(20, 31, 2)]  # 1 MiB .. 1 GiB of float32/bfloat16 payload
WARMUP, ITERATIONS = 5, 20


def bus_bandwidth_gbytes(size_bytes: int, seconds: float, ranks: int) -> float:
    # nccl-tests' busbw for all-reduce, in GB/s
    return size_bytes / seconds * 2 * (ranks - 1) / ranks / 1e9


def main() -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("nccl")
    rank, ranks = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    expected = os.environ.get("GPUC_EXPECTED_BUSBW_GBPS", "?")
    if rank == 0:
        print(f"all-reduce over {ranks} GPUs; inter-node network limit ~{expected} GB/s")
        print(f"{'bytes':>14}{'time ms':>10}{'busbw GB/s':>12}")
    for size in SIZES:
        tensor = torch.ones(size // 2, dtype=torch.bfloat16, device="cuda")
        for _ in range(WARMUP):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(ITERATIONS):
            dist.all_reduce(tensor)
        torch.cuda.synchronize()
        seconds = (time.perf_counter() - start) / ITERATIONS
        if rank == 0:
            busbw = bus_bandwidth_gbytes(size, seconds, ranks)
            print(f"{size:>14}{seconds * 1e3:>10.2f}{busbw:>12.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
