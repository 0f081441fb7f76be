"""`gpuc cost` output: the line-by-line estimate and the side-by-side purchase options, as text
or as JSON carrying the same numbers."""

from __future__ import annotations

import math
from typing import Any

from gpu_cluster.infra.cost.compare import OptionCost, saving
from gpu_cluster.infra.cost.model import DAYS_PER_MONTH, Estimate
from gpu_cluster.infra.prices.unit_prices import hours_per_month


def _usd(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"${value:,.{digits}f}"


def estimate_text(stack: str, estimate: Estimate) -> list[str]:
    usage = estimate.usage
    lines = [
        f"Cost of stack '{stack}': nodes run {usage.hours_per_day:g} h/day, "
        + (
            f"a {hours_per_month()} h month"
            if math.isclose(usage.days_per_month, DAYS_PER_MONTH)
            else f"{usage.days_per_month:g} days/month"
        ),
        "",
        f"{'item':<38}{'$/hour':>11}{'billed':>9}{'$/day':>12}{'$/month':>14}  detail",
    ]
    for line in estimate.lines:
        billed = "24 h/d" if line.always_on else f"{usage.hours_per_day:g} h/d"
        lines.append(
            f"{line.item:<38}{_usd(line.usd_per_hour, 4):>11}{billed:>9}"
            f"{_usd(line.daily(usage) if line.usd_per_hour is not None else None):>12}"
            f"{_usd(line.monthly(usage) if line.usd_per_hour is not None else None):>14}"
            f"  {line.detail}"
        )
    lines.append(
        f"{'total':<38}{_usd(estimate.hourly_usd, 4):>11}{'':>9}{_usd(estimate.daily_usd):>12}"
        f"{_usd(estimate.monthly_usd):>14}"
    )
    for line in estimate.unpriced:
        lines.append(f"  not included: {line.item}: {line.detail}")
    lines += [f"GPU prices: {estimate.gpu_prices}", f"Other prices: {estimate.unit_prices}"]
    return lines


def options_text(options: list[OptionCost], rest_monthly: float) -> list[str]:
    baseline = options[0]
    lines = [
        "",
        "The same GPU instances bought each way (other lines unchanged: "
        f"{_usd(rest_monthly)}/month):",
        "",
        f"{'option':<32}{'$/hour':>11}{'$/day':>12}{'$/month':>14}{'$/GPU-h used':>14}"
        f"{'saving':>9}  note",
    ]
    for row in options:
        cut = saving(row, baseline)
        lines.append(
            f"{row.option:<32}{_usd(row.usd_per_hour):>11}{_usd(row.daily):>12}"
            f"{_usd(row.monthly):>14}{_usd(row.per_gpu_hour_used, 3):>14}"
            f"{'-' if cut is None else f'{cut:.0%}':>9}  {row.note}"
        )
    return lines


def cost_json(stack: str, estimate: Estimate, options: list[OptionCost]) -> dict[str, Any]:
    usage = estimate.usage
    baseline = options[0] if options else None
    return {
        "stack": stack,
        "usage": {"hoursPerDay": usage.hours_per_day, "daysPerMonth": usage.days_per_month},
        "prices": {"gpu": estimate.gpu_prices, "other": estimate.unit_prices},
        "lines": [
            {
                "item": line.item,
                "detail": line.detail,
                "usdPerHour": line.usd_per_hour,
                "billedHoursPerDay": usage.hours(line.always_on),
                "usdPerDay": line.daily(usage) if line.usd_per_hour is not None else None,
                "usdPerMonth": line.monthly(usage) if line.usd_per_hour is not None else None,
                "source": line.source,
            }
            for line in estimate.lines
        ],
        "total": {
            "usdPerHour": estimate.hourly_usd,
            "usdPerDay": estimate.daily_usd,
            "usdPerMonth": estimate.monthly_usd,
            "notIncluded": [line.item for line in estimate.unpriced],
        },
        "options": [
            {
                "option": row.option,
                "usdPerHour": row.usd_per_hour,
                "billedHoursPerDay": 24 if row.always_on else row.hours_per_day,
                "usdPerDay": row.daily,
                "usdPerMonth": row.monthly,
                "usdPerGpuHourUsed": row.per_gpu_hour_used,
                "savingVsOnDemand": saving(row, baseline) if baseline else None,
                "note": row.note,
            }
            for row in options
        ],
    }
