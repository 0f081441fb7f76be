"""The inference stage's AWS WAF web ACL (components/waf.py) as a cost line: the web ACL and
each rule by the month, and every request it inspects (AWS WAF pricing: $5 per web ACL-month,
$1 per rule-month, $0.60 per million requests; the same in every region; the managed rule
groups it uses carry no fee of their own). Prices in infra/data/aws_unit_prices.json."""

from __future__ import annotations

from gpu_cluster.components.serving_config import ServingConfig
from gpu_cluster.components.waf import firewall_rules
from gpu_cluster.infra.prices.unit_prices import UnitPrices


def firewall_rule_count(serving: ServingConfig) -> int:
    """The web ACL's rules (a managed rule group counts as one), the API-key rule included."""
    return len(firewall_rules(serving.firewall)) + (1 if serving.access.api_keys else 0)


def firewall_usd_per_hour(serving: ServingConfig, requests_per_second: float, unit: UnitPrices):
    """(hourly cost, detail) of the web ACL, or None when inference.waf.enabled is false."""
    if not serving.firewall.enabled:
        return None
    rules = firewall_rule_count(serving)
    monthly = unit["waf_web_acl_month"] + rules * unit["waf_rule_month"]
    inspected = requests_per_second * 3600 / 1e6 * unit["waf_million_requests"]
    detail = (
        f"${unit['waf_web_acl_month']:g}/month + {rules} rules x ${unit['waf_rule_month']:g}"
        f"/month + {requests_per_second:g} req/s x ${unit['waf_million_requests']:g}/million"
    )
    return monthly / unit.hours_per_month + inspected, detail
