"""`gpuc estimate`: the step-time bounds and the cost of an epoch for a stack, as text or JSON."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gpu_cluster.components.bandwidth import bus_bandwidth_model, expected_busbw
from gpu_cluster.infra.cost.model import estimate_cluster
from gpu_cluster.infra.estimate.model import (
    GRADIENT_BYTES,
    Workload,
    busbw_allreduce_seconds,
    flat_ring_allreduce_seconds,
    memory_fit,
    node_network_gbps,
    nvme_read_bytes_per_second,
    published_claims,
    ring_allreduce_seconds,
    step_times,
    throughput,
)
from gpu_cluster.infra.json_doc import camel_fields
from gpu_cluster.infra.outcome import OK, load_cluster_spec
from gpu_cluster.infra.validation import ResolvedCluster

COMPARE_GBPS = (10, 100)
SOURCES = ("S3", "FSx for Lustre", "NVMe RAID")


def report(spec: ResolvedCluster, work: Workload, with_claims: bool = False) -> dict[str, Any]:
    facts, nodes = spec.facts, spec.node_count
    gbps = node_network_gbps(facts, spec.efa)
    steps, rates = step_times(facts, nodes, spec.efa, work)
    dataset_bytes = work.dataset_gb * 1e9
    tokens = dataset_bytes / work.bytes_per_token
    step_count = math.ceil(tokens / work.tokens_per_step)
    hourly = estimate_cluster(spec).hourly_usd
    epochs = {}
    for source in SOURCES:
        seconds = steps.step_seconds(source) * step_count
        epochs[source] = {
            "boundBy": steps.bound(source),
            "stepSeconds": steps.step_seconds(source),
            "hours": seconds / 3600,
            "gpuHours": seconds / 3600 * spec.total_gpus,
            "usd": seconds / 3600 * hourly,
        }
    _, nvme_basis = nvme_read_bytes_per_second(facts)
    busbw = expected_busbw(facts, nodes, spec.efa)
    fit = memory_fit(facts, nodes, work.model_params)
    return {
        "stack": spec.stack,
        "cluster": f"{nodes} x {facts.instance_type} ({spec.total_gpus} x {facts.gpu_model})",
        "modelParams": work.model_params,
        "nodeNetworkGbps": gbps,
        "busBandwidth": bus_bandwidth_model(busbw),
        "allReduce": {
            precision: {
                "gradientBytes": work.model_params * size,
                "seconds": steps.allreduce_s[precision],
                "flatRingSeconds": flat_ring_allreduce_seconds(
                    work.model_params * size, spec.total_gpus if nodes > 1 else 1, gbps
                ),
                "secondsAtExpectedBusbw": busbw_allreduce_seconds(
                    work.model_params * size, facts.gpu_count * nodes, busbw.gbytes_per_s
                ),
                **{
                    f"seconds{rate}Gbps": ring_allreduce_seconds(
                        work.model_params * size, max(nodes, 2), rate
                    )
                    for rate in COMPARE_GBPS
                },
            }
            for precision, size in GRADIENT_BYTES.items()
        },
        "read": {
            source: {
                "bytesPerSecond": rates[source],
                "datasetSeconds": dataset_bytes / rates[source],
                "stepSeconds": steps.read_s[source],
            }
            for source in SOURCES
        },
        "nvmeBasis": nvme_basis,
        "computeSeconds": steps.compute_s,
        "memory": camel_fields(fit)
        | {"fitsReplicated": fit.fits_replicated, "fitsSharded": fit.fits_sharded},
        "workload": {
            "datasetGb": work.dataset_gb,
            "tokensPerStep": work.tokens_per_step,
            "bytesPerToken": work.bytes_per_token,
            "mfu": work.mfu,
            "fsx": f"{work.fsx_tib:g} TiB {work.fsx_deployment}",
            "stepsPerEpoch": step_count,
        },
        "epoch": epochs,
        "usdPerHour": hourly,
        "claims": []
        if not with_claims
        else [
            {
                "claim": c.text,
                "quotedSeconds": c.quoted_seconds,
                "computedSeconds": c.computed_seconds,
                "holds": c.holds,
                "reading": c.reading,
            }
            for c in published_claims()
        ],
        "source": throughput()["source"],
    }


def text(doc: dict[str, Any]) -> str:
    w = doc["workload"]
    lines = [
        f"Estimate for stack '{doc['stack']}': {doc['cluster']}, "
        f"{doc['modelParams']:.3g} parameters",
        f"Inter-node network per node: {doc['nodeNetworkGbps']:g} Gbps",
        "",
        "Gradient all-reduce per step, bandwidth term over each node's network link:",
        "  hierarchical: NVLink inside each node, then a ring over the n nodes, 2(n-1)/n x bytes",
        "  flat ring: one ring over all P GPUs, 2(P-1)/P x bytes (NCCL's ring without the tree)",
        f"{'precision':<10}{'gradients':>12}{'hierarchical':>15}{'flat ring':>12}"
        f"{'at 10 Gbps':>13}{'at 100 Gbps':>13}",
    ]
    for precision, row in doc["allReduce"].items():
        lines.append(
            f"{precision:<10}{row['gradientBytes'] / 1e9:>10.1f} GB{row['seconds']:>13.3f} s"
            f"{row['flatRingSeconds']:>10.3f} s"
            f"{row['seconds10Gbps']:>11.2f} s{row['seconds100Gbps']:>11.3f} s"
        )
    bus = doc["busBandwidth"]
    if bus["nodes"] > 1:
        bf16 = doc["allReduce"]["bf16"]["secondsAtExpectedBusbw"]
        lines += [
            "",
            f"NCCL all-reduce busbw expected on {bus['nodes']} nodes: "
            f"{bus['gbytesPerSecond']:g} GB/s, {bus['kind']} ({bus['basis']}); the NCCL test "
            f"fails under {bus['passGbytesPerSecond']:g} GB/s.",
            f"At that busbw a bf16 gradient all-reduce takes {bf16:.3f} s "
            "(gradient bytes x 2(P-1)/P / busbw, P = GPUs).",
        ]
    memory = doc["memory"]
    lines += [
        "",
        f"Memory per GPU for weights, gradients and Adam states (16 B/param, mixed precision; "
        f"activations extra), {memory['gpuGib']:.0f} GiB per GPU:",
        f"  replicated (DDP): {memory['perGpuGibReplicated']:,.1f} GiB - "
        + ("fits" if memory["fitsReplicated"] else "does not fit: shard it"),
        f"  sharded over every GPU (FSDP full shard / ZeRO-3): "
        f"{memory['perGpuGibSharded']:,.1f} GiB - "
        + ("fits" if memory["fitsSharded"] else "does not fit even sharded: more GPUs"),
    ]
    lines += [
        "",
        f"Reading the data ({w['datasetGb']:g} GB; a step reads {w['tokensPerStep']:.3g} tokens x "
        f"{w['bytesPerToken']:g} B; FSx {w['fsx']}; NVMe: {doc['nvmeBasis']}):",
        f"{'source':<16}{'cluster rate':>14}{'whole dataset':>16}{'per step':>12}",
    ]
    for source, row in doc["read"].items():
        lines.append(
            f"{source:<16}{row['bytesPerSecond'] / 1e9:>10.2f} GB/s"
            f"{row['datasetSeconds'] / 60:>12.1f} min{row['stepSeconds']:>10.4f} s"
        )
    lines += [
        "",
        f"Compute per step (6 x params x tokens / (GPUs x peak BF16 x MFU {w['mfu']:g})): "
        f"{doc['computeSeconds']:.3f} s",
        f"An epoch is {w['stepsPerEpoch']:,} steps; at ${doc['usdPerHour']:,.2f}/h "
        "(the stack's estimate), with no overlap of compute, communication and reads:",
        f"{'data from':<16}{'bound by':<26}{'step s':>8}{'hours':>9}{'GPU-hours':>11}{'cost':>12}",
    ]
    for source, row in doc["epoch"].items():
        lines.append(
            f"{source:<16}{row['boundBy']:<26}{row['stepSeconds']:>8.3f}{row['hours']:>9.2f}"
            f"{row['gpuHours']:>11.1f}{'$' + format(row['usd'], ',.0f'):>12}"
        )
    if doc["claims"]:
        lines += ["", "Figures quoted in the project's issue tracker, recomputed:"]
    for claim in doc["claims"]:
        verdict = "holds" if claim["holds"] else "off"
        lines.append(
            f'  - "{claim["claim"]}": {verdict}; computed {claim["computedSeconds"]:.3g} s '
            f"({claim['reading']})"
        )
    lines.append(f"Sources: {doc['source']}")
    return "\n".join(lines)


def run_estimate(
    stack: str,
    work: Workload,
    as_json: bool = False,
    overrides: Sequence[tuple[str, str]] = (),
    with_claims: bool = False,
) -> int:
    spec = load_cluster_spec(stack, overrides)
    if spec.fsx is not None:  # the stack's own file system, not the default assumption
        work = replace(
            work,
            fsx_tib=spec.fsx.storage_capacity_gib / 1024,
            fsx_deployment=f"PERSISTENT_2_{spec.fsx.throughput_per_tib}",
        )
    doc = report(spec, work, with_claims)
    if as_json:
        json.dump(doc, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        print(text(doc))
    return OK
