"""jobs.repositories: the ECR repositories a training stack's nodes may pull job images from
(`gpuc run --image`). Names in the stack's own account and region, or repository ARNs; each
gets exactly the pull rights it needs (components/policies.ecr_pull_policy), so a wildcard is
refused rather than widened."""

from __future__ import annotations

import re

from gpu_cluster.components.images import (
    ECR_HOST,
    REPOSITORY_ARN,
    REPOSITORY_NAME_MAX,
    REPOSITORY_NAME_MIN,
    is_repository_arn,
    is_repository_name,
    partition_of,
)
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import StackSpec
from gpu_cluster.infra.validation.common import key

# IAM quotas: a role's inline policies share 10,240 characters (IAM User Guide, "IAM and AWS
# STS quotas"); the node role's other policies take about a third of it, and a repository ARN
# of a long name up to ~300 characters.
MAX_REPOSITORIES = 20
NAME_RULE = (
    f"{REPOSITORY_NAME_MIN}-{REPOSITORY_NAME_MAX} characters: lowercase letters and digits "
    "joined by '.', '_', '__' or '-', '/' between path parts (e.g. train, team/base)"
)
ARN_EXAMPLE = "arn:aws:ecr:us-west-2:123456789012:repository/team/base"


def _path(index: int) -> str:
    return key(f"jobs.repositories[{index}]")


def _set(index: int, value: str) -> str:
    return f"pulumi config set --path jobs.repositories[{index}] {value}"


def _as_name(value: str, region: str) -> str | None:
    """What the user most likely meant by a value that is not a repository name: an image URI
    of this region (its repository), or the name in lowercase."""
    host, _, rest = value.partition("/")
    match = ECR_HOST.match(host)
    if match and rest:
        repository = re.split(r"[@:]", rest, maxsplit=1)[0]
        image_region = match["region"] or match["dual_region"]
        if is_repository_name(repository):
            if image_region == region:
                return repository
            return (
                f"arn:{partition_of(image_region)}:ecr:{image_region}:{match['account']}:"
                f"repository/{repository}"
            )
    lower = value.strip().lower()
    return lower if is_repository_name(lower) else None


def _entry_problem(index: int, value: str, region: str) -> Problem | None:
    if "*" in value or "?" in value:
        stem = re.split(r"[*?]", value.rsplit(":repository/", 1)[-1], maxsplit=1)[0]
        listed = (
            f"repositories[?starts_with(repositoryName, `{stem}`)].repositoryName"
            if stem
            else "repositories[].repositoryName"
        )
        return Problem(
            path=_path(index),
            received=value,
            problem="wildcards are refused: the nodes get pull rights on exactly the repositories "
            "named (least privilege), never on a pattern",
            allowed="repository names or ARNs without '*' or '?', one per entry",
            fix=f"name each repository the jobs use instead: {_set(index, f'{stem}<name>')} "
            f"(list them with `aws ecr describe-repositories --query '{listed}'`)",
        )
    if is_repository_arn(value):
        match = REPOSITORY_ARN.match(value)
        if match is None or not is_repository_name(match["name"]):
            return Problem(
                path=_path(index),
                received=value,
                problem="not an ECR repository ARN"
                if match is None
                else f"the ARN's repository name {match['name']!r} is not a valid name",
                allowed=f"arn:PARTITION:ecr:REGION:ACCOUNT:repository/NAME, e.g. {ARN_EXAMPLE} "
                f"(NAME: {NAME_RULE})",
                fix="copy the ARN from `aws ecr describe-repositories --region REGION "
                "--query 'repositories[].repositoryArn'`",
            )
        if match["partition"] != partition_of(region):
            return Problem(
                path=_path(index),
                received=value,
                problem=f"a repository in partition {match['partition']}: the nodes in "
                f"{region} ({partition_of(region)}) cannot pull from it",
                allowed=f"a repository in the {partition_of(region)} partition",
                fix=f"pulumi config rm --path jobs.repositories[{index}] (push the image to a "
                f"repository in {region} and name that)",
            )
        return None
    if is_repository_name(value):
        return None
    meant = _as_name(value, region)
    return Problem(
        path=_path(index),
        received=value,
        problem="not an ECR repository name",
        allowed=f"a repository name ({NAME_RULE}), or an ARN such as {ARN_EXAMPLE}",
        fix=_set(index, meant)
        if meant
        else f"pulumi config rm --path jobs.repositories[{index}] (then name the repository "
        "as `aws ecr describe-repositories` lists it)",
    )


def _region_problem(index: int, value: str, spec: StackSpec) -> Problem | None:
    """Without a NAT gateway or public IPs the nodes reach ECR only through the stack's own
    VPC endpoints, which serve its region only."""
    match = REPOSITORY_ARN.match(value)
    internet = spec.network.nat_gateway or spec.network.public_ip
    if internet or match is None or match["region"] == spec.region:
        return None
    return Problem(
        path=_path(index),
        received=value,
        problem=f"a repository in {match['region']}: without a NAT gateway the nodes reach ECR "
        f"only through the VPC endpoints of {spec.region}",
        allowed=f"a repository in {spec.region}, or network.natGateway true",
        fix="pulumi config set --path network.natGateway true (or replicate the repository "
        f"into {spec.region} with ECR replication and name that one)",
    )


def check_jobs(spec: StackSpec) -> tuple[tuple[str, ...], list[Problem]]:
    """The repositories as configured (each once), and every problem with them."""
    if spec.jobs is None:
        return (), []
    repositories = spec.jobs.repositories
    if spec.role == "inference" and repositories:
        return (), [
            Problem(
                path=key("jobs"),
                received={"repositories": list(repositories)},
                problem="jobs apply to a training stack (role: cluster), where `gpuc run` starts "
                "them; a serving stack runs its model server's image (inference.server.image)",
                allowed="unset on role: inference",
                fix="pulumi config rm jobs",
            )
        ]
    problems: list[Problem] = []
    if len(repositories) > MAX_REPOSITORIES:
        problems.append(
            Problem(
                path=key("jobs.repositories"),
                received=f"{len(repositories)} repositories",
                problem="too many repositories for the node role's inline policies (IAM allows "
                "10,240 characters for all of them)",
                allowed=f"at most {MAX_REPOSITORIES} repositories",
                fix="keep the repositories the jobs use, e.g. "
                + " && ".join(
                    f"pulumi config rm --path jobs.repositories[{index}]"
                    for index in reversed(range(MAX_REPOSITORIES, len(repositories)))
                ),
            )
        )
    for index, value in enumerate(repositories):
        found = _entry_problem(index, value, spec.region)
        if found is None and value in repositories[:index]:
            found = Problem(
                path=_path(index),
                received=value,
                problem=f"listed twice (also jobs.repositories[{repositories.index(value)}])",
                allowed="each repository once",
                fix=f"pulumi config rm --path jobs.repositories[{index}]",
            )
        found = found or _region_problem(index, value, spec)
        if found is not None:
            problems.append(found)
    return tuple(dict.fromkeys(repositories)), problems
