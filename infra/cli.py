"""`gpuc`: offline plans and catalog upkeep. User mistakes print a message, never a traceback."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

EXIT_OK, EXIT_CONFIG, EXIT_USAGE = 0, 2, 1


def cmd_plan(args: argparse.Namespace) -> int:
    from infra.plan.engine import run_plan
    from infra.plan.render import preview_json, text_tree
    from infra.stack_files import StackFileError, load_stack_config

    try:
        config = load_stack_config(args.stack)
    except StackFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    plan = run_plan(args.stack, config)
    if plan.error is not None:
        print(f"error: {plan.error}", file=sys.stderr)
        return EXIT_CONFIG
    if args.json:
        json.dump(preview_json(plan), sys.stdout, indent=2, sort_keys=True, default=str)
        sys.stdout.write("\n")
    else:
        print(text_tree(plan))
    return EXIT_OK


def cmd_catalog_list(args: argparse.Namespace) -> int:
    from components.catalog import load_catalog
    from infra.prices import on_demand_hourly

    catalog = load_catalog()
    print(
        f"{'type':<20}{'gpu':<22}{'vcpu':>5}{'efa':>5}{'cards':>6}{'nvme':>10}  $/h ({args.region})"
    )
    for name, facts in sorted(catalog.instance_types.items()):
        price = on_demand_hourly(args.region, name)
        zones = catalog.zones_offering(args.region, name)
        print(
            f"{name:<20}{f'{facts.gpu_count} x {facts.gpu_model}':<22}{facts.vcpus:>5}"
            f"{facts.max_efa_interfaces:>5}{len(facts.network_cards):>6}"
            f"{f'{facts.nvme_disk_count}x{facts.nvme_disk_size_gb}':>10}  "
            f"{f'{price:.2f}' if price else '-':>7}  {' '.join(zones)}"
        )
    return EXIT_OK


def cmd_catalog_refresh(args: argparse.Namespace) -> int:
    from components.catalog import CATALOG_PATH
    from infra.aws import AwsError
    from infra.catalog_refresh import DEFAULT_REGIONS, fetch_catalog, write_catalog

    try:
        catalog = fetch_catalog(args.region or DEFAULT_REGIONS)
    except AwsError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_USAGE
    path = write_catalog(catalog, args.output or CATALOG_PATH)
    print(
        f"wrote {len(catalog.instance_types)} GPU instance types for "
        f"{len(catalog.offerings)} regions to {path}"
    )
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="gpuc", description="gpu-cluster: GPU clusters on AWS")
    sub = root.add_subparsers(dest="command", required=True)
    plan = sub.add_parser("plan", help="plan a stack offline (no Pulumi CLI, no credentials)")
    plan.add_argument("--stack", "-s", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
    plan.add_argument("--json", action="store_true", help="print the `pulumi preview --json` shape")
    plan.set_defaults(func=cmd_plan)
    catalog = sub.add_parser("catalog", help="the bundled GPU instance catalog")
    catalog_sub = catalog.add_subparsers(dest="catalog_command", required=True)
    listing = catalog_sub.add_parser("list", help="list GPU instance types")
    listing.add_argument("--region", default="us-east-1")
    listing.set_defaults(func=cmd_catalog_list)
    refresh = catalog_sub.add_parser("refresh", help="rebuild the catalog from EC2 (boto3)")
    refresh.add_argument("--region", action="append", help="region to describe (repeatable)")
    refresh.add_argument("--output", type=Path, help="write here instead of the bundled file")
    refresh.set_defaults(func=cmd_catalog_refresh)
    return root


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # `gpuc ... | head`: the reader left; that is not an error
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
