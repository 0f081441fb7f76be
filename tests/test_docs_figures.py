"""The figures the docs print, held against what the code prints and plans, so that none of
them can go stale: a fenced block after `<!-- output: gpuc ARGS -->` is what `gpuc ARGS`
prints; the tables of stage prices, purchase options, user data sizes, the benchmark's plan
sizes and the deployer's IAM actions are recomputed here. A figure that moves fails its test
with the value to write.

`python tests/test_docs_figures.py` prints the generated tables (IAM, bench sizes) to paste.
"""

from __future__ import annotations

import ast
import gzip
import importlib.util
import json
import re
import shlex
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import ROOT, STACKS, TRAIN_LIKE, plan_stack
from docs_text import page, section_table

from gpu_cluster.components.aws_limits import raw_user_data
from gpu_cluster.infra import cli
from gpu_cluster.infra.plan.engine import Plan, run_plan

DOCS = ROOT / "docs"
OUTPUT = re.compile(r"<!-- output: (gpuc [^\n]*?) -->\n```[a-z]*\n(.*?)```", re.S)
LT = "aws:ec2/launchTemplate:LaunchTemplate"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert cli.main(list(args)) == 0, args
    return capsys.readouterr().out


def run_json(capsys: pytest.CaptureFixture[str], *args: str):
    return json.loads(run(capsys, *args, "--json"))


def money(value: float) -> str:
    return f"{value:,.2f}"


# --- blocks of gpuc output -------------------------------------------------------------------


def output_blocks() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        for command, block in OUTPUT.findall(path.read_text()):
            found.append((str(path.relative_to(ROOT)), command, block))
    return found


