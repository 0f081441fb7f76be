"""CIDR math and the naming/tag contract."""

from __future__ import annotations

import ipaddress

from hypothesis import given
from hypothesis import strategies as st

from gpu_cluster.components.cidr import (
    MAX_ENDPOINT_ADDRESSES,
    addresses_needed,
    default_layout,
    max_nodes,
    usable_addresses,
)
from gpu_cluster.components.names import StackIdentity
from gpu_cluster.components.naming import child_name, cluster_tags, merge_tags


def test_default_layout_of_a_16():
    layout = default_layout("10.42.0.0/16")
    assert str(layout.private) == "10.42.0.0/17"
    assert str(layout.public) == "10.42.128.0/28"


@given(st.integers(min_value=16, max_value=24), st.integers(min_value=0, max_value=255))
def test_layout_subnets_are_disjoint_and_inside_the_vpc(prefix, second_octet):
    vpc = ipaddress.IPv4Network(f"10.{second_octet}.0.0/{prefix}", strict=False)
    layout = default_layout(str(vpc))
    assert layout.private.subnet_of(vpc) and layout.public.subnet_of(vpc)
    assert not layout.private.overlaps(layout.public)
    assert layout.private.num_addresses == vpc.num_addresses // 2


def test_usable_addresses_subtracts_aws_reserved():
    assert usable_addresses(ipaddress.IPv4Network("10.0.0.0/24")) == 251
    assert usable_addresses(ipaddress.IPv4Network("10.0.0.0/28")) == 11


@given(st.integers(min_value=1, max_value=5000), st.integers(min_value=1, max_value=33))
def test_capacity_math_is_consistent(nodes, ips_per_node):
    subnet = ipaddress.IPv4Network("10.0.0.0/20")
    fits = addresses_needed(nodes, ips_per_node) <= usable_addresses(subnet)
    assert fits == (nodes <= max_nodes(subnet, ips_per_node))
    assert addresses_needed(nodes, ips_per_node) == nodes * ips_per_node + MAX_ENDPOINT_ADDRESSES


def test_child_names_and_tags():
    assert child_name("train", "vpc") == "train-vpc"
    identity = StackIdentity("gpu-cluster", "train", "us-east-1", "train")
    tags = cluster_tags(identity, {"team": "ml", "gpu-cluster:name": "spoofed"})
    assert tags["gpu-cluster:name"] == "train"  # the cluster tag cannot be overridden
    assert tags["gpu-cluster:stack-id"] == "gpu-cluster/train/us-east-1"
    assert tags["team"] == "ml" and tags["managed-by"] == "gpu-cluster"
    assert merge_tags({"a": "1"}, None, {"a": "2", "b": "3"}) == {"a": "2", "b": "3"}
