"""GpuCluster: network, security, storage and GPU nodes composed from one set of args."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.ami import AmiChoice, resolve_ami
from gpu_cluster.components.bandwidth import (
    bus_bandwidth_model,
    expected_busbw,
    node_count_tables,
)
from gpu_cluster.components.boot_bundle import boot_bundle, bundle_key
from gpu_cluster.components.catalog import InstanceFacts
from gpu_cluster.components.cidr import SubnetLayout
from gpu_cluster.components.cost_controls import CostControls
from gpu_cluster.components.dashboard import BurnPrices, stack_dashboard, stack_spec
from gpu_cluster.components.datastore import DataStore, DataStoreArgs
from gpu_cluster.components.ec2_topology import supports_topology
from gpu_cluster.components.jobs import JOB_LOG_RETENTION_DAYS
from gpu_cluster.components.launch_template import RootVolume
from gpu_cluster.components.log_metrics import EVENTS_LOG, JOBS_LOG, NODE_LOG, filters_of
from gpu_cluster.components.lustre import ClusterLustre, ClusterLustreArgs, LustreSize
from gpu_cluster.components.names import (
    StackIdentity,
    alerts_topic_parameter,
    bundle_folder,
    dashboard_name,
    job_bucket_parameter,
    jobs_log_group,
    jobs_path,
    node_log_group,
    replacements_parameter,
    runtime_identity,
    secrets_path,
)
from gpu_cluster.components.naming import CLUSTER_TAG, child_name
from gpu_cluster.components.network import ClusterNetwork, ClusterNetworkArgs, ExistingNetwork
from gpu_cluster.components.nic_layout import efa_interface_count, nic_layout
from gpu_cluster.components.node_group import GpuNodeGroup, GpuNodeGroupArgs
from gpu_cluster.components.node_logs import log_metric_filters, node_log
from gpu_cluster.components.policies import (
    gang_stop_policy,
    log_group_writer_policy,
    node_alerts_policy,
)
from gpu_cluster.components.purchase import OnDemand, Purchase, Spot, is_single_instance
from gpu_cluster.components.secrets import secrets_path_arn, store_secrets
from gpu_cluster.components.security import ClusterSecurity, ClusterSecurityArgs
from gpu_cluster.components.stack_cost_controls import CostControlArgs, StackCostControls
from gpu_cluster.components.topology import has_nvswitch, has_row_remapping, nvswitch_pci_id
from gpu_cluster.components.user_data import (
    ALLREDUCE_BENCH_PATH,
    JOB_USER,
    BootConfig,
    bench_install_command,
    render_user_data,
    run_on_every_node_command,
    torchrun_command,
)


@dataclass
class StorageArgs:
    """Where the cluster's data lives. ``create`` makes a DataStore in this stack."""

    bucket_name: pulumi.Input[str]
    create: bool
    data_key_arn: pulumi.Input[str] | None = None


@dataclass
class GpuClusterArgs:
    facts: InstanceFacts
    node_count: int
    efa: bool
    region: str
    availability_zone: pulumi.Input[str]  # unknown in a plan that could not read it
    layout: SubnetLayout | None  # None with existing_network
    storage: StorageArgs
    purchase: Purchase = field(default_factory=OnDemand)
    ami_ssm_parameter: str | None = None
    ami_id: str | None = None
    ami_release: str | None = None  # a Deep Learning AMI release; "latest" follows SSM
    fsx: LustreSize | None = None  # FSx for Lustre linked to the data bucket
    root_volume: RootVolume = field(default_factory=RootVolume)
    nat_gateway: bool = True  # existing_network: whether its subnet reaches the internet
    public_ip: bool = False
    existing_network: ExistingNetwork | None = None  # the user's VPC and subnet
    # Whose physical names these are (components/names.py); None: the running stack's.
    identity: StackIdentity | None = None
    container_network: str = "host"
    # Pulumi secrets from stack config: name -> value (stored as SSM SecureString parameters)
    secrets: dict[str, pulumi.Input[str]] = field(default_factory=dict)
    cost_controls: CostControls = field(default_factory=CostControls)
    burn: BurnPrices = field(default_factory=BurnPrices)  # the dashboard's node price
    # ECR repositories job images come from (`gpuc run --image`): names or ARNs
    image_repositories: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def total_gpus(self) -> float:
        return self.facts.gpus * self.node_count


