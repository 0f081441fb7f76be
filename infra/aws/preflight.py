"""`gpuc preflight`: read-only checks before `pulumi up`, each pass / warn / fail with the fix -
so a deployment does not fail twenty minutes in on capacity, quota, offering or AMI problems.
Every call goes through the one boto3 wrapper; nothing is created (RunInstances is a DryRun)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import boto3

from gpu_cluster.components.catalog import load_catalog
from gpu_cluster.components.dlami import dlami, dlami_image_name, dlami_parameter
from gpu_cluster.components.names import default_bucket_name
from gpu_cluster.components.purchase import (
    BLOCK_END_MARGIN,
    CapacityBlock,
    CapacityReservation,
    Spot,
)
from gpu_cluster.components.quotas import on_demand_quota, spot_quota
from gpu_cluster.infra.aws import call, client, paginate
from gpu_cluster.infra.problems import AwsError, Problem
from gpu_cluster.infra.validation import ResolvedCluster, ResolvedData, stack_identity

PASS, WARN, FAIL = "pass", "warn", "fail"
# Service Quotas codes of the EC2 vCPU quotas (service code ec2)
QUOTA_CODES = {
    "Running On-Demand P instances": "L-417A185B",
    "Running On-Demand G and VT instances": "L-DB2E81BA",
    "All P Spot Instance Requests": "L-7212CCBC",
    "All G and VT Spot Instance Requests": "L-3819A6DF",
}
DRY_RUN_ADVICE = {
    "InstanceLimitExceeded": "the account's instance limit for this type is reached: request "
    "a quota increase (Service Quotas) or use fewer nodes",
    "VcpuLimitExceeded": "the vCPU quota is too small: request an increase in Service Quotas",
    "InsufficientInstanceCapacity": "AWS has no capacity for this type in the zone now: try "
    "another zone, a capacity reservation or a Capacity Block",
    "Unsupported": "the type is not supported in this zone (or with this AMI): pick a zone "
    "from `gpuc catalog list`",
    "UnauthorizedOperation": "the caller may not launch instances (ec2:RunInstances), or may "
    "not use the AMI or its KMS key",
}


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""
    value: str | None = None  # what later checks use (the account, the AMI id)
    could_not_look: bool = False  # its AWS call failed: nothing was checked (gpuc exits 4)


@dataclass
class Clients:
    ec2: Any
    sts: Any
    quotas: Any
    s3: Any
    ssm: Any = None

    @classmethod
    def for_region(cls, region: str, session: boto3.Session | None = None) -> Clients:
        return cls(
            ec2=client("ec2", region, session),
            sts=client("sts", region, session),
            quotas=client("service-quotas", region, session),
            s3=client("s3", region, session),
            ssm=client("ssm", region, session),
        )


def check_credentials(spec: ResolvedCluster | ResolvedData, aws: Clients) -> Check:
    who = call(aws.sts, "sts", "GetCallerIdentity")
    return Check(
        "credentials", PASS, f"account {who['Account']} as {who['Arn']}", value=who["Account"]
    )


def check_offering(spec: ResolvedCluster, aws: Clients) -> Check:
    kind, zone = spec.facts.instance_type, spec.availability_zone
    zones = sorted(
        offer["Location"]
        for offer in paginate(
            aws.ec2,
            "ec2",
            "DescribeInstanceTypeOfferings",
            "InstanceTypeOfferings",
            LocationType="availability-zone",
            Filters=[{"Name": "instance-type", "Values": [kind]}],
        )
    )
    if zone in zones:
        return Check("offering", PASS, f"{kind} is offered in {zone} (in this account)")
    return Check(
        "offering",
        FAIL,
        f"{kind} is not offered in {zone} in this account; it is in: "
        + (", ".join(zones) or "no zone of this region"),
        f"pulumi config set availabilityZone {zones[0]}" if zones else "pick another region",
    )


def running_vcpus(aws: Clients, family_letter: str, spot: bool) -> int:
    """vCPUs of this account's running instances that count against the same quota."""
    catalog = load_catalog()
    total = 0
    for reservation in paginate(
        aws.ec2,
        "ec2",
        "DescribeInstances",
        "Reservations",
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}],
    ):
        for instance in reservation.get("Instances", []):
            kind = instance["InstanceType"]
            is_spot = instance.get("InstanceLifecycle") == "spot"
            if kind.startswith(family_letter) and is_spot == spot:
                facts = catalog.get(kind)
                total += (
                    facts.vcpus
                    if facts
                    else instance.get("CpuOptions", {}).get("CoreCount", 0)
                    * instance.get("CpuOptions", {}).get("ThreadsPerCore", 1)
                )
    return total


