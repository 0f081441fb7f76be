"""The bundled price snapshots `gpuc` prints from, each with its date and the command that
refreshes it (the freshness warnings of `gpuc plan` and `gpuc cost`: infra/prices/freshness.py).
A snapshot the project ships empty (no Savings Plan rates, no advisor data) is not warned
about: nothing printed comes from it."""

from __future__ import annotations

from gpu_cluster.infra.prices.commitment_prices import commitment_snapshot_date, commitment_table
from gpu_cluster.infra.prices.freshness import Snapshot
from gpu_cluster.infra.prices.gpu_prices import price_table
from gpu_cluster.infra.prices.spot_advisor import advisor_snapshot_date, bundled_advisor


def bundled_snapshots(commitments: bool = True, advisor: bool = True) -> list[Snapshot]:
    """The snapshots a command prints from: GPU prices always; Savings Plan and RI rates and the
    advisor's bands when it shows them (``commitments``, ``advisor``)."""
    snapshots = [
        Snapshot("GPU prices (on-demand and spot)", price_table().date, "gpuc prices refresh")
    ]
    if commitments and commitment_table():
        snapshots.append(
            Snapshot(
                "Savings Plan and Reserved Instance rates",
                commitment_snapshot_date(),
                "gpuc prices refresh --commitments",
            )
        )
    if advisor and bundled_advisor() is not None:
        snapshots.append(
            Snapshot(
                "Spot Instance Advisor bands",
                advisor_snapshot_date(),
                "gpuc prices refresh --spot-advisor",
            )
        )
    return snapshots