# Session Manager's default shell is a non-login `sh` as ssm-user (amazon-ssm-agent,
# agent/session/shell/shell_unix.go), which reads no /etc/profile.d: start a login shell of
# the job user instead, so the session has the cluster's torchrun environment.
SSM_LOGIN_SHELL = (
    f'--document-name AWS-StartInteractiveCommand --parameters command="sudo -iu {JOB_USER}"'
)


def ssm_session_command(instance_id: str, region: str) -> str:
    return f"aws ssm start-session --region {region} --target {instance_id} {SSM_LOGIN_SHELL}"


def list_nodes_command(group: str, region: str) -> str:
    """The group's running nodes: instance id, private IP, type, spot or not, launch time."""
    return (
        f"aws ec2 describe-instances --region {region} --filters "
        f"Name=tag:aws:autoscaling:groupName,Values={group} "
        "Name=instance-state-name,Values=pending,running --query "
        "'Reservations[].Instances[].[InstanceId,PrivateIpAddress,InstanceType,"
        "InstanceLifecycle,LaunchTime]' --output table"
    )


def ssm_first_node_command(group: str, region: str) -> str:
    """A shell on the group's oldest running node (the rendezvous host)."""
    first = (
        f"aws ec2 describe-instances --region {region} --filters "
        f"Name=tag:aws:autoscaling:groupName,Values={group} "
        "Name=instance-state-name,Values=running --query "
        "'sort_by(Reservations[].Instances[], &LaunchTime)[0].InstanceId' --output text"
    )
    return f"aws ssm start-session --region {region} --target $({first}) {SSM_LOGIN_SHELL}"


