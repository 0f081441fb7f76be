"""The Pulumi program: stack config -> spec -> components -> stack outputs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC
from typing import TYPE_CHECKING

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.bandwidth import bus_bandwidth_model
from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.components.cluster import GpuCluster, GpuClusterArgs, StorageArgs
from gpu_cluster.components.dashboard import BurnPrices
from gpu_cluster.components.data_vault import DataVault, DataVaultArgs
from gpu_cluster.components.launch_template import RootVolume
from gpu_cluster.components.lustre import LustreSize
from gpu_cluster.components.names import StackIdentity, default_bucket_name
from gpu_cluster.components.naming import cluster_tags
from gpu_cluster.components.network import ExistingNetwork
from gpu_cluster.components.purchase import (
    BLOCK_END_MARGIN,
    CapacityBlock,
    CapacityReservation,
    Spot,
)
from gpu_cluster.components.quotas import quotas_needed
from gpu_cluster.components.user_data import DATA_MOUNT, LUSTRE_MOUNT, SCRATCH_MOUNT
from gpu_cluster.infra.config import current_config, load_spec
from gpu_cluster.infra.cost.model import (
    estimate_cluster,
    estimate_serving,
    is_gpu_line,
    scheduled_usage,
)
from gpu_cluster.infra.errors import AwsError, ConfigError, Problem
from gpu_cluster.infra.facts import NOT_FOUND_CODES, ReservationFacts
from gpu_cluster.infra.network_check import (
    NetworkLookup,
    from_subnet_zone,
    with_network_facts,
    with_subnet_zone,
    zone_not_read,
)
from gpu_cluster.infra.prices.unit_prices import hours_per_month
from gpu_cluster.infra.secrets_config import secret_value
from gpu_cluster.infra.spec import DEFAULT_DATA_STACK, PROJECT
from gpu_cluster.infra.validation import ResolvedCluster, ResolvedData, stack_identity
from gpu_cluster.infra.validation.network_facts import NetworkFacts
from gpu_cluster.infra.validation.purchase import check_live_reservation

if TYPE_CHECKING:  # imported where an inference stack is deployed: a cluster plan never loads it
    from gpu_cluster.components.serving_stack import ServingStack, ServingStackArgs


def identity_of(spec: ResolvedCluster | ResolvedData) -> StackIdentity:
    """The stack's identity in the project the program runs in (components/names.py)."""
    return stack_identity(spec, pulumi.get_project())


def data_bucket_name(identity: StackIdentity, account_id: pulumi.Input[str]) -> pulumi.Output[str]:
    """Globally unique and predictable, so IAM policies can name it before it exists."""
    return pulumi.Output.from_input(account_id).apply(
        lambda account: default_bucket_name(identity, account)
    )


def storage_args(spec: ResolvedCluster) -> StorageArgs:
    storage = spec.storage
    if storage.source == "existing":
        assert storage.bucket is not None
        return StorageArgs(
            bucket_name=storage.bucket, create=False, data_key_arn=storage.kms_key_arn
        )
    if storage.source == "stack":
        data = pulumi.StackReference(storage.stack or DEFAULT_DATA_STACK)
        return StorageArgs(
            bucket_name=data.require_output("bucketName"),
            create=False,
            data_key_arn=data.require_output("kmsKeyArn"),
        )
    account = aws.get_caller_identity_output().account_id
    return StorageArgs(
        bucket_name=storage.bucket or data_bucket_name(identity_of(spec), account), create=True
    )


def node_storage(spec: ResolvedCluster) -> str:
    facts = spec.facts
    if not facts.nvme_disk_count:
        return f"no instance store: {SCRATCH_MOUNT} is on the root volume"
    layout = "RAID0" if facts.nvme_disk_count > 1 else "one disk"
    return (
        f"{facts.nvme_disk_count} x {facts.nvme_disk_size_gb} GB NVMe ({layout}, or the Deep "
        f"Learning AMI's own volume) at {SCRATCH_MOUNT}"
    )


