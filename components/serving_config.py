"""What an inference stack serves and how (validated in infra/validation/inference.py, built
by components/inference.py): plain data, importable without the provider SDK."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServingConfig:
    zones: tuple[str, ...]
    min_nodes: int
    max_nodes: int
    model_prefix: str
    server_kind: str
    image: str
    port: int
    readiness_path: str
    server_args: tuple[str, ...]
    preferred_batch_sizes: tuple[int, ...]
    max_queue_delay_us: int
    tls_policy: str
    certificate_arn: str | None
    domain: str | None
    hosted_zone_id: str | None
    scaling_metric: str  # requestCount | gpuUtilization
    scaling_target: float
    warmup_seconds: int
    deletion_protection: bool = True
