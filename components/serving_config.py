"""What an inference stack serves and how (validated in infra/validation/inference.py, built
by components/inference.py): plain data, importable without the provider SDK."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Oidc:
    """The listener's authenticate-oidc action (client_secret: a secret, never shown)."""

    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    user_info_endpoint: str
    client_id: str
    client_secret: Any = field(repr=False)  # str or a secret pulumi.Output


@dataclass(frozen=True)
class Cognito:
    """The listener's authenticate-cognito action."""

    user_pool_arn: str
    user_pool_client_id: str
    user_pool_domain: str


@dataclass(frozen=True)
class ServiceAccess:
    """Who may call the service: source networks (none: any), keys or sign-in at the edge, or
    explicitly the public. Nothing set at all: no one (the listener's security group is closed)."""

    cidrs: tuple[str, ...] = ()
    prefix_lists: tuple[str, ...] = ()
    api_keys: tuple[Any, ...] = field(default=(), repr=False)  # str or secret Outputs
    api_key_header: str = "x-api-key"
    oidc: Oidc | None = None
    cognito: Cognito | None = None
    public: bool = False

    @property
    def signs_in(self) -> bool:
        return self.oidc is not None or self.cognito is not None

    @property
    def anywhere(self) -> bool:
        """No network limit: anyone may connect (public, or only keys or sign-in check them)."""
        return not (self.cidrs or self.prefix_lists) and (
            self.public or bool(self.api_keys) or self.signs_in
        )

    def describe(self) -> dict[str, Any]:
        """Who may call the service, for the stack's outputs (never a key or secret)."""
        return {
            "networks": [*self.cidrs, *self.prefix_lists]
            or ("anyone" if self.anywhere else "no one"),
            "apiKeys": len(self.api_keys),
            "apiKeyHeader": self.api_key_header if self.api_keys else None,
            "signIn": "oidc" if self.oidc else "cognito" if self.cognito else None,
            "public": self.public,
        }


@dataclass(frozen=True)
class ServiceFirewall:
    """The AWS WAF web ACL in front of the load balancer."""

    enabled: bool = True
    rate_limit: int = 2000  # requests per IP per window
    rate_window_seconds: int = 300

    def describe(self) -> dict[str, Any]:
        """The web ACL in the stack's outputs (components/waf.py has its rules)."""
        if not self.enabled:
            return {"enabled": False}
        return {
            "enabled": True,
            "rateLimitPerIp": self.rate_limit,
            "rateWindowSeconds": self.rate_window_seconds,
        }


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
    scaling_metric: str  # requestCount | gpuUtilization | queueTime
    scaling_target: float
    warmup_seconds: int
    deletion_protection: bool = True
    access: ServiceAccess = field(default_factory=ServiceAccess)
    firewall: ServiceFirewall = field(default_factory=ServiceFirewall)
    min_healthy_percent: int = 100