def vcpu_quotas(spec: ResolvedCluster) -> dict[str, int]:
    """vCPUs per Service Quotas quota; spot nodes are counted at the largest of their types
    (a fallback type may have more vCPUs than the primary)."""
    if not isinstance(spec.purchase, Spot):
        return quotas_needed(spec.facts.instance_type, spec.facts.vcpus, spec.node_count, 0)
    catalog = load_catalog()
    spot_vcpus = max(
        [spec.facts.vcpus] + [catalog.instance_types[t].vcpus for t in spec.purchase.fallback_types]
    )
    base = min(spec.purchase.on_demand_base, spec.node_count)
    needed = quotas_needed(spec.facts.instance_type, spec.facts.vcpus, base, 0) if base else {}
    return needed | quotas_needed(
        spec.facts.instance_type, spot_vcpus, spec.node_count - base, spec.node_count - base
    )


def cluster_secrets(names: tuple[str, ...]) -> dict[str, pulumi.Input[str]]:
    """Each named secret's value from stack config, kept a Pulumi secret throughout."""
    if not names:
        return {}
    values = pulumi.Config(PROJECT).require_secret_object("secrets")
    return {name: values.apply(lambda v, name=name: secret_value(v, name)) for name in names}


API_KEY_VARIABLE = "GPUC_API_KEY"


def smoke_test_command(url: str, kind: str, readiness: str, api_key_header: str | None) -> str:
    """Readiness, then one inference request (Triton's model list, or vLLM's models), for a
    shell (`bash -c "$(pulumi stack output smokeTestCommand)"`). With API keys the web ACL
    answers 401 without one: the requests carry the header from $GPUC_API_KEY (never the key)."""
    probe = f"{url}/v2/repository/index -X POST" if kind == "triton" else f"{url}/v1/models"
    curl = "curl -fsS"
    if api_key_header:
        curl += (
            f' -H "{api_key_header}: ${{{API_KEY_VARIABLE}:?set {API_KEY_VARIABLE} to one of '
            'inference.access.apiKeys}"'
        )
    return f"{curl} {url}{readiness} && {curl} {probe}"


def serving_args(spec: ResolvedCluster) -> ServingStackArgs:
    from gpu_cluster.components.inference import secret_access
    from gpu_cluster.components.serving_stack import ServingStackArgs

    assert spec.inference is not None
    serving = spec.inference
    return ServingStackArgs(
        facts=spec.facts,
        # API keys and the OIDC client secret stay Pulumi secrets (encrypted in the state)
        serving=dataclasses.replace(serving, access=secret_access(serving.access)),
        region=spec.region,
        layout=spec.layout,
        storage=storage_args(spec),
        purchase=spec.purchase,
        ami_ssm_parameter=spec.ami.ssm_parameter,
        ami_id=spec.ami.id,
        ami_release=spec.ami.release,
        root_volume=node_root_volume(spec),
        identity=identity_of(spec),
        cost_controls=spec.cost_controls,
        burn=burn_prices(spec),
        existing_network=spec.existing_network,
        tags=cluster_tags(identity_of(spec), spec.tags),
    )


def deploy_inference(spec: ResolvedCluster) -> ServingStack:
    from gpu_cluster.components.serving_stack import ServingStack

    serving = spec.inference
    assert serving is not None
    stack = ServingStack(spec.name, serving_args(spec))
    for warning in spec.warnings:
        pulumi.log.warn(warning)
    pulumi.export("configWarnings", list(spec.warnings))
    pulumi.export("instanceType", spec.facts.instance_type)
    pulumi.export("purchaseOption", spec.purchase_option)
    pulumi.export("url", stack.url)
    pulumi.export("dashboardUrl", stack.dashboard_url)
    pulumi.export("nodeGroupName", stack.service.group.name)
    pulumi.export("zones", list(serving.zones))
    pulumi.export(
        "serving",
        {
            "nodes": f"{serving.min_nodes}-{serving.max_nodes}",
            "server": serving.image,
            "port": serving.port,
            "tlsPolicy": serving.tls_policy,
            "scaling": f"{serving.scaling_metric} target {serving.scaling_target:g}",
            "batching": f"preferred {list(serving.preferred_batch_sizes)}, max queue delay "
            f"{serving.max_queue_delay_us} us",
            "warmupSeconds": serving.warmup_seconds,
            "access": serving.access.describe(),
            "firewall": serving.firewall.describe(),
        },
    )
    pulumi.export(
        "smokeTestCommand",
        stack.url.apply(
            lambda url: smoke_test_command(
                url,
                serving.server_kind,
                serving.readiness_path,
                serving.access.api_key_header if serving.access.api_keys else None,
            )
        ),
    )
    pulumi.export("costControls", spec.cost_controls.describe())
    estimate = estimate_serving(spec, scheduled_usage(spec))
    pulumi.export("costBasis", estimate.basis)
    pulumi.export("costPrepaid", estimate.prepaid)
    pulumi.export("totalGpus", spec.facts.gpus * serving.min_nodes)
    pulumi.export("estimatedUsdPerHour", round(estimate.hourly_usd, 2))
    pulumi.export("estimatedUsdPerMonth", round(estimate.monthly_usd, 2))
    pulumi.export(
        "gpuUsdPerHour",
        round(sum(c.usd_per_hour or 0 for c in estimate.lines if is_gpu_line(c)), 2),
    )
    return stack


