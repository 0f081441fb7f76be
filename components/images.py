"""Container images a training job may run in: the ECR repositories a stack names
(`jobs.repositories`), their ARNs and their registry hosts. Pure helpers shared by the stack's
validation (infra/validation/jobs.py), the node role's pull rights (policies.ecr_pull_policy)
and `gpuc run --image` (infra/aws/job_image.py).

Facts relied on (Amazon ECR API Reference and botocore's ECR service model: repositoryName is
2-256 characters of the pattern below; Service Authorization Reference, Amazon Elastic
Container Registry: the repository resource is ``arn:${Partition}:ecr:${Region}:${Account}:
repository/${RepositoryName}``; AWS General Reference, Amazon ECR endpoints: the Docker
registry host is ``dkr.ecr.<region>.amazonaws.com`` (``.amazonaws.com.cn`` in China,
``dkr.ecr-fips.`` for FIPS, ``dkr-ecr[-fips].<region>.on.aws`` dual-stack), prefixed with the
registry's account id)."""

from __future__ import annotations

import re

REPOSITORY_NAME_MIN, REPOSITORY_NAME_MAX = 2, 256
# botocore's ECR model, shape RepositoryName (tests check they agree); the API Reference's older
# text has [._-] for the separators, the model also takes "__" and runs of "-".
REPOSITORY_NAME_PATTERN = r"[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)*"
REPOSITORY_NAME = re.compile(REPOSITORY_NAME_PATTERN + r"\Z")
REGION = r"[a-z]{2}(?:-[a-z]+)+-\d+"
REPOSITORY_ARN = re.compile(
    rf"arn:(?P<partition>aws|aws-cn|aws-us-gov):ecr:(?P<region>{REGION}):(?P<account>\d{{12}}):"
    r"repository/(?P<name>.+)\Z"
)
ECR_HOST = re.compile(
    rf"(?P<account>\d{{12}})\.(?:dkr\.ecr(?:-fips)?\.(?P<region>{REGION})\.amazonaws\.com"
    rf"(?:\.cn)?|dkr-ecr(?:-fips)?\.(?P<dual_region>{REGION})\.on\.aws)\Z"
)
# What the node role needs to pull an image (Amazon ECR User Guide, "Private repository
# policies" and the AmazonEC2ContainerRegistryPullOnly managed policy): an authorization token,
# which has no resource scope, and the three read actions on the repository itself.
PULL_ACTIONS = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
)
TOKEN_ACTION = "ecr:GetAuthorizationToken"


def partition_of(region: str) -> str:
    """The AWS partition a region belongs to (ARNs and hosts differ per partition)."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def is_repository_arn(repository: str) -> bool:
    return repository.startswith("arn:")


def is_repository_name(name: str) -> bool:
    return (
        REPOSITORY_NAME_MIN <= len(name) <= REPOSITORY_NAME_MAX
        and REPOSITORY_NAME.match(name) is not None
    )


def repository_arn(repository: str, partition: str, region: str, account: str) -> str:
    """A configured repository as an ARN: a name is in the stack's own account and region, an
    ARN is taken as it is."""
    if is_repository_arn(repository):
        return repository
    return f"arn:{partition}:ecr:{region}:{account}:repository/{repository}"


def repository_arns(
    repositories: tuple[str, ...] | list[str], partition: str, region: str, account: str
) -> list[str]:
    """Every configured repository's ARN, each once, in a stable order."""
    return sorted({repository_arn(r, partition, region, account) for r in repositories})


def registry_host(account: str, region: str) -> str:
    """The private registry's Docker host for an account and region."""
    suffix = ".cn" if partition_of(region) == "aws-cn" else ""
    return f"{account}.dkr.ecr.{region}.amazonaws.com{suffix}"
