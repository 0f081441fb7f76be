"""Offline plan time and peak memory vs cluster size, against an SDK floor.

    python bench/plan_scale.py [--sizes 1,8,32,256,2048] [--repeat 3] [--floor replay|instances]
                               [--floor-gc on|off] [--check] [--json PATH | --no-json]

Sizes are GPU counts: 1 GPU = 1 x g5.xlarge (``--single-gpu-type g6.xlarge`` to change it),
N GPUs (a multiple of 8) = N/8 x p4d.24xlarge with EFA on. Every cluster is in us-east-1 /
us-east-1a, in a 10.42.0.0/16 VPC, with its data from the ``data`` stack through a
StackReference (the ``train`` stack's settings, scaled).

Each measurement runs in a FRESH child process (this file with ``--child``), so imports, caches
and peak RSS belong to that one run. Each is repeated ``--repeat`` times (sizes interleaved
within a round) and the median is reported. Definitions:

plan s
    Wall time (``time.perf_counter``) of ``infra.plan.engine.run_plan(stack, config)`` alone.
    Imports are done before the clock starts: pulumi, pulumi_aws, the project's modules and
    every pulumi_aws submodule the project's source names (``aws.<module>.``) -- pulumi_aws
    loads those lazily on first use, which would otherwise put ~1 s of imports inside the
    first plan. Everything else is inside: config validation, catalog/price loading, the
    program, the mocks, the recording monitor and the wait for outstanding RPCs. The child
    reports any module still imported during the plan (``late_imports`` in the JSON).
floor s
    A child that imports pulumi and pulumi_aws the same way, then times
    ``pulumi.runtime.set_mocks(<trivial Mocks>, preview=False)`` plus registering as many
    custom resources as the real plan registered (``PlannedResource.custom``) and waiting for
    the RPCs the way the engine does (``run_pulumi_func``). ``--floor replay`` (default)
    registers the plan's own custom resources -- same types, same names, the plan's recorded
    top-level inputs as literals -- flat under the stack: no components, no Output wiring
    between resources, no invokes, no config, no validation. It is what the SDK costs for
    exactly these resources, so ``plan/floor`` is our program's overhead. ``--floor
    instances`` registers that many ``aws.ec2.Instance`` with a few inputs instead. The floor
    leaves Python's cyclic GC on, as a plain Pulumi program does; the plan engine pauses it
    for the plan (infra/plan/engine.py). ``--floor-gc off`` pauses it in the floor too, to
    compare like with like.
proc s
    Wall time of the whole child process as the parent sees it (interpreter start, imports,
    run, exit).
peak RSS MiB
    ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of the child at its end (imports included).
ms/node
    Marginal cost of one more node: ``(T(b) - T(a)) / (nodes(b) - nodes(a))`` between a size
    ``b`` and the next smaller measured size ``a`` of the same instance type (for 32 GPUs:
    4 x p4d against 1 x p4d = 8 GPUs). Shown for plan and floor times. A node adds no
    resource (the group's desired capacity grows), so both are noise around zero.

Targets (PASS/FAIL; SKIP when the sizes they need were not measured):

1. At 32 GPUs, plan s <= 1.5 x floor s.
2. Plan time independent of cluster size from 32 to 2048 GPUs: every node group is one Auto
   Scaling group whatever its size, so the plan's resources do not grow with the node count;
   the plan times of the measured p4d sizes inside [32, 2048] GPUs satisfy max/min <= 1.20
   (the marginal ms/node columns are then noise around zero).

Exit code 0 whatever the figures, unless ``--check``: then 1 if a target FAILs. A child that
crashes is an error of the benchmark itself (exit 2). A full run with the defaults is 30 child
processes, ~50 s on 2 cores. On a shared 2-core machine single runs vary by 10-30%, which is
the size of target 2's margin: use ``--repeat 5`` or more when the verdict matters (``--check``).
"""

from __future__ import annotations

import argparse
import inspect
import itertools
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
DEFAULT_SIZES = (1, 8, 32, 256, 2048)
MULTI_GPU_TYPE = "p4d.24xlarge"
GPUS_PER_MULTI_NODE = 8
STACK = "bench"
DATA_STACK = "organization/gpu-cluster/data"
RATIO_TARGET_GPUS, RATIO_TARGET = 32, 1.5
LINEAR_RANGE, LINEAR_SPREAD = (32, 2048), 0.20
AWS_MODULE_USE = re.compile(r"\baws\.([a-z][a-z0-9_]*)\.")


