"""The explicit, documented exceptions: which control, on which resources, and why.

A suppression matches a control's policy name and a resource-name pattern, and optionally a
condition on the resource itself (so a choice made in stack config shows up as its reason)."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from dataclasses import dataclass

from gpu_cluster.policy.resources import Res, has_efa

CONTAINER_NETWORK_TAG = "gpu-cluster:container-network"  # components/launch_template.py


@dataclass(frozen=True)
class Suppression:
    control: str  # the control's policy name
    resources: str  # resource-name pattern (fnmatch)
    why: str
    when: Callable[[Res], bool] = lambda r: True


def _bridge_containers(r: Res) -> bool:
    return r.tags().get(CONTAINER_NETWORK_TAG) == "bridge"


SUPPRESSIONS = (
    Suppression(
        "s3-17-sse-kms",
        "*-access-logs",
        "S3 server access logging delivers only to buckets with SSE-S3 default encryption (AWS "
        "S3 docs, 'Enabling Amazon S3 server access logging'); the log bucket is private, "
        "TLS-only, versioned and readable by no node",
    ),
    Suppression(
        "s3-9-server-access-logging",
        "*-access-logs",
        "it is the access-log destination: logging it into itself would log every delivery "
        "(AWS advises a separate destination); only the S3 logging and CloudTrail services "
        "may write it, and no node role can read it",
    ),
    Suppression(
        "s3-17-sse-kms",
        "*-alb-logs",
        "Application Load Balancer access logs can be delivered only to buckets with SSE-S3 "
        "default encryption (ELB docs, 'Access logs for your Application Load Balancer'); the "
        "bucket is private, TLS-only, versioned and readable by no node",
    ),
    Suppression(
        "s3-9-server-access-logging",
        "*-alb-logs",
        "it holds the load balancer's own access logs, written only by Elastic Load Balancing; "
        "logging it again would log log deliveries",
    ),
    Suppression(
        "ec2-17-single-network-interface",
        "*",
        "EFA instances need one interface per network card to reach their network bandwidth "
        "(AWS EFA docs, 'Maximize network bandwidth'); every interface is in the node security "
        "group and none has a public IP",
        when=has_efa,
    ),
    Suppression(
        "imds-hop-limit-one",
        "*",
        "containerNetwork: bridge in stack config: bridge-network containers are one hop further "
        "from IMDS and need hop limit 2 (IMDSv2 tokens are still required)",
        when=_bridge_containers,
    ),
)


def suppressed(control: str, resource: Res) -> str | None:
    """Why `control` does not hold `resource` to account, or None."""
    return next(
        (
            s.why
            for s in SUPPRESSIONS
            if s.control == control
            and fnmatch.fnmatchcase(resource.name, s.resources)
            and s.when(resource)
        ),
        None,
    )
