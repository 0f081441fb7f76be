"""Zone, instance type (by name or by GPU), EFA, AMI and root volume."""

from __future__ import annotations

import re
import shlex

from gpu_cluster.components.catalog import Catalog, InstanceFacts
from gpu_cluster.components.dlami import dlami, dlami_supports, instance_family
from gpu_cluster.infra.meant import family_of, gpu_model
from gpu_cluster.infra.meant import instance_type as meant_type
from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly
from gpu_cluster.infra.problems import NOT_SET, Problem
from gpu_cluster.infra.spec import (
    GP3_IOPS_PER_GIB,
    GP3_MIBPS_PER_IOPS,
    AmiSpec,
    RootVolumeSpec,
    StackSpec,
)
from gpu_cluster.infra.suggest import closest, did_you_mean, suggest
from gpu_cluster.infra.validation.common import key

RELEASE = re.compile(r"^(20\d{6}|latest)\Z")
AMI_ID = re.compile(r"^ami-[0-9a-f]{8}([0-9a-f]{9})?\Z")


def check_zone(spec: StackSpec, catalog: Catalog) -> list[Problem]:
    zones = catalog.zones(spec.region)
    if spec.availability_zone is None:
        return [
            Problem(
                path=key("availabilityZone"),
                received=NOT_SET,
                problem="a cluster needs one availability zone "
                "(EFA and placement groups are zonal)"
                + (
                    "; with network.subnetIds `pulumi up` takes the subnet's, which the "
                    "offline plan cannot read"
                    if spec.network.subnet_ids
                    else ""
                ),
                allowed=", ".join(zones) or "an availability zone of the region",
                fix="pulumi config set availabilityZone <zone>",
            )
        ]
    if spec.availability_zone in zones or not zones:
        return []
    return [
        Problem(
            path=key("availabilityZone"),
            received=spec.availability_zone,
            problem=f"not an availability zone of {spec.region}",
            allowed=", ".join(zones),
            fix=f"{suggest(spec.availability_zone, zones)}pulumi config set availabilityZone "
            f"{closest(spec.availability_zone, zones) or zones[0]}",
        )
    ]


