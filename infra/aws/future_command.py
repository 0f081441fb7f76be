"""`gpuc capacity-reservation` (future-dated): the CLI side of infra/aws/future_reservation.py.
Without --yes it prints the plan and its cost; with --yes it creates the reservation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from gpu_cluster.infra.aws import client
from gpu_cluster.infra.aws.future_reservation import (
    create_future_reservation,
    plan_future_reservation,
    plan_text,
)
from gpu_cluster.infra.aws.preflight import Clients, in_subnet_zone
from gpu_cluster.infra.json_doc import camel, dump
from gpu_cluster.infra.outcome import INPUT, OK, CommandError, load_cluster_spec


def run_future_reservation(
    stack: str,
    start_text: str,
    commitment_days: int,
    instance_count: int | None = None,
    yes: bool = False,
    as_json: bool = False,
    overrides: Sequence[tuple[str, str]] = (),
) -> int:
    spec = load_cluster_spec(stack, overrides)
    stand_in = spec.zone_from_subnet  # availabilityZone left out in the user's own subnet
    if yes and stand_in is not None:  # never commit to a stand-in zone: the subnet's, from EC2
        from gpu_cluster.infra.overrides import stack_config

        spec = in_subnet_zone(spec, Clients.for_region(spec.region), stack_config(stack, overrides))
    try:
        plan = plan_future_reservation(spec, start_text, commitment_days, None, instance_count)
    except ValueError as refused:
        raise CommandError(INPUT, str(refused)) from None
    reservation_id = None
    if yes:
        try:
            reservation_id = create_future_reservation(plan, client("ec2", spec.region))
        except ValueError as refused:  # the start went stale between plan and call
            raise CommandError(INPUT, str(refused)) from None
    if as_json:
        fields = {camel(k): v for k, v in asdict(plan).items()}
        dump(fields | {"created": reservation_id})
        return OK
    for line in plan_text(plan):
        print(line.replace("<cr-id>", reservation_id or "<cr-id>"))
    if not yes and stand_in is not None:
        print(
            f"  {plan.availability_zone} stands in for subnet {stand_in}'s zone (availabilityZone "
            "is left out): --yes reads the subnet's zone from EC2 and reserves there"
        )
    if reservation_id:
        print(
            f"created {reservation_id} (state assessing; `aws ec2 describe-capacity-reservations`)"
        )
    else:
        print("Nothing was created. Run again with --yes to request it.")
    return OK