# --- sizes and config --------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    gpus: int
    instance_type: str
    nodes: int

    @property
    def label(self) -> str:
        return f"{self.nodes} x {self.instance_type}"


def size_for(gpus: int, single_gpu_type: str) -> Size:
    if gpus == 1:
        return Size(1, single_gpu_type, 1)
    if gpus > 0 and gpus % GPUS_PER_MULTI_NODE == 0:
        return Size(gpus, MULTI_GPU_TYPE, gpus // GPUS_PER_MULTI_NODE)
    raise ValueError(f"{gpus} GPUs: use 1 or a multiple of {GPUS_PER_MULTI_NODE}")


def plan_config(size: Size) -> dict[str, str]:
    """The flat string map the Pulumi runtime hands the program (as stack_files makes it)."""
    config = {
        "aws:region": "us-east-1",
        "gpu-cluster:availabilityZone": "us-east-1a",
        "gpu-cluster:instanceType": size.instance_type,
        "gpu-cluster:nodes": str(size.nodes),
        "gpu-cluster:network": json.dumps({"vpcCidr": "10.42.0.0/16"}),
        "gpu-cluster:storage": json.dumps({"source": "stack", "stack": DATA_STACK}),
    }
    if size.instance_type == MULTI_GPU_TYPE:
        config["gpu-cluster:efa"] = "true"
    return config


# --- child processes ---------------------------------------------------------------------------


def max_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def aws_submodules_used() -> list[str]:
    """pulumi_aws submodules the project's source names; pulumi_aws imports them lazily."""
    found: set[str] = set()
    for folder in ("components", "infra"):
        for path in (ROOT / folder).rglob("*.py"):
            found.update(AWS_MODULE_USE.findall(path.read_text()))
    return sorted(found)


def load_aws_submodules(aws: Any, names: list[str]) -> None:
    for name in names:
        module = getattr(aws, name, None)
        getattr(module, "__all__", None)  # any non-introspection attribute runs the lazy load


def child_plan(size: Size, replay_out: str | None) -> dict[str, Any]:
    start = time.perf_counter()
    import pulumi_aws

    import gpu_cluster.infra.config
    import gpu_cluster.infra.program
    import gpu_cluster.infra.stack_files
    import gpu_cluster.infra.validation  # noqa: F401  (imported lazily by infra.config)
    from gpu_cluster.infra.plan.engine import run_plan

    load_aws_submodules(pulumi_aws, aws_submodules_used())
    config = plan_config(size)
    modules_before = set(sys.modules)
    imported = time.perf_counter()
    cpu0 = time.process_time()
    plan = run_plan(STACK, config)
    cpu1, done = time.process_time(), time.perf_counter()
    if plan.error is not None:
        raise SystemExit(f"plan of {size.gpus} GPUs failed:\n{plan.error}")
    custom = [r for r in plan.resources if r.custom]
    groups = [r for r in custom if r.type == "aws:autoscaling/group:Group"]
    instances = [r for r in custom if r.type == "aws:ec2/instance:Instance"]
    planned_nodes = sum(g.inputs["desiredCapacity"] for g in groups) + len(instances)
    if planned_nodes != size.nodes:
        raise SystemExit(f"expected {size.nodes} nodes, the plan has {planned_nodes}")
    if replay_out:
        replay = [{"type": r.type, "name": r.name, "inputs": r.inputs} for r in custom]
        Path(replay_out).write_text(json.dumps(replay, default=str))
    return {
        "seconds": done - imported,
        "cpu_seconds": cpu1 - cpu0,
        "import_seconds": imported - start,
        "resources": len(plan.resources),
        "custom": len(custom),
        "peak_rss_mib": max_rss_mib(),
        "late_imports": sorted(set(sys.modules) - modules_before),
    }


def camel_to_snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def replay_builders(pulumi: Any, aws: Any, specs: list[dict[str, Any]]) -> list:
    """One zero-argument constructor per recorded custom resource, classes resolved (and their
    lazy modules loaded) now, outside the timed region."""
    builders = []
    for spec in specs:
        typ, name, inputs = spec["type"], spec["name"], spec["inputs"]
        package, module_path, class_name = typ.split(":")
        if package != "aws":
            builders.append(lambda t=typ, n=name, i=inputs: pulumi.CustomResource(t, n, dict(i)))
            continue
        module_name = module_path.split("/")[0]
        cls = getattr(aws if module_name == "index" else getattr(aws, module_name), class_name)
        accepted = inspect.signature(cls._internal_init).parameters
        kwargs = {camel_to_snake(k): v for k, v in inputs.items()}
        kwargs = {k: v for k, v in kwargs.items() if k in accepted}
        builders.append(lambda c=cls, n=name, kw=kwargs: c(n, **kw))
    return builders


def instance_builders(aws: Any, count: int) -> list:
    def build(index: int) -> Any:
        return aws.ec2.Instance(
            f"floor-node-{index}",
            ami="ami-0a1b2c3d4e5f60718",
            instance_type=MULTI_GPU_TYPE,
            subnet_id="subnet-0123456789abcdef0",
            tags={"Name": f"floor-node-{index}", "gpu-cluster:node-index": str(index)},
        )

    return [lambda i=index: build(i) for index in range(count)]


def child_floor(kind: str, count: int, replay_in: str | None, gc_on: bool) -> dict[str, Any]:
    start = time.perf_counter()
    import gc

    import pulumi
    import pulumi_aws
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    class FloorMocks(pulumi.runtime.Mocks):
        def new_resource(self, args):
            return f"{args.name}-id", dict(args.inputs)

        def call(self, args):
            return {}, []

    if kind == "replay":
        assert replay_in is not None
        builders = replay_builders(pulumi, pulumi_aws, json.loads(Path(replay_in).read_text()))
    else:
        load_aws_submodules(pulumi_aws, ["ec2"])
        builders = instance_builders(pulumi_aws, count)
    if len(builders) != count:
        raise SystemExit(f"floor: {len(builders)} resources to register, expected {count}")
    imported = time.perf_counter()
    cpu0 = time.process_time()
    pulumi.runtime.set_mocks(FloorMocks(), project="gpu-cluster", stack=STACK, preview=False)
    if not gc_on:
        gc.disable()

    def build_all() -> None:
        for build in builders:
            build()

    _sync_await(run_pulumi_func(build_all))
    cpu1, done = time.process_time(), time.perf_counter()
    return {
        "seconds": done - imported,
        "cpu_seconds": cpu1 - cpu0,
        "import_seconds": imported - start,
        "custom": count,
        "peak_rss_mib": max_rss_mib(),
    }


def child_main(args: argparse.Namespace) -> int:
    if args.child == "plan":
        result = child_plan(size_for(args.gpus, args.single_gpu_type), args.replay)
    else:
        result = child_floor(args.floor, args.count, args.replay, args.floor_gc == "on")
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
    return 0


# --- parent: orchestration ---------------------------------------------------------------------


class ChildFailed(RuntimeError):
    pass


def run_child(extra: list[str]) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", *extra]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise ChildFailed(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_seconds"] = elapsed
    return result