def check_quota(spec: ResolvedCluster, aws: Clients) -> Check:
    kind, facts = spec.facts.instance_type, spec.facts
    purchase = spec.purchase
    spot = isinstance(purchase, Spot)
    spot_nodes = spec.node_count - min(purchase.on_demand_base, spec.node_count) if spot else 0
    quota_name = spot_quota(kind) if spot_nodes else on_demand_quota(kind)
    needed = facts.vcpus * (spot_nodes or spec.node_count)
    try:
        value = call(
            aws.quotas,
            "servicequotas",
            "GetServiceQuota",
            ServiceCode="ec2",
            QuotaCode=QUOTA_CODES[quota_name],
        )["Quota"]["Value"]
    except AwsError as error:
        return Check(
            "vCPU quota",
            WARN,
            f"could not read '{quota_name}' ({error.code or error}); the cluster needs {needed}",
            f"check the quota in the Service Quotas console (code {QUOTA_CODES[quota_name]})",
        )
    running = running_vcpus(aws, kind[0], spot=bool(spot_nodes))
    if running + needed <= value:
        return Check(
            "vCPU quota",
            PASS,
            f"'{quota_name}' is {value:g} vCPUs; {running} run now, the cluster needs {needed}",
        )
    return Check(
        "vCPU quota",
        FAIL,
        f"'{quota_name}' is {value:g} vCPUs; {running} run now and the cluster needs {needed}",
        f"request at least {running + needed} vCPUs in Service Quotas "
        f"(quota {QUOTA_CODES[quota_name]}), or use fewer nodes",
    )


def check_ami(spec: ResolvedCluster, aws: Clients) -> Check:
    """The AMI the program will pick resolves, is not deprecated and fits the architecture."""
    ami = spec.ami
    if ami.id:
        request: dict[str, Any] = {"ImageIds": [ami.id], "IncludeDeprecated": True}
        what = ami.id
    elif ami.ssm_parameter or ami.release == "latest":
        parameter = ami.ssm_parameter or dlami_parameter(spec.facts.architecture)
        try:
            image_id = call(aws.ssm, "ssm", "GetParameter", Name=parameter)["Parameter"]["Value"]
        except AwsError as error:
            return Check(
                "AMI",
                FAIL,
                f"SSM parameter {parameter} does not resolve ({error.code})",
                "check the parameter name and region, or pin ami.release / ami.id",
            )
        request = {"ImageIds": [image_id], "IncludeDeprecated": True}
        what = f"{image_id} (from {parameter})"
    else:
        name = dlami_image_name(spec.facts.architecture, ami.release)
        request = {
            "Owners": [dlami()["owner"]],
            "Filters": [{"Name": "name", "Values": [name]}],
            "IncludeDeprecated": True,
        }
        what = f"'{name}'"
    images = call(aws.ec2, "ec2", "DescribeImages", **request).get("Images", [])
    if not images:
        return Check(
            "AMI",
            FAIL,
            f"no image {what} in {spec.region}",
            "set ami.release to a release listed in the Deep Learning AMI release notes, "
            "or ami.id to an AMI of this region",
        )
    image = max(images, key=lambda i: i.get("CreationDate", ""))
    if image.get("Architecture") not in spec.facts.architectures:
        return Check(
            "AMI",
            FAIL,
            f"{image['ImageId']} is {image.get('Architecture')}; {spec.facts.instance_type} runs "
            f"{', '.join(spec.facts.architectures)}",
            "use an AMI for the instance's architecture",
        )
    deprecated = image.get("DeprecationTime")
    if deprecated and deprecated <= datetime.now(UTC).isoformat():
        return Check(
            "AMI",
            WARN,
            f"{image['ImageId']} was deprecated on {deprecated[:10]}; it still launches",
            "move to a newer release (docs/guides/new-ami.md)",
            value=image["ImageId"],
        )
    return Check(
        "AMI", PASS, f"{image['ImageId']} ({image.get('Name', '')})", value=image["ImageId"]
    )


