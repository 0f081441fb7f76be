"""The public component API: GpuCluster, InferenceService and DataStore for your own Pulumi
program, with plain values (and Pulumi inputs for the ids and names another resource gives).

Arguments are the stack file's keys in snake_case (``instance_type``, ``nodes``,
``availability_zone``, ``network={"vpc_id": ..., "subnet_ids": [...]}``, ``storage``,
``purchase_option``, ``idle_stop``, ``tags``, ...; docs/concepts/configuration.md lists them).
They go through the same checks as a stack file, and every problem is raised at once, before
anything is created, as one Pulumi error that names the argument. The components are the ones
this project's own program creates (same type tokens, child names and parents), so the URNs are
the same."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Unpack

import pulumi

from gpu_cluster.components.ami import AmiChoice, resolve_ami
from gpu_cluster.components.cluster import GpuCluster as ClusterComponent
from gpu_cluster.components.data_vault import DataVault
from gpu_cluster.components.naming import cluster_tags
from gpu_cluster.components.node_group import GpuNodeGroup as NodeGroupComponent
from gpu_cluster.components.node_group import GpuNodeGroupArgs as NodeGroupComponentArgs
from gpu_cluster.components.serving_stack import ServingStack
from gpu_cluster.infra import program
from gpu_cluster.infra.api_arguments import (
    access_secret_values,
    args_problem,
    name_problem,
    node_group_input_problems,
    opts_problem,
    secret_values,
    settings_problems,
    value_problems,
    with_secrets,
)
from gpu_cluster.infra.api_config import STAND_INS, restore, stack_config
from gpu_cluster.infra.api_errors import ArgumentError, as_argument, covered, snake
from gpu_cluster.infra.api_settings import (
    ClusterSettings,
    DataSettings,
    NodeGroupSettings,
    ServingSettings,
)
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.network_check import (
    from_subnet_zone,
    with_network_facts,
    with_subnet_zone,
)
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import PROJECT
from gpu_cluster.infra.validation import ResolvedCluster, ResolvedData
from gpu_cluster.infra.versions import require_supported_pulumi

__all__ = [
    "ArgumentError",
    "DataStore",
    "DataStoreArgs",
    "GpuCluster",
    "GpuClusterArgs",
    "GpuNodeGroup",
    "GpuNodeGroupArgs",
    "InferenceService",
    "InferenceServiceArgs",
]


def resolve(
    component: str,
    role: str,
    name: str,
    region: str | None,
    settings: Mapping[str, Any],
    early: list[Problem] | None = None,
) -> ResolvedCluster | ResolvedData:
    """The resolved spec, with each stand-in replaced by its input again; ArgumentError when
    anything is wrong (the network and a reservation are checked as the program checks them),
    with the ``early`` problems of the arguments' Python values (check_arguments) first."""
    require_supported_pulumi()  # as infra/__main__.py: an SDK or CLI too old is a message
    early = [as_argument(component, p) for p in early or []]
    if any(p.path == "region" for p in early):
        region = None  # refused already; the rest is checked in the default region
    config, inputs = stack_config(role, name, region, settings)
    plain = [p.removeprefix("plain:") for p in inputs if p.startswith("plain:")]
    early += [  # an Output in a key the Args' types do not mark as an input
        problem
        for problem in (
            as_argument(
                component,
                Problem(
                    path=f"{PROJECT}:{path}",
                    received="a Pulumi Output",
                    problem="is checked before anything is created, so it must be a plain value",
                    allowed="the value itself; Outputs may stand only for ids and names: "
                    + ", ".join(snake(p) for p in STAND_INS),
                    fix="pass the value itself (read it from pulumi.Config, not an Output)",
                ),
            )
            for path in plain
        )
        if not covered(problem, early)
    ]
    zoned = with_subnet_zone(config, program.network_lookup) if not inputs else config
    try:
        try:
            spec = load_spec(zoned, pulumi.get_stack())
        except ConfigError as error:  # a problem with the subnet's zone says it is the subnet's
            raise from_subnet_zone(error, config, zoned) from None
        if isinstance(spec, ResolvedCluster):
            if not inputs:  # ids known only at `pulumi up` are checked by AWS then
                spec = with_network_facts(spec, program.network_lookup, stack_file=False)
            spec = program.with_block_end(
                spec, program.check_reservation(spec, program.live_lookup)
            )
    except ConfigError as error:
        later = [p for p in error.problems if not covered(as_argument(component, p), early)]
        raise ArgumentError(component, name, [*early, *later]) from None
    if early:
        raise ArgumentError(component, name, early)
    if isinstance(spec, ResolvedCluster) and spec.existing_network is not None:
        existing = spec.existing_network
        spec = dataclasses.replace(
            spec,
            existing_network=dataclasses.replace(
                existing,
                **{
                    f.name: restore(getattr(existing, f.name), inputs)
                    for f in dataclasses.fields(existing)
                },
            ),
        )
    storage = getattr(spec, "storage", None)
    if storage is not None and inputs:
        spec = dataclasses.replace(
            spec,
            storage=storage.model_copy(
                update={
                    "bucket": restore(storage.bucket, inputs),
                    "kms_key_arn": restore(storage.kms_key_arn, inputs),
                }
            ),
        )
    for warning in spec.warnings if isinstance(spec, ResolvedCluster) else ():
        for stand_in in inputs:  # a stand-in is no id of the user's: name what it stands for
            kind = "subnet" if stand_in.startswith("subnet-") else "id"
            warning = warning.replace(stand_in, f"the {kind} your Output gives")
        pulumi.log.warn(f"{component}('{name}'): {warning}")
    return spec