def burn_prices(spec: ResolvedCluster) -> BurnPrices:
    """A node's USD/hour for the dashboard's burn rate: the cost model's GPU lines (`gpuc cost`)
    per node, at the stack's largest size (a serving stack's maximum)."""
    nodes = spec.inference.max_nodes if spec.inference else spec.node_count
    lines = [
        line
        for line in estimate_cluster(replace(spec, node_count=nodes)).lines
        if is_gpu_line(line)
    ]
    month = hours_per_month()
    if not lines or any(line.usd_per_hour is None for line in lines):
        why = "prepaid capacity" if isinstance(spec.purchase, CapacityBlock) else "no price"
        return BurnPrices(None, month, why)
    return BurnPrices(sum(line.usd_per_hour or 0.0 for line in lines) / nodes, month)


def node_root_volume(spec: ResolvedCluster) -> RootVolume:
    volume = spec.root_volume
    return RootVolume(
        size_gib=volume.size_gib, iops=volume.iops, throughput_mibps=volume.throughput
    )


def node_zone(spec: ResolvedCluster) -> pulumi.Input[str]:
    """The nodes' zone; the zone of the subnet where the offline plan could not read it:
    unknown, as `pulumi preview` shows a value known only at `pulumi up` (the stand-in zone
    the plan checked and priced is no promise). At `pulumi up` the program has read it
    (with_subnet_zone), takes EC2's answer for a subnet another resource gives, or refuses
    (network_check.zone_not_read)."""
    if spec.zone_from_subnet is None:
        return spec.availability_zone
    if network_lookup is None:
        return unknown_output()
    subnet: object = spec.existing_network.subnet_ids[0] if spec.existing_network else None
    if isinstance(subnet, pulumi.Output):  # an id another resource gives (infra/api.py)
        # known only at `pulumi up`: its zone is EC2's answer then (DescribeSubnets)
        return aws.ec2.get_subnet_output(id=subnet).availability_zone
    raise ConfigError(spec.stack, [zone_not_read(spec.zone_from_subnet, "")])


def unknown_output() -> pulumi.Output[str]:
    """A value not known before `pulumi up`: the engine's own unknown, through Output's
    public constructor (pulumi/output.py: Output(resources, future, is_known))."""

    async def value() -> str:
        return ""

    async def known() -> bool:
        return False

    return pulumi.Output(set(), value(), known())


def cluster_args(
    spec: ResolvedCluster, secrets: dict[str, pulumi.Input[str]] | None = None
) -> GpuClusterArgs:
    """The component's args from a resolved stack (``secrets``: the values; by default read
    from the stack's config)."""
    return GpuClusterArgs(
        facts=spec.facts,
        node_count=spec.node_count,
        efa=spec.efa,
        region=spec.region,
        availability_zone=node_zone(spec),
        layout=spec.layout,
        storage=storage_args(spec),
        purchase=spec.purchase,
        ami_ssm_parameter=spec.ami.ssm_parameter,
        ami_id=spec.ami.id,
        ami_release=spec.ami.release,
        fsx=(
            LustreSize(spec.fsx.storage_capacity_gib, spec.fsx.throughput_per_tib)
            if spec.fsx
            else None
        ),
        root_volume=node_root_volume(spec),
        nat_gateway=spec.network.nat_gateway,
        public_ip=spec.network.public_ip,
        existing_network=spec.existing_network,
        identity=identity_of(spec),
        container_network=spec.container_network,
        secrets=cluster_secrets(spec.secrets) if secrets is None else secrets,
        cost_controls=spec.cost_controls,
        burn=burn_prices(spec),
        image_repositories=spec.image_repositories,
        tags=cluster_tags(identity_of(spec), spec.tags),
    )


