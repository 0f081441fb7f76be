"""Which EC2 vCPU quota a GPU instance type counts against (quotas are per family, in vCPUs)."""

from __future__ import annotations

ON_DEMAND_QUOTAS = {
    "p": "Running On-Demand P instances",
    "g": "Running On-Demand G and VT instances",
}


def on_demand_quota(instance_type: str) -> str:
    """The Service Quotas name whose vCPU limit an on-demand node of this type uses."""
    return ON_DEMAND_QUOTAS[instance_type[0]]


def vcpus_needed(vcpus_per_node: int, nodes: int) -> int:
    return vcpus_per_node * nodes
