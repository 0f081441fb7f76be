"""`gpuc run --image IMAGE`: the check made before anything is uploaded or started. The image
reference must be well formed; an ECR image must come from a repository the stack names in
jobs.repositories (the node role may pull from those only, components/policies.py) and, when
an ECR client is given, exist; an image from any other registry needs the internet (a NAT
gateway or public IPs), since the nodes of an air-gapped stack reach ECR only, through its VPC
endpoints.

The reference grammar is Docker's (github.com/distribution/reference, reference.go and
normalize.go): ``[host[:port]/]path[:tag][@digest]``; path components are lowercase
alphanumerics joined by ``.``, ``_``, ``__`` or dashes; a tag is ``[\\w][\\w.-]{0,127}``; the
first component is a registry host only if it has a ``.`` or ``:``, is ``localhost`` or has an
upper-case letter, otherwise the image is on Docker Hub (``docker.io``, ``library/`` for a
one-component path); a name is at most 255 characters. ECR's facts are in components/images.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from gpu_cluster.components.images import (
    ECR_HOST,
    REPOSITORY_ARN,
    is_repository_arn,
    is_repository_name,
    partition_of,
    registry_host,
)
from gpu_cluster.infra.aws import PERMISSION_ERRORS, call
from gpu_cluster.infra.problems import AwsError

BAD_REFERENCE = 2  # the --image value itself (a usage error, like the other run options)
REFUSED = 3  # the stack cannot run it: not a named repository, unknown image, no internet
AWS_FAILED = 4  # DescribeImages itself was refused (the caller's permissions)
DEFAULT_TAG = "latest"
NAME_MAX = 255  # distribution/reference NameTotalLengthMax
DOCKER_HUB = "docker.io"

PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
PATH = re.compile(rf"{PATH_COMPONENT}(?:/{PATH_COMPONENT})*\Z")
DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
HOST = re.compile(
    rf"(?:{DOMAIN_COMPONENT}(?:\.{DOMAIN_COMPONENT})*|\[[0-9a-fA-F:.]+\])(?::[0-9]+)?\Z"
)
TAG = re.compile(r"[\w][\w.-]{0,127}\Z")
DIGEST = re.compile(r"(?:sha256:[a-f0-9]{64}|sha384:[a-f0-9]{96}|sha512:[a-f0-9]{128})\Z")
EXAMPLES = (
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/train:v3, "
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/train@sha256:<64 hex digits>, "
    "nvcr.io/nvidia/pytorch:24.07-py3"
)


class ImageError(Exception):
    """An image `gpuc run` will not start a job in; nothing was uploaded or started. ``code``:
    2 a malformed reference, 3 refused (repository not named, unknown image, no route to the
    registry), 4 the caller may not check it (ecr:DescribeImages)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class ImageRef:
    """A parsed image reference: ``registry`` (``docker.io`` when the reference names none),
    ``repository`` (the path in it: ``library/python`` for Docker Hub's official images),
    ``tag`` and ``digest`` as written ("" when absent), and for a private ECR registry its
    account and region."""

    image: str
    registry: str
    repository: str
    tag: str = ""
    digest: str = ""
    ecr_account: str = ""
    ecr_region: str = ""

    @property
    def is_ecr(self) -> bool:
        return bool(self.ecr_account)

    @property
    def reference(self) -> str:
        """What the registry is asked for: the digest, else the tag, else ``latest``."""
        return self.digest or self.tag or DEFAULT_TAG

    @property
    def image_id(self) -> dict[str, str]:
        """ECR's imageIds entry for this reference (DescribeImages, BatchGetImage)."""
        return {"imageDigest": self.digest} if self.digest else {"imageTag": self.reference}


@dataclass(frozen=True)
class ImageContext:
    region: str
    account: str  # the caller's account (STS), "" when unknown
    repositories: tuple[str, ...]  # the stack's jobs.repositories, as configured
    internet: bool  # the stack has a NAT gateway (natGateway, default true) or public IPs
    stack: str = ""  # named in the fixes ("" : <stack>)


def _malformed(image: str, why: str) -> ImageError:
    return ImageError(
        f"gpuc run --image {image!r}: not a container image reference ({why}); write "
        f"[REGISTRY/]REPOSITORY[:TAG][@sha256:DIGEST], e.g. {EXAMPLES}",
        BAD_REFERENCE,
    )


def _split_host(name: str) -> tuple[str, str]:
    """(registry, path) as Docker splits a name (normalize.go, splitDockerDomain)."""
    first, slash, rest = name.partition("/")
    if slash and (any(c in first for c in ".:") or first == "localhost" or first != first.lower()):
        return first, rest
    path = name if "/" in name else f"library/{name}"
    return DOCKER_HUB, path


