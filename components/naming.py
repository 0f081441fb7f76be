"""Resource names and tags: one place for the naming contract."""

from __future__ import annotations

import re
from collections.abc import Mapping

from gpu_cluster.components.jobs import NODE_ENV_NAMES, NODE_ENV_PREFIXES
from gpu_cluster.components.names import StackIdentity

MANAGED_BY_TAG = {"managed-by": "gpu-cluster"}
CLUSTER_TAG = "gpu-cluster:name"  # nodes find each other by it (and by their VPC)
HEALTH_TAG = "gpu-cluster:health"  # each node's own report (boot/gpu-cluster-health.sh)
STACK_TAG = "gpu-cluster:stack"
# project/stack/region (components/names.StackIdentity.stack_id): what `gpuc sweep` and `status`
# match, and the nodes' IAM conditions name. The stack tag alone is shared by the same stack
# name in another region or project: IAM roles, instance profiles and budgets are account-wide.
STACK_ID_TAG = "gpu-cluster:stack-id"
# What gpu-cluster puts on a node besides the user's tags: cluster_tags, the instance's Name
# (components/node_group.py) and the node's own health report (HEALTH_TAG, set at run time,
# unseen by any plan). AWS's 50 tags per resource (aws_limits.MAX_TAGS) leave the rest.
OWN_NODE_TAGS = (*MANAGED_BY_TAG, CLUSTER_TAG, STACK_TAG, STACK_ID_TAG, "Name", HEALTH_TAG)


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
    identity: StackIdentity, user_tags: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The tags every resource of a stack carries (user tags may not drop gpu-cluster's)."""
    own = {
        CLUSTER_TAG: identity.cluster,
        STACK_TAG: identity.stack,
        STACK_ID_TAG: identity.stack_id,
    }
    return merge_tags(MANAGED_BY_TAG, user_tags, own)


def node_name(index: int) -> str:
    return f"node-{index}"


# Also an environment variable name on the nodes (upper case, as `gpuc run --env` names), and
# within SSM's parameter-name characters.
SECRET_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,127}\Z")
SECRET_NAME_ALLOWED = "upper-case letters, digits and _, not starting with a digit, at most 128"


def secret_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a secret, or None. A job gets each secret as an environment
    variable (boot/gpuc-torchrun.sh sources secrets.env under `set -a`): a line the shell cannot
    assign (`MY-KEY=...` is a command) makes every job exit 127, and a name the node sets
    itself (PATH, CLUSTER, AWS_..., GPUC_...) would replace the node's own value."""
    if not SECRET_NAME.match(name):
        return "not an environment variable name (every job gets the secret as one)"
    if name in NODE_ENV_NAMES or name.startswith(NODE_ENV_PREFIXES):
        return f"the node sets {name} itself (its cluster settings, the AWS CLI or gpu-cluster)"
    return None


def suggest_secret_name(name: str) -> str:
    """``name`` as a usable secret name: upper case, '_' for anything else, no leading digit."""
    safe = re.sub(r"[^A-Z0-9_]", "_", name.upper())[:128] or "SECRET"
    safe = f"_{safe}"[:128] if safe[0].isdigit() else safe
    return safe if secret_name_problem(safe) is None else f"JOB_{safe}"[:128]
