"""GPU interconnect facts per instance family (components/data/gpu_topology.json)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

TOPOLOGY_PATH = Path(__file__).parent / "data" / "gpu_topology.json"


@cache
def topology() -> dict:
    return json.loads(TOPOLOGY_PATH.read_text())


def has_nvswitch(instance_type: str) -> bool:
    return instance_type.split(".", 1)[0] in topology()["nvswitch_families"]
