"""GPU interconnect and memory-error facts per instance type (components/data/gpu_topology.json)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

TOPOLOGY_PATH = Path(__file__).parent / "data" / "gpu_topology.json"


@cache
def topology() -> dict:
    return json.loads(TOPOLOGY_PATH.read_text())


def has_nvswitch(instance_type: str) -> bool:
    """The type's GPUs hang off NVSwitch (decided per type, never by family: p5.4xlarge has
    one H100 and no NVSwitch)."""
    return instance_type in topology()["nvswitch_instance_types"]


def has_row_remapping(gpu_model: str) -> bool:
    """The GPU remaps rows on memory errors (A100, H100, ...) instead of retiring pages."""
    return gpu_model.upper() in {m.upper() for m in topology()["row_remapping_gpus"]}
