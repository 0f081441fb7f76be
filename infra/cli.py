"""`gpuc`: a thin dispatcher - offline plans, costs, estimates, stacks, catalog and prices, capacity
blocks. Commands raise CommandError; main() turns every failure into a message and exit code."""

from __future__ import annotations

import argparse
import atexit
import gc
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpu_cluster.components.names import DEFAULT_PROJECT, StackIdentity
from gpu_cluster.infra.json_doc import camel_fields, dump
from gpu_cluster.infra.outcome import (
    AWS,
    FINDINGS,
    INPUT,
    OK,
    USAGE,
    CommandError,
    from_exception,
    report,
)
from gpu_cluster.infra.overrides import add_override_options

if TYPE_CHECKING:
    from gpu_cluster.infra.prices.commitment import Commitment

EXIT_CONFIG = INPUT  # kept for callers of the old name


def cmd_plan(args: argparse.Namespace) -> int:
    if getattr(args, "own_process", False):
        # The plan is this process's last work: keep the cyclic GC paused from here to the exit
        # (run_plan pauses it for the plan and leaves it as it found it), so it never rescans
        # the heap the plan's imports and pulumi_aws's lazily loaded modules built (~0.1 s).
        gc.disable()
    from gpu_cluster.infra.overrides import apply_overrides, stack_config
    from gpu_cluster.infra.plan.engine import run_plan
    from gpu_cluster.infra.plan.render import preview_json, text_tree

    if args.program:
        from gpu_cluster.infra.stack_files import program_of

        project, program, config = program_of(Path(args.program), args.stack)
        config = apply_overrides(config, args.overrides)
        plan = run_plan(args.stack, config, program=program, preview=True, project=project)
    else:
        plan = run_plan(args.stack, stack_config(args.stack, args.overrides), preview=True)
    if plan.error is not None:
        raise from_exception(plan.error)
    for warning in plan.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    outputs = plan.outputs or {}
    warn_stale_prices(
        args.max_price_age,
        commitments=any(
            held in str(outputs.get("costNotes", "")) for held in ("Savings Plan", "Reserved")
        ),
        advisor=outputs.get("purchaseOption") == "spot",
    )
    if args.json:
        json.dump(preview_json(plan), sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
    else:
        print(text_tree(plan))
    return OK


def warn_stale_prices(
    limit_days: float | None, commitments: bool = True, advisor: bool = True
) -> None:
    """A warning on stderr per bundled price snapshot the command prints from that is older
    than the limit."""
    from gpu_cluster.infra.prices.freshness import max_age_days, stale_warnings
    from gpu_cluster.infra.prices.snapshots import bundled_snapshots

    try:
        limit = max_age_days(None if limit_days is None else int(limit_days))
    except ValueError as error:
        raise CommandError(INPUT, str(error)) from None
    for warning in stale_warnings(bundled_snapshots(commitments, advisor), limit):
        print(f"warning: {warning}", file=sys.stderr)


def add_price_age_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-price-age",
        type=bounded(1, 3650, "--max-price-age"),
        default=None,
        metavar="DAYS",
        help="warn when a bundled price snapshot is older than this (default 30, or "
        "GPUC_MAX_PRICE_AGE_DAYS)",
    )


