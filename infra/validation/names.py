"""Cluster name, region and tags (the keys each stage may set: stage_keys.py)."""

from __future__ import annotations

import re
import unicodedata

from gpu_cluster.components.aws_limits import MAX_TAGS
from gpu_cluster.components.catalog import Catalog
from gpu_cluster.components.naming import MANAGED_BY_TAG, OWN_NODE_TAGS
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import (
    StackSpec,
)
from gpu_cluster.infra.suggest import closest, suggest
from gpu_cluster.infra.validation.common import key

CLUSTER_NAME = re.compile(r"^[a-z][a-z0-9-]{0,18}[a-z0-9]\Z")
IMDS_TAG_KEY = re.compile(r"^[A-Za-z0-9+\-=._:@,]+\Z")  # instance metadata tags are enabled
MAX_USER_TAGS = MAX_TAGS - len(OWN_NODE_TAGS)  # 44: AWS allows 50 per resource


def suggest_cluster_name(name: str) -> str:
    """A valid cluster name as close to ``name`` as possible (accents dropped, other characters
    turned into '-', cut to 20 without a trailing '-'); it always passes check_name."""
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    words = [w for w in re.split(r"[^a-z0-9]+", ascii_name) if w]
    candidate = "-".join(words).lstrip("0123456789-")
    candidate = candidate[:20].rstrip("-")
    if len(candidate) < 2:
        candidate = ("gpu-" + candidate)[:20].rstrip("-") if candidate else "gpu-cluster"
    return candidate if CLUSTER_NAME.match(candidate) else "gpu-cluster"


def check_name(spec: StackSpec, stack: str) -> tuple[str, list[Problem]]:
    name = spec.cluster_name or stack
    if CLUSTER_NAME.match(name):
        return name, []
    origin = "clusterName" if spec.cluster_name else "clusterName (defaults to the stack name)"
    return name, [
        Problem(
            path=key("clusterName"),
            received=name,
            problem=f"{origin} is not a valid cluster name",
            allowed="2-20 characters: lowercase letters, digits and '-', starting with a letter",
            fix=f"pulumi config set clusterName {suggest_cluster_name(name)}",
        )
    ]


def check_region(spec: StackSpec, catalog: Catalog) -> list[Problem]:
    if spec.region in catalog.offerings:
        return []
    return [
        Problem(
            path="aws:region",
            received=spec.region,
            problem="no GPU offerings are known for this region",
            allowed=", ".join(catalog.regions),
            fix=f"{suggest(spec.region, catalog.regions)}pulumi config set aws:region "
            f"{closest(spec.region, catalog.regions) or '<region>'} (or add the region with "
            f"`gpuc catalog refresh --region {spec.region}`)",
        )
    ]


def check_tags(tags: dict[str, str]) -> list[Problem]:
    problems = []
    if len(tags) > MAX_USER_TAGS:
        problems.append(
            Problem(
                path=key("tags"),
                received=f"{len(tags)} tags",
                problem="too many tags",
                allowed=f"at most {MAX_USER_TAGS} (AWS allows 50 per resource; gpu-cluster adds "
                "its own)",
                fix=" && ".join(
                    f"pulumi config rm --path tags.{name}" for name in sorted(tags)[MAX_USER_TAGS:]
                )
                + " (or drop others you need less)",
            )
        )
    for tag, value in tags.items():
        if not IMDS_TAG_KEY.match(tag):
            problems.append(
                Problem(
                    path=key(f"tags.{tag}"),
                    received=tag,
                    problem="nodes expose their tags through instance metadata, where AWS allows "
                    "only letters, digits and + - = . , _ : @ in tag keys (no spaces or '/')",
                    allowed="a key such as cost-center or team:owner",
                    fix=f"rename the tag, e.g. {re.sub(r'[^A-Za-z0-9+=._:@,-]', '-', tag)}",
                )
            )
        elif tag.startswith("gpu-cluster:") or tag in MANAGED_BY_TAG:
            problems.append(
                Problem(
                    path=key(f"tags.{tag}"),
                    received=value,
                    problem="gpu-cluster sets this tag itself (nodes find their cluster, `gpuc "
                    "status` and `gpuc sweep` find a stack's resources by it); yours would be "
                    "overridden",
                    allowed="a key outside the gpu-cluster: namespace and other than managed-by",
                    fix=f"pulumi config rm --path tags.{tag}",
                )
            )
        elif tag.lower().startswith("aws:") or not 1 <= len(tag) <= 128 or len(value) > 256:
            problems.append(
                Problem(
                    path=key(f"tags.{tag}"),
                    received=value,
                    problem="not a valid AWS tag",
                    allowed="a key of 1-128 characters not starting with 'aws:', a value of at "
                    "most 256 characters",
                    fix=f"pulumi config rm --path tags.{tag}",
                )
            )
    return problems
