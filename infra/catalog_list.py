"""`gpuc catalog list`: the GPU types of a region with their facts and prices, filtered and
sorted by price (pure: catalog + price snapshot in, rows out)."""

from __future__ import annotations

from dataclasses import dataclass

from gpu_cluster.components.catalog import Catalog
from gpu_cluster.infra.outcome import INPUT, CommandError
from gpu_cluster.infra.prices.gpu_prices import PriceTable
from gpu_cluster.infra.prices.node_price import cheapest_spot_zone
from gpu_cluster.infra.suggest import suggest


def cheapest_price(
    region: str, instance_type: str, spot: dict[str, float], catalog: Catalog
) -> float | None:
    best = cheapest_spot_zone(region, instance_type, spot, catalog)
    return best[1] if best else None


@dataclass(frozen=True)
class CatalogRow:
    instance_type: str
    gpus: str  # "8 x A100" or "0.125 x L4"
    gpu_memory_gib: float
    vcpus: int
    efa_interfaces: int
    nvme: str
    on_demand: float | None
    spot_low: float | None  # the cheapest standard AZ's spot price in the snapshot
    per_gpu_hour: float | None
    zones: tuple[str, ...]


def catalog_rows(
    catalog: Catalog,
    prices: PriceTable,
    region: str,
    gpu: str | None = None,
    min_gpus: int = 0,
    offered_only: bool = False,
) -> list[CatalogRow]:
    if region not in catalog.offerings:
        raise CommandError(
            INPUT,
            f"no GPU offerings are known for region '{region}'; "
            f"{suggest(region, catalog.regions)}known: {', '.join(catalog.regions)}",
        )
    if (
        gpu
        and not catalog.types_for_gpu(gpu)
        and gpu.casefold() not in {m.casefold() for m in catalog.gpu_models}
    ):
        raise CommandError(
            INPUT,
            f"unknown GPU model '{gpu}'; {suggest(gpu, catalog.gpu_models)}"
            f"known: {', '.join(catalog.gpu_models)}",
        )
    rows = []
    for name, facts in catalog.instance_types.items():
        if gpu and facts.gpu_model.casefold() != gpu.casefold():
            continue
        if facts.gpus < min_gpus:
            continue
        zones = tuple(catalog.zones_offering(region, name))
        if offered_only and not zones:
            continue
        on_demand = prices.on_demand.get((region, name))
        spot = prices.spot.get((region, name), {})
        rows.append(
            CatalogRow(
                instance_type=name,
                gpus=f"{facts.gpus:g} x {facts.gpu_model}",
                gpu_memory_gib=facts.gpu_memory_mib / 1024,
                vcpus=facts.vcpus,
                efa_interfaces=facts.max_efa_interfaces,
                nvme=f"{facts.nvme_disk_count}x{facts.nvme_disk_size_gb}"
                if facts.nvme_disk_count
                else "-",
                on_demand=on_demand,
                spot_low=cheapest_price(region, name, spot, catalog),
                per_gpu_hour=on_demand / facts.gpus if on_demand and facts.gpus else None,
                zones=zones,
            )
        )
    return sorted(
        rows,
        key=lambda r: (r.on_demand is None, r.on_demand or 0.0, r.instance_type),
    )


def catalog_text(rows: list[CatalogRow], region: str) -> str:
    gpu_width = max([len(r.gpus) for r in rows] + [4]) + 2

    def usd(value: float | None) -> str:
        return f"{value:,.3f}" if value is not None else "no price"

    lines = [
        f"{'type':<20}{'gpus':<{gpu_width}}{'GiB/GPU':>8}{'vCPU':>6}{'EFA':>5}{'NVMe GB':>10}"
        f"{'$/h':>11}{'spot $/h':>11}{'$/GPU-h':>11}  zones ({region})"
    ]
    for r in rows:
        lines.append(
            f"{r.instance_type:<20}{r.gpus:<{gpu_width}}{r.gpu_memory_gib:>8.0f}{r.vcpus:>6}"
            f"{r.efa_interfaces:>5}{r.nvme:>10}{usd(r.on_demand):>11}{usd(r.spot_low):>11}"
            f"{usd(r.per_gpu_hour):>11}  {' '.join(r.zones) or 'not offered'}"
        )
    return "\n".join(lines)