def pick_instance_type(
    spec: StackSpec, catalog: Catalog, zone_ok: bool
) -> tuple[InstanceFacts | None, list[Problem]]:
    """The requested type, or the cheapest type with the requested GPU model and count."""
    if spec.instance_type and spec.gpu:
        return None, [
            Problem(
                path=key("gpu"),
                received=spec.gpu,
                problem="both instanceType and gpu are set; they are two ways to ask for one thing",
                allowed="either instanceType, or gpu (+ gpusPerNode)",
                fix="pulumi config rm gpu  (or: pulumi config rm instanceType)",
            )
        ]
    if spec.instance_type:
        if spec.gpus_per_node is not None:
            return None, [
                Problem(
                    path=key("gpusPerNode"),
                    received=spec.gpus_per_node,
                    problem="gpusPerNode only applies to a gpu request; "
                    "instanceType fixes the count",
                    allowed="unset when instanceType is set",
                    fix="pulumi config rm gpusPerNode",
                )
            ]
        facts = catalog.get(spec.instance_type)
        if facts is None:
            return None, [
                Problem(
                    path=key("instanceType"),
                    received=spec.instance_type,
                    problem="not an NVIDIA GPU instance type in the catalog",
                    allowed="a type such as "
                    + ", ".join(
                        sorted(catalog.instance_types)[:: max(len(catalog.instance_types) // 8, 1)]
                    )
                    + " (`gpuc catalog list` shows all)",
                    fix=unknown_type_fix(spec.instance_type, spec.region, catalog),
                )
            ]
        return facts, check_offered(spec, catalog, facts, zone_ok)
    if spec.gpu:
        return pick_by_gpu(spec, catalog, zone_ok)
    return None, [
        Problem(
            path=key("instanceType"),
            received=NOT_SET,
            problem="no GPU requested",
            allowed="instanceType (e.g. p4d.24xlarge), or gpu (e.g. A100) with gpusPerNode",
            fix="pulumi config set instanceType g5.xlarge  (or: pulumi config set gpu A10G)",
        )
    ]


def not_in_catalog(what: str, region: str) -> str:
    return (
        f"{what} is not in the catalog (a snapshot of EC2's GPU types): if AWS offers it now, "
        f"refresh it with `gpuc catalog refresh --region {region}`"
    )


def unknown_type_fix(typed: str, region: str, catalog: Catalog) -> str:
    """The catalog type typed another way (p4d.24xl); else, for a GPU family's name, how to
    refresh the catalog; never a type of another family or size."""
    meant = meant_type(typed, catalog.instance_types)
    if meant:
        return f"{did_you_mean(typed, meant)}pulumi config set instanceType {meant}"
    pick = "pulumi config set instanceType <type> (`gpuc catalog list` shows them)"
    if family_of(typed)[:1] in ("p", "g"):  # EC2's NVIDIA GPU families: p (train), g (graphics)
        return f"{not_in_catalog(typed, region)}; or pick one it has: {pick}"
    return f"pick an NVIDIA GPU instance type: {pick}"


def unknown_gpu_fix(typed: str, region: str, models: list[str]) -> str:
    """The catalog model typed another way (a100, A10O); else how to refresh the catalog,
    never another GPU (H300 is not H200)."""
    meant = gpu_model(typed, models)
    if meant:
        return f"{did_you_mean(typed, meant)}pulumi config set gpu {shlex.quote(meant)}"
    return f"{not_in_catalog(typed, region)}; or pick a model it has: pulumi config set gpu <model>"


def pick_by_gpu(
    spec: StackSpec, catalog: Catalog, zone_ok: bool
) -> tuple[InstanceFacts | None, list[Problem]]:
    ranked, problems = ranked_by_price(spec, catalog, zone_ok)
    return (ranked[0] if ranked else None), problems


def gpu_choice_note(spec: StackSpec, catalog: Catalog) -> str | None:
    """Why a `gpu:` request became the type it did, with the runners-up."""
    if not spec.gpu or spec.instance_type:
        return None
    ranked, _ = ranked_by_price(spec, catalog, zone_ok=True)
    if not ranked:
        return None

    def price(facts: InstanceFacts) -> str:
        usd = on_demand_hourly(spec.region, facts.instance_type)
        return f"${usd:,.2f}/h" if usd is not None else "no price"

    chosen, others = ranked[0], ranked[1:4]
    note = (
        f"gpu: {spec.gpu} x {chosen.gpu_count} -> {chosen.instance_type} ({price(chosen)}): the "
        f"cheapest such type offered in {spec.availability_zone} at the snapshot's on-demand price"
    )
    if others:
        note += "; runners-up: " + ", ".join(f"{f.instance_type} ({price(f)})" for f in others)
    return note


def ranked_by_price(
    spec: StackSpec, catalog: Catalog, zone_ok: bool
) -> tuple[list[InstanceFacts], list[Problem]]:
    """The types that satisfy a gpu request, cheapest first (or why none does)."""
    assert spec.gpu is not None
    models = catalog.gpu_models
    if not catalog.types_for_gpu(spec.gpu):
        return [], [
            Problem(
                path=key("gpu"),
                received=spec.gpu,
                problem="unknown GPU model",
                allowed=", ".join(models),
                fix=unknown_gpu_fix(spec.gpu, spec.region, models),
            )
        ]
    counts = sorted({f.gpu_count for f in catalog.types_for_gpu(spec.gpu)})
    wanted = spec.gpus_per_node or counts[0]
    candidates = catalog.types_for_gpu(spec.gpu, wanted)
    if not candidates:
        return [], [
            Problem(
                path=key("gpusPerNode"),
                received=spec.gpus_per_node,
                problem=f"no instance type has {wanted} x {spec.gpu}",
                allowed=", ".join(str(c) for c in counts),
                fix="pulumi config set gpusPerNode "
                f"{min(counts, key=lambda c: (abs(c - wanted), -c))}",
            )
        ]
    if zone_ok and spec.availability_zone:
        offered = [
            f
            for f in candidates
            if spec.availability_zone in catalog.zones_offering(spec.region, f.instance_type)
        ]
    else:
        offered = [f for f in candidates if catalog.zones_offering(spec.region, f.instance_type)]
    if not offered:
        where = spec.availability_zone if zone_ok and spec.availability_zone else spec.region
        zones = sorted(
            {z for f in candidates for z in catalog.zones_offering(spec.region, f.instance_type)}
        )
        return [], [
            Problem(
                path=key("gpu"),
                received=f"{wanted} x {spec.gpu}",
                problem=f"no type with {wanted} x {spec.gpu} is offered in {where}",
                allowed=("zones offering it: " + ", ".join(zones))
                if zones
                else "another region (`gpuc catalog list` shows offerings)",
                fix="pick another availabilityZone, region, gpu or gpusPerNode",
            )
        ]
    if spec.efa:
        offered = [f for f in offered if f.efa_supported] or offered
    if default_ami(spec):
        offered = [f for f in offered if dlami_supports(f.instance_type, f.architecture)] or offered

    def price_key(facts: InstanceFacts) -> tuple[float, int, str]:
        price = on_demand_hourly(spec.region, facts.instance_type)
        return (price if price is not None else float("inf"), facts.vcpus, facts.instance_type)

    return sorted(offered, key=price_key), []


def check_offered(
    spec: StackSpec, catalog: Catalog, facts: InstanceFacts, zone_ok: bool
) -> list[Problem]:
    zones = catalog.zones_offering(spec.region, facts.instance_type)
    if not zones:
        regions = [r for r in catalog.regions if catalog.zones_offering(r, facts.instance_type)]
        return [
            Problem(
                path=key("instanceType"),
                received=facts.instance_type,
                problem=f"not offered in {spec.region}",
                allowed="regions offering it: " + (", ".join(regions) or "none known"),
                fix="choose another instanceType, or `pulumi config set aws:region <region>`",
            )
        ]
    if zone_ok and spec.availability_zone and spec.availability_zone not in zones:
        return [
            Problem(
                path=key("availabilityZone"),
                received=spec.availability_zone,
                problem=f"{facts.instance_type} is not offered in this zone",
                allowed=", ".join(zones),
                fix=f"pulumi config set availabilityZone {zones[0]}",
            )
        ]
    return []


def check_efa(
    spec: StackSpec, facts: InstanceFacts, catalog: Catalog
) -> tuple[bool, list[Problem]]:
    if spec.efa is None:
        return facts.efa_supported and spec.nodes > 1, []
    if spec.efa and not facts.efa_supported:
        alternatives = [
            f.instance_type for f in catalog.types_for_gpu(facts.gpu_model) if f.efa_supported
        ]
        return False, [
            Problem(
                path=key("efa"),
                received=True,
                problem=f"{facts.instance_type} does not support EFA",
                allowed="EFA-capable types with this GPU: " + (", ".join(alternatives) or "none"),
                fix="pulumi config set efa false, or pick one of the EFA-capable types",
            )
        ]
    return spec.efa, []


def release_meant(text: str) -> str:
    """The release a date written another way names (2026-10-09 -> 20261009); else the
    current one."""
    digits = re.sub(r"[\s./-]", "", text)
    return digits if RELEASE.match(digits) else dlami()["release"]


def check_ami(ami: AmiSpec, facts: InstanceFacts) -> list[Problem]:
    problems = []
    if ami.id and ami.ssm_parameter:
        problems.append(
            Problem(
                path=key("ami"),
                received={"id": ami.id, "ssmParameter": ami.ssm_parameter},
                problem="both ami.id and ami.ssmParameter are set",
                allowed="one of them (or neither, for the AWS Deep Learning AMI)",
                fix="pulumi config rm --path ami.ssmParameter",
            )
        )
    if ami.release is not None and (ami.id or ami.ssm_parameter):
        problems.append(
            Problem(
                path=key("ami.release"),
                received=ami.release,
                problem="ami.release picks a Deep Learning AMI release; ami.id or "
                "ami.ssmParameter names another AMI",
                allowed="ami.release alone, or ami.id / ami.ssmParameter alone",
                fix="pulumi config rm --path ami.release",
            )
        )
    if ami.release is not None and not RELEASE.match(ami.release):
        problems.append(
            Problem(
                path=key("ami.release"),
                received=ami.release,
                problem="not a Deep Learning AMI release",
                allowed="a release date YYYYMMDD from the DLAMI release notes (e.g. "
                f"{dlami()['release']}), or latest",
                fix=f"pulumi config set --path ami.release {release_meant(ami.release)}",
            )
        )
    if ami.id and not AMI_ID.match(ami.id):
        problems.append(
            Problem(
                path=key("ami.id"),
                received=ami.id,
                problem="not an AMI id",
                allowed="ami- followed by 8 or 17 hex digits",
                fix="pulumi config set --path ami.id ami-0123456789abcdef0",
            )
        )
    if ami.ssm_parameter and not ami.ssm_parameter.startswith("/"):
        problems.append(
            Problem(
                path=key("ami.ssmParameter"),
                received=ami.ssm_parameter,
                problem="an SSM parameter name starts with '/'",
                allowed="e.g. /aws/service/deeplearning/ami/x86_64/<ami type>/latest/ami-id",
                fix="pulumi config set --path ami.ssmParameter /aws/service/...",
            )
        )
    declared = ami.architecture
    if declared is None and ami.ssm_parameter:
        for arch in ("x86_64", "arm64"):
            if f"/{arch}/" in ami.ssm_parameter:
                declared = arch
    if declared and declared not in facts.architectures:
        problems.append(
            Problem(
                path=key("ami.architecture" if ami.architecture else "ami.ssmParameter"),
                received=ami.architecture or ami.ssm_parameter,
                problem=f"the AMI is {declared} but {facts.instance_type} runs "
                f"{', '.join(facts.architectures)}",
                allowed=f"an AMI for {', '.join(facts.architectures)}",
                fix="use an AMI built for the instance's architecture, or another instanceType",
            )
        )
    if ami.id and declared is None:
        problems.append(
            Problem(
                path=key("ami.architecture"),
                received=NOT_SET,
                problem="a custom ami.id needs its architecture, so it can be checked offline",
                allowed="x86_64, arm64",
                fix=f"pulumi config set --path ami.architecture {facts.architecture}",
            )
        )
    return problems


def check_root_volume(volume: RootVolumeSpec) -> list[Problem]:
    problems = []
    if volume.iops > volume.size_gib * GP3_IOPS_PER_GIB:
        problems.append(
            Problem(
                path=key("rootVolume.iops"),
                received=volume.iops,
                problem=f"gp3 allows at most {GP3_IOPS_PER_GIB} IOPS per GiB",
                allowed=f"at most {volume.size_gib * GP3_IOPS_PER_GIB} for {volume.size_gib} GiB",
                fix="lower rootVolume.iops or raise rootVolume.sizeGib",
            )
        )
    if volume.throughput > volume.iops * GP3_MIBPS_PER_IOPS:
        problems.append(
            Problem(
                path=key("rootVolume.throughput"),
                received=volume.throughput,
                problem=f"gp3 allows at most {GP3_MIBPS_PER_IOPS} MiB/s per provisioned IOPS",
                allowed=f"at most {int(volume.iops * GP3_MIBPS_PER_IOPS)} at {volume.iops} IOPS",
                fix="lower rootVolume.throughput or raise rootVolume.iops",
            )
        )
    return problems


def default_ami(spec: StackSpec) -> bool:
    return not (spec.ami.id or spec.ami.ssm_parameter)


def check_dlami_support(spec: StackSpec, facts: InstanceFacts, catalog: Catalog) -> list[Problem]:
    """The default Deep Learning AMI boots only the families its release notes list."""
    if not default_ami(spec) or dlami_supports(facts.instance_type, facts.architecture):
        return []
    alternatives = [
        f.instance_type
        for f in catalog.types_for_gpu(facts.gpu_model)
        if dlami_supports(f.instance_type, f.architecture)
    ]
    supported = dlami()["supported_families"].get(facts.architecture, [])
    return [
        Problem(
            path=key("instanceType"),
            received=facts.instance_type,
            problem=f"the default Deep Learning AMI ({dlami()['ami_type']}) does not support "
            f"the {instance_family(facts.instance_type)} family",
            allowed=(
                f"{facts.gpu_model} types it supports: {', '.join(alternatives)}"
                if alternatives
                else f"families it supports: {', '.join(supported)}"
            ),
            fix="pick a supported instanceType, or set ami.id / ami.ssmParameter to an AMI "
            "built for this type",
        )
    ]


def check_whole_gpus(
    spec: StackSpec, facts: InstanceFacts, efa: bool, catalog: Catalog
) -> list[Problem]:
    """A GPU slice (g6f, gr6f) serves one process on one node; training across nodes or over
    EFA needs whole GPUs."""
    if facts.is_whole_gpu or (spec.nodes == 1 and not efa):
        return []
    whole = [f.instance_type for f in catalog.types_for_gpu(facts.gpu_model)][:6]
    return [
        Problem(
            path=key("instanceType"),
            received=facts.instance_type,
            problem=f"{facts.instance_type} has {facts.gpu_partition:g} of an {facts.gpu_model} "
            f"({facts.gpu_memory_mib} MiB); {spec.nodes} nodes"
            + (" with EFA" if efa else "")
            + " need whole GPUs",
            allowed=f"whole-GPU {facts.gpu_model} types: {', '.join(whole)}",
            fix=f"pulumi config set instanceType {whole[0] if whole else '<type>'}, or nodes 1",
        )
    ]