@dataclass
class Row:
    gpus: int
    label: str
    instance_type: str
    nodes: int
    resources: int
    custom: int
    plan_s: float
    floor_s: float
    plan_proc_s: float
    floor_proc_s: float
    plan_rss_mib: float
    floor_rss_mib: float
    plan_cpu_s: float
    floor_cpu_s: float
    plan_import_s: float
    plan_ms_per_node: float | None = None
    floor_ms_per_node: float | None = None

    @property
    def ratio(self) -> float:
        return self.plan_s / self.floor_s


def median_of(samples: list[dict[str, Any]], key: str) -> float:
    return statistics.median(sample[key] for sample in samples)


def measure(
    sizes: list[Size], repeat: int, floor_flags: list[str], single_gpu_type: str
) -> tuple[list[Row], dict[int, dict[str, list[dict[str, Any]]]]]:
    samples: dict[int, dict[str, list[dict[str, Any]]]] = {
        s.gpus: {"plan": [], "floor": []} for s in sizes
    }
    custom: dict[int, int] = {}
    with tempfile.TemporaryDirectory(prefix="plan_scale-") as scratch:
        for round_ in range(1, repeat + 1):
            for size in sizes:
                replay = str(Path(scratch) / f"replay-{size.gpus}.json")
                plan_args = ["plan", "--gpus", str(size.gpus), "--single-gpu-type"]
                plan_args.append(single_gpu_type)
                if size.gpus not in custom:
                    plan_args += ["--replay", replay]
                plan = run_child(plan_args)
                if plan["late_imports"]:
                    late = ", ".join(plan["late_imports"])
                    print(f"  note: imported during the plan: {late}", file=sys.stderr)
                if custom.setdefault(size.gpus, plan["custom"]) != plan["custom"]:
                    raise ChildFailed(f"{size.gpus} GPUs: custom resource count changed")
                floor_args = ["floor", *floor_flags, "--count", str(custom[size.gpus])]
                floor_result = run_child([*floor_args, "--replay", replay])
                samples[size.gpus]["plan"].append(plan)
                samples[size.gpus]["floor"].append(floor_result)
                print(
                    f"  round {round_}/{repeat} {size.gpus:>5} GPUs ({size.label}): "
                    f"plan {plan['seconds']:.3f} s, floor {floor_result['seconds']:.3f} s",
                    file=sys.stderr,
                )
    rows = []
    for size in sizes:
        plan, fl = samples[size.gpus]["plan"], samples[size.gpus]["floor"]
        rows.append(
            Row(
                gpus=size.gpus,
                label=size.label,
                instance_type=size.instance_type,
                nodes=size.nodes,
                resources=plan[0]["resources"],
                custom=plan[0]["custom"],
                plan_s=median_of(plan, "seconds"),
                floor_s=median_of(fl, "seconds"),
                plan_proc_s=median_of(plan, "process_seconds"),
                floor_proc_s=median_of(fl, "process_seconds"),
                plan_rss_mib=median_of(plan, "peak_rss_mib"),
                floor_rss_mib=median_of(fl, "peak_rss_mib"),
                plan_cpu_s=median_of(plan, "cpu_seconds"),
                floor_cpu_s=median_of(fl, "cpu_seconds"),
                plan_import_s=median_of(plan, "import_seconds"),
            )
        )
    add_marginal_costs(rows)
    return rows, samples


