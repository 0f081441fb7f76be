"""The offline plan's own overhead: ``gpuc plan`` against a plain Pulumi program, side by side.

    python bench/plan_overhead.py [--stack train] [--runs 7] [--max-ratio 1.5] [--json PATH]

What is compared (wall time of a whole fresh process, as the parent sees it: interpreter start,
imports, run, output, exit):

gpuc
    ``gpuc plan --stack STACK`` (the console script, or the same ``main()`` through
    ``python -c`` when there is no ``gpuc`` next to this Python), its output read and dropped.
baseline
    A plain Pulumi program, generated once per benchmark run from a survey of the real plan:
    it imports pulumi, pulumi_aws, every pulumi_aws submodule the plan loaded (pulumi_aws loads
    them lazily on first use) and every other provider package the plan used (pulumiverse_time),
    sets ``pulumi.runtime.set_mocks`` with trivial mocks (a resource's state is its inputs, an
    invoke answers ``{}``) and ``preview=True`` as the plan does, and registers the same
    resources: the same number, types and names, components as ``pulumi.ComponentResource`` of
    the same type, custom resources through their pulumi_aws (or other provider) classes with
    the plan's recorded top-level inputs as literals, reads as ``pulumi.StackReference``, each
    under the same parent. It waits for the registrations the way the plan engine does
    (``run_pulumi_func``). No config, validation, invokes, Output wiring, rendering or CLI.

The survey is one untimed child (``--survey``) that runs the plan in-process with ``--json``
and records which modules were loaded and which class each resource type was made with.
Then ``--runs`` rounds each run gpuc and the baseline once, alternately (gpuc first in odd
rounds, the baseline first in even ones), so load from other processes on a shared machine
falls on both alike. Reported: the median, min and max of each, and the ratio of the medians.

Exit code 0 when median(gpuc) / median(baseline) <= ``--max-ratio`` (1.5), 1 when above, 2 when
a child failed (a benchmark error). A run with the defaults is 17 child processes (the survey,
one warm-up of each, 7 rounds of two): 40-110 s on a busy 2-core machine. The results also go to
bench/results/plan_overhead.json (git-ignored). Timing lives here only, never in the tests.

``--bytecode env`` (default) runs both as this environment does; where PYTHONDONTWRITEBYTECODE
is set, every gpuc run compiles the project's ~600 KiB of source again (~0.1 s CPU), which an
installed wheel never does: ``--bytecode cached`` gives both a private .pyc cache instead.
``--baseline-exit freeze`` makes the baseline skip the teardown GC at exit as gpuc does (see
below), so the ratio is like for like on everything but the program itself.

Results (issue 28 part 6). A 2-core machine shared with other engineers' test runs (load average
5-12 throughout, so wall times are 1.5-4x a quiet machine's; CPU = user + system of the child,
steadier); medians of 7 alternating rounds; 59 resources (52 custom, 5 components, 1 read).
Rows ran at different loads: compare the ratio within a row, not seconds across rows.

    code       --bytecode  --baseline-exit   gpuc s (cpu)    baseline s (cpu)  ratio (cpu)
    before     env         plain             9.918 (2.710)   8.013 (2.222)     1.24 (1.22)
    before     cached      plain             9.956 (2.631)   9.052 (2.364)     1.10 (1.11)
    after      env         plain             3.145 (1.451)   3.807 (2.078)     0.83 (0.70)
    after      env         freeze            2.624 (1.579)   2.468 (1.604)     1.06 (0.98)
    after      cached      plain             1.335 (1.284)   2.090 (1.803)     0.64 (0.71)
    after      cached      freeze            2.265 (1.746)   2.125 (1.672)     1.07 (1.04)

Before and after side by side in one session (7 rounds of four processes, order rotated; "before"
is the same checkout's ``main(argv)``, which keeps the old GC behaviour; bytecode env):
gpuc 1.774 s (cpu 1.594), gpuc as before 3.132 s (2.621), baseline 2.160 s (2.063), baseline
freezing at exit 1.617 s (1.488): before/baseline 1.45, after/baseline 0.82, after/baseline
freezing at exit 1.10.

Where the time went (cProfile and ``-X importtime`` of one process; CPU on the loaded machine):
pulumi + pulumi_aws imports ~1.45 s (shared with the baseline: ~0.25 s at import, ~0.8 s of
pulumi_aws submodules loaded lazily during the plan), gpuc's own imports ~0.33 s (pydantic and
the config models about half; compiling the project's source ~0.1 s with bytecode env), the
SDK registering the resources ~0.18 s (shared), gpuc's config, validation, catalog, costs and
rendering ~0.07 s -- and two GC costs: (1) run_plan pauses the cyclic GC for the plan; when it
resumed it, the first collection scanned everything allocated during the pause, pulumi_aws's
lazily loaded modules included (~0.1 s); (2) at exit Python empties every module and collects
the whole heap as garbage: 0.7-0.9 s CPU in gpuc and in the baseline alike, a third of the
process. Changes: gpuc's own process (``main()`` with no argv) registers ``gc.freeze`` as its
last exit handler (the teardown collection then has nothing to scan; output is flushed before
it) and keeps the GC paused from the start of ``gpuc plan`` to the exit; the program imports
the serving stack's components only for an inference stack (~10 ms). Checked and left: boto3
and botocore are not imported by a plan; the catalog, price table, DLAMI and topology files
are each read once; Pulumi.yaml is parsed three times (~1.5 ms each); two importlib.metadata
version lookups (a few ms); the SDK's per-resource stack trace walks gpuc's deeper call stack.
"""

