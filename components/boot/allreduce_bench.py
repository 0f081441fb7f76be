# gpu-cluster: measure all-reduce bus bandwidth across the cluster with NCCL (through PyTorch,
# so it runs with the same rendezvous as training: `gpuc-torchrun <this file>`).
# Bus bandwidth is what nccl-tests reports: algorithm bandwidth x 2(n-1)/n, n = ranks.
# Sizes double from 1 MiB up to the plateau the model names (GPUC_BENCH_MAX_BYTES: p5 still
# climbs at 1 GiB and levels off at 16 GiB in AWS's runs). Rank 0 prints a table, then one
# line `GPUC_NCCL_RESULT {json}` (gpuc nccl-test reads it), and fails (exit 1) when the
# largest size's busbw is under the pass line (GPUC_BUSBW_THRESHOLD_GBPS, else the node's
# GPUC_BUSBW_PASS_TABLE for this many nodes; none set: it only reports).
# GPUC_BENCH_BACKEND=gloo runs it on CPUs (the tests: the same torchrun, the same result line).
# (Comments, not docstrings: the node's user data carries this file without its comments.)

from __future__ import annotations

import json
import os
import sys
import time

WARMUP, ITERATIONS = 5, 20
SMALLEST = 2**20


def bus_bandwidth_gbytes(size_bytes: int, seconds: float, ranks: int) -> float:
    # nccl-tests' busbw for all-reduce, in GB/s
    return size_bytes / seconds * 2 * (ranks - 1) / ranks / 1e9


def sizes(largest: int) -> list[int]:
    out = [SMALLEST]
    while out[-1] * 2 <= largest:
        out.append(out[-1] * 2)
    return out


def for_nodes(table: str, nodes: int) -> float | None:
    """The figure of a "1:X,2:Y,3:Z" table for this many nodes (3 stands for three or more);
    None when the table has none above 0 for it."""
    wanted = min(nodes, 3)
    for pair in table.split(","):
        key, _, value = pair.partition(":")
        try:
            if int(key) == wanted and float(value) > 0:
                return float(value)
        except ValueError:
            continue
    return None


def pass_line(env: dict[str, str], nodes: int) -> float | None:
    """An explicit GPUC_BUSBW_THRESHOLD_GBPS (`gpuc nccl-test`), else the node's table."""
    try:
        if float(env.get("GPUC_BUSBW_THRESHOLD_GBPS", "")) > 0:
            return float(env["GPUC_BUSBW_THRESHOLD_GBPS"])
    except ValueError:
        pass
    return for_nodes(env.get("GPUC_BUSBW_PASS_TABLE", ""), nodes)


def verdict(ranks: int, nodes: int, size: int, busbw: float, threshold: float | None) -> dict:
    passed = threshold is None or busbw >= threshold
    return {
        "ranks": ranks,
        "nodes": nodes,
        "bytes": size,
        "busbw": round(busbw, 2),
        "threshold": threshold,
        "pass": passed,
    }


def main() -> int:
    import torch
    import torch.distributed as dist

    backend = os.environ.get("GPUC_BENCH_BACKEND", "nccl")
    dist.init_process_group(backend)
    rank, ranks = dist.get_rank(), dist.get_world_size()
    device = "cuda" if backend == "nccl" else "cpu"
    if device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    sync = torch.cuda.synchronize if device == "cuda" else dist.barrier
    nodes = max(1, ranks // max(1, int(os.environ.get("LOCAL_WORLD_SIZE", ranks))))
    largest = int(os.environ.get("GPUC_BENCH_MAX_BYTES", str(2**30)))
    threshold = pass_line(dict(os.environ), nodes)
    if rank == 0:
        expected = for_nodes(os.environ.get("GPUC_EXPECTED_BUSBW_TABLE", ""), nodes) or "?"
        print(
            f"all-reduce over {ranks} GPUs on {nodes} node(s); expected ~{expected} GB/s, "
            f"pass line {threshold if threshold is not None else 'none'} GB/s"
        )
        print(f"{'bytes':>14}{'time ms':>10}{'busbw GB/s':>12}")
    busbw, size = 0.0, SMALLEST
    for size in sizes(largest):
        tensor = torch.ones(size // 2, dtype=torch.bfloat16, device=device)
        for _ in range(WARMUP):
            dist.all_reduce(tensor)
        sync()
        start = time.perf_counter()
        for _ in range(ITERATIONS):
            dist.all_reduce(tensor)
        sync()
        seconds = (time.perf_counter() - start) / ITERATIONS
        busbw = bus_bandwidth_gbytes(size, seconds, ranks)
        del tensor
        if rank == 0:
            print(f"{size:>14}{seconds * 1e3:>10.2f}{busbw:>12.2f}")
    # every rank exits as rank 0 judged: a worker that succeeded beside a failed one would
    # keep its torchrun agent in the exit barrier for 300 s (torch.distributed.elastic
    # agent/server/api.py _exit_barrier, run only after a successful worker group)
    result = verdict(ranks, nodes, size, busbw, threshold)
    passed = torch.tensor([1 if result["pass"] else 0], dtype=torch.int32, device=device)
    dist.broadcast(passed, src=0)
    dist.destroy_process_group()
    if rank == 0:
        print("GPUC_NCCL_RESULT " + json.dumps(result), flush=True)
        if not result["pass"]:
            line = f"FAIL: {busbw:.1f} GB/s is under the pass line {threshold} GB/s"
            print(line, file=sys.stderr)
    return 0 if int(passed.item()) else 1


if __name__ == "__main__":
    sys.exit(main())