def deploy_cluster(spec: ResolvedCluster) -> GpuCluster:
    cluster = GpuCluster(spec.name, cluster_args(spec))
    for warning in spec.warnings:
        pulumi.log.warn(warning)
    pulumi.export("configWarnings", list(spec.warnings))
    pulumi.export("instanceType", spec.facts.instance_type)
    if spec.choice_note:
        pulumi.export("instanceChoice", spec.choice_note)
    pulumi.export("nodeCount", spec.node_count)
    pulumi.export("purchaseOption", spec.purchase_option)
    pulumi.export("costControls", spec.cost_controls.describe())
    pulumi.export("resumeCommand", f"gpuc resume --stack {spec.stack}")
    pulumi.export("totalGpus", cluster.total_gpus)
    pulumi.export("efaInterfacesPerNode", cluster.efa_interfaces_per_node)
    pulumi.export("expectedBusBandwidthGBps", cluster.expected_busbw_gbytes)
    pulumi.export("busBandwidthModel", bus_bandwidth_model(cluster.busbw))
    pulumi.export("healthCheck", "instance tag gpu-cluster:health, metric gpu-cluster/NodeHealthy")
    pulumi.export("nodeStorage", node_storage(spec))
    if cluster.lustre is not None:
        pulumi.export(
            "lustre",
            cluster.lustre.mount_target.apply(
                lambda target: (
                    f"{target} at {LUSTRE_MOUNT}: the bucket's datasets/ (import only), "
                    "checkpoints/ and outputs/ (exported back) in folders of the same names"
                )
            ),
        )
    pulumi.export("dataPath", cluster.bucket_name.apply(lambda b: data_path(b, spec)))
    pulumi.export("amiId", cluster.ami.image_id)
    pulumi.export("amiName", cluster.ami.name)
    if cluster.node_group_name is not None:
        pulumi.export("nodeGroupName", cluster.node_group_name)
        pulumi.export("listNodesCommand", cluster.list_nodes_command)
        pulumi.export("runOnEveryNodeCommand", cluster.run_everywhere_command)
        pulumi.export("ncclTestCommand", cluster.nccl_test_command)
    else:
        pulumi.export("nodePrivateIps", cluster.private_ips)
        pulumi.export("instanceIds", cluster.nodes.instance_ids)
    pulumi.export("ssmSessionCommands", cluster.ssm_commands)
    pulumi.export("bucketName", cluster.bucket_name)
    pulumi.export("torchrunCommand", cluster.job_command)
    pulumi.export("dashboardUrl", cluster.dashboard_url)
    pulumi.export("vcpuQuotasNeeded", vcpu_quotas(spec))
    # Priced as `gpuc cost` prices it, at the root volume the nodes really get: never smaller
    # than the AMI's root snapshot (components/launch_template.py root_volume_size).
    minimum = cluster.ami.min_root_gib
    estimate = minimum.apply(lambda gib: priced_cluster(spec, gib))
    pulumi.export("estimatedUsdPerHour", estimate.apply(lambda e: round(e.hourly_usd, 2)))
    pulumi.export("estimatedUsdPerMonth", estimate.apply(lambda e: round(e.monthly_usd, 2)))
    pulumi.export("costPrepaid", estimate.apply(lambda e: e.prepaid))
    pulumi.export(
        "gpuUsdPerHour",
        estimate.apply(
            lambda e: round(sum(line.usd_per_hour or 0 for line in e.lines if is_gpu_line(line)), 2)
        ),
    )
    pulumi.export("costBasis", estimate.apply(lambda e: e.basis))
    pulumi.export(
        "costNotes", pulumi.Output.all(estimate, minimum).apply(lambda v: cost_notes(spec, *v))
    )
    return cluster


def priced_cluster(spec: ResolvedCluster, ami_min_root_gib: int):
    """The estimate with the root volume at max(asked, the AMI's root snapshot)."""
    volume = spec.root_volume
    if (ami_min_root_gib or 0) > volume.size_gib:
        volume = volume.model_copy(update={"size_gib": ami_min_root_gib})
        spec = dataclasses.replace(spec, root_volume=volume)
    return estimate_cluster(spec, scheduled_usage(spec))


