"""The AWS regions botocore knows (its endpoints data, every partition), and a region a user
typed checked against them before any call, with a did-you-mean."""

from __future__ import annotations

from functools import cache

from gpu_cluster.infra.problems import INPUT, CommandError
from gpu_cluster.infra.suggest import suggest


@cache
def known_regions() -> frozenset[str]:
    """Every region in botocore's endpoints data, in every partition (aws, aws-cn, aws-us-gov,
    ...): each partition's ``regions``. Read with botocore's loader, not a session, so that a
    missing AWS_PROFILE is the AWS call's message later, not this check's crash."""
    from botocore.loaders import create_loader

    partitions = create_loader().load_data("endpoints")["partitions"]
    return frozenset(region for partition in partitions for region in partition["regions"])


def region_problem(region: str, flag: str = "--region", source: str = "") -> str | None:
    """Why ``region`` is not an AWS region (None when it is one); ``source``: the file it was
    read from."""
    if region in known_regions():
        return None
    where = f" ({source})" if source else ""
    what = (
        f"{flag} '{region}'{where} is not an AWS region" if region.strip() else f"{flag} is empty"
    )
    return (
        f"{what}; {suggest(region.strip().lower(), known_regions())}"
        "regions look like us-east-1 or eu-west-2 (`aws ec2 describe-regions` lists yours)"
    )


def checked_region(region: str, flag: str = "--region", source: str = "") -> str:
    """``region`` when AWS has it, else a CommandError (INPUT) before any call is made."""
    problem = region_problem(region, flag, source)
    if problem:
        raise CommandError(INPUT, problem)
    return region