def normalized(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def test_the_pages_show_gpuc_output_where_a_reader_needs_it():
    shown = {(p, c) for p, c, _ in output_blocks()}
    for needed in [
        ("docs/getting-started.md", "gpuc plan --stack train"),
        ("docs/concepts/stages.md", "gpuc stacks"),
        ("docs/concepts/security.md", "gpuc audit --stack train"),
        ("docs/guides/serve-a-model.md", "gpuc plan --stack inference"),
        ("docs/guides/serve-a-model.md", "gpuc cost --stack inference"),
    ]:
        assert needed in shown, needed


@pytest.mark.parametrize(("path", "command", "block"), output_blocks(), ids=lambda v: "")
def test_each_output_block_is_what_gpuc_prints(path, command, block, capsys):
    printed = normalized(run(capsys, *shlex.split(command)[1:]))
    assert normalized(block) in printed, (
        f"{path}: the block after <!-- output: {command} --> is not what it prints today:\n"
        f"{printed}"
    )


ERROR = re.compile(r"<!-- error: (gpuc [^\n]*?) -->\n```[a-z]*\n(.*?)```", re.S)


def error_blocks() -> list[tuple[str, str, str]]:
    found = []
    for path in sorted(DOCS.rglob("*.md")):
        for command, block in ERROR.findall(path.read_text()):
            found.append((str(path.relative_to(ROOT)), command, block))
    return found


def test_the_configuration_page_shows_real_errors():
    assert [p for p, _, _ in error_blocks()].count("docs/concepts/configuration.md") >= 2


@pytest.mark.parametrize(("path", "command", "block"), error_blocks(), ids=lambda v: "")
def test_each_error_block_is_what_gpuc_prints(path, command, block, capsys):
    """An input error: exit 3, the block is stderr's, whole."""
    capsys.readouterr()
    assert cli.main(shlex.split(command)[1:]) == 3, command
    printed = normalized(capsys.readouterr().err)
    assert normalized(block) == printed, f"{path}: <!-- error: {command} --> prints:\n{printed}"


PROGRAM = re.compile(
    r"<!-- program -->\n *```python\n(.*?) *```.*?<!-- program error -->\n *```\n(.*?) *```", re.S
)


def test_the_own_program_error_is_what_the_program_raises(tmp_path):
    """The program on "Use it from your own program" and the error it stops with, whole."""
    from gpu_cluster.infra.plan.engine import run_plan

    (found,) = PROGRAM.findall(page("docs/guides/own-program.md"))
    program, error = (textwrap.dedent(part) for part in found)
    (tmp_path / "__main__.py").write_text(program)
    plan = run_plan("dev", {"aws:region": "us-east-1"}, program=tmp_path / "__main__.py")
    assert plan.error is not None
    # the page names the program's file as the user sees it: relative to their project
    assert normalized(error) == normalized(str(plan.error).replace(f"{tmp_path}/", ""))
    assert [r.type for r in plan.resources] == ["pulumi:pulumi:Stack"]


def test_the_quick_start_shows_the_plans_totals():
    """Steps and cost: the two lines a reader compares with their own plan first."""
    text = page("docs/getting-started.md")
    (block,) = [b for c, b in OUTPUT.findall(text) if c == "gpuc plan --stack train"]
    assert block.startswith("Steps: ") and "\nEstimated cost: $" in block


# --- prices --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stacks_json() -> dict[str, dict]:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(["stacks", "--json"]) == 0
    return {row["stack"]: row for row in json.loads(out.getvalue())}


def test_the_readmes_stage_table_is_what_gpuc_stacks_prints(stacks_json):
    rows = section_table(page("README.md"), "| stack | what | GPUs | $/h (us-east-1) |")
    assert sorted(r[0].strip("`") for r in rows) == sorted(stacks_json)
    for row in rows:
        stack = stacks_json[row[0].strip("`")]
        assert row[3].split()[0] == money(stack["usdPerHour"]), row
        assert row[2] in (str(stack.get("gpus", 0)), str(stack.get("nodes"))), row


def test_the_stage_walk_prices_are_what_gpuc_stacks_prints(stacks_json):
    rows = section_table(
        page("docs/concepts/stages.md"),
        "| step | command | what runs | $/hour | what survives `pulumi destroy` |",
    )
    priced = [r for r in rows if r[0] in stacks_json]
    assert [r[0] for r in priced] == ["data", "dev", "experiment", "train"]
    for row in priced:
        assert row[3] == money(stacks_json[row[0]]["usdPerHour"]), row


def test_the_stage_tables_gpu_prices_are_gpuc_costs(capsys):
    rows = section_table(
        page("docs/concepts/stages.md"),
        "| stack | what | GPUs | bought as | GPU $/h (us-east-1) |",
    )
    for row in rows:
        stack = row[0].strip("`")
        if stack == "data":
            assert row[4] == "storage only"
            continue
        cost = run_json(capsys, "cost", "--stack", stack)
        (gpu,) = [line for line in cost["lines"] if line["item"].startswith("GPU instances")]
        assert row[4].split()[0] == money(gpu["usdPerHour"]), row
        assert gpu["item"] == f"GPU instances ({row[3]})", row
        if "(on-demand" in row[4]:
            on_demand = cost["options"][0]
            assert on_demand["option"] == "on-demand"
            assert row[4].endswith(f"(on-demand {money(on_demand['usdPerHour'])})"), row


PURCHASE_HEADER = (
    "| stage | on-demand $/h | spot (stack AZ) $/h | spot (cheapest AZ) $/h | 1-yr SP $/h "
    "| 3-yr SP $/h | reservation $/h | other lines $/month |"
)
OPTION_COLUMNS = [
    "on-demand",
    "spot, ",
    "spot, cheapest AZ",
    "savings plan, 1 year",
    "savings plan, 3 year",
    "capacity reservation",
]


def test_the_purchase_option_table_is_gpuc_costs(capsys):
    rows = section_table(page("docs/concepts/purchase-options.md"), PURCHASE_HEADER)
    assert [r[0].split()[0] for r in rows] == ["dev", "experiment", "train"]
    for row in rows:
        cost = run_json(capsys, "cost", "--stack", row[0].split()[0])
        options = cost["options"]
        for cell, prefix in zip(row[1:7], OPTION_COLUMNS, strict=True):
            (option,) = [
                o
                for o in options
                if o["option"].startswith(prefix)
                and ("cheapest" in o["option"]) == ("cheapest" in prefix)
            ]
            assert cell == money(option["usdPerHour"]), (row[0], prefix, option)
        (gpu,) = [line for line in cost["lines"] if line["item"].startswith("GPU instances")]
        other = cost["total"]["usdPerMonth"] - gpu["usdPerMonth"]
        assert row[7] == f"{round(other):,}", (row[0], other)


def test_usage_sentence_is_gpuc_cost_at_8_hours_a_day(capsys):
    cost = run_json(capsys, "cost", "--stack", "train", "--hours-per-day", "8")
    by = {o["option"]: o for o in cost["options"]}
    on_demand, reservation = by["on-demand"], by["capacity reservation"]
    sentence = (
        f"day (on-demand ${money(on_demand['usdPerDay'])}/day, "
        f"${on_demand['usdPerGpuHourUsed']:.3f} per GPU-hour used) while a savings plan's "
        "commitment and a reservation bill 24 h a day — at 8 h/day the reservation costs "
        f"${reservation['usdPerGpuHourUsed']:.2f} per GPU-hour actually used."
    )
    assert sentence in " ".join(page("docs/concepts/purchase-options.md").split())


def test_the_estimates_sentence_is_gpuc_estimates(capsys):
    printed = run(capsys, "estimate", "--stack", "train", "--model-params", "7e9")
    (bf16,) = [line.split() for line in printed.splitlines() if line.startswith("bf16")]
    compute = re.search(r"Compute per step .*: ([0-9.]+) s", printed)
    assert compute
    sentence = (
        f"a bf16 gradient all-reduce takes {float(bf16[3]):.2f} s per step "
        f"({float(bf16[7]):.1f} s on a 10 Gbps link), well under the "
        f"~{round(float(compute.group(1)))} s of compute per 4M-token step."
    )
    assert sentence in " ".join(page("docs/guides/interconnect.md").split())


def test_the_serving_cost_sentence_is_gpuc_costs(capsys):
    printed = run(capsys, "cost", "--stack", "inference")
    serving = re.search(
        r"Serving: \$([0-9,]+)/month at (\d+) nodes \(minimum\), \$([0-9,]+)/month "
        r"at (\d+) \(maximum\)",
        printed,
    )
    per_request = re.search(r"\$([0-9.]+) per 1,000 requests", printed)
    assert serving and per_request, printed
    low, low_nodes, high, high_nodes = serving.groups()
    sentence = (
        f"about ${low}/month at {low_nodes} nodes, ${high} at {high_nodes}, "
        f"${float(per_request.group(1)):.3f} per 1,000 requests at the defaults"
    )
    assert sentence in " ".join(page("docs/guides/serve-a-model.md").split())


def test_the_readmes_links_point_at_files():
    """GitHub shows the README: its relative links must name files of the repository."""
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page("README.md")):
        if "://" not in target:
            assert (ROOT / target).is_file(), target