class GpuCluster(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: GpuClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:index:GpuCluster", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        invoke = pulumi.InvokeOptions(parent=self)
        ids = args.identity or runtime_identity(name, args.region)
        stack = ids.stack
        identity = aws.get_caller_identity_output(opts=invoke)
        partition = aws.get_partition_output(opts=invoke).partition
        bucket_arn = pulumi.Output.concat("arn:", partition, ":s3:::", args.storage.bucket_name)

        extra_keys = [args.storage.data_key_arn] if args.storage.data_key_arn else []
        self.security = ClusterSecurity(
            child_name(name, "security"),
            ClusterSecurityArgs(
                account_id=identity.account_id,
                partition=partition,
                region=args.region,
                data_bucket_arn=bucket_arn,
                extra_key_arns=extra_keys,
                protect_key=args.storage.create,
                autoscaling=not is_single_instance(args.purchase, args.node_count),
                identity=ids,
                cluster=name,
                secrets_path=secrets_path(ids) if args.secrets else None,
                jobs_path=jobs_path(ids),
                alert_topic=args.cost_controls.alerts,
                image_repositories=args.image_repositories,
                tags=args.tags,
            ),
            child,
        )
        self.secrets = store_secrets(
            name, secrets_path(ids), args.secrets, self.security.key.arn, args.tags, child
        )
        self.jobs_log = self._jobs_log(name, ids, args, child)
        self.node_log, node_log_access = node_log(
            name, ids, self.security.key.arn, self.security.role.name, args.tags, child
        )
        self.network = ClusterNetwork(
            child_name(name, "network"),
            ClusterNetworkArgs(
                layout=args.layout,
                availability_zone=args.availability_zone,
                region=args.region,
                account_id=identity.account_id,
                kms_key_arn=self.security.key.arn,
                nat_gateway=args.nat_gateway,
                public_nodes=args.public_ip,
                ecr_endpoints=bool(args.image_repositories),
                identity=ids,
                existing=args.existing_network,
                tags=args.tags,
            ),
            child,
        )
        self.storage = None
        bucket_name: pulumi.Input[str] = args.storage.bucket_name
        if args.storage.create:
            self.storage = DataStore(
                child_name(name, "data"),
                DataStoreArgs(
                    bucket_name=args.storage.bucket_name,
                    kms_key_arn=self.security.key.arn,
                    account_id=identity.account_id,
                    tags=args.tags,
                ),
                child,
            )
            bucket_name = self.storage.bucket.bucket

        self.ami = resolve_ami(
            AmiChoice(
                architecture=args.facts.architecture,
                image_id=args.ami_id,
                ssm_parameter=args.ami_ssm_parameter,
                release=args.ami_release,
            ),
            invoke,
        )
        self.lustre = None
        lustre_target: pulumi.Input[str] = ""
        if args.fsx is not None:
            self.lustre = ClusterLustre(
                child_name(name, "lustre"),
                ClusterLustreArgs(
                    vpc_id=self.network.vpc_id,
                    subnet_id=self.network.node_subnet_id,
                    node_security_group_id=self.network.node_security_group.id,
                    kms_key_arn=self.security.key.arn,
                    bucket_name=bucket_name,
                    storage_capacity_gib=args.fsx.storage_capacity_gib,
                    throughput_per_tib=args.fsx.throughput_per_tib,
                    tags=args.tags,
                ),
                child,
            )
            lustre_target = self.lustre.mount_target
        job_files = self._job_files(name, ids, args, child, bucket_name)
        gpus_per_node = args.facts.processes_per_node
        # what the all-reduce bench should reach, measured or derived (components/bandwidth.py)
        self.busbw = expected_busbw(args.facts, args.node_count, args.efa)
        self.expected_busbw_gbytes = self.busbw.gbytes_per_s
        busbw_tables = node_count_tables(args.facts, args.efa)
        efa_interfaces = efa_interface_count(nic_layout(args.facts, args.efa))
        self.nodes = GpuNodeGroup(
            child_name(name, "nodes"),
            GpuNodeGroupArgs(
                facts=args.facts,
                node_count=args.node_count,
                efa=args.efa,
                ami_id=self.ami.image_id,
                root_device_name=self.ami.root_device,
                ami_min_root_gib=self.ami.min_root_gib,
                subnet_id=self.network.node_subnet_id,
                security_group_id=self.network.node_security_group.id,
                extra_security_group_ids=(
                    args.existing_network.security_group_ids if args.existing_network else ()
                ),
                instance_profile_arn=self.security.instance_profile.arn,
                kms_key_arn=self.security.key.arn,
                user_data=pulumi.Output.all(bucket_name, lustre_target).apply(
                    lambda values: render_user_data(
                        BootConfig(
                            cluster=name,
                            identity=ids,
                            region=args.region,
                            gpus_per_node=gpus_per_node,
                            nvme_disk_count=args.facts.nvme_disk_count,
                            efa_interfaces=efa_interfaces,
                            bucket=values[0],
                            spot=isinstance(args.purchase, Spot),
                            nvswitch=has_nvswitch(args.facts.instance_type),
                            nvswitch_pci_id=nvswitch_pci_id(args.facts.instance_type),
                            row_remapping=has_row_remapping(args.facts.gpu_model),
                            internet=args.nat_gateway,
                            expected_busbw_table=busbw_tables[0],
                            busbw_pass_table=busbw_tables[1],
                            bench_max_bytes=self.busbw.message_bytes,
                            lustre_target=values[1],
                            secrets_path=secrets_path(ids) if args.secrets else "",
                            jobs_log_group=jobs_log_group(ids),
                            node_log_group=node_log_group(ids),
                            stack=stack,
                            gang_timeout_seconds=args.cost_controls.gang_timeout_minutes * 60,
                            topology=supports_topology(args.facts.instance_type),
                        )
                    )
                ),
                availability_zone=args.availability_zone,
                purchase=args.purchase,
                autoscaling_role_arn=(self.security.autoscaling_role_arn),
                boot_dependencies=[
                    *self.network.boot_dependencies,
                    *self.security.boot_dependencies,
                    *([self.lustre] if self.lustre else []),
                    *self.secrets,
                    *job_files,
                    node_log_access,
                ],
                identity=ids,
                root_volume=args.root_volume,
                public_ip=args.public_ip,
                container_network=args.container_network,
                scale_to_zero=args.cost_controls.idle_stop is not None,
                file_system_id=self.lustre.file_system.id if self.lustre else "",
                tags={**args.tags, CLUSTER_TAG: name},
            ),
            child,
        )
        log_groups = {NODE_LOG: self.node_log, JOBS_LOG: self.jobs_log}
        if getattr(self.nodes, "events_log", None) is not None:  # an Auto Scaling group's
            log_groups[EVENTS_LOG] = self.nodes.events_log
        self.log_metric_filters = log_metric_filters(name, ids, log_groups, child)
        self.cost_controls = StackCostControls(
            child_name(name, "cost"),
            CostControlArgs(
                controls=args.cost_controls,
                stack=stack,
                region=args.region,
                account_id=identity.account_id,
                partition=partition,
                kms_key_arn=self.security.key.arn,
                node_count=args.node_count,
                instance=self.nodes.instance,
                group=self.nodes.group,
                cluster=name,
                identity=ids,
                tags=args.tags,
            ),
            child,
        )
        if self.cost_controls.topic is not None:
            arn = pulumi.Output.all(partition, identity.account_id).apply(
                lambda v: secrets_path_arn(v[0], args.region, v[1], replacements_parameter(ids))
            )
            self._node_alerts_access(name, ids, args, child, self.cost_controls.topic, arn)
            if args.cost_controls.gang_timeout_minutes:
                aws.iam.RolePolicy(
                    child_name(name, "gang-stop-access"),
                    role=self.security.role.name,
                    policy=json.dumps(gang_stop_policy(ids.stack_id)),
                    opts=child,
                )
        self.efa_interfaces_per_node = efa_interfaces
        self.bucket_name = pulumi.Output.from_input(bucket_name)
        self.total_gpus = args.total_gpus
        self.node_group_name = self.nodes.group_name
        self.job_command = torchrun_command()
        outputs: dict[str, pulumi.Input] = {
            "bucketName": self.bucket_name,
            "totalGpus": self.total_gpus,
            "amiId": self.ami.image_id,
            "amiName": self.ami.name,
            "efaInterfacesPerNode": self.efa_interfaces_per_node,
            "expectedBusBandwidthGBps": self.expected_busbw_gbytes,
            "busBandwidthModel": bus_bandwidth_model(self.busbw),
        }
        if self.node_group_name is not None:  # an Auto Scaling group: nodes come and go
            group = self.node_group_name
            self.list_nodes_command = group.apply(lambda g: list_nodes_command(g, args.region))
            self.ssm_commands = group.apply(lambda g: [ssm_first_node_command(g, args.region)])
            outputs |= {"nodeGroupName": group, "listNodesCommand": self.list_nodes_command}
            self.run_everywhere_command = group.apply(
                lambda g: run_on_every_node_command(args.region, "aws:autoscaling:groupName", g)
            )
            self.nccl_test_command = group.apply(
                lambda g: run_on_every_node_command(
                    args.region,
                    "aws:autoscaling:groupName",
                    g,
                    ALLREDUCE_BENCH_PATH,
                    setup=bench_install_command(),
                )
            )
            outputs["runOnEveryNodeCommand"] = self.run_everywhere_command
            outputs["ncclTestCommand"] = self.nccl_test_command
        else:
            self.private_ips = self.nodes.private_ips
            self.ssm_commands = self.nodes.instance_ids.apply(
                lambda ids: [ssm_session_command(i, args.region) for i in ids]
            )
            outputs |= {"nodePrivateIps": self.private_ips, "instanceIds": self.nodes.instance_ids}
        if self.lustre is not None:
            outputs["lustreMountTarget"] = self.lustre.mount_target
        outputs["ssmSessionCommands"] = self.ssm_commands
        outputs["torchrunCommand"] = self.job_command
        self.dashboard, self.dashboard_url = stack_dashboard(
            child_name(name, "dashboard"),
            dashboard_name(ids),
            stack_spec(
                ids,
                args.region,
                f"{args.facts.instance_type} nodes",  # no count: scaling leaves it as it is
                args.cost_controls,
                args.burn,
                efa=args.efa,
                log_metrics=tuple(f.name for f in filters_of(tuple(log_groups))),
            ),
            child,
            None
            if self.node_group_name is None
            else self.node_group_name.apply(lambda group: {"group_name": group}),
        )
        outputs["dashboardUrl"] = self.dashboard_url
        self.register_outputs(outputs)

    def _node_alerts_access(
        self,
        name: str,
        ids: StackIdentity,
        args: GpuClusterArgs,
        child: pulumi.ResourceOptions,
        topic: aws.sns.Topic,
        replacements: pulumi.Output[str],
    ) -> None:
        """The alert topic's ARN where the nodes find it, their right to publish to it, and
        to their replacement counts (policies.node_alerts_policy)."""
        parameter = aws.ssm.Parameter(
            child_name(name, "alerts-topic"),
            name=alerts_topic_parameter(ids),
            type="SecureString",  # as every parameter of the stack: under the cluster key
            key_id=self.security.key.arn,
            value=topic.arn,
            description=f"gpu-cluster {name}: the alert topic the nodes tell",
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            child_name(name, "node-alerts-access"),
            role=self.security.role.name,
            policy=pulumi.Output.all(topic.arn, parameter.arn, replacements).apply(
                lambda arns: json.dumps(node_alerts_policy(*arns))
            ),
            opts=child,
        )

    def _job_files(
        self,
        name: str,
        ids: StackIdentity,
        args: GpuClusterArgs,
        child: pulumi.ResourceOptions,
        bucket_name: pulumi.Input[str],
    ) -> list[pulumi.Resource]:
        """What the jobs need in place before a node boots: the boot bundle in the stack's
        bucket (components/boot_bundle.py), and the bucket's name where `gpuc run` finds it."""
        # after the bucket's own settings (its default KMS encryption) when this stack makes the
        # bucket: an object is encrypted as the bucket says when it is written, never later
        bundle = aws.s3.BucketObjectv2(
            child_name(name, "boot-bundle"),
            bucket=bucket_name,
            key=bundle_key(bundle_folder(ids)),
            content=boot_bundle(),
            content_type="text/x-shellscript",
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(depends_on=[self.storage] if self.storage else [])
            ),
        )
        bucket = aws.ssm.Parameter(
            child_name(name, "job-bucket"),
            name=job_bucket_parameter(ids),
            type="SecureString",  # as every parameter of the stack: under the cluster key
            key_id=self.security.key.arn,
            value=bucket_name,
            description=f"gpu-cluster {name}: the bucket gpuc run puts the jobs' code in",
            tags=args.tags,
            opts=child,
        )
        return [bundle, bucket]

    def _jobs_log(
        self, name: str, ids: StackIdentity, args: GpuClusterArgs, child: pulumi.ResourceOptions
    ) -> aws.cloudwatch.LogGroup:
        """Every node's job output (`gpuc logs`), encrypted with the cluster key, written by
        the nodes' CloudWatch agent only."""
        group = aws.cloudwatch.LogGroup(
            child_name(name, "jobs-log"),
            name=jobs_log_group(ids),
            kms_key_id=self.security.key.arn,
            retention_in_days=JOB_LOG_RETENTION_DAYS,
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(
            child_name(name, "jobs-log-access"),
            role=self.security.role.name,
            policy=group.arn.apply(
                lambda arn: json.dumps(log_group_writer_policy("JobOutput", arn))
            ),
            opts=child,
        )
        return group
