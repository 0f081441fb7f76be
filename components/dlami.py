"""The AWS Deep Learning AMI the nodes boot by default, and the instance families its release
notes list as supported (components/data/dlami.json)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

DLAMI_PATH = Path(__file__).parent / "data" / "dlami.json"


@cache
def dlami() -> dict:
    return json.loads(DLAMI_PATH.read_text())


def dlami_parameter(architecture: str) -> str:
    """Public SSM parameter of the AWS Deep Learning OSS Nvidia Driver GPU PyTorch AMI
    (/aws/service/deeplearning/ami/<architecture>/<ami type>/latest/ami-id)."""
    return f"/aws/service/deeplearning/ami/{architecture}/{dlami()['ami_type']}/latest/ami-id"


def instance_family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def dlami_supports(instance_type: str, architecture: str) -> bool:
    return instance_family(instance_type) in dlami()["supported_families"].get(architecture, [])


def dlami_image_name(architecture: str, release: str | None = None) -> str:
    """The EC2 image name of one Deep Learning AMI release (default: the bundled one)."""
    data = dlami()
    return data["image_names"][architecture].format(release=release or data["release"])