def cost_notes(spec: ResolvedCluster, estimate, ami_min_root_gib: int) -> list[str]:
    notes = [f"{line.item}: {line.detail}" for line in estimate.lines if is_gpu_line(line)]
    if (ami_min_root_gib or 0) > spec.root_volume.size_gib:
        notes.append(
            f"EBS root volumes: rootVolume.sizeGib {spec.root_volume.size_gib} is below the "
            f"AMI's root snapshot; nodes get (and are priced at) {ami_min_root_gib} GiB"
        )
    return notes


def vault_args(spec: ResolvedData) -> DataVaultArgs:
    identity = aws.get_caller_identity_output()
    return DataVaultArgs(
        bucket_name=spec.bucket or data_bucket_name(identity_of(spec), identity.account_id),
        account_id=identity.account_id,
        partition=aws.get_partition_output().partition,
        region=spec.region,
        audit_trail=spec.audit_trail,
        ebs_encryption_by_default=spec.ebs_encryption_by_default,
        snapshot_block_public_access=spec.snapshot_block_public_access,
        identity=identity_of(spec),
        tags=cluster_tags(identity_of(spec), spec.tags),
    )


def deploy_data(spec: ResolvedData) -> DataVault:
    vault = DataVault(spec.name, vault_args(spec))
    for warning in spec.warnings:
        pulumi.log.warn(warning)
    if spec.warnings:  # a data stack's outputs stay as they were without any
        pulumi.export("configWarnings", list(spec.warnings))
    pulumi.export("bucketName", vault.bucket_name)
    pulumi.export("bucketArn", vault.bucket_arn)
    pulumi.export("kmsKeyArn", vault.kms_key_arn)
    return vault


ReservationLookup = Callable[[str, str], ReservationFacts]


def describe_live(reservation_id: str, region: str) -> ReservationFacts:
    from gpu_cluster.infra.aws.reservations import (
        describe_reservation,  # boto3 only when it is needed
    )

    return describe_reservation(reservation_id, region)


# How the program reads a reservation's facts; the offline plan engine sets None (no AWS).
live_lookup: ReservationLookup | None = describe_live


def with_block_end(spec: ResolvedCluster, facts: ReservationFacts | None) -> ResolvedCluster:
    """A Capacity Block's end becomes the stack's expiry (the group scales to 0 30 minutes
    before it, the alert topic is warned an hour before that), unless expiresAt is earlier."""
    if not isinstance(spec.purchase, CapacityBlock) or facts is None or facts.end_date is None:
        return spec
    end = facts.end_date.astimezone(UTC)
    stop = end - BLOCK_END_MARGIN
    controls = spec.cost_controls
    if controls.expires_at is not None and controls.expires_at <= stop:
        return spec
    reason = f"Capacity Block {facts.reservation_id} ends {end:%Y-%m-%d %H:%M} UTC"
    pulumi.log.warn(
        f"{reason}: the group scales to 0 at {stop:%Y-%m-%d %H:%M} UTC, 30 minutes before, as "
        "AWS asks (after the end the group would retry launches forever)"
    )
    stopped = replace(controls, expires_at=stop, expiry_reason=reason)
    return replace(spec, cost_controls=stopped)


def check_reservation(
    spec: ResolvedCluster, lookup: ReservationLookup | None
) -> ReservationFacts | None:
    """Match a targeted reservation or block against the group (type, zone, size, state), as
    ParallelCluster does; with no access to EC2, warn and let AWS decide at launch."""
    purchase = spec.purchase
    if isinstance(purchase, CapacityBlock):
        reservation_id, field = purchase.reservation_id, "capacityBlock.id"
    elif isinstance(purchase, CapacityReservation) and purchase.reservation_id:
        reservation_id, field = purchase.reservation_id, "capacityReservation.id"
    else:
        return None
    if lookup is None:
        return None
    try:
        facts = lookup(reservation_id, spec.region)
    except AwsError as error:
        if error.code in NOT_FOUND_CODES:
            raise ConfigError(
                spec.stack,
                [
                    Problem(
                        path=f"gpu-cluster:{field}",
                        received=reservation_id,
                        problem=f"no such reservation in {spec.region} for this account",
                        allowed="the id of an active or scheduled reservation in this region",
                        fix="check the id with `aws ec2 describe-capacity-reservations`",
                    )
                ],
            ) from None
        if isinstance(purchase, CapacityBlock):
            block_end_unknown(spec, reservation_id, f"EC2 could not be read: {error}")
        pulumi.log.warn(f"could not check {field} {reservation_id}: {error}")
        return None
    problems = check_live_reservation(
        purchase, facts, spec.facts.instance_type, spec.availability_zone, spec.node_count
    )
    if problems:
        raise ConfigError(spec.stack, problems)
    if isinstance(purchase, CapacityBlock) and facts.end_date is None:
        block_end_unknown(spec, reservation_id, "EC2 gave the block no end date")
    return facts


