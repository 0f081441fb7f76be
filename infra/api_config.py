"""The public components' arguments as the config Pulumi would hand this project's program:
snake_case keys to the stack file's camelCase, and each Pulumi Output where an id or a name
belongs replaced by a stand-in of its kind, so that the stack file's checks run on it; the
stand-ins are swapped back for the Outputs after the checks (restore)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, get_args

import pulumi
from pydantic.alias_generators import to_camel

from gpu_cluster.infra.spec import PROJECT, StackSpec, StrictModel

# Where a Pulumi input (known only at `pulumi up`) may stand: ids and names another resource
# gives. It is checked as a valid stand-in of its kind, then passed on as the input itself.
STAND_INS = {
    "network.vpcId": "vpc-00000000",
    "network.subnetIds": "subnet-{index:08x}",
    "network.loadBalancerSubnetIds": "subnet-{index:08x}",
    "network.securityGroupIds": "sg-{index:08x}",
    "storage.bucket": "gpuc-input-bucket",
    "storage.kmsKeyArn": "arn:aws:kms:us-east-1:000000000000:key/"
    "00000000-0000-0000-0000-000000000000",
}
STAND_IN_OFFSET = {"network.loadBalancerSubnetIds": 0x8000}


def _model_of(annotation: Any) -> type[StrictModel] | None:
    for option in (annotation, *get_args(annotation)):
        if isinstance(option, type) and issubclass(option, StrictModel):
            return option
    return None


def _camel(value: Any, model: type[StrictModel] | None, path: str, inputs: dict) -> Any:
    """Snake-case keys of the stack file's models to its camelCase; inputs to stand-ins."""
    if isinstance(value, pulumi.Output):
        base = re.sub(r"\[\d+\]$", "", path)
        index = int(path.rsplit("[", 1)[1][:-1]) if path.endswith("]") else 0
        if base not in STAND_INS:
            inputs[f"plain:{path}"] = value  # checked before anything exists: resolve says so
            return None
        stand_in = STAND_INS[base].format(index=index + STAND_IN_OFFSET.get(base, 0) + 1)
        inputs[stand_in] = value
        return stand_in
    if isinstance(value, Mapping) and model is not None:
        result = {}
        for key, item in value.items():
            field = model.model_fields.get(key)
            name = to_camel(key) if field is not None else key
            inner = _model_of(field.annotation) if field is not None else None
            result[name] = _camel(item, inner, f"{path}.{name}".lstrip("."), inputs)
        return result
    if isinstance(value, list | tuple):
        return [_camel(v, model, f"{path}[{i}]", inputs) for i, v in enumerate(value)]
    return value


def stack_config(
    role: str, name: str, region: str | None, settings: Mapping[str, Any]
) -> tuple[dict[str, str], dict[str, pulumi.Output]]:
    """The config Pulumi would hand the program for these settings, and the inputs that stand
    behind stand-in values."""
    inputs: dict[str, pulumi.Output] = {}
    config = {"aws:region": region or pulumi.Config("aws").get("region") or "us-east-1"}
    for key, value in {"role": role, "cluster_name": name, **settings}.items():
        field = StackSpec.model_fields.get(key)
        camel = to_camel(key) if field is not None else key
        converted = _camel(value, _model_of(field.annotation) if field else None, camel, inputs)
        if isinstance(converted, str):
            config[f"{PROJECT}:{camel}"] = converted
        else:
            config[f"{PROJECT}:{camel}"] = json.dumps(converted, default=repr)
    return config, inputs


def restore(value: Any, inputs: Mapping[str, pulumi.Output]) -> Any:
    """A value with each stand-in swapped back for the Output it stands for."""
    if isinstance(value, str):
        return inputs.get(value, value)
    if isinstance(value, tuple):
        return tuple(restore(v, inputs) for v in value)
    return value