# --- user data sizes -----------------------------------------------------------------------


def user_data_sizes(plan: Plan) -> tuple[int, int]:
    (template,) = plan.of_type(LT)
    raw = raw_user_data(template.inputs["userData"], base64_encoded=True)
    return len(raw), len(gzip.decompress(raw))


def test_the_user_data_size_table_is_the_plans():
    from test_user_data_size import LARGEST

    rows = section_table(page("docs/concepts/nodes.md"), "| stack | user data | script |")
    plans: dict[str, Callable[[], Plan]] = {
        s: lambda s=s: plan_stack(s) for s in STACKS if s != "data"
    }
    plans["largest"] = lambda: run_plan("largest", LARGEST, secret_keys=["gpu-cluster:secrets"])
    assert [r[0].split()[0] for r in rows] == ["dev", "experiment", "train", "inference", "largest"]
    for row in rows:
        raw, script = user_data_sizes(plans[row[0].split()[0]]())
        assert (row[1], row[2]) == (f"{raw:,}", f"{script:,}"), row


# --- the benchmark's plan sizes ------------------------------------------------------------


def plan_scale():
    path = ROOT / "bench" / "plan_scale.py"
    spec = importlib.util.spec_from_file_location("bench_plan_scale", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def bench_sizes_table() -> str:
    bench = plan_scale()
    lines = ["| GPUs | nodes | resources (custom) |", "|---:|---|---:|"]
    for gpus in bench.DEFAULT_SIZES:
        size = bench.size_for(gpus, "g5.xlarge")
        plan = run_plan(bench.STACK, bench.plan_config(size))
        assert plan.error is None, plan.error
        custom = len([r for r in plan.resources if r.custom])
        lines.append(f"| {gpus} | {size.label} | {len(plan.resources)} ({custom}) |")
    return "\n".join(lines)


def between(text: str, start: str, end: str) -> str:
    return text.split(start + "\n", 1)[1].split("\n" + end, 1)[0]


def test_the_benchmarks_plan_sizes_are_todays():
    shown = between(page("docs/benchmarks.md"), "<!-- bench: plan_scale sizes -->", "<!-- /bench")
    assert shown == bench_sizes_table()


PUBLISHED = ROOT / "bench" / "published"  # the runs the page reports, as the benches wrote them


def published_timing_tables() -> str:
    """The page's timing tables, rendered from the recorded runs (bench/published/*.json)."""
    scale = json.loads((PUBLISHED / "plan_scale.json").read_text())
    lines = [
        "| GPUs | nodes | resources (custom) | plan s | floor s | plan/floor "
        "| peak RSS MiB plan / floor |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in scale["rows"]:
        lines.append(
            f"| {row['gpus']} | {row['label']} | {row['resources']} ({row['custom']}) | "
            f"{row['plan_s']:.3f} | {row['floor_s']:.3f} | {row['plan_s'] / row['floor_s']:.2f} | "
            f"{row['plan_rss_mib']:.0f} / {row['floor_rss_mib']:.0f} |"
        )
    lines += ["", "| baseline exit | gpuc plan s (cpu) | baseline s (cpu) | ratio |"]
    lines += ["|---|---:|---:|---:|"]
    for name in ("plan_overhead.json", "plan_overhead_freeze.json"):
        run = json.loads((PUBLISHED / name).read_text())
        gpuc, base = run["gpuc"], run["baseline"]
        lines.append(
            f"| {run['baseline_exit']} | {gpuc['median_s']:.3f} ({gpuc['median_cpu_s']:.3f}) | "
            f"{base['median_s']:.3f} ({base['median_cpu_s']:.3f}) | {run['ratio']:.2f} |"
        )
    return "\n".join(lines)


def test_the_benchmarks_timings_are_the_recorded_runs():
    shown = between(page("docs/benchmarks.md"), "<!-- bench: published timings -->", "<!-- /bench")
    assert shown == published_timing_tables()


# --- the deployer's IAM actions ------------------------------------------------------------

# Each module that calls AWS outside Pulumi, by its file name, and who runs it.
CALLERS = {
    "capacity_blocks": "gpuc capacity-block",
    "future_reservation": "gpuc capacity-reservation",
    "catalog_refresh": "gpuc catalog refresh",
    "job_command": "gpuc run, jobs, logs, cancel",
    "job_image": "gpuc run, jobs, logs, cancel",
    "jobs": "gpuc run, jobs, logs, cancel",
    "workdir": "gpuc run, jobs, logs, cancel",
    "nccl_test": "gpuc nccl-test",
    "network_facts": "pulumi up, gpuc preflight (your own VPC)",
    "reservations": "pulumi up, gpuc preflight (a reservation or Capacity Block)",
    "placement_scores": "gpuc preflight",  # --regions: spot placement scores
    "preflight": "gpuc preflight",
    "price_refresh": "gpuc prices refresh",
    "resume": "gpuc resume",
    "status": "gpuc status",
    "sweep": "gpuc sweep",
    "sweep_controls": "gpuc sweep",
    "sweep_network": "gpuc sweep",
}
# Calls whose operation is a variable or that bypass the wrapper (read from the code by hand;
# the test below fails when the module stops making them).
EXTRA = {
    "network_facts": ["ec2:DescribeVpcs", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"],
    "sweep_network": ["ec2:RevokeSecurityGroupIngress", "ec2:RevokeSecurityGroupEgress"],
    "preflight": ["ec2:RunInstances", "s3:ListBucket"],  # the DryRun; HeadBucket's permission
    "catalog_refresh": ["ec2:DescribeAvailabilityZones"],
    "nccl_test": ["ssm:DescribeInstanceInformation"],  # jobs.unreachable: is SSM's agent online
}
EXTRA_EVIDENCE = {
    "network_facts": ["DescribeVpcs", "DescribeSubnets", "DescribeSecurityGroups"],
    "sweep_network": ["RevokeSecurityGroupIngress", "RevokeSecurityGroupEgress"],
    "preflight": ["run_instances(", "head_bucket("],
    "catalog_refresh": ["describe_availability_zones("],
    "nccl_test": ["unreachable("],
}


def aws_modules() -> Iterator[Path]:
    for path in sorted((ROOT / "infra").rglob("*.py")):
        text = path.read_text()
        if "call(" in text or "paginate(" in text or "translated(" in text:
            yield path


def literal_actions(path: Path) -> set[str]:
    from gpu_cluster.infra.aws import _action

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
        args = {"call": node.args[1:3], "paginate": node.args[1:3], "translated": node.args[:2]}
        pair = args.get(name or "")
        if pair and len(pair) == 2 and all(isinstance(a, ast.Constant) for a in pair):
            service, operation = (a.value for a in pair)  # type: ignore[union-attr]
            if isinstance(service, str) and isinstance(operation, str):
                found.add(_action(service, operation))
    return found


def actions_by_caller() -> dict[str, set[str]]:
    by: dict[str, set[str]] = {}
    for path in aws_modules():
        actions = literal_actions(path)
        if not actions:
            continue
        assert path.stem in CALLERS, (
            f"{path.relative_to(ROOT)} calls AWS ({sorted(actions)}): add it to CALLERS with "
            "the command that runs it, and run this file to regenerate docs/iam-policy.md"
        )
        by.setdefault(CALLERS[path.stem], set()).update(actions, EXTRA.get(path.stem, []))
        if '"TagSpecifications"' in path.read_text():  # tags on create: EC2 authorizes
            by[CALLERS[path.stem]].add("ec2:CreateTags")  # CreateTags too (see the page)
    return by


def iam_actions_table() -> str:
    lines = ["| who | IAM actions |", "|---|---|"]
    for who, actions in sorted(actions_by_caller().items()):
        lines.append(f"| {who} | {', '.join(f'`{a}`' for a in sorted(actions))} |")
    return "\n".join(lines)


def service_of(resource_type: str) -> str:
    package, module = resource_type.split(":")[0], resource_type.split(":")[1].split("/")[0]
    if package != "aws":
        return ""
    if module == "index":  # getPartition answers locally; getCallerIdentity asks STS
        return "sts" if "getCallerIdentity" in resource_type else ""
    if module == "cloudwatch":
        kind = resource_type.split("/")[1]
        if kind.startswith("event"):
            return "events"
        return "logs" if kind.startswith("log") else "cloudwatch"
    return {"lb": "elasticloadbalancing", "vpc": "ec2", "ebs": "ec2"}.get(module, module)


# Plans whose resources are what `pulumi up` manages: every stack, and the options no stack
# file turns on.
FEATURES: dict[str, dict[str, str]] = {
    "train + fsx, schedule, expiresAt, a created reservation, jobs.repositories": {
        **TRAIN_LIKE,
        "gpu-cluster:fsx": json.dumps({"storageCapacityGib": 1200, "throughputPerTib": 250}),
        "gpu-cluster:schedule": json.dumps(
            {"days": "MON-FRI", "start": "08:00", "stop": "20:00", "timezone": "UTC"}
        ),
        "gpu-cluster:expiresAt": "2031-01-31T00:00:00Z",
        "gpu-cluster:purchaseOption": "capacity-reservation",
        "gpu-cluster:capacityReservation": json.dumps({"create": True}),
        "gpu-cluster:jobs": json.dumps({"repositories": ["train"]}),
    },
    "dev + budget.stopAtLimit, no NAT gateway": {
        **{k: v for k, v in TRAIN_LIKE.items() if k != "gpu-cluster:nodes"},
        "gpu-cluster:instanceType": "g5.xlarge",
        "gpu-cluster:budget": json.dumps({"monthlyUsd": 300, "stopAtLimit": True}),
        "gpu-cluster:alertEmails": json.dumps(["ml@example.com"]),
        "gpu-cluster:network": json.dumps({"natGateway": False}),
    },
    "data + auditTrail, ebsEncryptionByDefault, snapshotBlockPublicAccess": {
        "aws:region": "us-east-1",
        "gpu-cluster:role": "data",
        "gpu-cluster:storage": json.dumps({"source": "create"}),
        "gpu-cluster:auditTrail": "true",
        "gpu-cluster:ebsEncryptionByDefault": "true",
        "gpu-cluster:snapshotBlockPublicAccess": "true",
    },
}


def planned_types() -> dict[str, set[str]]:
    plans = {s: plan_stack(s) for s in STACKS}
    for name, config in FEATURES.items():
        plans[name] = run_plan("features", config)
        assert plans[name].error is None, (name, plans[name].error)
    types: dict[str, set[str]] = {}
    for plan in plans.values():
        for resource in plan.resources:
            if resource.custom and service_of(resource.type):
                types.setdefault(service_of(resource.type), set()).add(resource.type)
        for token, _ in plan.invokes:
            if service_of(token):
                types.setdefault(service_of(token), set()).add(token)
    return types


def iam_resources_table() -> str:
    lines = ["| IAM service | resources and reads (Pulumi type tokens) |", "|---|---|"]
    for service, types in sorted(planned_types().items()):
        names = ", ".join(f"`{t.split(':', 1)[1]}`" for t in sorted(types))
        lines.append(f"| `{service}` | {names} |")
    return "\n".join(lines)


def test_the_extra_actions_are_still_in_the_code():
    for stem, needles in EXTRA_EVIDENCE.items():
        text = "".join(p.read_text() for p in (ROOT / "infra").rglob(f"{stem}.py"))
        for needle in needles:
            assert needle in text, (stem, needle)


def test_the_iam_page_lists_every_action_gpuc_calls():
    shown = between(page("docs/iam-policy.md"), "<!-- iam: gpuc actions -->", "<!-- /iam")
    assert shown == iam_actions_table()


def test_the_iam_page_lists_every_service_pulumi_up_manages():
    shown = between(page("docs/iam-policy.md"), "<!-- iam: pulumi up resources -->", "<!-- /iam")
    assert shown == iam_resources_table()


if __name__ == "__main__":
    print(iam_resources_table(), iam_actions_table(), bench_sizes_table(), sep="\n\n")
