"""`gpuc sweep`: after `pulumi destroy`, what is still tagged with the stack and can bill (or
blocks deleting what bills), each with an estimated hourly cost; delete it in dependency order.
The data stack's bucket and key are never touched: buckets are not among the kinds swept, the
data stack's key carries the data stack's own tag, and a data stack itself is refused."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from gpu_cluster.components.names import DEFAULT_PROJECT, StackIdentity
from gpu_cluster.infra.aws import UNREACHABLE, call, emulator_lacks, paginate, translated
from gpu_cluster.infra.aws.sweep_controls import ControlsSweep
from gpu_cluster.infra.aws.sweep_kinds import Leftover, has_tag, kind_name, stack_filter
from gpu_cluster.infra.aws.sweep_network import NetworkSweep
from gpu_cluster.infra.prices.gpu_prices import on_demand_hourly
from gpu_cluster.infra.prices.node_price import node_hourly
from gpu_cluster.infra.prices.unit_prices import unit_prices
from gpu_cluster.infra.problems import AwsError

COMMITTED = "committed capacity reservation"  # reported, never cancelled by the sweep


@dataclass
class Sweeper(NetworkSweep, ControlsSweep):
    ec2: Any
    autoscaling: Any
    logs: Any
    region: str
    stack: str
    fsx: Any = None
    # the rest: None leaves the kind out (a caller that did not ask for it), never "clean"
    elbv2: Any = None
    wafv2: Any = None
    scheduler: Any = None
    cloudwatch: Any = None
    events: Any = None
    sns: Any = None
    budgets: Any = None
    iam: Any = None
    kms: Any = None
    sts: Any = None
    account_id: str | None = None  # looked up through sts for the budgets
    cluster: str = ""  # the stack's clusterName (names start with it); default the stack
    project: str = DEFAULT_PROJECT  # with the stack and region: what the stack-id tag holds
    # the stack owns its bucket (storage.source create): `pulumi destroy --exclude-protected`
    # keeps the bucket, its log bucket, the KMS key encrypting them and what the key depends on
    # (the Auto Scaling service-linked role its policy names), so sweep leaves the key and role
    keeps_data: bool = False
    # seconds between checks that an asynchronous delete has ended (about five minutes)
    poll_delays: tuple[float, ...] = (5, 10, 15, 30, 30, 30, 60, 60, 60)

    def __post_init__(self) -> None:
        self.cluster = self.cluster or self.stack

    @property
    def identity(self) -> StackIdentity:
        """What the stack's resources are matched by (sweep_kinds: the stack-id tag)."""
        return StackIdentity(self.project, self.stack, self.region, self.cluster)

    # --- listing, one generator per kind, in deletion order ----------------------------------

    def groups(self) -> Iterator[Leftover]:
        for group in paginate(
            self.autoscaling, "autoscaling", "DescribeAutoScalingGroups", "AutoScalingGroups"
        ):
            if has_tag(group.get("Tags"), self.identity):
                yield Leftover(
                    "auto scaling group",
                    group["AutoScalingGroupName"],
                    f"desired {group.get('DesiredCapacity', 0)} (relaunches nodes)",
                    0.0,
                )

    def instances(self) -> Iterator[Leftover]:
        for reservation in paginate(
            self.ec2,
            "ec2",
            "DescribeInstances",
            "Reservations",
            Filters=[
                *stack_filter(self.identity),
                {"Name": "instance-state-name", "Values": ["pending", "running", "stopped"]},
            ],
        ):
            for instance in reservation["Instances"]:
                kind = instance["InstanceType"]
                running = instance["State"]["Name"] != "stopped"
                spot = instance.get("InstanceLifecycle") == "spot"
                zone = instance.get("Placement", {}).get("AvailabilityZone")
                price = (node_hourly(self.region, kind, spot, zone) or 0.0) if running else 0.0
                yield Leftover("instance", instance["InstanceId"], kind, price)

    def nat_gateways(self) -> Iterator[Leftover]:
        unit = unit_prices(self.region)
        for nat in paginate(
            self.ec2,
            "ec2",
            "DescribeNatGateways",
            "NatGateways",
            Filter=stack_filter(self.identity),
        ):
            if nat.get("State") not in ("deleted", "deleting") and has_tag(
                nat.get("Tags"), self.identity
            ):
                yield Leftover("NAT gateway", nat["NatGatewayId"], "", unit["nat_gateway_hour"])

    def endpoints(self) -> Iterator[Leftover]:
        unit = unit_prices(self.region)
        for endpoint in paginate(
            self.ec2,
            "ec2",
            "DescribeVpcEndpoints",
            "VpcEndpoints",
            Filters=stack_filter(self.identity),
        ):
            interface = endpoint.get("VpcEndpointType") == "Interface"
            if not has_tag(endpoint.get("Tags"), self.identity) or endpoint.get(
                "State", ""
            ).lower() in (
                "deleted",
                "deleting",
            ):
                continue  # the tag filter is applied again: some endpoints ignore it
            yield Leftover(
                "VPC endpoint",
                endpoint["VpcEndpointId"],
                endpoint.get("ServiceName", ""),
                unit["interface_endpoint_hour"] if interface else 0.0,
            )

    def addresses(self) -> Iterator[Leftover]:
        unit = unit_prices(self.region)
        for address in call(
            self.ec2, "ec2", "DescribeAddresses", Filters=stack_filter(self.identity)
        ).get("Addresses", []):
            if not has_tag(address.get("Tags"), self.identity):
                continue
            yield Leftover(
                "Elastic IP",
                address["AllocationId"],
                address.get("PublicIp", ""),
                unit["public_ipv4_hour"],
            )

    def volumes(self) -> Iterator[Leftover]:
        unit = unit_prices(self.region)
        for volume in paginate(
            self.ec2,
            "ec2",
            "DescribeVolumes",
            "Volumes",
            Filters=[*stack_filter(self.identity), {"Name": "status", "Values": ["available"]}],
        ):
            size = volume["Size"]
            yield Leftover(
                "EBS volume",
                volume["VolumeId"],
                f"{size} GiB, unattached",
                size * unit["ebs_gp3_gb_month"] / unit.hours_per_month,
            )

    def snapshots(self) -> Iterator[Leftover]:
        unit = unit_prices(self.region)
        for snapshot in paginate(
            self.ec2,
            "ec2",
            "DescribeSnapshots",
            "Snapshots",
            OwnerIds=["self"],
            Filters=stack_filter(self.identity),
        ):
            if has_tag(snapshot.get("Tags"), self.identity):
                size = snapshot.get("VolumeSize", 0)
                # snapshots bill for changed blocks; the volume size is an upper bound
                yield Leftover(
                    "EBS snapshot",
                    snapshot["SnapshotId"],
                    f"up to {size} GiB",
                    size * unit["ebs_snapshot_gb_month"] / unit.hours_per_month,
                )

    def interfaces(self) -> Iterator[Leftover]:
        for interface in paginate(
            self.ec2,
            "ec2",
            "DescribeNetworkInterfaces",
            "NetworkInterfaces",
            Filters=[*stack_filter(self.identity), {"Name": "status", "Values": ["available"]}],
        ):
            if has_tag(interface.get("TagSet"), self.identity):
                yield Leftover("network interface", interface["NetworkInterfaceId"], "", 0.0)

    def spot_requests(self) -> Iterator[Leftover]:
        for request in call(
            self.ec2,
            "ec2",
            "DescribeSpotInstanceRequests",
            Filters=[*stack_filter(self.identity), {"Name": "state", "Values": ["open", "active"]}],
        ).get("SpotInstanceRequests", []):
            yield Leftover("spot request", request["SpotInstanceRequestId"], "", 0.0)

    def reservations(self) -> Iterator[Leftover]:
        """Active reservations, and future-dated ones (`gpuc capacity-reservation`) scheduled
        to start: within its commitment a reservation is reported, not cancelled (cancelling
        then needs a paid cancellation quote: EC2 API CancelCapacityReservation)."""
        for reservation in paginate(
            self.ec2,
            "ec2",
            "DescribeCapacityReservations",
            "CapacityReservations",
            Filters=[
                *stack_filter(self.identity),
                {"Name": "state", "Values": ["active", "scheduled"]},
            ],
        ):
            kind = reservation["InstanceType"]
            count = reservation.get("TotalInstanceCount", 0)
            hourly = count * (on_demand_hourly(self.region, kind) or 0.0)
            until = (reservation.get("CommitmentInfo") or {}).get("CommitmentEndDate")
            if until is not None and until > datetime.now(UTC):
                yield Leftover(
                    COMMITTED,
                    reservation["CapacityReservationId"],
                    f"{reservation.get('State', '')}, committed until {until:%Y-%m-%d}: it bills "
                    "until then; cancelling sooner needs a cancellation quote (EC2 console)",
                    hourly,
                )
                continue
            yield Leftover(
                "capacity reservation",
                reservation["CapacityReservationId"],
                f"{count} x {kind}, billed used or not",
                hourly,
            )

    def launch_templates(self) -> Iterator[Leftover]:
        for template in paginate(
            self.ec2,
            "ec2",
            "DescribeLaunchTemplates",
            "LaunchTemplates",
            Filters=stack_filter(self.identity),
        ):
            yield Leftover("launch template", template["LaunchTemplateId"], "", 0.0)

    def placement_groups(self) -> Iterator[Leftover]:
        for group in call(
            self.ec2, "ec2", "DescribePlacementGroups", Filters=stack_filter(self.identity)
        ).get("PlacementGroups", []):
            yield Leftover("placement group", group["GroupName"], group.get("Strategy", ""), 0.0)

    def security_groups(self) -> Iterator[Leftover]:
        for group in paginate(
            self.ec2,
            "ec2",
            "DescribeSecurityGroups",
            "SecurityGroups",
            Filters=stack_filter(self.identity),
        ):
            if group.get("GroupName") != "default":
                yield Leftover("security group", group["GroupId"], group["GroupName"], 0.0)

    def file_systems(self) -> Iterator[Leftover]:
        if self.fsx is None:
            return
        unit = unit_prices(self.region)
        for system in paginate(self.fsx, "fsx", "DescribeFileSystems", "FileSystems"):
            if not has_tag(system.get("Tags"), self.identity):
                continue
            if system.get("Lifecycle") in ("DELETING", "DELETED"):
                continue
            size = system.get("StorageCapacity", 0)
            tier = str(system.get("LustreConfiguration", {}).get("PerUnitStorageThroughput", 250))
            per_gb = unit["fsx_lustre_persistent2_gb_month"].get(tier, 0.0)
            yield Leftover(
                "FSx file system",
                system["FileSystemId"],
                f"{size} GiB Lustre",
                size * per_gb / unit.hours_per_month,
            )

    def log_groups(self) -> Iterator[Leftover]:
        for group in paginate(self.logs, "logs", "DescribeLogGroups", "logGroups"):
            arn = group["arn"].removesuffix(":*")
            tags = call(self.logs, "logs", "ListTagsForResource", resourceArn=arn).get("tags", {})
            if has_tag(tags, self.identity):
                yield Leftover("log group", group["logGroupName"], "", 0.0)

    # --- deleting -----------------------------------------------------------------------------

    def delete(self, leftover: Leftover) -> None:
        if self.delete_network(leftover) or self.delete_control(leftover):
            return
        actions: dict[str, Callable[[str], object]] = {
            "auto scaling group": lambda name: call(
                self.autoscaling,
                "autoscaling",
                "DeleteAutoScalingGroup",
                AutoScalingGroupName=name,
                ForceDelete=True,
            ),
            "instance": lambda i: call(self.ec2, "ec2", "TerminateInstances", InstanceIds=[i]),
            "NAT gateway": lambda i: call(self.ec2, "ec2", "DeleteNatGateway", NatGatewayId=i),
            "VPC endpoint": lambda i: call(
                self.ec2, "ec2", "DeleteVpcEndpoints", VpcEndpointIds=[i]
            ),
            "Elastic IP": lambda i: call(self.ec2, "ec2", "ReleaseAddress", AllocationId=i),
            "EBS volume": lambda i: call(self.ec2, "ec2", "DeleteVolume", VolumeId=i),
            "EBS snapshot": lambda i: call(self.ec2, "ec2", "DeleteSnapshot", SnapshotId=i),
            "network interface": lambda i: call(
                self.ec2, "ec2", "DeleteNetworkInterface", NetworkInterfaceId=i
            ),
            "spot request": lambda i: call(
                self.ec2, "ec2", "CancelSpotInstanceRequests", SpotInstanceRequestIds=[i]
            ),
            "capacity reservation": lambda i: call(
                self.ec2, "ec2", "CancelCapacityReservation", CapacityReservationId=i
            ),
            "launch template": lambda i: call(
                self.ec2, "ec2", "DeleteLaunchTemplate", LaunchTemplateId=i
            ),
            "placement group": lambda n: call(self.ec2, "ec2", "DeletePlacementGroup", GroupName=n),
            "security group": lambda i: call(self.ec2, "ec2", "DeleteSecurityGroup", GroupId=i),
            "log group": lambda n: call(self.logs, "logs", "DeleteLogGroup", logGroupName=n),
            "FSx file system": lambda i: call(self.fsx, "fsx", "DeleteFileSystem", FileSystemId=i),
        }
        if leftover.kind == COMMITTED:
            raise AwsError(
                f"{leftover.resource_id} is {leftover.detail}; gpuc sweep does not pay a "
                "cancellation charge",
                "CommittedReservation",
            )
        actions[leftover.kind](leftover.resource_id)

    def listers(self) -> tuple[Callable[[], Iterator[Leftover]], ...]:
        """One lister per kind, in the order the kinds can be deleted (users first)."""
        return (
            self.groups,
            self.file_systems,
            self.spot_requests,
            self.instances,
            self.reservations,
            self.load_balancers,
            self.web_acls,
            self.target_groups,
            self.nat_gateways,
            self.endpoints,
            self.addresses,
            self.volumes,
            self.snapshots,
            self.interfaces,
            self.launch_templates,
            self.placement_groups,
            self.security_groups,
            self.subnets,
            self.route_tables,
            self.internet_gateways,
            self.vpcs,
            self.schedules,
            self.alarms,
            self.event_rules,
            self.topics,
            self.cost_budgets,
            self.dashboards,
            self.instance_profiles,
            self.roles,
            self.log_groups,
            self.kms_keys,
        )

    def find(self) -> list[Leftover]:
        """Everything left, in the order it can be deleted (what uses a thing comes first)."""
        found: list[Leftover] = []
        self.skipped: list[tuple[str, str]] = []  # (kind, why) not listed: claim nothing
        self.unsupported: list[tuple[str, str]] = []  # the endpoint (an emulator) lacks the API
        listers = self.listers()
        foreign: list[tuple[str, str]] = []  # answered, but not AWS's way
        listed = 0
        for position, lister in enumerate(listers):
            try:
                found += list(lister())
                listed += 1
            except NotImplementedError as error:  # moto's in-process mock without the API
                self.unsupported.append((kind_name(lister), str(error)))
            except AwsError as error:
                if emulator_lacks(error):
                    foreign.append((kind_name(lister), str(error)))
                    continue
                self.skipped.append((kind_name(lister), str(error)))
                if error.code in (UNREACHABLE, "NoCredentials"):
                    # no other call can succeed either: say so at once instead of timing out
                    # once per kind
                    rest = listers[position + 1 :]
                    self.skipped += [(kind_name(other), f"not tried ({error})") for other in rest]
                    break
        # an emulator lacks a few APIs, but only an endpoint that answered other kinds AWS's way
        # is one: a proxy's page or a wrong URL's 404 answers every kind alike (nothing was read)
        (self.unsupported if listed else self.skipped).extend(foreign)
        return found

    def delete_all(self, leftovers: list[Leftover]) -> list[tuple[Leftover, str]]:
        """Delete in order, waiting where AWS needs it (terminated instances release their
        interfaces, deleted NAT gateways their addresses, deleted groups their service-linked
        role); a failure is reported and the rest goes on."""
        failures = []
        for kind in dict.fromkeys(leftover.kind for leftover in leftovers):
            batch = [leftover for leftover in leftovers if leftover.kind == kind]
            if kind == "security group":
                try:
                    self.revoke_group_references([leftover.resource_id for leftover in batch])
                except AwsError as error:
                    failures += [(leftover, str(error)) for leftover in batch]
                    continue
            deleted = []
            for leftover in batch:
                try:
                    self._delete_when_free(leftover)
                    deleted.append(leftover.resource_id)
                except AwsError as error:
                    failures.append((leftover, str(error)))
                except NotImplementedError as error:  # moto's in-process mock without the API
                    failures.append((leftover, f"this endpoint cannot delete it: {error}"))
            try:
                self.wait_for(kind, deleted)
            except AwsError as error:  # the next kinds say what it still blocks
                failures.append((batch[0], f"waiting for the {kind} deletion: {error}"))
        return failures

    def _delete_when_free(self, leftover: Leftover) -> None:
        """Delete; while AWS still holds what uses it (a load balancer's, a file system's or
        an endpoint's interfaces are released minutes after their delete), try again."""
        for delay in (*self.poll_delays, None):
            try:
                self.delete(leftover)
                return
            except AwsError as error:
                if error.code != "DependencyViolation" or delay is None:
                    raise
                time.sleep(delay)

    def wait_for(self, kind: str, ids: list[str]) -> None:
        if not ids:
            return
        if kind == "auto scaling group":  # ForceDelete returns first; no botocore waiter
            self._poll(
                lambda: [
                    g
                    for g in paginate(
                        self.autoscaling,
                        "autoscaling",
                        "DescribeAutoScalingGroups",
                        "AutoScalingGroups",
                        AutoScalingGroupNames=ids,
                    )
                ],
                kind,
            )
            return
        waiters = {
            "instance": (self.ec2, "instance_terminated", "InstanceIds"),
            "NAT gateway": (self.ec2, "nat_gateway_deleted", "NatGatewayIds"),
            "load balancer": (self.elbv2, "load_balancers_deleted", "LoadBalancerArns"),
        }
        if kind not in waiters:
            return
        api, name, key = waiters[kind]
        if api is None or name not in api.waiter_names:
            return
        # one load balancer at a time: the waiter ends at the first LoadBalancerNotFound
        groups = [[one] for one in ids] if kind == "load balancer" else [ids]
        for group in groups:
            with translated(api.meta.service_model.service_name, f"wait {name}"):
                api.get_waiter(name).wait(**{key: group})

    def _poll(self, still_there: Callable[[], list], kind: str) -> None:
        for delay in (*self.poll_delays, None):
            if not still_there():
                return
            if delay is None:
                raise AwsError(f"the {kind} deletion has not finished yet", "DeletionPending")
            time.sleep(delay)
