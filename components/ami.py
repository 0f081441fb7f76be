"""Which AMI the nodes boot: a Deep Learning AMI release pinned by name (the default), the
latest release (opt-in), or an AMI of the user's own. Every node of a cluster boots the same
AMI until the user names another one: no lookup follows a moving "latest" unless asked to."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.dlami import dlami, dlami_image_name, dlami_parameter

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
            filters=[{"name": "image-id", "values": [image_id]}],
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
    return ResolvedAmi(image_id=image_id, root_device=image.root_device_name, name=image.name)
