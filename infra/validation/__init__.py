"""Meaning checks on a well-shaped StackSpec, one module per domain (names, compute, network,
storage, purchase), run together by ``resolve``."""

from gpu_cluster.infra.validation.resolve import (
    ResolvedCluster,
    ResolvedData,
    resolve,
    stack_identity,
)

__all__ = ["ResolvedCluster", "ResolvedData", "resolve", "stack_identity"]