# The keyword arguments of the Args below: infra/api_settings.py. An Output may stand only for
# the ids and names in STAND_INS. They are checked at run time as a stack file is, whatever the
# types say (tests/test_types.py keeps these keys the spec's).


class _Args:
    role = "cluster"
    keywords: type = ClusterSettings  # the TypedDict of the keyword arguments

    def __init__(self, region: str | None = None, **settings: Any) -> None:
        self.region = region
        self.settings: dict[str, Any] = settings
        self.given: dict[str, Any] = dict(settings)  # as the user passed them, checked first


def check_arguments(
    component: str, name: Any, args: Any, expected: type[_Args], opts: Any
) -> list[Problem]:
    """The problems of the arguments' Python values (infra/api_arguments.py), seen before they
    are read as a stack's config; ArgumentError at once when the name, the Args object or opts
    is not what a component takes."""
    problems = [
        p
        for p in (
            name_problem(component, name),
            args_problem(component, name, args, expected),
            opts_problem(component, name, opts),
        )
        if p is not None
    ]
    if problems:
        raise ArgumentError(component, str(name), problems)
    return [
        *value_problems(args.region, str | None, "region"),
        *settings_problems(args.given, args.keywords),
        *getattr(args, "input_problems", []),
    ]


class GpuClusterArgs(_Args):
    """A training (or dev) cluster: the stack file's keys in snake_case, e.g.
    ``GpuClusterArgs(instance_type="p4d.24xlarge", nodes=4, availability_zone="us-east-1a",
    network={"vpc_id": vpc.id, "subnet_ids": [subnet.id]}, storage={"source": "create"})``, or
    by GPU (``gpu="H100", gpus_per_node=8``). ``secrets``: name -> value (a Pulumi secret),
    stored as SSM SecureString parameters for the nodes."""

    def __init__(
        self,
        region: str | None = None,
        secrets: Mapping[str, pulumi.Input[str]] | None = None,
        **settings: Unpack[ClusterSettings],
    ) -> None:
        given = secrets if isinstance(secrets, Mapping) else {}
        self.secret_values, self.input_problems, self.warnings = secret_values(given)
        if secrets is not None and not isinstance(secrets, Mapping):
            self.input_problems += value_problems(secrets, Mapping[str, str], "secrets")
        values: dict[str, Any] = dict(settings)
        if self.secret_values:
            # the config holds the values; only their names are checked (never shown)
            values["secrets"] = {name: {"secure": "input"} for name in self.secret_values}
        super().__init__(region, **values)
        self.given = dict(settings)