def parse_image(image: str) -> ImageRef:
    """A reference in Docker's grammar, or ImageError (code 2) naming what is wrong."""
    if not image or any(c.isspace() for c in image):
        raise _malformed(image, "empty or contains spaces")
    name, at, digest = image.partition("@")
    if at and not DIGEST.match(digest):
        why = f"the digest {digest!r} is not sha256: and 64 lowercase hex digits"
        raise _malformed(image, why)
    tag = ""
    if name.rfind(":") > name.rfind("/"):  # after the last '/': the tag (before it: a port)
        name, _, tag = name.rpartition(":")
        if not TAG.match(tag):
            why = (
                f"the tag {tag!r} is not 1-128 letters, digits, '_', '.' or '-', starting with "
                "a letter, digit or '_'"
            )
            raise _malformed(image, why)
    if len(name) > NAME_MAX:
        raise _malformed(image, f"the name is {len(name)} characters, at most {NAME_MAX}")
    registry, path = _split_host(name)
    if registry != DOCKER_HUB and not HOST.match(registry):
        raise _malformed(image, f"{registry!r} is not a registry host[:port]")
    if not PATH.match(path):
        written = path if "/" in name else name  # not the library/ Docker Hub adds
        lower = "; repository names are lowercase" if written != written.lower() else ""
        why = (
            f"the repository {written!r} is not lowercase letters and digits joined by '.', "
            f"'_', '__' or '-', with '/' between path parts{lower}"
        )
        raise _malformed(image, why)
    account = region = ""
    if ecr := ECR_HOST.match(registry):
        account, region = ecr["account"], ecr["region"] or ecr["dual_region"]
        if not is_repository_name(path):
            raise _malformed(image, f"{path!r} is not an ECR repository name (2-256 characters)")
    if registry == "index.docker.io":
        registry = DOCKER_HUB
    return ImageRef(image, registry, path, tag, digest, account, region)


def _configured_arn(repository: str, context: ImageContext) -> tuple[str, str, str] | None:
    """(account, region, name) a configured repository stands for ("" account: unknown)."""
    if is_repository_arn(repository):
        match = REPOSITORY_ARN.match(repository)
        return (match["account"], match["region"], match["name"]) if match else None
    return context.account, context.region, repository


def is_named(ref: ImageRef, context: ImageContext) -> bool:
    """The stack's jobs.repositories name the image's repository (a bare name: the stack's own
    account, when known, and region)."""
    for repository in context.repositories:
        named = _configured_arn(repository, context)
        if named is None:
            continue
        account, region, name = named
        if name == ref.repository and region == ref.ecr_region and account in ("", ref.ecr_account):
            return True
    return False


def _stack(context: ImageContext) -> str:
    return context.stack or "<stack>"


def _entry(ref: ImageRef, context: ImageContext) -> str:
    """How jobs.repositories names this image's repository: its name in the stack's own
    account and region, else its ARN."""
    own = ref.ecr_region == context.region and context.account in ("", ref.ecr_account)
    if own:
        return ref.repository
    partition = partition_of(ref.ecr_region)
    return f"arn:{partition}:ecr:{ref.ecr_region}:{ref.ecr_account}:repository/{ref.repository}"


def _not_named(ref: ImageRef, context: ImageContext) -> ImageError:
    entry = _entry(ref, context)
    stack = _stack(context)
    index = len(context.repositories)
    listed = ", ".join(context.repositories) or "none"
    others = ", ".join(json.dumps(r) for r in (*context.repositories, entry))
    return ImageError(
        f"gpuc run --image {ref.image}: the stack '{stack}' does not name the ECR repository "
        f"'{ref.repository}' (account {ref.ecr_account}, {ref.ecr_region}) in jobs.repositories "
        f"(it names: {listed}); its nodes get pull rights only for the repositories it names.\n"
        f"  fix: pulumi config set --path 'jobs.repositories[{index}]' {entry} -s {stack}, then "
        f"pulumi up -s {stack}\n"
        f"  or in stacks/Pulumi.{stack}.yaml: gpu-cluster:jobs: {{repositories: [{others}]}}, "
        "then pulumi up",
        REFUSED,
    )


