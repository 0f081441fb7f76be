"""Each GPU type counts against the right EC2 vCPU quota."""

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.components.quotas import on_demand_quota, vcpus_needed


def test_every_catalog_type_maps_to_a_vcpu_quota():
    for name in load_catalog().instance_types:
        expected = "P instances" if name.startswith("p") else "G and VT instances"
        assert on_demand_quota(name).endswith(expected), name


def test_vcpus_needed_scales_with_nodes():
    assert vcpus_needed(load_catalog().instance_types["p4d.24xlarge"].vcpus, 4) == 384
