"""The cost model (pure): a resolved stack and a usage pattern in, priced lines out.

A month is ``days_per_month`` days of the stack existing; nodes run ``hours_per_day`` of each
day; everything else (NAT gateway, endpoints, keys, storage, reservations, savings-plan
commitments) bills around the clock. Monthly unit prices are prorated per hour over the
snapshot's hours per month (730), as AWS bills them."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from gpu_cluster.components.catalog import Catalog, load_catalog
from gpu_cluster.components.cidr import interface_endpoints
from gpu_cluster.components.cloudwatch_agent import AgentProfile, MetricCount, node_metrics
from gpu_cluster.components.cloudwatch_agent import agent_config as cloudwatch_agent_config
from gpu_cluster.components.purchase import (
    CapacityBlock,
    CapacityReservation,
    Spot,
    is_single_instance,
)
from gpu_cluster.infra.cost.firewall import firewall_usd_per_hour
from gpu_cluster.infra.prices.commitment import committed_hourly
from gpu_cluster.infra.prices.gpu_prices import PriceTable, price_table
from gpu_cluster.infra.prices.unit_prices import UnitPrices, hours_per_month, unit_prices
from gpu_cluster.infra.validation import ResolvedCluster, ResolvedData

HOURS_PER_DAY = 24
GP3_BASE_IOPS, GP3_BASE_MIBPS = 3000, 125


# One month everywhere: the unit-price snapshot's 730 hours (AWS's pricing convention), so a
# stack that exists all month runs 730 / 24 days of it.
DAYS_PER_MONTH = hours_per_month() / HOURS_PER_DAY


@dataclass(frozen=True)
class Usage:
    hours_per_day: float = 24
    days_per_month: float = DAYS_PER_MONTH
    dataset_gb: float | None = None  # None: the bundled assumption
    flow_log_gb_per_month: float | None = None
    trail_events_millions: float | None = None  # audit-trail data events a month
    requests_per_second: float | None = None  # serving: the load behind the load balancer
    kb_per_request: float | None = None
    requests_per_gpu_second: float | None = None
    savings_plan_1y: float | None = None  # discount rates; None: the bundled defaults
    savings_plan_3y: float | None = None

    def hours(self, always_on: bool) -> float:
        return HOURS_PER_DAY if always_on else self.hours_per_day


@dataclass(frozen=True)
class CostLine:
    item: str
    detail: str
    usd_per_hour: float | None  # while it bills; None: not priced offline
    always_on: bool  # bills 24 h/day, not only while nodes run
    source: str

    def daily(self, usage: Usage) -> float:
        return (self.usd_per_hour or 0.0) * usage.hours(self.always_on)

    def monthly(self, usage: Usage) -> float:
        return self.daily(usage) * usage.days_per_month


@dataclass(frozen=True)
class Estimate:
    lines: tuple[CostLine, ...]
    usage: Usage
    gpu_prices: str
    unit_prices: str

    @property
    def hourly_usd(self) -> float:
        """Everything billing while the nodes run."""
        return sum(line.usd_per_hour or 0.0 for line in self.lines)

    @property
    def daily_usd(self) -> float:
        return sum(line.daily(self.usage) for line in self.lines)

    @property
    def monthly_usd(self) -> float:
        return sum(line.monthly(self.usage) for line in self.lines)

    @property
    def unpriced(self) -> list[CostLine]:
        return [line for line in self.lines if line.usd_per_hour is None]

    @property
    def basis(self) -> str:
        days = self.usage.days_per_month
        month = (
            f"a {hours_per_month()} h month"
            if math.isclose(days, DAYS_PER_MONTH)
            else f"{days:g} days a month"
        )
        return (
            f"{self.usage.hours_per_day:g} h/day, {month}; "
            f"GPU prices: {self.gpu_prices}; other prices: {self.unit_prices}"
        )

    @property
    def prepaid(self) -> list[str]:
        """What bills outside this estimate (a Capacity Block, paid when bought)."""
        return [line.item for line in self.unpriced if "prepaid" in line.detail]


def is_gpu_line(line: CostLine) -> bool:
    return line.item.startswith("GPU instances")


def zone_id(spec: ResolvedCluster, catalog: Catalog) -> str | None:
    return catalog.zone_id(spec.region, spec.availability_zone)


def gpu_lines(spec: ResolvedCluster, prices: PriceTable, catalog: Catalog) -> list[CostLine]:
    """The GPU instances, priced by the stack's purchase option (on-demand hours at the rate of
    the commitment the stack says it holds: infra/prices/commitment.py)."""
    kind, nodes = spec.facts.instance_type, spec.node_count
    listed = prices.on_demand.get((spec.region, kind))
    source = prices.label
    what = f"{nodes} x {kind}"
    purchase = spec.purchase
    if isinstance(purchase, CapacityBlock):
        return [
            CostLine(
                f"GPU instances (capacity block {purchase.reservation_id})",
                f"{what}: prepaid when the block was bought; `gpuc capacity-block offerings` "
                "shows prices",
                None,
                True,
                "not priced offline",
            )
        ]
    if listed is None:
        return [CostLine(f"GPU instances ({spec.purchase_option})", what, None, False, source)]
    on_demand, rate = listed, f"${listed:,.4f}/h each"
    if spec.commitment is not None:
        committed = committed_hourly(spec.region, kind, listed, spec.commitment)
        if committed.usd_per_hour is not None:
            on_demand, rate = committed.usd_per_hour, committed.label
    if isinstance(purchase, CapacityReservation):
        return [
            CostLine(
                "GPU instances (capacity reservation)",
                f"{what} at the on-demand rate {rate}; the reservation bills 24 h/day from "
                "creation, used or not",
                nodes * on_demand,
                True,
                source,
            )
        ]
    if not isinstance(purchase, Spot):
        return [
            CostLine(
                "GPU instances (on-demand)", f"{what} at {rate}", nodes * on_demand, False, source
            )
        ]
    base = min(purchase.on_demand_base, nodes)
    lines = []
    if base:
        lines.append(
            CostLine(
                "GPU instances (on-demand base)",
                f"{base} x {kind} at {rate}",
                base * on_demand,
                False,
                source,
            )
        )
    zone = zone_id(spec, catalog)
    spot = prices.spot.get((spec.region, kind), {}).get(zone or "")
    where = f"{spec.availability_zone} ({zone or 'AZ id unknown'})"
    if spot is None:
        detail = f"{nodes - base} x {kind}: no spot price for {where}; on-demand rate shown"
        spot = listed
    else:
        detail = f"{nodes - base} x {kind} at ${spot:,.4f}/h each in {where}"
    if nodes - base:
        lines.append(CostLine("GPU instances (spot)", detail, (nodes - base) * spot, False, source))
    return lines


def root_volume_line(spec: ResolvedCluster, unit: UnitPrices) -> CostLine:
    volume = spec.root_volume
    monthly = (
        volume.size_gib * unit["ebs_gp3_gb_month"]
        + max(volume.iops - GP3_BASE_IOPS, 0) * unit["ebs_gp3_iops_month"]
        + max(volume.throughput - GP3_BASE_MIBPS, 0) * unit["ebs_gp3_mibps_month"]
    )
    # A plain instance keeps its volume while stopped; group nodes take theirs with them.
    single = spec.node_count == 1 and spec.purchase_option == "on-demand"
    return CostLine(
        "EBS root volumes (gp3)",
        f"{spec.node_count} x {volume.size_gib} GiB, {volume.iops} IOPS, "
        f"{volume.throughput} MiB/s (above baseline: {max(volume.iops - GP3_BASE_IOPS, 0)} "
        f"IOPS, {max(volume.throughput - GP3_BASE_MIBPS, 0)} MiB/s)",
        spec.node_count * monthly / unit.hours_per_month,
        single,
        unit.label,
    )


def network_lines(spec: ResolvedCluster, unit: UnitPrices, usage: Usage) -> list[CostLine]:
    lines = []
    existing = spec.existing_network  # the user's VPC: its NAT and endpoints are not ours
    if spec.network.nat_gateway and existing is None:
        lines += [
            CostLine(
                "NAT gateway",
                f"1 x ${unit['nat_gateway_hour']}/h (+ ${unit['nat_gateway_gb']}/GB processed, "
                "not estimated)",
                unit["nat_gateway_hour"],
                True,
                unit.label,
            ),
            CostLine(
                "Public IPv4 address (NAT gateway)",
                f"1 x ${unit['public_ipv4_hour']}/h",
                unit["public_ipv4_hour"],
                True,
                unit.label,
            ),
        ]
    services = (
        existing.create_endpoints
        if existing
        else interface_endpoints(spec.network.nat_gateway, bool(spec.image_repositories))
    )
    endpoints = len(services)
    lines.append(
        CostLine(
            "VPC interface endpoints",
            f"{endpoints} endpoints x 1 AZ x ${unit['interface_endpoint_hour']}/h "
            f"({', '.join(services)}; the S3 gateway endpoint is free)",
            endpoints * unit["interface_endpoint_hour"],
            True,
            unit.label,
        )
    )
    if spec.network.public_ip:
        lines.append(
            CostLine(
                "Public IPv4 addresses (nodes)",
                f"{spec.node_count} x ${unit['public_ipv4_hour']}/h",
                spec.node_count * unit["public_ipv4_hour"],
                False,
                unit.label,
            )
        )
    flow_gb = (
        usage.flow_log_gb_per_month
        if usage.flow_log_gb_per_month is not None
        else unit.flow_log_gb_per_month
    )
    lines.append(
        CostLine(
            "VPC flow logs (CloudWatch Logs)",
            f"{flow_gb:g} GB/month ingested x ${unit['logs_ingestion_gb']}/GB + stored x "
            f"${unit['logs_storage_gb_month']}/GB-month (estimate)",
            flow_gb
            * (unit["logs_ingestion_gb"] + unit["logs_storage_gb_month"])
            / unit.hours_per_month,
            True,
            unit.label,
        )
    )
    return lines


def kms_line(keys: int, unit: UnitPrices) -> CostLine:
    return CostLine(
        "KMS customer managed keys",
        f"{keys} x ${unit['kms_key_month']:g}/month (requests not estimated)",
        keys * unit["kms_key_month"] / unit.hours_per_month,
        True,
        unit.label,
    )


def fsx_line(size_gib: int, throughput: int, unit: UnitPrices) -> CostLine:
    per_gb = unit["fsx_lustre_persistent2_gb_month"][str(throughput)]
    return CostLine(
        "FSx for Lustre (PERSISTENT_2)",
        f"{size_gib} GiB at {throughput} MB/s/TiB x ${per_gb}/GB-month (exists while the stack "
        "does; data flows back to the bucket)",
        size_gib * per_gb / unit.hours_per_month,
        True,
        unit.label,
    )


def s3_line(usage: Usage, unit: UnitPrices) -> CostLine:
    size = usage.dataset_gb if usage.dataset_gb is not None else unit.dataset_gb
    return CostLine(
        "S3 Standard (datasets, checkpoints)",
        f"{size:g} GB x ${unit['s3_standard_gb_month']}/GB-month",
        size * unit["s3_standard_gb_month"] / unit.hours_per_month,
        True,
        unit.label,
    )


def stack_metrics(spec: ResolvedCluster) -> MetricCount:
    """The custom metrics a stack's nodes publish, counted from the CloudWatch agent profile
    its nodes get (components/cloudwatch_agent.py; the names in it do not change the count)."""
    training = spec.inference is None
    triton = spec.inference is not None and spec.inference.server_kind == "triton"
    profile = AgentProfile(
        stack_id="-",
        efa=spec.efa,
        model_metrics_log_group="-" if triton else "",
    )
    in_group = not training or not is_single_instance(spec.purchase, spec.node_count)
    return node_metrics(cloudwatch_agent_config(profile), in_group, training)


def monitoring_lines(spec: ResolvedCluster, unit: UnitPrices) -> list[CostLine]:
    """The nodes' custom metrics (CloudWatch prorates them by the hour they are published:
    while nodes run), the stack's dashboard and the idle stop's alarm."""
    count = stack_metrics(spec)
    metrics = count.total(spec.node_count)
    price = unit["cloudwatch_metric_month"]
    lines = [
        CostLine(
            "CloudWatch metrics",
            f"{metrics} metrics x ${price:.2f} = ${metrics * price:,.2f}/month while the nodes "
            f"run ({count.per_node} per node, {count.per_stack} per stack)",
            metrics * price / unit.hours_per_month,
            False,
            unit.label,
        ),
        CostLine(
            "CloudWatch dashboard",
            f"1 dashboard x ${unit['cloudwatch_dashboard_month']:.2f}/month (an account's first "
            "3 are free)",
            unit["cloudwatch_dashboard_month"] / unit.hours_per_month,
            True,
            unit.label,
        ),
    ]
    if spec.cost_controls.idle_stop:
        lines.append(
            CostLine(
                "CloudWatch idle alarm",
                f"1 alarm x ${unit['cloudwatch_alarm_month']}/month",
                unit["cloudwatch_alarm_month"] / unit.hours_per_month,
                True,
                unit.label,
            )
        )
    return lines


def trail_line(usage: Usage, unit: UnitPrices) -> CostLine:
    """The audit trail's S3 data events. Management events: the account's first copy is free;
    a second (another trail already records them) is billed per 100,000, noted, not priced."""
    events = (
        usage.trail_events_millions * 1e6
        if usage.trail_events_millions is not None
        else unit.trail_data_events_per_month
    )
    per_100k = unit["cloudtrail_data_events_per_100k"]
    extra = unit["cloudtrail_extra_management_events_per_100k"]
    return CostLine(
        "CloudTrail audit trail (data bucket)",
        f"{events / 1e6:g}M data events/month x ${per_100k}/100k; management events free as "
        f"the account's first copy, else ${extra:g}/100k",
        events / 100_000 * per_100k / unit.hours_per_month,
        True,
        unit.label,
    )


def estimate_cluster(
    spec: ResolvedCluster,
    usage: Usage | None = None,
    prices: PriceTable | None = None,
    catalog: Catalog | None = None,
) -> Estimate:
    usage = usage or Usage()
    prices = prices or price_table()
    catalog = catalog or load_catalog()
    unit = unit_prices(spec.region)
    lines = [*gpu_lines(spec, prices, catalog), root_volume_line(spec, unit)]
    lines += network_lines(spec, unit, usage)
    lines.append(kms_line(1, unit))
    lines += monitoring_lines(spec, unit)
    if spec.fsx is not None:
        lines.append(fsx_line(spec.fsx.storage_capacity_gib, spec.fsx.throughput_per_tib, unit))
    if spec.storage.source == "create":  # the bucket is this stack's; else the data stack's
        lines.append(s3_line(usage, unit))
    return Estimate(tuple(lines), usage, prices.label, unit.label)


def estimate_data(spec: ResolvedData, usage: Usage | None = None) -> Estimate:
    usage = usage or Usage()
    unit = unit_prices(spec.region)
    lines = [kms_line(1, unit), s3_line(usage, unit)]
    if spec.audit_trail:
        lines.append(trail_line(usage, unit))
    return Estimate(tuple(lines), usage, price_table().label, unit.label)


@dataclass(frozen=True)
class ServingLoad:
    requests_per_second: float
    kb_per_request: float
    requests_per_gpu_second: float


def serving_load(usage: Usage, unit: UnitPrices) -> ServingLoad:
    def pick(given: float | None, default: float) -> float:
        return default if given is None else given

    return ServingLoad(
        pick(usage.requests_per_second, unit.serving_requests_per_second),
        pick(usage.kb_per_request, unit.serving_kb_per_request),
        pick(usage.requests_per_gpu_second, unit.serving_requests_per_gpu_second),
    )


def load_balancer_line(load: ServingLoad, unit: UnitPrices) -> CostLine:
    """ALB hours plus LCUs: the larger of new connections (25/s per LCU, one request per
    connection assumed) and processed bytes (1 GB/h per LCU); rule evaluations stay free."""
    gigabytes_per_hour = load.requests_per_second * load.kb_per_request * 3600 / 1e6
    lcus = max(load.requests_per_second / 25, gigabytes_per_hour)
    hourly = unit["alb_hour"] + lcus * unit["alb_lcu_hour"]
    return CostLine(
        "Application Load Balancer",
        f"${unit['alb_hour']}/h + {lcus:.2f} LCU x ${unit['alb_lcu_hour']}/LCU-h at "
        f"{load.requests_per_second:g} req/s of {load.kb_per_request:g} KB",
        hourly,
        True,
        unit.label,
    )


def estimate_serving(
    spec: ResolvedCluster, usage: Usage | None = None, nodes: int | None = None
) -> Estimate:
    """An inference stack at `nodes` (default: its minimum), always on."""
    assert spec.inference is not None
    usage = usage or Usage()
    unit = unit_prices(spec.region)
    sized = replace(spec, node_count=spec.inference.min_nodes if nodes is None else nodes)
    base = estimate_cluster(sized, usage)
    load = serving_load(usage, unit)
    lines = [*base.lines, load_balancer_line(load, unit)]
    if waf := firewall_usd_per_hour(spec.inference, load.requests_per_second, unit):
        lines.append(CostLine("AWS WAF web ACL", waf[1], waf[0], True, unit.label))
    return Estimate(tuple(lines), usage, base.gpu_prices, base.unit_prices)


def nodes_for_load(spec: ResolvedCluster, load: ServingLoad) -> int:
    assert spec.inference is not None
    per_node = load.requests_per_gpu_second * max(1.0, spec.facts.gpus)
    needed = math.ceil(load.requests_per_second / per_node) if per_node else 0
    return min(max(needed, spec.inference.min_nodes, 1), spec.inference.max_nodes)


def scheduled_usage(spec: object, usage: Usage | None = None) -> Usage:
    """A stack with working hours bills the hours its schedule runs the nodes."""
    usage = usage or Usage()
    controls = getattr(spec, "cost_controls", None)
    schedule = controls.schedule if controls is not None else None
    return replace(usage, hours_per_day=schedule.hours_per_day()) if schedule else usage