def _no_internet(ref: ImageRef, context: ImageContext) -> ImageError:
    stack = _stack(context)
    where = (
        f"{ref.registry}" if not ref.is_ecr else f"ECR in {ref.ecr_region} (not {context.region})"
    )
    repository = ref.repository.removeprefix("library/")
    host = registry_host(context.account or "ACCOUNT", context.region)
    target = f"{host}/{repository}:{ref.tag or DEFAULT_TAG}"
    return ImageError(
        f"gpuc run --image {ref.image}: the stack '{stack}' has no NAT gateway (or public IPs), "
        f"so its nodes cannot reach {where}; they reach ECR in {context.region} only, through "
        "the stack's VPC endpoints.\n"
        f"  fix: push the image to ECR in {context.region} (docker pull {ref.image} && docker "
        f"tag {ref.image} {target} && docker push {target}), name the repository "
        f"'{repository}' in jobs.repositories and pulumi up -s {stack}; or pulumi config set "
        f"--path network.natGateway true -s {stack} and pulumi up -s {stack}",
        REFUSED,
    )


def _describe(ref: ImageRef, ecr: Any) -> None:
    """The image exists in its repository (DescribeImages), or ImageError."""
    try:
        call(
            ecr,
            "ecr",
            "DescribeImages",
            registryId=ref.ecr_account,
            repositoryName=ref.repository,
            imageIds=[ref.image_id],
        )
    except AwsError as error:
        region = ref.ecr_region
        if error.code == "RepositoryNotFoundException":
            raise ImageError(
                f"gpuc run --image {ref.image}: unknown image: account {ref.ecr_account} has no "
                f"ECR repository '{ref.repository}' in {region}.\n"
                f"  fix: create it and push the image (aws ecr create-repository --region "
                f"{region} --repository-name {ref.repository}; docker push {ref.image}), or "
                f"check the name with `aws ecr describe-repositories --region {region}`",
                REFUSED,
            ) from error
        if error.code == "ImageNotFoundException":
            what = f"digest {ref.digest}" if ref.digest else f"tag '{ref.reference}'"
            raise ImageError(
                f"gpuc run --image {ref.image}: unknown image: the repository "
                f"'{ref.repository}' has no image with {what}.\n"
                f"  fix: push it (docker push {ref.image}), or check the tags with `aws ecr "
                f"list-images --region {region} --repository-name {ref.repository}`",
                REFUSED,
            ) from error
        if error.code in PERMISSION_ERRORS or "AccessDenied" in error.code:
            raise ImageError(
                f"gpuc run --image {ref.image}: cannot check that the image exists: the caller "
                "may not call ecr:DescribeImages on "
                f"arn:{partition_of(region)}:ecr:{region}:{ref.ecr_account}:repository/"
                f"{ref.repository} ({error.code}).\n"
                "  fix: allow ecr:DescribeImages on that repository for your IAM identity (and, "
                "for another account's repository, in its repository policy)",
                AWS_FAILED,
            ) from error
        raise


def check_image(image: str, context: ImageContext, ecr: Any | None = None) -> ImageRef:
    """The parsed reference when the stack's nodes can run a job in ``image``, else ImageError.
    ``ecr``: a boto3 ECR client for the image's region (ImageRef.ecr_region); with it, an ECR
    image is also looked up (DescribeImages), without it only the stack's own rules apply."""
    ref = parse_image(image)
    if not ref.is_ecr:
        if not context.internet:
            raise _no_internet(ref, context)
        return ref
    if not is_named(ref, context):
        raise _not_named(ref, context)
    if not context.internet and ref.ecr_region != context.region:
        raise _no_internet(ref, context)
    if ecr is not None:
        _describe(ref, ecr)
    return ref


def _setting(settings: dict, key: str) -> Any:
    """A structured stack setting as a value: Pulumi hands the program JSON text; a dict (or a
    list) is taken as it is; anything unreadable counts as unset."""
    value = settings.get(key)
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value


def _flag(value: Any, default: bool) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "True"):
        return True
    if value in ("false", "False"):
        return False
    return default


def image_context(stack_settings: dict, region: str, account: str, stack: str = "") -> ImageContext:
    """The stack's rules for images from its stack file's settings (``gpu-cluster:jobs``,
    ``gpu-cluster:network``, as infra/stack_files.load_stack_config hands them)."""
    jobs = _setting(stack_settings, "gpu-cluster:jobs")
    listed = jobs.get("repositories") if isinstance(jobs, dict) else None
    repositories = tuple(str(r) for r in listed) if isinstance(listed, list) else ()
    network = _setting(stack_settings, "gpu-cluster:network")
    network = network if isinstance(network, dict) else {}
    internet = _flag(network.get("natGateway"), True) or _flag(network.get("publicIp"), False)
    return ImageContext(region, account, repositories, internet, stack)