def check_reservation(spec: ResolvedCluster, aws: Clients) -> Check | None:
    from gpu_cluster.infra.aws.reservations import describe_reservation
    from gpu_cluster.infra.validation.purchase import check_live_reservation

    purchase = spec.purchase
    reservation_id = (
        purchase.reservation_id
        if isinstance(purchase, CapacityBlock | CapacityReservation)
        else None
    )
    # a block always; a reservation when targeted by id
    if reservation_id is None or not (isinstance(purchase, CapacityBlock) or reservation_id):
        return None
    try:
        facts = describe_reservation(reservation_id, spec.region, ec2=aws.ec2)
    except AwsError as error:
        return Check("reservation", FAIL, str(error), "check the id")
    problems = check_live_reservation(
        purchase, facts, spec.facts.instance_type, spec.availability_zone, spec.node_count
    )
    if problems:
        return Check("reservation", FAIL, "; ".join(p.problem for p in problems), problems[0].fix)
    ends = ""
    if isinstance(purchase, CapacityBlock) and facts.end_date is not None:
        end = facts.end_date.astimezone(UTC)
        ends = (
            f"; ends {end:%Y-%m-%d %H:%M} UTC: the group scales to 0 at "
            f"{end - BLOCK_END_MARGIN:%H:%M} UTC"
        )
    return Check(
        "reservation",
        PASS,
        f"{reservation_id}: {facts.total_instances} x {facts.instance_type} in "
        f"{facts.availability_zone}, {facts.state}{ends}",
    )


def check_spot(spec: ResolvedCluster, aws: Clients) -> Check | None:
    """Spot: the current price in each AZ of the region, and AWS's placement score for the
    node count in the stack's AZ (1-10; how likely the request is to be filled)."""
    if not isinstance(spec.purchase, Spot):
        return None
    kind = spec.facts.instance_type
    latest: dict[str, float] = {}
    for item in paginate(
        aws.ec2,
        "ec2",
        "DescribeSpotPriceHistory",
        "SpotPriceHistory",
        InstanceTypes=[kind],
        ProductDescriptions=["Linux/UNIX"],
        StartTime=datetime.now(UTC),
    ):
        latest.setdefault(item["AvailabilityZone"], float(item["SpotPrice"]))
    prices = ", ".join(f"{zone} ${price:g}" for zone, price in sorted(latest.items()))
    try:
        scores = call(
            aws.ec2,
            "ec2",
            "GetSpotPlacementScores",
            InstanceTypes=[kind],
            TargetCapacity=spec.node_count,
            SingleAvailabilityZone=True,
            RegionNames=[spec.region],
        ).get("SpotPlacementScores", [])
    except AwsError as error:
        return Check("spot", WARN, f"prices: {prices or 'none'}; no placement score ({error.code})")
    zones = call(aws.ec2, "ec2", "DescribeAvailabilityZones")["AvailabilityZones"]
    zone_id = next(
        (z["ZoneId"] for z in zones if z["ZoneName"] == spec.availability_zone), None
    )  # this account's mapping, not the bundled one
    score = next((s["Score"] for s in scores if s.get("AvailabilityZoneId") == zone_id), None)
    detail = f"prices: {prices or 'none'}; placement score in {spec.availability_zone}: {score}"
    if score is not None and score <= 3:
        return Check(
            "spot",
            WARN,
            detail,
            "a low score: add fallbackTypes, an on-demand base, or another zone",
        )
    return Check("spot", PASS, detail)


