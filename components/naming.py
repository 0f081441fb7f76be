"""Resource names and tags: one place for the naming contract."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping

MANAGED_BY_TAG = {"managed-by": "gpu-cluster"}
CLUSTER_TAG = "gpu-cluster:name"  # nodes find each other by it (and by their VPC)
HEALTH_TAG = "gpu-cluster:health"  # each node's own report (boot/gpu-cluster-health.sh)
STACK_TAG = "gpu-cluster:stack"


def child_name(parent: str, role: str) -> str:
    """Children of component ``parent`` are named ``f"{parent}-{role}"`` (a public contract)."""
    return f"{parent}-{role}"


def merge_tags(*layers: Mapping[str, str] | None) -> dict[str, str]:
    """Merge tag layers left to right; later layers win. ``None`` layers are skipped."""
    merged: dict[str, str] = {}
    for layer in layers:
        if layer:
            merged.update(layer)
    return merged


def cluster_tags(
    cluster: str, user_tags: Mapping[str, str] | None = None, stack: str | None = None
) -> dict[str, str]:
    """The tags every resource of a cluster carries (user tags may not drop the cluster or
    stack tag)."""
    own = {CLUSTER_TAG: cluster} | ({STACK_TAG: stack} if stack else {})
    return merge_tags(MANAGED_BY_TAG, user_tags, own)


def unique_name(name: str, scope: str = "") -> str:
    """An account- and region-wide name (alias, log group, service-linked role suffix) that
    stays unique when two stacks share a cluster name: ``scope`` is the stack name then."""
    return f"{name}-{scope}" if scope else name


def node_name(index: int) -> str:
    return f"node-{index}"


def bounded_name(text: str, limit: int = 32) -> str:
    """A physical name within an AWS length limit (load balancers and target groups: 32),
    kept unique by a short hash of the whole name when it has to be cut."""
    safe = re.sub(r"[^a-zA-Z0-9-]", "-", text)  # ELB names: letters, digits and hyphens
    if len(safe) <= limit and safe == text:
        return safe
    digest = hashlib.sha256(text.encode()).hexdigest()[:6]
    return f"{safe[: limit - 7].rstrip('-')}-{digest}"


# Also an environment variable name on the nodes, and within SSM's parameter-name characters.
SECRET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def default_bucket_name(cluster: str, account_id: str, region: str) -> str:
    """A data bucket's name when the stack names none: globally unique and predictable, so
    IAM policies can name it before it exists."""
    return f"gpuc-{cluster}-{account_id}-{region}"
