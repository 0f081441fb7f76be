"""Refresh the bundled Spot Instance Advisor data (infra/data/spot_advisor.json) from AWS's
public feed: no credentials, no AWS API (a plain HTTPS GET of a public S3 object, as the
advisor page https://aws.amazon.com/ec2/spot/instance-advisor/ itself loads it, and as
alexei-led/spotinfo's `make update-data` and internal/spot/data.go fetch it).

The feed is kept in its own format, trimmed to the catalog's GPU types and Linux (the project's
only OS: the Deep Learning AMI), and replaced atomically with its source and date only when the
whole download parsed; a failed or malformed fetch leaves the bundled file as it was."""

from __future__ import annotations

import json
import os
import tempfile
import urllib.request
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.infra.prices.spot_advisor import ADVISOR_META_PATH, ADVISOR_PATH
from gpu_cluster.infra.problems import AWS, CommandError

ADVISOR_URL = "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json"
KEPT_OS = ("Linux",)
TIMEOUT_SECONDS = 60


def fetch_url(url: str) -> bytes:
    """The feed's bytes (a public object: no credentials, no signing)."""
    with urllib.request.urlopen(url, timeout=TIMEOUT_SECONDS) as answer:
        return answer.read()


def trim_advisor(data: Any, instance_types: Iterable[str]) -> dict[str, Any]:
    """The feed cut down to ``instance_types`` (and KEPT_OS), still in its own format; a
    ValueError naming what is missing when it is not the advisor's format."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    ranges, regions = data.get("ranges"), data.get("spot_advisor")
    if not isinstance(ranges, list) or not ranges or not isinstance(regions, dict) or not regions:
        raise ValueError("no 'ranges' list or no 'spot_advisor' object")
    if not all(isinstance(r, dict) and {"index", "label"} <= set(r) for r in ranges):
        raise ValueError("a 'ranges' item without its index and label")
    indexes = {r["index"] for r in ranges}
    wanted = set(instance_types)
    kept: dict[str, Any] = {}
    for region, systems in sorted(regions.items()):
        for system in KEPT_OS:
            types = (systems or {}).get(system, {})
            rows = {k: {"s": v.get("s"), "r": v.get("r")} for k, v in types.items() if k in wanted}
            for kind, row in rows.items():
                if row["r"] not in indexes:
                    raise ValueError(
                        f"{region} {system} {kind}: range {row['r']!r} is not in 'ranges'"
                    )
            if rows:
                kept.setdefault(region, {})[system] = dict(sorted(rows.items()))
    if not kept:
        raise ValueError("none of the catalog's instance types is in it")
    described = data.get("instance_types") or {}
    trimmed: dict[str, Any] = {
        "instance_types": {k: described[k] for k in sorted(described) if k in wanted},
        "ranges": ranges,
        "spot_advisor": kept,
    }
    if "global_rate" in data:
        trimmed["global_rate"] = data["global_rate"]
    return trimmed


def advisor_json(data: dict[str, Any]) -> str:
    """The trimmed feed as text: one line per instance type, so a refresh diffs line by line."""
    lines = ["{", ' "instance_types": {']
    described = list(data["instance_types"].items())
    lines += [
        f"  {json.dumps(k)}: {json.dumps(v)}" + ("," if i < len(described) - 1 else "")
        for i, (k, v) in enumerate(described)
    ]
    lines += [" },", f' "ranges": {json.dumps(data["ranges"])},', ' "spot_advisor": {']
    regions = list(data["spot_advisor"].items())
    for i, (region, systems) in enumerate(regions):
        lines.append(f"  {json.dumps(region)}: {{")
        for j, (system, types) in enumerate(systems.items()):
            lines.append(f"   {json.dumps(system)}: {{")
            items = list(types.items())
            lines += [
                f"    {json.dumps(k)}: {json.dumps(v)}" + ("," if n < len(items) - 1 else "")
                for n, (k, v) in enumerate(items)
            ]
            lines.append("   }" + ("," if j < len(systems) - 1 else ""))
        lines.append("  }" + ("," if i < len(regions) - 1 else ""))
    lines.append(" }" + ("," if "global_rate" in data else ""))
    if "global_rate" in data:
        lines.append(f' "global_rate": {json.dumps(data["global_rate"])}')
    lines.append("}")
    return "\n".join(lines) + "\n"


def _replace(path: Path, text: str) -> None:
    """Write beside the file, then rename over it (atomic on one filesystem)."""
    with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
        out.write(text)
    os.replace(out.name, path)


def write_advisor(
    data: dict[str, Any],
    source: str,
    date: str,
    path: Path = ADVISOR_PATH,
    meta_path: Path = ADVISOR_META_PATH,
) -> None:
    _replace(path, advisor_json(data))
    _replace(meta_path, json.dumps({"source": source, "date": date}, indent=2) + "\n")


def refresh_spot_advisor(
    instance_types: Iterable[str] | None = None,
    fetch: Callable[[str], bytes] | None = None,
    path: Path = ADVISOR_PATH,
    meta_path: Path = ADVISOR_META_PATH,
    today: str | None = None,
) -> dict[str, Any]:
    """Download the feed, trim it to ``instance_types`` (default: the catalog's) and replace
    the bundled copy; the trimmed data. A CommandError (AWS) when the download fails or is not
    the advisor's format: nothing is written then."""
    kinds = (
        list(instance_types) if instance_types is not None else list(load_catalog().instance_types)
    )
    try:
        raw = (fetch or fetch_url)(ADVISOR_URL)
    except OSError as error:
        raise CommandError(
            AWS,
            f"could not download the Spot Instance Advisor data from {ADVISOR_URL}: {error}; "
            "the bundled copy is unchanged (check the network or HTTPS_PROXY)",
        ) from error
    try:
        data = trim_advisor(json.loads(raw), kinds)
    except ValueError as error:  # json's JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise CommandError(
            AWS,
            f"{ADVISOR_URL} is not the Spot Instance Advisor's format ({error}); the bundled "
            "copy is unchanged",
        ) from error
    date = today or datetime.now(UTC).date().isoformat()
    write_advisor(data, f"{ADVISOR_URL}, fetched {date}", date, path, meta_path)
    return data
