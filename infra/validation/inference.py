"""role: inference - zones, sizes, the model server, TLS and scaling of the serving stack."""

from __future__ import annotations

import re

from gpu_cluster.components.catalog import Catalog, InstanceFacts
from gpu_cluster.components.serving_config import ServingConfig
from gpu_cluster.infra.meant import dns_name
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import EndpointTlsSpec, InferenceSpec, StackSpec
from gpu_cluster.infra.suggest import closest
from gpu_cluster.infra.validation.common import key
from gpu_cluster.infra.validation.service_access import access_problems, service_access
from gpu_cluster.infra.validation.service_firewall import firewall_problems, service_firewall
from gpu_cluster.infra.validation.service_zones import check_service_zones
from gpu_cluster.policy.service import RECOMMENDED_TLS_POLICIES

# ELB.17's recommended policies (the security pack's list): TLS 1.3, minimum TLS 1.2 or 1.3.
TLS_POLICIES = RECOMMENDED_TLS_POLICIES
DEFAULT_TLS_POLICY = EndpointTlsSpec().policy  # TLS 1.3, TLS 1.2 with forward secrecy
TLS13_ONLY_POLICY = "ELBSecurityPolicy-TLS13-1-3-2021-06"
SERVERS = {
    "triton": ("nvcr.io/nvidia/tritonserver:25.01-py3", "/v2/health/ready"),
    "vllm": ("vllm/vllm-openai:v0.7.2", "/health"),
}
CERTIFICATE_ARN = re.compile(r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:\d{12}:certificate/[0-9a-f-]{36}$")
HOSTED_ZONE = re.compile(r"^Z[A-Z0-9]{1,31}$")
DOMAIN = re.compile(r"^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)+[a-z]{2,63}$")


ResolvedInference = ServingConfig


def problem(path: str, received, what: str, allowed: str, fix: str) -> Problem:
    return Problem(path=key(path), received=received, problem=what, allowed=allowed, fix=fix)


def other_zone(typed: str, zones: tuple[str, ...], offered: set[str]) -> str:
    """The offered zone closest to ``typed`` that the list does not hold yet (a duplicate
    zone is no second zone)."""
    free = sorted(offered - set(zones)) or sorted(offered)
    return closest(typed, free) or free[0]


def check_inference(
    spec: StackSpec, facts: InstanceFacts | None, catalog: Catalog
) -> tuple[ResolvedInference | None, list[Problem]]:
    settings = spec.inference or InferenceSpec()
    found: list[Problem] = []
    zones = tuple(settings.availability_zones) or (
        (spec.availability_zone,) if spec.availability_zone else ()
    )
    if len(set(zones)) < 2:
        offering = (
            catalog.zones_offering(spec.region, facts.instance_type)
            if facts is not None
            else catalog.zones(spec.region)
        )
        other = next((z for z in offering if z not in zones), "<another zone>")
        found.append(
            problem(
                "inference.availabilityZones",
                list(zones),
                "a service needs two or more availability zones (the load balancer and the nodes "
                "survive the loss of one)",
                "two or more zones of the region, e.g. [us-east-1a, us-east-1b]",
                f"pulumi config set --path inference.availabilityZones[{1 if zones else 0}] "
                f"{other}",
            )
        )
    offered = set(
        catalog.zones_offering(spec.region, facts.instance_type)
        if facts is not None
        else catalog.zones(spec.region)
    )
    for index, zone in enumerate(zones):
        if offered and zone not in offered:
            found.append(
                problem(
                    f"inference.availabilityZones[{index}]",
                    zone,
                    "not a zone of the region that offers the instance type",
                    ", ".join(sorted(offered)),
                    f"pulumi config set --path inference.availabilityZones[{index}] "
                    f"{other_zone(zone, zones, offered)}",
                )
            )
    if zones and spec.availability_zone and spec.availability_zone != zones[0]:
        found.append(
            problem(
                "availabilityZone",
                spec.availability_zone,
                "an inference stack's first zone is inference.availabilityZones[0]",
                f"{zones[0]}, or unset",
                "pulumi config rm availabilityZone",
            )
        )
    if settings.max_nodes < settings.min_nodes:
        found.append(
            problem(
                "inference.maxNodes",
                settings.max_nodes,
                f"fewer than minNodes ({settings.min_nodes})",
                f"at least {settings.min_nodes}",
                f"pulumi config set --path inference.maxNodes {settings.min_nodes}",
            )
        )
    if facts is not None and not facts.is_whole_gpu:
        found.append(
            problem(
                "instanceType",
                facts.instance_type,
                f"{facts.instance_type} has a fraction of a GPU; a model server needs whole GPUs",
                "a whole-GPU type, e.g. g4dn.xlarge (T4) or g5.xlarge (A10G)",
                "pulumi config set instanceType g4dn.xlarge",
            )
        )
    tls = settings.tls
    if tls.policy not in TLS_POLICIES:
        found.append(
            problem(
                "inference.tls.policy",
                tls.policy,
                "not a TLS 1.3 policy with TLS 1.2 or later as the minimum (ELB.17)",
                f"{DEFAULT_TLS_POLICY}, {TLS13_ONLY_POLICY} (TLS 1.3 only), or a FIPS variant",
                f"pulumi config set --path inference.tls.policy {DEFAULT_TLS_POLICY}",
            )
        )
    found += _certificate_problems(tls)
    found += _certificate_region_problems(tls, spec.region)
    found += _scaling_problems(settings)
    found += _rollout_problems(settings)
    found += check_service_zones(spec.network, zones, offered, settings.max_nodes)
    found += access_problems(settings)
    found += firewall_problems(settings)
    if spec.fsx is not None:
        found.append(
            problem(
                "fsx",
                "set",
                "an inference stack mounts no FSx for Lustre file system (its nodes read the model "
                "from the bucket), so nothing would be created for it",
                "unset on an inference stack",
                "pulumi config rm fsx",
            )
        )
    server = settings.server
    if server.kind != "triton" and "batching" in settings.model_fields_set:
        found.append(
            problem(
                "inference.batching",
                settings.batching.model_dump(by_alias=True),
                f"batching is Triton's dynamic batching; a {server.kind} server batches by itself "
                "and ignores it",
                "unset with server.kind vllm",
                "pulumi config rm --path inference.batching",
            )
        )
    image, readiness = SERVERS[server.kind]
    for index, size in enumerate(settings.batching.preferred_batch_sizes):
        if size < 1:
            found.append(
                problem(
                    f"inference.batching.preferredBatchSizes[{index}]",
                    size,
                    "a batch size is a positive number of requests",
                    "1 or more, e.g. [4, 8]",
                    f"pulumi config set --path inference.batching.preferredBatchSizes[{index}] 4",
                )
            )
    if not spec.network.nat_gateway:
        found.append(
            problem(
                "network.natGateway",
                False,
                "the model server's container image comes from a public registry (nvcr.io, "
                "Docker Hub) through the NAT gateway",
                "true on an inference stack",
                "pulumi config set --path network.natGateway true",
            )
        )
    for index, arg in enumerate(server.args):
        if not re.fullmatch(r"[A-Za-z0-9_=:,./+-]+", arg):
            found.append(
                problem(
                    f"inference.server.args[{index}]",
                    arg,
                    "server arguments go into a systemd command line: no spaces, quotes, % or $",
                    "letters, digits and _ = : , . / + -, e.g. --log-verbose=1",
                    f"pulumi config set --path inference.server.args[{index}] <argument>",
                )
            )
    prefix = settings.model_repository.strip("/")
    if not prefix or prefix.startswith(("s3:", "/")) or ".." in prefix:
        found.append(
            problem(
                "inference.modelRepository",
                settings.model_repository,
                "not a prefix of the data bucket",
                "a relative prefix, e.g. models/ or outputs/run-42/model-repository/",
                "pulumi config set --path inference.modelRepository models/",
            )
        )
    if found:
        return None, found
    return (
        ResolvedInference(
            zones=zones,
            min_nodes=settings.min_nodes,
            max_nodes=settings.max_nodes,
            model_prefix=prefix + "/",
            server_kind=server.kind,
            image=server.image or image,
            port=server.port,
            readiness_path=server.readiness_path or readiness,
            server_args=tuple(server.args),
            preferred_batch_sizes=tuple(settings.batching.preferred_batch_sizes),
            max_queue_delay_us=settings.batching.max_queue_delay_microseconds,
            tls_policy=tls.policy,
            certificate_arn=tls.certificate_arn,
            domain=tls.domain,
            hosted_zone_id=tls.hosted_zone_id,
            scaling_metric=settings.scaling.metric,
            scaling_target=settings.scaling.target,
            warmup_seconds=settings.warmup_seconds,
            deletion_protection=settings.deletion_protection,
            min_healthy_percent=settings.rollout.min_healthy_percent,
            access=service_access(settings.access),
            firewall=service_firewall(settings),
        ),
        [],
    )


def _certificate_region_problems(tls, region: str) -> list[Problem]:
    """A load balancer takes an ACM certificate of its own region only (ELB user guide,
    "SSL certificates": the certificate must be in the same region)."""
    if not tls.certificate_arn or not CERTIFICATE_ARN.match(tls.certificate_arn):
        return []
    certificate_region = tls.certificate_arn.split(":")[3]
    if certificate_region == region:
        return []
    return [
        problem(
            "inference.tls.certificateArn",
            tls.certificate_arn,
            f"the certificate is in {certificate_region}, the load balancer in {region}: ELB "
            "takes a certificate of its own region only",
            f"an ACM certificate in {region}",
            f"request or import the certificate in {region}, then pulumi config set --path "
            "inference.tls.certificateArn <its ARN>",
        )
    ]


QUEUE_MS_MAX = 60_000  # a minute in the queue: past any client's patience


def _scaling_problems(settings) -> list[Problem]:
    scaling = settings.scaling
    if scaling.metric == "queueTime":
        return _queue_time_problems(settings)
    if scaling.metric != "gpuUtilization" or 1 <= scaling.target <= 100:
        return []
    meant = round(scaling.target * 100) if scaling.target < 1 else 70
    return [
        problem(
            "inference.scaling.target",
            scaling.target,
            "a GPU-utilization target is a percentage of each node's GPUs"
            + (
                f" ({scaling.target} is {scaling.target}%, not {meant}%)"
                if scaling.target < 1
                else ""
            ),
            "1 to 100 (percent)",
            f"pulumi config set --path inference.scaling.target {meant}",
        )
    ]


def _certificate_problems(tls) -> list[Problem]:
    if tls.certificate_arn:
        if tls.domain or tls.hosted_zone_id:
            return [
                problem(
                    "inference.tls.domain",
                    tls.domain or tls.hosted_zone_id,
                    "give either a certificateArn or a domain with its hostedZoneId, not both",
                    "certificateArn, or domain + hostedZoneId",
                    "pulumi config rm --path inference.tls.domain (or the certificateArn)",
                )
            ]
        if not CERTIFICATE_ARN.match(tls.certificate_arn):
            return [
                problem(
                    "inference.tls.certificateArn",
                    tls.certificate_arn,
                    "not an ACM certificate ARN",
                    "arn:aws:acm:<region>:<account>:certificate/<uuid>",
                    "pulumi config set --path inference.tls.certificateArn <ACM ARN>",
                )
            ]
        return []
    if not tls.domain:
        return [
            problem(
                "inference.tls",
                None,
                "an HTTPS endpoint needs a certificate",
                "certificateArn (an ACM certificate), or domain + hostedZoneId (DNS-validated)",
                "pulumi config set --path inference.tls.domain api.example.com and "
                "--path inference.tls.hostedZoneId Z0123456789ABC",
            )
        ]
    found = []
    if not DOMAIN.match(tls.domain):
        found.append(
            problem(
                "inference.tls.domain",
                tls.domain,
                "not a DNS name",
                "a lower-case name, e.g. api.example.com (an international name in its "
                "IDNA form, xn--...)",
                "pulumi config set --path inference.tls.domain "
                + (dns_name(tls.domain, DOMAIN) or "<domain> (your own, e.g. api.example.com)"),
            )
        )
    if not tls.hosted_zone_id:
        found.append(
            problem(
                "inference.tls.hostedZoneId",
                None,
                "a domain needs its Route 53 hosted zone (for the DNS validation and the alias)",
                "the hosted zone id, e.g. Z0123456789ABC",
                "pulumi config set --path inference.tls.hostedZoneId <zone id>",
            )
        )
    elif not HOSTED_ZONE.match(tls.hosted_zone_id):
        found.append(
            problem(
                "inference.tls.hostedZoneId",
                tls.hosted_zone_id,
                "not a Route 53 hosted zone id",
                "Z followed by letters and digits, e.g. Z0123456789ABC",
                "pulumi config set --path inference.tls.hostedZoneId <zone id>",
            )
        )
    return found


def _queue_time_problems(settings) -> list[Problem]:
    """queueTime scales on Triton's queue counters (components/serving_group.py): a target in
    milliseconds, and a server whose queue time reaches CloudWatch."""
    scaling, found = settings.scaling, []
    if settings.server.kind != "triton":
        found.append(
            problem(
                "inference.scaling.metric",
                scaling.metric,
                f"a {settings.server.kind} server's queue time is a Prometheus histogram, which "
                "the CloudWatch agent drops (it sends counters, gauges and summaries): the group "
                "would scale on no data",
                "queueTime with server.kind triton; requestCount or gpuUtilization with "
                f"{settings.server.kind}",
                "pulumi config set --path inference.scaling.metric gpuUtilization",
            )
        )
    target = scaling.target
    if not 1 <= target <= QUEUE_MS_MAX:
        meant = round(target * 1000) if target < 1 else round(target / 1000)
        meant = min(max(meant, 1), QUEUE_MS_MAX)
        found.append(
            problem(
                "inference.scaling.target",
                target,
                "a queue-time target is milliseconds a request waits in the server's queue"
                + (
                    f" ({target:g} ms is under a millisecond; {target:g} s is {meant} ms)"
                    if target < 1
                    else f" ({target:g} ms is over a minute; {target:g} us is {meant} ms)"
                ),
                f"1 to {QUEUE_MS_MAX} (milliseconds), e.g. 50",
                f"pulumi config set --path inference.scaling.target {meant}",
            )
        )
    return found


def _rollout_problems(settings) -> list[Problem]:
    """An instance refresh keeps minHealthyPercent of the nodes in service (rounded up): 0
    lets it take every node out at once."""
    percent = settings.rollout.min_healthy_percent
    if percent >= 1:
        return []
    return [
        problem(
            "inference.rollout.minHealthyPercent",
            percent,
            "a rollout with 0% healthy may take every node out of service at once: requests "
            "fail until the new nodes have loaded their model",
            "1 to 100 (100: each new node serves before an old one goes)",
            "pulumi config set --path inference.rollout.minHealthyPercent 100",
        )
    ]
