"""GPU instance catalog: facts from EC2 DescribeInstanceTypes, bundled as data.

The bundled file ``components/data/gpu_catalog.json`` is produced by ``gpuc catalog refresh``
(infra/catalog_refresh.py) from DescribeInstanceTypes and DescribeInstanceTypeOfferings.
This module only reads it and converts raw API items; it never talks to AWS.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

CATALOG_PATH = Path(__file__).parent / "data" / "gpu_catalog.json"


@dataclass(frozen=True, slots=True)
class NetworkCard:
    """One network card of an instance type (DescribeInstanceTypes NetworkCards[])."""

    index: int
    max_interfaces: int
    interface_types: tuple[str, ...]
    baseline_bandwidth_gbps: float
    peak_bandwidth_gbps: float

    @property
    def supports_efa(self) -> bool:
        return "efa" in self.interface_types or "efa-only" in self.interface_types


@dataclass(frozen=True, slots=True)
class InstanceFacts:
    """What a deployment needs to know about one GPU instance type."""

    instance_type: str
    gpu_model: str
    gpu_count: int
    gpu_partition: float
    gpu_memory_mib: int
    vcpus: int
    memory_mib: int
    architectures: tuple[str, ...]
    efa_supported: bool
    max_efa_interfaces: int
    network_cards: tuple[NetworkCard, ...]
    nvme_disk_count: int
    nvme_disk_size_gb: int
    placement_strategies: tuple[str, ...]
    usage_classes: tuple[str, ...]

    @property
    def architecture(self) -> str:
        return self.architectures[0]

    @property
    def is_whole_gpu(self) -> bool:
        return self.gpu_count >= 1 and self.gpu_partition >= 1.0

    @property
    def gpus(self) -> float:
        """GPUs per node: the count, or the slice of one GPU a fractional type has (g6f: 1/8)."""
        return self.gpu_count if self.is_whole_gpu else self.gpu_partition

    @property
    def processes_per_node(self) -> int:
        """torchrun processes per node: one per GPU, one for a GPU slice."""
        return max(1, self.gpu_count)

    @property
    def nvme_total_gb(self) -> int:
        return self.nvme_disk_count * self.nvme_disk_size_gb

    def to_json(self) -> dict[str, Any]:
        return {
            "gpu_model": self.gpu_model,
            "gpu_count": self.gpu_count,
            "gpu_partition": self.gpu_partition,
            "gpu_memory_mib": self.gpu_memory_mib,
            "vcpus": self.vcpus,
            "memory_mib": self.memory_mib,
            "architectures": list(self.architectures),
            "efa_supported": self.efa_supported,
            "max_efa_interfaces": self.max_efa_interfaces,
            "network_cards": [
                {
                    "index": card.index,
                    "max_interfaces": card.max_interfaces,
                    "interface_types": list(card.interface_types),
                    "baseline_bandwidth_gbps": card.baseline_bandwidth_gbps,
                    "peak_bandwidth_gbps": card.peak_bandwidth_gbps,
                }
                for card in self.network_cards
            ],
            "nvme": {"count": self.nvme_disk_count, "size_gb": self.nvme_disk_size_gb},
            "placement_strategies": list(self.placement_strategies),
            "usage_classes": list(self.usage_classes),
        }

    @classmethod
    def from_json(cls, instance_type: str, data: dict[str, Any]) -> InstanceFacts:
        return cls(
            instance_type=instance_type,
            gpu_model=data["gpu_model"],
            gpu_count=data["gpu_count"],
            gpu_partition=data["gpu_partition"],
            gpu_memory_mib=data["gpu_memory_mib"],
            vcpus=data["vcpus"],
            memory_mib=data["memory_mib"],
            architectures=tuple(data["architectures"]),
            efa_supported=data["efa_supported"],
            max_efa_interfaces=data["max_efa_interfaces"],
            network_cards=tuple(
                NetworkCard(
                    index=card["index"],
                    max_interfaces=card["max_interfaces"],
                    interface_types=tuple(card["interface_types"]),
                    baseline_bandwidth_gbps=card["baseline_bandwidth_gbps"],
                    peak_bandwidth_gbps=card["peak_bandwidth_gbps"],
                )
                for card in data["network_cards"]
            ),
            nvme_disk_count=data["nvme"]["count"],
            nvme_disk_size_gb=data["nvme"]["size_gb"],
            placement_strategies=tuple(data["placement_strategies"]),
            usage_classes=tuple(data["usage_classes"]),
        )


def is_nvidia_gpu_item(item: dict[str, Any]) -> bool:
    """True for a DescribeInstanceTypes item whose accelerators are NVIDIA GPUs."""
    gpus = item.get("GpuInfo", {}).get("Gpus", [])
    return bool(gpus) and all(gpu.get("Manufacturer") == "NVIDIA" for gpu in gpus)


def facts_from_describe(item: dict[str, Any]) -> InstanceFacts:
    """Convert one DescribeInstanceTypes item (boto3 shape) into InstanceFacts."""
    gpu = item["GpuInfo"]["Gpus"][0]
    network = item["NetworkInfo"]
    cards = tuple(
        NetworkCard(
            index=card["NetworkCardIndex"],
            max_interfaces=card["MaximumNetworkInterfaces"],
            interface_types=tuple(card.get("InterfaceTypes", ["interface"])),
            baseline_bandwidth_gbps=float(card.get("BaselineBandwidthInGbps", 0.0)),
            peak_bandwidth_gbps=float(card.get("PeakBandwidthInGbps", 0.0)),
        )
        for card in sorted(network.get("NetworkCards", []), key=lambda c: c["NetworkCardIndex"])
    )
    disks = item.get("InstanceStorageInfo", {}).get("Disks", [])
    nvme_count = sum(disk["Count"] for disk in disks)
    nvme_size = disks[0]["SizeInGB"] if disks else 0
    return InstanceFacts(
        instance_type=item["InstanceType"],
        gpu_model=gpu["Name"],
        gpu_count=sum(g["Count"] for g in item["GpuInfo"]["Gpus"]),
        gpu_partition=float(gpu.get("GpuPartitionSize", 1.0)),
        gpu_memory_mib=gpu["MemoryInfo"]["SizeInMiB"],
        vcpus=item["VCpuInfo"]["DefaultVCpus"],
        memory_mib=item["MemoryInfo"]["SizeInMiB"],
        architectures=tuple(item["ProcessorInfo"]["SupportedArchitectures"]),
        efa_supported=bool(network.get("EfaSupported", False)),
        max_efa_interfaces=int(network.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0)),
        network_cards=cards,
        nvme_disk_count=nvme_count,
        nvme_disk_size_gb=nvme_size,
        placement_strategies=tuple(
            item.get("PlacementGroupInfo", {}).get("SupportedStrategies", [])
        ),
        usage_classes=tuple(sorted(item.get("SupportedUsageClasses", []))),
    )


@dataclass(frozen=True)
class Catalog:
    """Instance facts plus where each type is offered (region -> AZ -> types)."""

    instance_types: dict[str, InstanceFacts]
    offerings: dict[str, dict[str, frozenset[str]]]
    source: str = ""
    # AZ name -> AZ id per region (names map to different physical zones in each account; the
    # bundled mapping is the refreshing account's, prices are keyed by AZ id)
    zone_ids: dict[str, dict[str, str]] = field(default_factory=dict)

    def get(self, instance_type: str) -> InstanceFacts | None:
        return self.instance_types.get(instance_type)

    @property
    def gpu_models(self) -> list[str]:
        return sorted({facts.gpu_model for facts in self.instance_types.values()})

    @property
    def regions(self) -> list[str]:
        return sorted(self.offerings)

    def zones(self, region: str) -> list[str]:
        return sorted(self.offerings.get(region, {}))

    def zone_id(self, region: str, zone: str) -> str | None:
        return self.zone_ids.get(region, {}).get(zone)

    def zone_name(self, region: str, zone_id: str) -> str | None:
        return next((n for n, i in self.zone_ids.get(region, {}).items() if i == zone_id), None)

    def zones_offering(self, region: str, instance_type: str) -> list[str]:
        return sorted(
            zone for zone, types in self.offerings.get(region, {}).items() if instance_type in types
        )

    def types_for_gpu(
        self, gpu_model: str, gpus_per_node: int | None = None
    ) -> list[InstanceFacts]:
        """Whole-GPU types of a model (case-insensitive), optionally with an exact GPU count."""
        wanted = gpu_model.casefold()
        return sorted(
            (
                facts
                for facts in self.instance_types.values()
                if facts.gpu_model.casefold() == wanted
                and facts.is_whole_gpu
                and (gpus_per_node is None or facts.gpu_count == gpus_per_node)
            ),
            key=lambda facts: facts.instance_type,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "instance_types": {
                name: self.instance_types[name].to_json() for name in sorted(self.instance_types)
            },
            "offerings": {
                region: {zone: sorted(types) for zone, types in sorted(zones.items())}
                for region, zones in sorted(self.offerings.items())
            },
            "zone_ids": {
                region: dict(sorted(zones.items()))
                for region, zones in sorted(self.zone_ids.items())
            },
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Catalog:
        return cls(
            instance_types={
                name: InstanceFacts.from_json(name, facts)
                for name, facts in data["instance_types"].items()
            },
            offerings={
                region: {zone: frozenset(types) for zone, types in zones.items()}
                for region, zones in data["offerings"].items()
            },
            source=data.get("source", ""),
            zone_ids=data.get("zone_ids", {}),
        )


@cache
def load_catalog(path: Path = CATALOG_PATH) -> Catalog:
    """The bundled catalog (read once per process)."""
    return Catalog.from_json(json.loads(path.read_text()))