def block_end_unknown(spec: ResolvedCluster, reservation_id: str, why: str) -> None:
    """A Capacity Block whose end cannot be read at `pulumi up`: the stop 30 minutes before it
    (with_block_end) cannot be scheduled, and AWS terminates the block's instances at its end
    while the group retries launches forever. The stack's own expiresAt is then the stop; with
    none, nothing is created (a warning would leave the nodes without a stop)."""
    if spec.cost_controls.expires_at is not None:
        pulumi.log.warn(
            f"Capacity Block {reservation_id}: its end is unknown ({why}); the nodes stop at "
            f"expiresAt {spec.cost_controls.expires_at:%Y-%m-%d %H:%M} UTC, which must be at "
            "least 30 minutes before the block ends"
        )
        return
    raise ConfigError(
        spec.stack,
        [
            Problem(
                path="gpu-cluster:capacityBlock.id",
                received=reservation_id,
                problem=f"the block's end could not be read ({why}): without it the group gets "
                "no stop 30 minutes before the block ends (AWS terminates the block's instances "
                "then, and the group would retry launches forever)",
                allowed="a block this caller can describe (ec2:DescribeCapacityReservations), or "
                "expiresAt set to at least 30 minutes before the block's end",
                fix="give the caller ec2:DescribeCapacityReservations and run `pulumi up` again, "
                "or read the end (aws ec2 describe-capacity-reservations "
                f"--capacity-reservation-ids {reservation_id} --query "
                "'CapacityReservations[0].EndDate') and pulumi config set expiresAt "
                "<30 minutes before it, e.g. 2027-01-31T11:30:00Z>",
            )
        ],
    )


def describe_network_live(existing: ExistingNetwork, region: str) -> NetworkFacts:
    from gpu_cluster.infra.aws.network_facts import describe_network  # boto3 when needed

    return describe_network(existing, region)


# How the program reads an existing network's facts; the offline plan engine sets None.
network_lookup: NetworkLookup | None = describe_network_live


def main() -> None:
    config = current_config()
    zoned = with_subnet_zone(config, network_lookup)
    try:
        spec = load_spec(zoned, pulumi.get_stack())
    except ConfigError as error:
        raise from_subnet_zone(error, config, zoned) from None
    if isinstance(spec, ResolvedData):
        deploy_data(spec)
    else:
        spec = with_network_facts(spec, network_lookup)
        spec = with_block_end(spec, check_reservation(spec, live_lookup))
        if spec.inference is not None:
            deploy_inference(spec)
        else:
            deploy_cluster(spec)


def data_path(bucket: str, spec: ResolvedCluster) -> str:
    """Where a node finds the data bucket. Mountpoint comes from its release bucket and the
    Ubuntu archive, outside the VPC: without a NAT gateway a node cannot install it."""
    if not spec.network.nat_gateway:
        return (
            f"s3://{bucket} (not mounted at {DATA_MOUNT}: Mountpoint for Amazon S3 installs from "
            "outside the VPC and network.natGateway is false; use aws s3 cp or boto3, which "
            "reach the bucket through the S3 gateway endpoint)"
        )
    cache = (
        f"read cache on {SCRATCH_MOUNT}"
        if spec.facts.nvme_disk_count
        else "no read cache: no NVMe, and the root volume is kept for the node"
    )
    return f"s3://{bucket} read-only at {DATA_MOUNT} (Mountpoint for Amazon S3, {cache})"
