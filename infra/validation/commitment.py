"""The `commitment` settings: a Savings Plan or Reserved Instances the account holds, checked
against what AWS applies them to (on-demand usage and Capacity Reservations; never Spot
Instances or Capacity Blocks: AWS Savings Plans User Guide, "Savings Plans do not apply to
Spot Instances"; Capacity Blocks are paid up front when bought)."""

from __future__ import annotations

from gpu_cluster.infra.prices.commitment import TERM_YEARS, Commitment
from gpu_cluster.infra.problems import NOT_SET, Problem
from gpu_cluster.infra.spec import StackSpec
from gpu_cluster.infra.validation.common import key


def check_commitment(spec: StackSpec) -> tuple[Commitment | None, list[Problem]]:
    """The resolved commitment (None when unset), or every problem with it."""
    settings = spec.commitment
    if settings is None:
        return None, []
    given = settings.model_fields_set
    problems: list[Problem] = []
    if settings.savings_plan and settings.reserved_instances:
        problems.append(
            Problem(
                path=key("commitment"),
                received=f"savingsPlan {settings.savings_plan} and reservedInstances "
                f"{settings.reserved_instances}",
                problem="one commitment prices the nodes, not two",
                allowed="savingsPlan or reservedInstances",
                fix="pulumi config rm --path commitment.reservedInstances (or "
                "commitment.savingsPlan)",
            )
        )
    elif not settings.savings_plan and not settings.reserved_instances:
        problems.append(
            Problem(
                path=key("commitment.savingsPlan"),
                received=NOT_SET,
                problem="commitment names neither a Savings Plan nor Reserved Instances",
                allowed="savingsPlan: 1y or 3y, or reservedInstances: 1y or 3y",
                fix="pulumi config set --path commitment.savingsPlan 1y",
            )
        )
    for field, alias, needs in (
        ("plan_type", "planType", "savingsPlan"),
        ("offering_class", "offeringClass", "reservedInstances"),
    ):
        other = settings.savings_plan if needs == "savingsPlan" else settings.reserved_instances
        if field in given and not other:
            problems.append(
                Problem(
                    path=key(f"commitment.{alias}"),
                    received=str(getattr(settings, field)),
                    problem=f"{alias} describes a {needs} commitment, and none is set",
                    allowed=f"{alias} with commitment.{needs}",
                    fix=f"pulumi config rm --path commitment.{alias}",
                )
            )
    if problems:
        return None, problems
    if settings.savings_plan:
        return Commitment(
            "savings-plan",
            TERM_YEARS[settings.savings_plan],
            plan_type=settings.plan_type,
            payment=settings.payment,
        ), []
    assert settings.reserved_instances is not None
    return Commitment(
        "reserved",
        TERM_YEARS[settings.reserved_instances],
        offering_class=settings.offering_class,
        payment=settings.payment,
    ), []


def commitment_warning(spec: StackSpec) -> str | None:
    """A commitment that covers none of the nodes as they are bought: valid (an account-wide
    Savings Plan may be named in every stack file), but it changes no price here."""
    option = spec.purchase_option
    base = spec.spot.on_demand_base if spec.spot else 0
    if spec.commitment is None or not (
        option == "capacity-block" or (option == "spot" and base == 0)
    ):
        return None
    why = (
        "a Capacity Block is paid up front when bought"
        if option == "capacity-block"
        else "Savings Plans and Reserved Instances never apply to Spot Instances, and "
        "spot.onDemandBase is 0"
    )
    return (
        f"commitment: covers none of the nodes with purchaseOption {option} ({why}); they are "
        "priced as bought. Fix: pulumi config rm commitment, or an on-demand base "
        "(spot.onDemandBase)"
    )