from __future__ import annotations

import argparse
import contextlib
import io
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
import types
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
MAX_RATIO = 1.5
STACK_TYPE = "pulumi:pulumi:Stack"
STACK_REFERENCE_TYPE = "pulumi:pulumi:StackReference"
PROVIDER_PACKAGES = re.compile(r"^(pulumi_[a-z0-9_]+|pulumiverse_[a-z0-9_]+)$")


# --- survey: what the plan loads and registers (untimed) --------------------------------------


def camel_to_snake(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).lower()


def survey(stack: str) -> dict[str, Any]:
    """Run the plan in this process; return its modules and resources for the baseline."""
    import inspect

    import pulumi

    classes: dict[str, tuple[str, str]] = {}  # type token -> (module, class name)
    original = pulumi.CustomResource.__init__

    def recording_init(self: Any, t: str, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        classes.setdefault(t, (cls.__module__, cls.__qualname__))
        original(self, t, *args, **kwargs)

    pulumi.CustomResource.__init__ = recording_init  # type: ignore[method-assign]
    from gpu_cluster.infra.cli import main as gpuc_main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = gpuc_main(["plan", "--stack", stack, "--json"])
    pulumi.CustomResource.__init__ = original  # type: ignore[method-assign]
    if code != 0:
        raise SystemExit(f"survey: gpuc plan --stack {stack} --json exited {code}")
    steps = json.loads(out.getvalue())["steps"]
    loaded = [
        name
        for name, module in list(sys.modules.items())
        if type(module) is types.ModuleType  # a lazy module not yet used is a subclass
        and (PROVIDER_PACKAGES.match(name) or re.match(r"^pulumi_aws\.[a-z0-9_]+$", name))
    ]
    index_of: dict[str, int] = {}
    resources: list[dict[str, Any]] = []
    for step in steps:
        state = step["newState"]
        typ, urn = state["type"], state["urn"]
        name = urn.rsplit("::", 1)[1]
        index_of[urn] = len(resources)
        entry: dict[str, Any] = {
            "type": typ,
            "name": name,
            "parent": index_of.get(state.get("parent", "")),
        }
        if typ == STACK_TYPE:
            entry["kind"] = "stack"
        elif step["op"] == "read" and typ == STACK_REFERENCE_TYPE:
            entry["kind"] = "stack_reference"
        elif not state.get("custom"):
            entry["kind"] = "component"
        else:
            if typ not in classes:
                raise SystemExit(f"survey: no class recorded for {typ}")
            module_name, class_name = classes[typ]
            cls = getattr(sys.modules[module_name], class_name)
            package = module_name.rsplit(".", 1)[0]  # pulumi_aws.ec2.vpc: as pulumi_aws.ec2.Vpc
            if getattr(sys.modules.get(package), class_name, None) is cls:
                module_name = package
            accepted = inspect.signature(cls._internal_init).parameters
            kwargs = {camel_to_snake(k): v for k, v in state.get("inputs", {}).items()}
            entry.update(
                kind="custom",
                module=module_name,
                cls=class_name,
                kwargs={k: v for k, v in kwargs.items() if k in accepted},
            )
        resources.append(entry)
    return {"modules": sorted(loaded), "resources": resources}


def baseline_source(
    found: dict[str, Any], stack: str, project: str, freeze_at_exit: bool = False
) -> str:
    """A plain Pulumi program under set_mocks registering the surveyed resources."""
    lines = [
        '"""Generated by bench/plan_overhead.py: the baseline plain Pulumi program."""',
        *(
            ["import atexit", "import gc", "", "atexit.register(gc.freeze)  # as gpuc does", ""]
            if freeze_at_exit
            else []
        ),
        "import pulumi",
        *(f"import {module}" for module in found["modules"]),
        "from pulumi.runtime.stack import run_pulumi_func",
        "from pulumi.runtime.sync_await import _sync_await",
        "",
        "",
        "class Mocks(pulumi.runtime.Mocks):",
        "    def new_resource(self, args):",
        '        return f"{args.name}-id", dict(args.inputs)',
        "",
        "    def call(self, args):",
        "        return {}, []",
        "",
        "",
        "def program():",
    ]
    for index, entry in enumerate(found["resources"]):
        kind = entry["kind"]
        if kind == "stack":
            continue  # run_pulumi_func makes the root stack
        parent = entry["parent"]
        opts = "None"
        if parent is not None and found["resources"][parent]["kind"] != "stack":
            opts = f"pulumi.ResourceOptions(parent=r{parent})"
        name = repr(entry["name"])
        if kind == "component":
            call = f"pulumi.ComponentResource({entry['type']!r}, {name}, None, {opts})"
        elif kind == "stack_reference":
            call = f"pulumi.StackReference({name}, opts={opts})"
        else:
            args = "".join(f", {k}={v!r}" for k, v in entry["kwargs"].items())
            call = f"{entry['module']}.{entry['cls']}({name}{args}, opts={opts})"
        lines.append(f"    r{index} = {call}")
    lines += [
        "",
        "",
        f"pulumi.runtime.set_mocks(Mocks(), project={project!r}, stack={stack!r}, preview=True)",
        "_sync_await(run_pulumi_func(program))",
        "",
    ]
    return "\n".join(lines)


# --- timing ------------------------------------------------------------------------------------


class ChildFailed(RuntimeError):
    pass


def gpuc_command(stack: str) -> list[str]:
    script = Path(sys.executable).with_name("gpuc")
    if script.exists():
        return [str(script), "plan", "--stack", stack]
    code = "import sys; from gpu_cluster.infra.cli import main; sys.exit(main())"
    return [sys.executable, "-c", code, "plan", "--stack", stack]


def child_env(bytecode: str, scratch: Path) -> dict[str, str]:
    """The children's environment: as given (``env``), or with bytecode cached in a private
    folder (``cached``), as an installed package has it even where PYTHONDONTWRITEBYTECODE is
    set (no __pycache__ is written into the checkout)."""
    env = dict(os.environ)
    if bytecode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    return env


def child_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@dataclass
class Sample:
    wall_s: float
    cpu_s: float


def timed(command: list[str], env: dict[str, str]) -> Sample:
    """Wall and CPU (user + system) seconds of one child process, run to its end."""
    cpu = child_cpu_seconds()
    started = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise ChildFailed(f"{' '.join(command)} exited {done.returncode}:\n{done.stderr}")
    return Sample(elapsed, child_cpu_seconds() - cpu)


@dataclass
class Summary:
    median_s: float
    min_s: float
    max_s: float
    median_cpu_s: float
    samples: list[Sample]


def summary(samples: list[Sample]) -> Summary:
    walls = [sample.wall_s for sample in samples]
    return Summary(
        median_s=statistics.median(walls),
        min_s=min(walls),
        max_s=max(walls),
        median_cpu_s=statistics.median(sample.cpu_s for sample in samples),
        samples=samples,
    )


def measure(
    gpuc: list[str], baseline: list[str], runs: int, env: dict[str, str]
) -> tuple[Summary, Summary]:
    gpuc_runs: list[Sample] = []
    baseline_runs: list[Sample] = []
    for round_ in range(1, runs + 1):
        order = [(gpuc, gpuc_runs), (baseline, baseline_runs)]
        for command, samples in order if round_ % 2 else order[::-1]:
            samples.append(timed(command, env))
        print(
            f"  round {round_}/{runs}: gpuc {gpuc_runs[-1].wall_s:.3f} s "
            f"(cpu {gpuc_runs[-1].cpu_s:.3f}), baseline {baseline_runs[-1].wall_s:.3f} s "
            f"(cpu {baseline_runs[-1].cpu_s:.3f})",
            file=sys.stderr,
        )
    return summary(gpuc_runs), summary(baseline_runs)


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for package in ("pulumi", "pulumi_aws", "pulumiverse_time", "pydantic", "grpcio", "protobuf"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = "-"
    return found


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--stack", default="train", help="the stack to plan (%(default)s)")
    parser.add_argument("--project", default="gpu-cluster", help=argparse.SUPPRESS)
    parser.add_argument("--runs", type=int, default=7, help="alternating rounds (median)")
    parser.add_argument("--max-ratio", type=float, default=MAX_RATIO, help="exit 1 above it")
    parser.add_argument(
        "--bytecode",
        choices=("env", "cached"),
        default="env",
        help="env: the environment as given; cached: .pyc files in a private cache folder",
    )
    parser.add_argument(
        "--baseline-exit",
        choices=("plain", "freeze"),
        default="plain",
        help="plain: the baseline exits as a plain program does; freeze: it freezes its heap "
        "out of the teardown GC at exit as gpuc does (like for like on exit cost)",
    )
    parser.add_argument("--keep", type=Path, help="also write the generated baseline here")
    parser.add_argument(
        "--json",
        type=Path,
        default=RESULTS / "plan_overhead.json",
        help="where to write the results as JSON (default: %(default)s)",
    )
    parser.add_argument("--no-json", action="store_true", help="do not write the JSON file")
    parser.add_argument("--survey", type=Path, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def report(
    stack: str, found: dict[str, Any], gpuc: Summary, baseline: Summary, max_ratio: float
) -> str:
    kinds = [entry["kind"] for entry in found["resources"]]
    ratio = gpuc.median_s / baseline.median_s
    width = len(f"gpuc plan --stack {stack}")
    lines = [
        f"resources: {len(kinds)} ({kinds.count('custom')} custom, "
        f"{kinds.count('component')} components, {kinds.count('stack_reference')} read, "
        f"{kinds.count('stack')} stack); modules the baseline imports: {len(found['modules'])}",
    ]
    for label, s in ((f"gpuc plan --stack {stack}", gpuc), ("baseline", baseline)):
        lines.append(
            f"{label:<{width}}  median {s.median_s:.3f} s (min {s.min_s:.3f}, max {s.max_s:.3f});"
            f" cpu median {s.median_cpu_s:.3f} s"
        )
    lines.append(
        f"ratio of medians: {ratio:.2f} (target <= {max_ratio}): "
        f"{'PASS' if ratio <= max_ratio else 'FAIL'}; "
        f"cpu ratio {gpuc.median_cpu_s / baseline.median_cpu_s:.2f}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.survey:  # the child: survey the plan, write it for the parent
        args.survey.write_text(json.dumps(survey(args.stack)))
        return 0
    if args.runs < 1:
        print("error: --runs must be at least 1", file=sys.stderr)
        return 2
    started = time.perf_counter()
    print(
        f"plan_overhead: stack {args.stack}, {args.runs} rounds, bytecode {args.bytecode}, "
        f"baseline exit {args.baseline_exit}, "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}",
        file=sys.stderr,
    )
    with tempfile.TemporaryDirectory(prefix="plan_overhead-") as folder:
        scratch = Path(folder)
        env = child_env(args.bytecode, scratch)
        survey_path = scratch / "survey.json"
        this = [sys.executable, str(Path(__file__).resolve()), "--stack", args.stack]
        baseline_path = scratch / "baseline_program.py"
        gpuc, baseline = gpuc_command(args.stack), [sys.executable, str(baseline_path)]
        try:
            timed([*this, "--survey", str(survey_path)], env)
            found = json.loads(survey_path.read_text())
            freeze = args.baseline_exit == "freeze"
            baseline_path.write_text(baseline_source(found, args.stack, args.project, freeze))
            if args.keep:
                args.keep.write_text(baseline_path.read_text())
            timed(baseline, env)  # warm-up: the page cache (and the .pyc cache if cached)
            timed(gpuc, env)
            gpuc_summary, baseline_summary = measure(gpuc, baseline, args.runs, env)
        except (ChildFailed, subprocess.TimeoutExpired) as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
    ratio = gpuc_summary.median_s / baseline_summary.median_s
    print(report(args.stack, found, gpuc_summary, baseline_summary, args.max_ratio))
    print(f"benchmark wall time: {time.perf_counter() - started:.0f} s", file=sys.stderr)
    if not args.no_json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        document = {
            "when": datetime.now(UTC).isoformat(timespec="seconds"),
            "argv": sys.argv[1:],
            "stack": args.stack,
            "runs": args.runs,
            "bytecode": args.bytecode,
            "baseline_exit": args.baseline_exit,
            "cpus": os.cpu_count(),
            "load_average": os.getloadavg(),
            "versions": versions(),
            "gpuc": asdict(gpuc_summary),
            "baseline": asdict(baseline_summary),
            "ratio": ratio,
            "max_ratio": args.max_ratio,
            "modules": found["modules"],
            "resources": len(found["resources"]),
        }
        args.json.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0 if ratio <= args.max_ratio else 1


if __name__ == "__main__":
    sys.exit(main())
