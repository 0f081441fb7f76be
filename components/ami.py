"""Which AMI the nodes boot: a Deep Learning AMI release pinned by name (the default), the
latest release (opt-in), or an AMI of the user's own. Every node of a cluster boots the same
AMI until the user names another one: no lookup follows a moving "latest" unless asked to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.dlami import dlami, dlami_image_name, dlami_parameter

LATEST = "latest"


@dataclass(frozen=True)
class AmiChoice:
    architecture: str
    image_id: str | None = None  # an AMI of the user's own
    ssm_parameter: str | None = None  # ... or the SSM parameter that names one
    release: str | None = None  # a Deep Learning AMI release (YYYYMMDD), "latest", or None


@dataclass
class ResolvedAmi:
    image_id: pulumi.Output[str]
    root_device: pulumi.Output[str]
    name: pulumi.Output[str]
    min_root_gib: pulumi.Output[int]  # the size of the AMI's root snapshot


def root_snapshot_gib(mappings: list, root_device: str) -> int:
    """The AMI's root volume size (EC2 refuses a smaller root volume); 0 when not listed."""
    for mapping in mappings or []:
        ebs = _field(mapping, "ebs") or {}
        if _field(mapping, "device_name") == root_device and ebs.get("volume_size"):
            return int(ebs["volume_size"])
    return 0


def _field(item: object, name: str) -> Any:
    """Invoke results arrive as typed objects under the engine, as dicts in some SDK paths."""
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _image_id_filter(image_id: str) -> list[aws.ec2.GetAmiFilterArgsDict]:
    return [{"name": "image-id", "values": [image_id]}]


def resolve_ami(choice: AmiChoice, invoke: pulumi.InvokeOptions) -> ResolvedAmi:
    """Deprecated AMIs keep resolving (include_deprecated): a pinned cluster keeps launching."""
    if choice.image_id or choice.ssm_parameter or choice.release == LATEST:
        image_id = pulumi.Output.from_input(
            choice.image_id
            or aws.ssm.get_parameter_output(
                name=choice.ssm_parameter or dlami_parameter(choice.architecture), opts=invoke
            ).value
        )
        image = aws.ec2.get_ami_output(
            filters=image_id.apply(_image_id_filter),
            include_deprecated=True,
            opts=invoke,
        )
    else:
        image = aws.ec2.get_ami_output(
            owners=[dlami()["owner"]],
            filters=[
                {"name": "name", "values": [dlami_image_name(choice.architecture, choice.release)]}
            ],
            include_deprecated=True,
            most_recent=True,
            opts=invoke,
        )
        image_id = image.id
    min_root = pulumi.Output.all(image.block_device_mappings, image.root_device_name).apply(
        lambda parts: root_snapshot_gib(parts[0], parts[1])
    )
    return ResolvedAmi(
        image_id=image_id,
        root_device=image.root_device_name,
        name=image.name,
        min_root_gib=min_root,
    )