def add_marginal_costs(rows: list[Row]) -> None:
    """ms/node between each size and the next smaller measured size of the same type."""
    by_type: dict[str, list[Row]] = {}
    for row in sorted(rows, key=lambda r: r.nodes):
        by_type.setdefault(row.instance_type, []).append(row)
    for same_type in by_type.values():
        for smaller, row in itertools.pairwise(same_type):
            added = row.nodes - smaller.nodes
            row.plan_ms_per_node = 1000 * (row.plan_s - smaller.plan_s) / added
            row.floor_ms_per_node = 1000 * (row.floor_s - smaller.floor_s) / added


# --- parent: targets and report ----------------------------------------------------------------


@dataclass
class Target:
    name: str
    status: str  # PASS, FAIL or SKIP
    detail: str


def evaluate(rows: list[Row]) -> list[Target]:
    by_gpus = {row.gpus: row for row in rows}
    name = f"plan time <= {RATIO_TARGET}x floor at {RATIO_TARGET_GPUS} GPUs"
    row = by_gpus.get(RATIO_TARGET_GPUS)
    if row is None:
        ratio_target = Target(name, "SKIP", f"{RATIO_TARGET_GPUS} GPUs not measured")
    else:
        ratio_target = Target(
            name,
            "PASS" if row.ratio <= RATIO_TARGET else "FAIL",
            f"{row.plan_s:.3f} s vs floor {row.floor_s:.3f} s = {row.ratio:.2f}x",
        )
    low, high = LINEAR_RANGE
    name = (
        f"plan time independent of cluster size (within {LINEAR_SPREAD:.0%}) "
        f"from {low} to {high} GPUs"
    )
    inside = sorted(
        (r for r in rows if r.instance_type == MULTI_GPU_TYPE and low <= r.gpus <= high),
        key=lambda r: r.gpus,
    )
    if len(inside) < 2:
        linear_target = Target(name, "SKIP", "needs at least two p4d sizes in the range")
    else:
        times = [r.plan_s for r in inside]
        spread = max(times) / min(times) - 1
        parts = ", ".join(f"{r.gpus} GPUs {r.plan_s:.3f} s" for r in inside)
        linear_target = Target(
            name,
            "PASS" if spread <= LINEAR_SPREAD else "FAIL",
            f"{parts}; max/min - 1 = {spread:.0%}",
        )
    return [ratio_target, linear_target]


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def markdown(rows: list[Row], targets: list[Target], floor: str, repeat: int) -> str:
    lines = [
        f"Offline plan vs SDK floor (`{floor}`), median of {repeat} fresh processes each",
        "",
        "| GPUs | nodes | resources (custom) | plan s | floor s | plan/floor "
        "| ms/node plan | ms/node floor | process s plan / floor | peak RSS MiB plan / floor |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.gpus} | {r.label} | {r.resources} ({r.custom}) | {r.plan_s:.3f} "
            f"| {r.floor_s:.3f} | {r.ratio:.2f} | {fmt(r.plan_ms_per_node, '.2f')} "
            f"| {fmt(r.floor_ms_per_node, '.2f')} | {r.plan_proc_s:.2f} / {r.floor_proc_s:.2f} "
            f"| {r.plan_rss_mib:.0f} / {r.floor_rss_mib:.0f} |"
        )
    lines.append("")
    lines += [f"- **{t.status}** {t.name}: {t.detail}" for t in targets]
    return "\n".join(lines)


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for package in ("pulumi", "pulumi_aws", "grpcio", "protobuf"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "-"
    return found


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        default=",".join(map(str, DEFAULT_SIZES)),
        help="comma-separated GPU counts: 1 or multiples of 8 (default: %(default)s)",
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs per size (median)")
    parser.add_argument("--floor", choices=("replay", "instances"), default="replay")
    parser.add_argument(
        "--floor-gc", choices=("on", "off"), default="on", help="cyclic GC during the floor"
    )
    parser.add_argument("--single-gpu-type", default="g5.xlarge", help="the 1-GPU node type")
    parser.add_argument("--check", action="store_true", help="exit 1 if a target fails")
    parser.add_argument(
        "--json",
        type=Path,
        default=RESULTS / "plan_scale.json",
        help="where to write the results as JSON (default: %(default)s)",
    )
    parser.add_argument("--no-json", action="store_true", help="do not write the JSON file")
    parser.add_argument("--child", choices=("plan", "floor"), help=argparse.SUPPRESS)
    parser.add_argument("--gpus", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--replay", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        return child_main(args)
    try:
        gpu_counts = sorted({int(part) for part in args.sizes.split(",") if part.strip()})
        sizes = [size_for(gpus, args.single_gpu_type) for gpus in gpu_counts]
    except ValueError as error:
        print(f"error: --sizes: {error}", file=sys.stderr)
        return 2
    if args.repeat < 1:
        print("error: --repeat must be at least 1", file=sys.stderr)
        return 2
    started = time.perf_counter()
    print(
        f"plan_scale: sizes {gpu_counts} GPUs, {args.repeat} run(s) each, "
        f"floor={args.floor} (gc {args.floor_gc}), {os.cpu_count()} CPUs",
        file=sys.stderr,
    )
    floor_flags = ["--floor", args.floor, "--floor-gc", args.floor_gc]
    try:
        rows, samples = measure(sizes, args.repeat, floor_flags, args.single_gpu_type)
    except (ChildFailed, subprocess.TimeoutExpired) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    targets = evaluate(rows)
    elapsed = time.perf_counter() - started
    print(markdown(rows, targets, " ".join(floor_flags), args.repeat))
    print(f"\nbenchmark wall time: {elapsed:.0f} s", file=sys.stderr)
    if not args.no_json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "argv": sys.argv[1:],
            "floor": args.floor,
            "floor_gc": args.floor_gc,
            "repeat": args.repeat,
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "versions": versions(),
            "benchmark_seconds": elapsed,
            "rows": [{**asdict(r), "ratio": r.ratio} for r in rows],
            "targets": [asdict(t) for t in targets],
            "samples": {str(gpus): runs for gpus, runs in samples.items()},
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    if args.check and any(t.status == "FAIL" for t in targets):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