def check_dry_run(spec: ResolvedCluster, aws: Clients, image_id: str | None) -> Check:
    if not image_id:
        return Check("launch (dry run)", WARN, "skipped: the AMI did not resolve")
    try:
        aws.ec2.run_instances(
            DryRun=True,
            ImageId=image_id,
            InstanceType=spec.facts.instance_type,
            MinCount=1,
            MaxCount=1,
            Placement={"AvailabilityZone": spec.availability_zone},
        )
    except Exception as error:
        code = getattr(error, "response", {}).get("Error", {}).get("Code", type(error).__name__)
        if code == "DryRunOperation":
            return Check("launch (dry run)", PASS, "RunInstances would be allowed")
        return Check(
            "launch (dry run)",
            FAIL,
            f"RunInstances refused: {code}",
            DRY_RUN_ADVICE.get(code, "see the AWS error code"),
        )
    return Check("launch (dry run)", WARN, "the endpoint ignored DryRun")


def check_bucket(spec: ResolvedCluster, aws: Clients, account: str | None) -> Check | None:
    if spec.storage.source != "create":
        return None
    return bucket_name_check(
        spec.storage.bucket or default_bucket_name(stack_identity(spec), str(account)), aws
    )


def bucket_name_check(name: str, aws: Clients, owned_note: str = "") -> Check:
    """Is the bucket name free (S3 names are global), taken elsewhere, or this account's?"""
    try:
        aws.s3.head_bucket(Bucket=name)
    except Exception as error:
        status = getattr(error, "response", {}).get("Error", {}).get("Code", "")
        if status in ("404", "NoSuchBucket", "NotFound"):
            return Check("bucket name", PASS, f"{name} is free")
        if status in ("403", "AccessDenied"):
            return Check(
                "bucket name",
                FAIL,
                f"{name} exists in another account",
                "pulumi config set --path storage.bucket <another globally unique name>",
            )
        return Check("bucket name", WARN, f"could not check {name}: {status or error}")
    if owned_note:
        return Check("bucket name", WARN, f"{name} already exists in this account", owned_note)
    return Check("bucket name", PASS, f"{name} exists and is this account's")


def run_data_preflight(spec: ResolvedData, aws: Clients) -> list[Check]:
    """What a data stack can get wrong before `pulumi up`: credentials and its bucket name."""
    try:
        identity = check_credentials(spec, aws)
    except AwsError as error:
        return [Check("credentials", FAIL, str(error), could_not_look=True)]
    name = spec.bucket or default_bucket_name(stack_identity(spec), str(identity.value))
    note = (
        "fine if this stack created it; otherwise adopt it (pulumi import) or set "
        "`pulumi config set --path storage.bucket <another name>`"
    )
    try:
        bucket = bucket_name_check(name, aws, owned_note=note)
    except AwsError as error:
        bucket = Check("bucket name", FAIL, str(error), could_not_look=True)
    return [identity, bucket]


def check_existing_network(spec: ResolvedCluster, aws: Clients) -> Check | None:
    """network.vpcId: the same checks the program runs before it creates anything."""
    from gpu_cluster.infra.aws.network_facts import describe_network
    from gpu_cluster.infra.network_check import network_needs
    from gpu_cluster.infra.validation.network_facts import check_network_facts

    existing = spec.existing_network
    if existing is None:
        return None
    facts = describe_network(existing, spec.region, aws.ec2)
    problems, warnings = check_network_facts(existing, network_needs(spec), facts)
    if problems:
        return Check(
            "network",
            FAIL,
            "; ".join(f"{p.path.split(':', 1)[-1]}: {p.problem}" for p in problems),
            fix="; ".join(p.fix for p in problems),
        )
    where = ", ".join(
        f"{s} ({facts.subnets[s].zone}, {facts.subnets[s].free_addresses} free)"
        for s in existing.subnet_ids
    )
    if warnings:
        return Check("network", WARN, f"{existing.vpc_id}: {where}; " + "; ".join(warnings))
    return Check("network", PASS, f"{existing.vpc_id}: {where}")