class GpuCluster(ClusterComponent):
    """GPU nodes (EFA, placement group, the purchase option), their network (created, or the
    one given), KMS key, IAM, storage and cost controls.

    Outputs (attributes): ``bucket_name``, ``total_gpus``, ``node_group_name`` (None for a
    single dev box, which has ``private_ips``), ``job_command`` (torchrun), ``ssm_commands``,
    ``efa_interfaces_per_node``, ``expected_busbw_gbytes``, ``network.vpc_id``,
    ``network.node_subnet_id``, ``network.node_security_group``, ``estimated_usd_per_hour``,
    and ``spec`` (the resolved, checked settings)."""

    def __init__(
        self, name: str, args: GpuClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        early = check_arguments("GpuCluster", name, args, GpuClusterArgs, opts)
        for warning in args.warnings:
            pulumi.log.warn(f"GpuClusterArgs.{warning}")
        spec = resolve("GpuCluster", "cluster", name, args.region, args.settings, early)
        assert isinstance(spec, ResolvedCluster)
        if spec.inference is not None:
            raise ArgumentError(
                "GpuCluster",
                name,
                [
                    Problem(
                        path=f"{PROJECT}:role",
                        received="inference",
                        problem="an inference service is its own component",
                        allowed="cluster",
                        fix="use InferenceService(name, InferenceServiceArgs(...))",
                    )
                ],
            )
        self.spec = spec
        super().__init__(name, program.cluster_args(spec, args.secret_values), opts)
        self.estimated_usd_per_hour = self.ami.min_root_gib.apply(
            lambda gib: round(program.priced_cluster(spec, gib).hourly_usd, 2)
        )


class InferenceServiceArgs(_Args):
    """A model server behind an HTTPS load balancer across zones: the stack file's keys in
    snake_case, with ``inference={"model_uri": ..., "availability_zones": [...], ...}``; in an
    existing network also ``network={"vpc_id", "subnet_ids" (one per zone),
    "load_balancer_subnet_ids"}``."""

    role = "inference"
    keywords = ServingSettings

    def __init__(self, region: str | None = None, **settings: Unpack[ServingSettings]) -> None:
        # the API keys and OIDC client secret: Pulumi secrets, checked as the stack file's are
        values, self.secrets, self.input_problems, self.warnings = access_secret_values(settings)
        super().__init__(region, **values)
        self.given = dict(settings)


class InferenceService(ServingStack):
    """Outputs: ``url``, ``service`` (its ``group``), ``network``, and ``spec``."""

    def __init__(
        self, name: str, args: InferenceServiceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        early = check_arguments("InferenceService", name, args, InferenceServiceArgs, opts)
        for warning in args.warnings:
            pulumi.log.warn(f"InferenceServiceArgs.{warning}")
        spec = resolve("InferenceService", "inference", name, args.region, args.settings, early)
        assert isinstance(spec, ResolvedCluster) and spec.inference is not None
        spec = dataclasses.replace(
            spec,
            inference=dataclasses.replace(
                spec.inference, access=with_secrets(spec.inference.access, args.secrets)
            ),
        )
        self.spec = spec
        super().__init__(name, program.serving_args(spec), opts)


class DataStoreArgs(_Args):
    """The bucket for datasets and checkpoints with its KMS key, kept on `pulumi destroy`:
    ``bucket`` (a name; by default one from the name, account and region), ``audit_trail``,
    ``ebs_encryption_by_default``, ``snapshot_block_public_access``, ``tags``."""

    role = "data"
    keywords = DataSettings

    def __init__(self, region: str | None = None, **settings: Unpack[DataSettings]) -> None:
        values: dict[str, Any] = dict(settings)
        # the stack file's storage (source create; the bucket's name, if given)
        bucket = {"bucket": values.pop("bucket")} if "bucket" in values else {}
        values.setdefault("storage", {"source": "create", **bucket})
        super().__init__(region, **values)
        self.given = dict(settings)


class DataStore(DataVault):
    """Outputs: ``bucket_name``, ``bucket_arn``, ``kms_key_arn``, and ``spec``."""

    def __init__(
        self, name: str, args: DataStoreArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        early = check_arguments("DataStore", name, args, DataStoreArgs, opts)
        spec = resolve("DataStore", "data", name, args.region, args.settings, early)
        assert isinstance(spec, ResolvedData)
        self.spec = spec
        super().__init__(name, program.vault_args(spec), opts)


class GpuNodeGroupArgs(_Args):
    """GPU nodes alone, in your subnet with your security group (it must allow all traffic
    between its members for EFA), instance profile and KMS key (the root volumes'), running your
    ``user_data``: ``instance_type`` (or ``gpu``/``gpus_per_node``), ``nodes``,
    ``availability_zone``, ``efa``, ``purchase_option`` (and ``spot``, ``capacity_reservation``,
    ``capacity_block``), ``ami`` and ``root_volume`` as in a stack file. The ids may be Outputs."""

    keywords = NodeGroupSettings

    def __init__(
        self,
        subnet_id: pulumi.Input[str],
        security_group_id: pulumi.Input[str],
        instance_profile_arn: pulumi.Input[str],
        kms_key_arn: pulumi.Input[str],
        user_data: pulumi.Input[str] = "",
        region: str | None = None,
        **settings: Unpack[NodeGroupSettings],
    ) -> None:
        self.inputs: dict[str, pulumi.Input[str]] = {
            "subnet_id": subnet_id,
            "security_group_id": security_group_id,
            "instance_profile_arn": instance_profile_arn,
            "kms_key_arn": kms_key_arn,
            "user_data": user_data,
        }
        self.input_problems = node_group_input_problems(self.inputs)
        values: dict[str, Any] = dict(settings)
        values.setdefault("storage", {"source": "create"})  # a node group has no storage
        super().__init__(region, **values)
        self.given = dict(settings)


class GpuNodeGroup(NodeGroupComponent):
    """Outputs: ``group`` (an Auto Scaling group; a single on-demand node is an ``instance``),
    ``group_name``, ``launch_template``, ``placement_group``, and ``spec``."""

    def __init__(
        self, name: str, args: GpuNodeGroupArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        early = check_arguments("GpuNodeGroup", name, args, GpuNodeGroupArgs, opts)
        spec = resolve("GpuNodeGroup", "cluster", name, args.region, args.settings, early)
        assert isinstance(spec, ResolvedCluster)
        self.spec = spec
        ami = resolve_ami(
            AmiChoice(
                architecture=spec.facts.architecture,
                image_id=spec.ami.id,
                ssm_parameter=spec.ami.ssm_parameter,
                release=spec.ami.release,
            ),
            pulumi.InvokeOptions(parent=opts.parent if opts else None),
        )
        super().__init__(
            name,
            NodeGroupComponentArgs(
                facts=spec.facts,
                node_count=spec.node_count,
                efa=spec.efa,
                ami_id=ami.image_id,
                root_device_name=ami.root_device,
                ami_min_root_gib=ami.min_root_gib,
                availability_zone=spec.availability_zone,
                purchase=spec.purchase,
                root_volume=program.node_root_volume(spec),
                identity=program.identity_of(spec),
                tags=cluster_tags(program.identity_of(spec), spec.tags),
                subnet_id=args.inputs["subnet_id"],
                security_group_id=args.inputs["security_group_id"],
                instance_profile_arn=args.inputs["instance_profile_arn"],
                kms_key_arn=args.inputs["kms_key_arn"],
                user_data=args.inputs["user_data"],
            ),
            opts,
        )