def cmd_diff(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.diff.command import run_diff

    return run_diff(args.stacks, args.stack, args.saved, args.overrides, args.json)


def job_target(stack: str, region: str | None) -> tuple[StackIdentity, str, dict[str, str]]:
    """(its names' identity, region, stack file settings) of a stack jobs run on: the names
    are the program's (components/names.py), whatever clusterName is. Every jobs command
    refuses, with one message each: a stack without a stack file (its file names the cluster
    and the region; the stacks and a did-you-mean are listed), the data stack, an inference
    stack."""
    from gpu_cluster.infra.aws.job_command import job_stack_settings

    settings = job_stack_settings(stack)
    cluster = settings.get("gpu-cluster:clusterName") or stack
    region = stack_region(stack, region, settings)
    return StackIdentity(DEFAULT_PROJECT, stack, region, cluster), region, settings


def cmd_run(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.job_command import RunFlags, command_run

    cluster, region, settings = job_target(args.stack, args.region)
    command = args.command_line[1:] if args.command_line[:1] == ["--"] else args.command_line
    flags = RunFlags(
        command=command,
        name=args.name,
        max_restarts=args.max_restarts,
        env=args.env,
        workdir=args.workdir,
        setup=args.setup,
        image=args.image,
        job_file=args.file,
    )
    return command_run(
        args.stack, cluster, region, flags, args.json, watch_seconds=args.watch, settings=settings
    )


def cmd_jobs(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.job_command import command_jobs

    cluster, region, _ = job_target(args.stack, args.region)
    return command_jobs(cluster, region, args.stack, args.json, args.job)


def cmd_logs(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.job_command import command_logs

    cluster, region, _ = job_target(args.stack, args.region)
    return command_logs(args.stack, cluster, region, args.job, args.node, args.follow, args.json)


def cmd_cancel(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.job_command import command_cancel

    cluster, region, _ = job_target(args.stack, args.region)
    return command_cancel(args.stack, cluster, region, args.job, args.json)


def cmd_nccl_test(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.nccl_command import command_nccl_test
    from gpu_cluster.infra.outcome import load_cluster_spec

    cluster, region, _ = job_target(args.stack, args.region)
    spec = load_cluster_spec(args.stack)
    return command_nccl_test(
        args.stack, cluster, region, spec.facts, spec.efa, args.pairwise, args.json
    )


def cmd_resume(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.resume import run_resume

    return run_resume(args.stack, args.json)


def cmd_audit(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.audit.command import run_audit

    return run_audit(args.stack, args.json, args.overrides)


def cmd_catalog_list(args: argparse.Namespace) -> int:
    from gpu_cluster.components.catalog import load_catalog
    from gpu_cluster.infra.catalog_list import catalog_rows, catalog_text
    from gpu_cluster.infra.prices.gpu_prices import price_table

    rows = catalog_rows(
        load_catalog(), price_table(), args.region, args.gpu, args.min_gpus, args.offered
    )
    if args.json:
        dump({"region": args.region, "instanceTypes": [camel_fields(row) for row in rows]})
    else:
        print(catalog_text(rows, args.region))
        print(f"Prices: {price_table().label}")
    return OK


def cmd_catalog_refresh(args: argparse.Namespace) -> int:
    from gpu_cluster.components.catalog import CATALOG_PATH, Catalog
    from gpu_cluster.infra.catalog_refresh import (
        DEFAULT_REGIONS,
        fetch_catalog,
        merged_catalog,
        write_catalog,
    )

    path = args.output or CATALOG_PATH
    fresh = fetch_catalog(args.region or DEFAULT_REGIONS)
    catalog = (
        merged_catalog(Catalog.from_json(json.loads(path.read_text())), fresh)
        if path.is_file()
        else fresh
    )
    path = write_catalog(catalog, path)
    if args.json:
        types, regions = len(catalog.instance_types), len(catalog.offerings)
        dump({"path": str(path), "instanceTypes": types, "regions": regions})
        return OK
    print(
        f"wrote {len(catalog.instance_types)} GPU instance types for "
        f"{len(catalog.offerings)} regions to {path}"
    )
    return OK


def cmd_preflight(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.preflight import (
        FAIL,
        Clients,
        in_subnet_zone,
        run_data_preflight,
        run_preflight,
    )
    from gpu_cluster.infra.outcome import load_stack_spec
    from gpu_cluster.infra.validation import ResolvedCluster, ResolvedData

    spec = load_stack_spec(args.stack)
    if args.regions:  # refused before any call
        from gpu_cluster.components.purchase import instance_types
        from gpu_cluster.infra.aws.placement_scores import checked_regions

        if not isinstance(spec, ResolvedCluster):
            raise CommandError(INPUT, "--regions ranks spot placement for a stack with nodes")
        try:
            checked_regions(
                region_list(args.regions) or [],
                instance_types(spec.facts.instance_type, spec.purchase),
            )
        except ValueError as refused:
            raise CommandError(INPUT, str(refused)) from None
    scoring_ec2 = None  # the stack's region's EC2 client, for --regions
    if isinstance(spec, ResolvedData):  # the storage stack: its credentials and bucket name
        checks = run_data_preflight(spec, Clients.for_region(spec.region))
        where = spec.region
    elif isinstance(spec, ResolvedCluster):
        clients = Clients.for_region(spec.region)
        scoring_ec2 = clients.ec2
        spec = in_subnet_zone(spec, clients)  # availabilityZone left out: the subnet's
        checks = run_preflight(spec, clients)
        where = f"{spec.region}, {spec.availability_zone}"
    else:
        raise CommandError(INPUT, f"stack '{args.stack}' has nothing preflight can check")
    for warning in spec.warnings:  # as `gpuc plan` prints them (a stack file's 010 is 8)
        print(f"warning: {warning}", file=sys.stderr)
    failed = [check for check in checks if check.status == FAIL]
    unread = [check.name for check in failed if check.could_not_look]
    scores = None
    if args.regions:
        if scoring_ec2 is None:
            raise CommandError(INPUT, "--regions ranks spot placement for a stack with nodes")
        scores = region_scores(spec, scoring_ec2, region_list(args.regions) or [])
    if not (args.json and unread):
        if args.json and scores is not None:
            dump({"checks": [camel_fields(c) for c in checks], "placementScores": scores[1]})
        else:
            report_checks(args.stack, where, checks, args.json)
        if scores is not None and not args.json:
            from gpu_cluster.infra.aws.placement_scores import placement_text

            print(f"Spot placement scores for {scores[0]}:")
            print("\n".join("  " + line for line in placement_text(*scores[2:])))
    if unread:  # an AWS call failed: those checks could not look (exit 4), the rest is findings
        raise CommandError(
            AWS,
            f"gpuc preflight could not check {', '.join(unread)} for stack '{args.stack}': an "
            "AWS call failed (the check says which and why).",
            [camel_fields(check) for check in checks],
        )
    return FINDINGS if failed else OK


def region_scores(spec: Any, ec2: Any, regions: list[str]) -> tuple[str, list, Any, Any, Any]:
    """GetSpotPlacementScores for the stack's types and size over ``regions``, ranked."""
    from gpu_cluster.components.purchase import instance_types
    from gpu_cluster.infra.aws.placement_scores import own_zone_id, placement_scores
    from gpu_cluster.infra.problems import AwsError

    kinds = instance_types(spec.facts.instance_type, spec.purchase)
    try:
        zone = own_zone_id(ec2, spec.availability_zone)
        scores = placement_scores(
            ec2, kinds, spec.node_count, regions, spec.region, zone, single_zone=True
        )
    except ValueError as refused:
        raise CommandError(INPUT, str(refused)) from None
    except AwsError as error:
        raise CommandError(AWS, f"GetSpotPlacementScores failed: {error}") from error
    what = f"{spec.node_count} x {'/'.join(kinds)} in one zone"
    return what, [camel_fields(s) for s in scores], scores, regions, kinds


def report_checks(stack: str, where: str, checks: list[Any], as_json: bool) -> None:
    """Preflight's checks: a JSON list, or a line each with the fix of what did not pass."""
    if as_json:
        dump([camel_fields(check) for check in checks])
        return
    print(f"Preflight for stack '{stack}' ({where}):")
    for check in checks:
        print(f"  {check.status.upper():<5} {check.name:<18} {check.detail}")
        if check.fix and check.status != "pass":
            print(f"        fix: {check.fix}")


SWEPT_SERVICES = (
    "ec2",
    "autoscaling",
    "logs",
    "fsx",
    "elbv2",
    "wafv2",
    "scheduler",
    "cloudwatch",
    "events",
    "sns",
    "budgets",
    "iam",
    "kms",
    "sts",
)


def stack_settings(stack: str | None) -> dict[str, str] | None:
    """The stack file's settings ({} without a stack), or None when its file is gone (a
    destroyed stack's may be)."""
    from gpu_cluster.infra.stack_files import StackFileError, load_stack_config

    try:
        return load_stack_config(stack) if stack else {}
    except StackFileError:
        return None


def stack_region(
    stack: str | None, region: str | None, settings: dict[str, str] | None = None
) -> str:
    """The region asked for, else the stack file's aws:region, else us-east-1 (a destroyed
    stack's file may be gone: then say which region is searched). ``settings``: the stack
    file's, when the caller has read them already."""
    from gpu_cluster.infra.regions import checked_region

    if region:
        return checked_region(region)
    settings = settings if settings is not None else stack_settings(stack)
    if settings is None:
        print(f"no stack file for '{stack}': looking in us-east-1 (--region R)", file=sys.stderr)
        return "us-east-1"
    region = settings.get("aws:region") or "us-east-1"
    return checked_region(region, "aws:region", f"stacks/Pulumi.{stack}.yaml")


def check_regions(args: argparse.Namespace) -> None:
    """Every --region given is one AWS has (INPUT, with a did-you-mean, before any call)."""
    from gpu_cluster.infra.regions import checked_region

    given = getattr(args, "region", None)
    for region in given if isinstance(given, list) else [given] if given is not None else []:
        checked_region(region)


def stack_commitments(region: str) -> dict[str, Commitment]:
    """Stack id -> the commitment its stack file holds, for this region's stacks (a stack file
    that does not load prices its nodes without one: `gpuc plan` says what is wrong)."""
    from gpu_cluster.infra.outcome import load_stack_spec
    from gpu_cluster.infra.stack_files import available_stacks, project_root
    from gpu_cluster.infra.validation import ResolvedCluster

    found: dict[str, Commitment] = {}
    for stack in available_stacks(project_root()):
        try:
            spec = load_stack_spec(stack)
        except CommandError:
            continue
        if isinstance(spec, ResolvedCluster) and spec.region == region and spec.commitment:
            found[StackIdentity(DEFAULT_PROJECT, stack, region, spec.name).stack_id] = (
                spec.commitment
            )
    return found


def budget_line(stack: str, burn: float) -> str | None:
    """The stack's monthly budget against this burn (the same node prices as `gpuc cost`)."""
    from gpu_cluster.infra.outcome import load_stack_spec
    from gpu_cluster.infra.validation import ResolvedCluster

    try:
        spec = load_stack_spec(stack)
    except CommandError:
        return None
    budget = spec.cost_controls.budget if isinstance(spec, ResolvedCluster) else None
    if budget is None or burn <= 0:
        return None
    days = budget.monthly_usd / (burn * 24)
    return (
        f"budget ${budget.monthly_usd:,.0f}/month: this burn spends it in {days:,.1f} days "
        "(the nodes only; AWS Budgets counts every line of the bill)"
    )


def cmd_status(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws import client
    from gpu_cluster.infra.aws.status import gang_spans, list_nodes, orphans
    from gpu_cluster.infra.prices.gpu_prices import price_table
    from gpu_cluster.infra.stack_files import available_stacks, project_root

    args.region = stack_region(args.stack, args.region)
    ec2 = client("ec2", args.region)
    nodes = list_nodes(ec2, args.region, commitments=stack_commitments(args.region))
    if args.stack:
        stack = StackIdentity(DEFAULT_PROJECT, args.stack, args.region, args.stack)
        nodes = [n for n in nodes if n.belongs_to(stack)]
    unowned = {n.instance_id for n in orphans(nodes, available_stacks(project_root()))}
    if args.json:
        dump([camel_fields(n) | {"noStackFile": n.instance_id in unowned} for n in nodes])
        return OK
    if not nodes:
        print(f"no gpu-cluster nodes run in {args.region}")
        return OK
    print(
        f"{'stack':<12}{'cluster':<12}{'instance':<21}{'type':<18}{'bought':<10}{'zone':<12}"
        f"{'up h':>7}{'$/h':>10}  health"
    )
    for n in nodes:
        mark = "  <- no stack file" if n.instance_id in unowned else ""
        price = f"{n.usd_per_hour:,.2f}" if n.usd_per_hour is not None else "-"
        print(
            f"{n.stack or '-':<12}{n.cluster or '-':<12}{n.instance_id:<21}{n.instance_type:<18}"
            f"{n.lifecycle:<10}{n.zone:<12}{n.uptime_hours:>7.1f}{price:>10}"
            f"  {n.health or 'not reported'}{mark}"
        )
    burn = sum(n.usd_per_hour or 0 for n in nodes)
    print(
        f"burning about ${burn:,.2f}/hour (${burn * 24:,.0f}/day) at the bundled prices "
        f"({price_table().label}), as `gpuc cost` prices them"
    )
    if args.stack:
        line = budget_line(args.stack, burn)
        if line:
            print(line)
    for line in gang_spans(ec2, nodes):  # EC2 topology (infra/aws/status.py)
        print(line)
    return OK


def owns_bucket(settings: dict[str, str]) -> bool:
    """storage.source create: the stack's own bucket, log bucket and KMS key are protected."""
    try:
        storage = json.loads(settings.get("gpu-cluster:storage") or "{}")
    except ValueError:
        return False
    return isinstance(storage, dict) and storage.get("source") == "create"


def kept_data_note(stack: str) -> str:
    return (
        f"stack '{stack}' owns its bucket (storage.source create): its bucket, log bucket and KMS "
        "key are protected, so a plain `pulumi destroy` fails in its preview and deletes nothing "
        f"(GPU nodes included). Stop paying with `pulumi destroy -s {stack} --exclude-protected`; "
        "sweep leaves the bucket, the key that encrypts it and the Auto Scaling service-linked "
        "role the key's policy names"
    )


def cmd_sweep(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws import client
    from gpu_cluster.infra.aws.sweep import Sweeper

    settings = stack_settings(args.stack)
    args.region = stack_region(args.stack, args.region, settings)
    settings = settings or {}
    if settings.get("gpu-cluster:role") == "data":
        raise CommandError(
            INPUT,
            f"gpuc sweep --stack {args.stack}: '{args.stack}' is the data stack (datasets and "
            "checkpoints); sweep never touches it. Sweep the compute stacks that used it.",
        )
    sweeper = Sweeper(
        **{service: client(service, args.region) for service in SWEPT_SERVICES},
        region=args.region,
        stack=args.stack,
        cluster=settings.get("gpu-cluster:clusterName") or args.stack,
        keeps_data=owns_bucket(settings),
    )
    leftovers = sweeper.find()
    for kind, why in sweeper.unsupported:
        print(f"warning: this endpoint cannot list {kind}: {why}", file=sys.stderr)
    if sweeper.skipped:  # what could not be looked at may still bill: claim nothing
        for kind, why in sweeper.skipped:
            print(f"error: could not list {kind}: {why}", file=sys.stderr)
        for leftover in leftovers if not args.json else []:  # --json: in the error document
            print(f"  found {leftover.kind} {leftover.resource_id} ({leftover.detail})")
        not_checked = [kind for kind, _ in sweeper.skipped]
        raise CommandError(
            AWS,
            f"gpuc sweep could not check {len(not_checked)} kind(s) in {args.region} "
            f"({', '.join(not_checked)}): the stack may still leave resources there; nothing "
            "was deleted. Fix access (credentials, endpoint, IAM) and run it again.",
            [{"notChecked": not_checked, "found": [camel_fields(left) for left in leftovers]}],
        )
    if sweeper.keeps_data:
        print(kept_data_note(args.stack), file=sys.stderr)
    if args.json and not args.delete:  # what is left is a finding (exit 5), as audit's
        dump([camel_fields(leftover) for leftover in leftovers])
        return FINDINGS if leftovers else OK
    if not args.json:
        print_leftovers(args.stack, args.region, sweeper.identity.stack_id, leftovers)
    if not leftovers:
        if args.json:
            dump({"deleted": [], "notDeleted": []})
        return OK
    if not args.delete:
        print(f"delete them with: gpuc sweep --stack {args.stack} --region {args.region} --delete")
        return FINDINGS
    confirmed = args.yes or (
        not args.json
        and sys.stdin.isatty()
        and input("delete all of these? [y/N] ").strip().lower() == "y"
    )
    if not confirmed:
        raise CommandError(USAGE, "nothing deleted (confirm with --yes)")
    failures = sweeper.delete_all(leftovers)
    if args.json:
        failed = [leftover for leftover, _ in failures]
        dump(
            {
                "deleted": [camel_fields(x) for x in leftovers if x not in failed],
                "notDeleted": [camel_fields(x) | {"error": str(why)} for x, why in failures],
            }
        )
    else:
        for leftover, error in failures:
            print(f"  could not delete {leftover.kind} {leftover.resource_id}: {error}")
        print(f"deleted {len(leftovers) - len(failures)} of {len(leftovers)}")
    return AWS if failures else OK


def print_leftovers(stack: str, region: str, stack_id: str, leftovers: list[Any]) -> None:
    """What sweep found, a line each, and what it costs (or that nothing is left)."""
    from gpu_cluster.infra.prices.unit_prices import hours_per_month

    if not leftovers:  # stack_id: what sweep matches (another region's is not it)
        print(f"nothing tagged gpu-cluster:stack-id={stack_id} is left in {region}")
        return
    print(f"Left behind by stack '{stack}' in {region}:")
    for leftover in leftovers:
        print(
            f"  {leftover.kind:<20}{leftover.resource_id:<28}${leftover.usd_per_hour:>8.3f}/h"
            f"  {leftover.detail}"
        )
    total = sum(leftover.usd_per_hour for leftover in leftovers)
    print(
        f"about ${total:,.3f}/hour (${total * hours_per_month(region):,.0f}/month); the "
        "data stack's bucket and key are never swept"
    )


def cmd_stacks(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.cost.model import (
        estimate_cluster,
        estimate_data,
        estimate_serving,
        scheduled_usage,
    )
    from gpu_cluster.infra.outcome import load_stack_spec
    from gpu_cluster.infra.stack_files import available_stacks, project_root
    from gpu_cluster.infra.validation import ResolvedCluster

    rows = []
    for stack in available_stacks(project_root()):
        try:
            spec = load_stack_spec(stack)
        except CommandError as error:
            rows.append({"stack": stack, "error": str(error).splitlines()[0]})
            continue
        usage = scheduled_usage(spec)  # as `gpuc plan` and `gpuc cost` price it
        if isinstance(spec, ResolvedCluster) and spec.inference is not None:
            serving = spec.inference
            estimate = estimate_serving(spec, usage)  # at the minimum
            row = {
                "stage": spec.tags.get("stage", "inference"),
                "instanceType": spec.facts.instance_type,
                "nodes": f"{serving.min_nodes}-{serving.max_nodes}",
                "gpus": spec.facts.gpus * serving.min_nodes,
                "purchaseOption": spec.purchase_option,
            }
        elif isinstance(spec, ResolvedCluster):
            estimate = estimate_cluster(spec, usage)
            row = {
                "stage": spec.tags.get("stage", "-"),
                "instanceType": spec.facts.instance_type,
                "nodes": spec.node_count,
                "gpus": spec.total_gpus,
                "purchaseOption": spec.purchase_option,
            }
        else:
            estimate = estimate_data(spec, usage)
            row = {"stage": "data"}
        rows.append(
            {
                "stack": stack,
                **row,
                "usdPerHour": round(estimate.hourly_usd, 4 if row["stage"] == "data" else 2),
                "usdPerMonth": round(estimate.monthly_usd, 2),
                "hoursPerDay": usage.hours_per_day,
                "prepaid": estimate.prepaid,
            }
        )
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return OK
    print(
        f"{'stack':<14}{'stage':<12}{'type':<18}{'nodes':>6}{'GPUs':>7}  {'bought':<22}{'$/h':>10}"
        f"{'$/month':>12}"
    )
    for row in rows:
        if "error" in row:
            print(f"{row['stack']:<14}{row['error']}")
            continue
        note = " + block (prepaid)" if row["prepaid"] else ""
        note += f" at {row['hoursPerDay']:g} h/day" if row["hoursPerDay"] != 24 else ""
        print(
            f"{row['stack']:<14}{row['stage']:<12}{row.get('instanceType', '-'):<18}"
            f"{row.get('nodes', 0):>6}{row.get('gpus', 0):>7g}  "
            f"{row.get('purchaseOption', '-'):<22}"
            f"{row['usdPerHour']:>10,.2f}{row['usdPerMonth']:>12,.0f}{note}"
        )
    print(prices_footer())
    return OK


def prices_footer() -> str:
    """Where the printed prices come from, and how old they are."""
    from gpu_cluster.infra.prices.gpu_prices import price_table
    from gpu_cluster.infra.prices.unit_prices import unit_prices

    return (
        f"Prices: GPU {price_table().date}, other {unit_prices('us-east-1').date} (`gpuc cost` "
        "names each source)"
    )


def cmd_cost(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.cost.command import run_cost
    from gpu_cluster.infra.cost.model import DAYS_PER_MONTH, Usage

    if args.savings_plan and args.reserved:
        raise CommandError(
            USAGE,
            "--savings-plan and --reserved each price the nodes: give one "
            f"(got --savings-plan {args.savings_plan} --reserved {args.reserved})",
        )
    if args.savings_plan or args.reserved:  # as the stack's `commitment` would, for this run
        held = (
            {"savingsPlan": args.savings_plan, "planType": args.plan_type}
            if args.savings_plan
            else {"reservedInstances": args.reserved}
        )
        args.overrides = [
            *args.overrides,
            ("--set", f"commitment={json.dumps(held | {'payment': args.payment})}"),
        ]
    warn_stale_prices(args.max_price_age)
    usage = Usage(
        hours_per_day=24.0 if args.hours_per_day is None else args.hours_per_day,
        days_per_month=DAYS_PER_MONTH if args.days_per_month is None else args.days_per_month,
        dataset_gb=args.dataset_gb,
        flow_log_gb_per_month=args.flow_log_gb,
        trail_events_millions=args.trail_events_millions,
        requests_per_second=args.requests_per_second,
        kb_per_request=args.kb_per_request,
        requests_per_gpu_second=args.requests_per_gpu_second,
        savings_plan_1y=args.savings_plan_1y,
        savings_plan_3y=args.savings_plan_3y,
    )
    follow_schedule = args.hours_per_day is None
    return run_cost(
        args.stack, usage, args.json, args.quote_capacity_block, follow_schedule, args.overrides
    )


def cmd_block_offerings(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.block_command import run_offerings

    return run_offerings(
        args.stack, args.hours, args.start, args.json, regions=region_list(args.regions)
    )


def region_list(text: str | None) -> list[str] | None:
    """--regions us-east-1,us-west-2 (commas or spaces); None when not given."""
    if not text:
        return None
    return [r for r in text.replace(",", " ").split() if r]


def cmd_capacity_reservation(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.future_command import run_future_reservation

    return run_future_reservation(
        args.stack,
        args.start,
        args.commitment_days,
        args.count,
        args.yes,
        args.json,
        args.overrides,
    )


def cmd_block_purchase(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.block_command import run_purchase

    return run_purchase(args.offering_id, args.region, args.yes, args.json)


def cmd_prices_refresh(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.aws.price_refresh import fetch_prices, merged_price_rows, write_prices
    from gpu_cluster.infra.catalog_refresh import DEFAULT_REGIONS
    from gpu_cluster.infra.prices.gpu_prices import META_PATH, PRICES_PATH
    from gpu_cluster.infra.problems import AwsError

    regions: list[str] = args.region or list(DEFAULT_REGIONS)
    if args.commitments or args.spot_advisor:
        return refresh_other_prices(args, regions)
    try:
        rows = fetch_prices(regions)
    except AwsError as error:
        raise CommandError(AWS, f"{error}\nThe price snapshot was kept unchanged.") from error
    if not rows:
        raise CommandError(AWS, "AWS returned no prices; the snapshot was kept unchanged.")
    prices = args.output or PRICES_PATH
    meta = args.output.with_suffix(".meta.json") if args.output else META_PATH
    rows, kept = merged_price_rows(prices, rows, regions)
    write_prices(rows, regions, prices, meta, kept_regions=kept)
    if args.json:
        dump({"path": str(prices), "rows": len(rows), "regions": regions, "keptRegions": kept})
        return OK
    print(f"wrote {len(rows)} price rows for {len(regions)} regions to {prices}")
    return OK


def refresh_other_prices(args: argparse.Namespace, regions: list[str]) -> int:
    """--commitments: Savings Plan and RI rates from AWS's public price list files (streamed;
    no credentials); --spot-advisor: the Spot Instance Advisor's bands. Each all or nothing."""
    from gpu_cluster.infra.problems import AwsError

    if args.output and args.commitments and args.spot_advisor:
        raise CommandError(
            USAGE, "--output names one file: refresh --commitments and --spot-advisor one at a time"
        )
    target: dict[str, Any] = {}
    if args.output:
        target = {"path": args.output, "meta_path": args.output.with_suffix(".meta.json")}
    done: dict[str, Any] = {}
    if args.commitments:
        from gpu_cluster.infra.aws.price_list_files import run_commitments_refresh

        def progress(line: str) -> None:
            if not args.json:
                print(line, file=sys.stderr, flush=True)

        try:
            rows = run_commitments_refresh(regions, progress=progress, **target)
        except AwsError as error:
            raise CommandError(AWS, f"{error}\nThe bundled rates were kept unchanged.") from error
        done["commitmentRows"] = len(rows)
    if args.spot_advisor:
        from gpu_cluster.infra.aws.spot_advisor_refresh import refresh_spot_advisor

        data = refresh_spot_advisor(**target)
        done["spotAdvisorRegions"] = len(data.get("spot_advisor", {}))
    if args.json:
        dump(done)
    else:
        for name, value in done.items():
            print(f"{name}: {value}")
    return OK


def cmd_estimate(args: argparse.Namespace) -> int:
    from gpu_cluster.infra.estimate.command import run_estimate
    from gpu_cluster.infra.estimate.model import Workload, throughput

    defaults = throughput()["defaults"]
    work = Workload(
        model_params=args.model_params,
        dataset_gb=args.dataset_gb,
        tokens_per_step=args.tokens_per_step or defaults["tokens_per_step"],
        bytes_per_token=args.bytes_per_token or defaults["bytes_per_token"],
        mfu=args.mfu or defaults["mfu"],
        fsx_tib=args.fsx_tib or defaults["fsx_tib"],
        fsx_deployment=defaults["fsx_deployment"],
    )
    return run_estimate(args.stack, work, args.json, args.overrides, args.claims)


def bounded(low: float, high: float, name: str):
    """An argparse type: a number within [low, high], or a one-line usage error."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{name} must be {low:g}-{high:g}, got {text}")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    root = Parser(prog="gpuc", description="gpu-cluster: GPU clusters on AWS")
    root.add_argument("--version", action="version", version=f"gpuc {package_version()}")
    sub = root.add_subparsers(dest="command", parser_class=Parser)
    plan = sub.add_parser("plan", help="plan a stack offline (no Pulumi CLI, no credentials)")
    plan.add_argument("--stack", "-s", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    plan.add_argument("--json", action="store_true", help="print the `pulumi preview --json` shape")
    plan.add_argument(
        "--program",
        metavar="DIR",
        help="plan another Pulumi Python project (its Pulumi.yaml and Pulumi.<stack>.yaml)",
    )
    add_override_options(plan)
    add_price_age_option(plan)
    plan.set_defaults(func=cmd_plan)
    diff = sub.add_parser(
        "diff", help="what changes between two stacks, or a stack and --set overrides (offline)"
    )
    diff.add_argument("stacks", nargs="*", metavar="STACK", help="one or two stack names")
    diff.add_argument("--stack", "-s", help="the stack to compare (with --set or --from)")
    diff.add_argument(
        "--from", dest="saved", metavar="PLAN.json", help="a saved `gpuc plan --json`"
    )
    diff.add_argument("--json", action="store_true")
    add_override_options(diff)
    diff.set_defaults(func=cmd_diff)
    resume = sub.add_parser(
        "resume", help="start what the idle stop, a schedule or expiresAt stopped (needs AWS)"
    )
    resume.add_argument("--stack", "-s", required=True)
    resume.add_argument("--json", action="store_true")
    resume.set_defaults(func=cmd_resume)
    audit = sub.add_parser("audit", help="the security controls over a stack's plan (offline)")
    add_override_options(audit)
    audit.add_argument("--stack", "-s", required=True, help="stack: stacks/Pulumi.<stack>.yaml")
    audit.add_argument("--json", action="store_true", help="one object per control")
    audit.set_defaults(func=cmd_audit)
    preflight = sub.add_parser("preflight", help="read-only checks before pulumi up (needs AWS)")
    preflight.add_argument("--stack", "-s", required=True)
    preflight.add_argument(
        "--regions",
        metavar="R1,R2",
        help="also rank spot placement scores for the stack's types and size over these regions "
        "(at most 10), the stack's own marked",
    )
    preflight.add_argument("--json", action="store_true")
    preflight.set_defaults(func=cmd_preflight)
    run = sub.add_parser(
        "run",
        help="start a training job on every running node of a stack (needs AWS)",
        description="Start a training job on every running node of a stack. Its settings come "
        "from the flags, from a job file (-f job.yaml), or both: a flag given on the command "
        "line wins over the file's setting (--env: variable by variable), and the command after "
        "-- wins over the file's command.",
    )
    run.add_argument("--stack", "-s", required=True)
    run.add_argument(
        "--file",
        "-f",
        metavar="JOB.yaml",
        help="the job's settings: name, command, workdir (relative to the file's folder), "
        "setup, image, env, maxRestarts; the flags override them",
    )
    run.add_argument("--name", help="the job's name (default: the file's, else the script's)")
    run.add_argument(
        "--max-restarts",
        type=lambda v: int(bounded(0, 100, "--max-restarts")(v)),
        default=None,
        help="torchrun restarts of a failed worker group (default: the file's, else 3)",
    )
    run.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable for the job (repeatable; wins over the file's)",
    )
    run.add_argument(
        "--workdir",
        metavar="DIR",
        help="your code's folder: packed, uploaded to the stack's bucket once per content, and "
        "the job's working directory on every node",
    )
    run.add_argument(
        "--setup",
        metavar="CMD",
        help="a shell command run once per node before the job, e.g. "
        "'pip install -r requirements.txt' (at most 2 KB)",
    )
    run.add_argument(
        "--image", metavar="IMAGE", help="run the job in this container image (default: the AMI)"
    )
    run.add_argument(
        "--watch",
        type=bounded(0, 3600, "--watch"),
        default=30,
        metavar="SECONDS",
        help="watch the start this long: a job that fails on every node at once is reported "
        "and marked failed (default 30; 0: do not wait)",
    )
    run.add_argument("--region", help="default: the stack file's aws:region, else us-east-1")
    run.add_argument("--json", action="store_true", help="the started job as JSON")
    run.add_argument(
        "command_line",
        nargs=argparse.REMAINDER,
        metavar="-- CMD ARGS...",
        help="the job's command, after -- (wins over the file's command)",
    )
    run.set_defaults(func=cmd_run)
    jobs = sub.add_parser("jobs", help="a stack's jobs and their state on each node (needs AWS)")
    jobs.add_argument("--stack", "-s", required=True)
    jobs.add_argument("--job", help="only this job (--json: one object, not a list)")
    jobs.add_argument("--region", help="default: the stack file's aws:region, else us-east-1")
    jobs.add_argument("--json", action="store_true")
    jobs.set_defaults(func=cmd_jobs)
    logs = sub.add_parser("logs", help="a job's output from every node, interleaved (needs AWS)")
    logs.add_argument("--stack", "-s", required=True)
    logs.add_argument("--job", required=True)
    logs.add_argument("--node", help="only this node (its instance id)")
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing new lines")
    logs.add_argument("--region", help="default: the stack file's aws:region, else us-east-1")
    logs.add_argument("--json", action="store_true", help="one JSON object per line")
    logs.set_defaults(func=cmd_logs)
    cancel = sub.add_parser("cancel", help="stop a job on every node and keep it stopped")
    cancel.add_argument("--stack", "-s", required=True)
    cancel.add_argument("--job", required=True)
    cancel.add_argument("--region", help="default: the stack file's aws:region, else us-east-1")
    cancel.add_argument("--json", action="store_true")
    cancel.set_defaults(func=cmd_cancel)
    nccl = sub.add_parser(
        "nccl-test",
        help="all-reduce bus bandwidth on a stack's running nodes, or in pairs (needs AWS)",
        description="Run the NCCL all-reduce bench on every running node of a stack at once and "
        "hold its bus bandwidth against the model's pass line for that many nodes; with "
        "--pairwise, run it on pairs (each node twice, with different partners) and name the "
        "slow node. Exit 5 when a run is under its line, a node is named or lost.",
    )
    nccl.add_argument("--stack", "-s", required=True)
    nccl.add_argument(
        "--pairwise",
        action="store_true",
        help="pairs in rounds, each node measured at least twice: names the slow node(s)",
    )
    nccl.add_argument("--region", help="default: the stack file's aws:region, else us-east-1")
    nccl.add_argument("--json", action="store_true")
    nccl.set_defaults(func=cmd_nccl_test)
    status = sub.add_parser("status", help="what runs now for this project (needs AWS)")
    status.add_argument("--stack", "-s", help="only this stack (or cluster)")
    status.add_argument("--region", help="default: the stack file's aws:region, else us-east-1")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_status)
    sweep = sub.add_parser("sweep", help="what a destroyed stack left behind (needs AWS)")
    sweep.add_argument("--stack", "-s", required=True)
    sweep.add_argument("--region", help="default: the stack file's aws:region, else us-east-1")
    sweep.add_argument("--delete", action="store_true", help="delete what is found")
    sweep.add_argument("--yes", action="store_true", help="do not ask before deleting")
    sweep.add_argument("--json", action="store_true")
    sweep.set_defaults(func=cmd_sweep)
    stacks = sub.add_parser("stacks", help="the stack files: stage, type, nodes, GPUs, $/h")
    stacks.add_argument("--json", action="store_true")
    stacks.set_defaults(func=cmd_stacks)
    cost = sub.add_parser("cost", help="a stack's cost, line by line, and every way to buy it")
    add_override_options(cost)
    add_price_age_option(cost)
    cost.add_argument("--stack", "-s", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    cost.add_argument(
        "--savings-plan",
        choices=("1y", "3y"),
        help="price the on-demand nodes at this Savings Plan's rate for their type (AWS's price "
        "list files; the stack's `commitment` does it for every command)",
    )
    cost.add_argument(
        "--plan-type",
        choices=("compute", "ec2-instance"),
        default="compute",
        help="with --savings-plan: Compute (default) or EC2 Instance",
    )
    cost.add_argument(
        "--reserved",
        choices=("1y", "3y"),
        help="price the on-demand nodes at a standard Reserved Instance's rate of this term",
    )
    cost.add_argument(
        "--payment",
        choices=("no-upfront", "partial-upfront", "all-upfront"),
        default="no-upfront",
        help="with --savings-plan or --reserved: how it is paid (upfront spread over the term)",
    )
    cost.add_argument(
        "--hours-per-day",
        type=bounded(0, 24, "--hours-per-day"),
        default=None,
        help="hours a day the nodes run (default: the stack's schedule, else 24)",
    )
    cost.add_argument(
        "--days-per-month",
        type=bounded(0, 31, "--days-per-month"),
        default=None,
        help="days a month the stack exists (default: all of a 730-hour month)",
    )
    cost.add_argument("--dataset-gb", type=bounded(0, 1e9, "--dataset-gb"), help="data in S3")
    cost.add_argument(
        "--flow-log-gb", type=bounded(0, 1e9, "--flow-log-gb"), help="flow logs GB/month"
    )
    for flag, what in (
        ("--requests-per-second", "inference: requests per second at the load balancer"),
        ("--kb-per-request", "inference: request + response size in KB"),
        ("--requests-per-gpu-second", "inference: requests one GPU serves a second"),
    ):
        cost.add_argument(flag, type=bounded(0.001, 1e9, flag), help=what)
    cost.add_argument(
        "--trail-events-millions",
        type=bounded(0, 1e6, "--trail-events-millions"),
        help="audit-trail S3 data events a month, in millions (data stack with auditTrail)",
    )
    cost.add_argument(
        "--savings-plan-1y",
        type=bounded(0, 0.99, "--savings-plan-1y"),
        help="1-year savings plan discount rate, e.g. 0.3",
    )
    cost.add_argument(
        "--savings-plan-3y",
        type=bounded(0, 0.99, "--savings-plan-3y"),
        help="3-year savings plan discount rate, e.g. 0.5",
    )
    cost.add_argument(
        "--quote-capacity-block",
        action="store_true",
        help="price a capacity block from live offerings (needs AWS credentials)",
    )
    cost.add_argument("--json", action="store_true", help="the same numbers as JSON")
    cost.set_defaults(func=cmd_cost)
    block = sub.add_parser("capacity-block", help="EC2 Capacity Blocks for ML (needs AWS)")
    block_sub = block.add_subparsers(dest="block_command", required=True)
    offerings = block_sub.add_parser("offerings", help="offerings for a stack's nodes")
    offerings.add_argument("--stack", "-s", required=True)
    offerings.add_argument("--hours", type=int, required=True, help="block length, whole days")
    offerings.add_argument("--start", help="earliest start date (UTC), e.g. 2027-01-15")
    offerings.add_argument(
        "--regions",
        metavar="R1,R2",
        help="search these regions too, ranked by total price then start (default: the "
        "stack's region)",
    )
    offerings.add_argument("--json", action="store_true")
    offerings.set_defaults(func=cmd_block_offerings)
    buy = block_sub.add_parser("purchase", help="buy an offering (cannot be cancelled)")
    buy.add_argument(
        "offering_id", help="the offering's id, as `gpuc capacity-block offerings` lists it"
    )
    buy.add_argument("--region", default="us-east-1")
    buy.add_argument("--yes", action="store_true", help="confirm: the block cannot be cancelled")
    buy.add_argument("--json", action="store_true")
    buy.set_defaults(func=cmd_block_purchase)
    estimate = sub.add_parser("estimate", help="what bounds a training step, what an epoch costs")
    add_override_options(estimate)
    estimate.add_argument("--stack", "-s", required=True)
    estimate.add_argument(
        "--model-params",
        type=bounded(1e3, 1e14, "--model-params"),
        required=True,
        help="parameters, e.g. 7e9",
    )
    estimate.add_argument(
        "--dataset-gb",
        type=bounded(0.001, 1e9, "--dataset-gb"),
        default=1000.0,
        help="tokenized dataset size in GB (default 1000)",
    )
    estimate.add_argument(
        "--tokens-per-step",
        type=bounded(1, 1e12, "--tokens-per-step"),
        help="tokens in one training step (default: infra/data/throughput.json's)",
    )
    estimate.add_argument(
        "--bytes-per-token",
        type=bounded(1, 16, "--bytes-per-token"),
        help="bytes of tokenized data per token (default: infra/data/throughput.json's)",
    )
    estimate.add_argument("--mfu", type=bounded(0.01, 1, "--mfu"), help="model FLOPs utilisation")
    estimate.add_argument(
        "--fsx-tib",
        type=bounded(1.17, 1e5, "--fsx-tib"),
        help="FSx for Lustre size in TiB (default: infra/data/throughput.json's)",
    )
    estimate.add_argument(
        "--claims",
        action="store_true",
        help="also recompute the transfer-time figures quoted in the project's issue tracker",
    )
    estimate.add_argument("--json", action="store_true")
    estimate.set_defaults(func=cmd_estimate)
    future = sub.add_parser(
        "capacity-reservation",
        help="plan, and with --yes create, a future-dated capacity reservation (needs AWS)",
    )
    add_override_options(future)
    future.add_argument("--stack", "-s", required=True)
    future.add_argument(
        "--start", required=True, help="when it starts (UTC), 5-120 days ahead, e.g. 2027-02-01"
    )
    future.add_argument(
        "--commitment-days",
        type=int,
        default=14,
        help="how long it is held at least (AWS's minimum: 14 days); it ends then",
    )
    future.add_argument("--count", type=int, help="instances (default: the stack's nodes)")
    future.add_argument(
        "--yes", action="store_true", help="create it: it bills from its start, used or not"
    )
    future.add_argument("--json", action="store_true")
    future.set_defaults(func=cmd_capacity_reservation)
    prices = sub.add_parser("prices", help="the bundled GPU price snapshot")
    prices_sub = prices.add_subparsers(dest="prices_command", required=True)
    prices_refresh = prices_sub.add_parser("refresh", help="rebuild it from AWS (boto3)")
    prices_refresh.add_argument("--region", action="append", help="region (repeatable)")
    prices_refresh.add_argument(
        "--output", type=Path, help="write here instead of the bundled file"
    )
    prices_refresh.add_argument(
        "--commitments",
        action="store_true",
        help="instead: Savings Plan and Reserved Instance rates from AWS's public price list "
        "files (large downloads, streamed; no credentials)",
    )
    prices_refresh.add_argument(
        "--spot-advisor",
        action="store_true",
        help="instead: the Spot Instance Advisor's interruption bands (public; advisory)",
    )
    prices_refresh.add_argument("--json", action="store_true")
    prices_refresh.set_defaults(func=cmd_prices_refresh)
    catalog = sub.add_parser("catalog", help="the bundled GPU instance catalog")
    catalog_sub = catalog.add_subparsers(dest="catalog_command", required=True)
    listing = catalog_sub.add_parser("list", help="list GPU instance types")
    listing.add_argument("--region", default="us-east-1")
    listing.add_argument("--gpu", help="only this GPU model, e.g. A100")
    listing.add_argument("--min-gpus", type=float, default=0, help="at least this many per node")
    listing.add_argument("--offered", action="store_true", help="only types offered in the region")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=cmd_catalog_list)
    refresh = catalog_sub.add_parser("refresh", help="rebuild the catalog from EC2 (boto3)")
    refresh.add_argument("--region", action="append", help="region to describe (repeatable)")
    refresh.add_argument("--output", type=Path, help="write here instead of the bundled file")
    refresh.add_argument("--json", action="store_true")
    refresh.set_defaults(func=cmd_catalog_refresh)
    return root


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("gpu-cluster")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "unknown (not installed)"


class UsageError(Exception):
    """An argparse refusal, raised instead of printed so `--json` can answer it as JSON."""

    def __init__(self, usage: str, message: str) -> None:
        super().__init__(message)
        self.usage = usage


# Help for the flags many commands share, where a command gives none of its own (shown by
# `gpuc <command> --help` and in the docs site's CLI reference, infra/reference/).
SHARED_HELP = {
    "--stack": "stack name: stacks/Pulumi.<stack>.yaml",
    "--json": "print JSON instead of text",
    "--job": "the job's name, as `gpuc jobs` lists it",
    "--region": "the AWS region",
}


class Parser(argparse.ArgumentParser):
    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        if kwargs.get("help") is None and args and args[0] in SHARED_HELP:
            kwargs["help"] = SHARED_HELP[args[0]]
        return super().add_argument(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        raise UsageError(self.format_usage(), f"{self.prog}: error: {message}")


def parse(root: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Arguments; an unknown flag is reported with its own subcommand's usage."""
    args, unknown = root.parse_known_args(argv)
    if unknown:
        commands = next(
            a for a in root._actions if isinstance(a, argparse._SubParsersAction)
        ).choices
        command = commands.get(getattr(args, "command", None) or "", root)
        command.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    own_process = argv is None  # gpuc's own command line: the process ends with this command
    if own_process:
        # At exit Python empties every module and then collects the whole heap as cyclic
        # garbage (after a plan: pulumi, pulumi_aws, pydantic), about a third of the process's
        # CPU time (bench/plan_overhead.py). The output is flushed before that teardown and gpuc
        # holds nothing whose finalizer matters, so the last exit handler (registered first)
        # freezes the heap out of that collection.
        atexit.register(gc.freeze)
    argv = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in argv
    root = parser()
    code = OK
    try:
        try:
            args = parse(root, argv)
        except UsageError as error:
            if not as_json:
                sys.stderr.write(error.usage + str(error) + "\n")
                return USAGE
            return report(CommandError(USAGE, str(error)), True)
        if args.command is None:  # plain `gpuc`: say what it can do
            root.print_help()
            return OK
        args.own_process = own_process
        try:
            check_regions(args)
            return args.func(args)
        except BrokenPipeError:
            raise
        except Exception as error:
            if os.environ.get("GPUC_DEBUG") and not isinstance(error, CommandError):
                raise
            failure = from_exception(error)
            code = failure.code
            return report(failure, as_json)
    except BrokenPipeError:  # `gpuc ... | head`: the reader left; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return code


if __name__ == "__main__":
    sys.exit(main())
