"""Which EC2 vCPU quota a GPU node counts against (per instance family and purchase option, in
vCPUs; Service Quotas names). Capacity reservations and blocks run on-demand capacity."""

from __future__ import annotations

ON_DEMAND_QUOTAS = {
    "p": "Running On-Demand P instances",
    "g": "Running On-Demand G and VT instances",
}
SPOT_QUOTAS = {
    "p": "All P Spot Instance Requests",
    "g": "All G and VT Spot Instance Requests",
}


def on_demand_quota(instance_type: str) -> str:
    """The Service Quotas name whose vCPU limit an on-demand node of this type uses."""
    return ON_DEMAND_QUOTAS[instance_type[0]]


def spot_quota(instance_type: str) -> str:
    return SPOT_QUOTAS[instance_type[0]]


def vcpus_needed(vcpus_per_node: int, nodes: int) -> int:
    return vcpus_per_node * nodes


def quotas_needed(
    instance_type: str, vcpus_per_node: int, nodes: int, spot_nodes: int
) -> dict[str, int]:
    """vCPUs needed per quota: spot nodes count against the spot quota, the rest on-demand."""
    needed: dict[str, int] = {}
    if nodes - spot_nodes:
        needed[on_demand_quota(instance_type)] = vcpus_needed(vcpus_per_node, nodes - spot_nodes)
    if spot_nodes:
        needed[spot_quota(instance_type)] = vcpus_needed(vcpus_per_node, spot_nodes)
    return needed