def subnet_zone(subnet_id: str, aws: Clients) -> str | None:
    """The subnet's zone (ec2:DescribeSubnets); None when EC2 knows no such subnet."""
    from gpu_cluster.infra.aws.network_facts import MISSING

    try:
        subnets = call(aws.ec2, "ec2", "DescribeSubnets", SubnetIds=[subnet_id])["Subnets"]
    except AwsError as error:
        if error.code in MISSING:
            return None
        raise
    return subnets[0]["AvailabilityZone"] if subnets else None


def in_subnet_zone(
    spec: ResolvedCluster, aws: Clients, config: Mapping[str, str] | None = None
) -> ResolvedCluster:
    """availabilityZone left out in your own subnet: the stack checked again in the subnet's
    zone, as `pulumi up` checks it (infra/network_check.py with_subnet_zone). ``config``: the
    stack's (default: its stack file). A ConfigError when it cannot work there or the subnet
    is unknown."""
    from gpu_cluster.infra.config import load_spec
    from gpu_cluster.infra.errors import ConfigError
    from gpu_cluster.infra.network_check import from_subnet_zone
    from gpu_cluster.infra.overrides import stack_config
    from gpu_cluster.infra.spec import PROJECT

    subnet = spec.zone_from_subnet
    if subnet is None:
        return spec
    zone = subnet_zone(subnet, aws)
    if zone is None:
        problem = Problem(
            path=f"{PROJECT}:network.subnetIds[0]",
            received=subnet,
            problem=f"EC2 knows no such subnet in {spec.region} for this account, so the nodes' "
            "zone (availabilityZone, left out) cannot be read from it",
            allowed=f"the id of one of this account's subnets in {spec.region}",
            fix=f"check the id with `aws ec2 describe-subnets --region {spec.region}`, then "
            f"pulumi config set --path 'network.subnetIds[0]' <subnet id>",
        )
        raise ConfigError(spec.stack, [problem])
    config = config or stack_config(spec.stack)
    zoned = {**config, f"{PROJECT}:availabilityZone": zone}
    try:
        resolved = load_spec(zoned, spec.stack)
    except ConfigError as error:
        raise from_subnet_zone(error, config, zoned) from None
    assert isinstance(resolved, ResolvedCluster)  # the same stack, now with its zone
    return resolved


def run_preflight(
    spec: ResolvedCluster, aws: Clients, on_check: Callable[[Check], None] | None = None
) -> list[Check]:
    """Every check, in order; an AWS failure in one check is that check's failure. A zone
    left out in your own subnet is read first (in_subnet_zone)."""
    spec = in_subnet_zone(spec, aws)
    checks: list[Check] = []

    def run(name: str, step: Callable[[], Check | None]) -> Check | None:
        try:
            result = step()
        except AwsError as error:
            result = Check(name, FAIL, str(error), could_not_look=True)
        if result is not None:
            checks.append(result)
            if on_check:
                on_check(result)
        return result

    identity = run("credentials", lambda: check_credentials(spec, aws))
    account = identity.value if identity else None
    run("offering", lambda: check_offering(spec, aws))
    run("vCPU quota", lambda: check_quota(spec, aws))
    ami = run("AMI", lambda: check_ami(spec, aws))
    image_id = (ami.value if ami else None) or spec.ami.id
    run("reservation", lambda: check_reservation(spec, aws))
    run("spot", lambda: check_spot(spec, aws))
    run("launch (dry run)", lambda: check_dry_run(spec, aws, image_id))
    run("bucket name", lambda: check_bucket(spec, aws, account))
    run("network", lambda: check_existing_network(spec, aws))
    return checks
