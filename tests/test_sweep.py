"""`gpuc sweep` against moto: a cluster's worth of tagged resources, a partial teardown, then
sweep finds exactly the rest (nothing untagged, nothing of another stack), deletes it, and a
second sweep finds nothing."""

from __future__ import annotations

import json
import os
import socket
from typing import Any

import boto3
import pytest
from conftest import ROOT, stack_names
from moto import mock_aws

from gpu_cluster.components.names import budget_name, dashboard_name, schedule_description
from gpu_cluster.components.naming import cluster_tags
from gpu_cluster.infra import stack_files as cli_stack_files
from gpu_cluster.infra.aws.sweep import Sweeper
from gpu_cluster.infra.aws.sweep_kinds import Leftover, kind_name
from gpu_cluster.infra.cli import main
from gpu_cluster.infra.outcome import FINDINGS

REGION = "us-east-1"


def tag_list(stack: str, region: str = REGION) -> list[dict[str, str]]:
    """The tags the program gives every resource of `stack` (its stack id among them)."""
    return [{"Key": k, "Value": v} for k, v in cluster_tags(stack_names(stack, region)).items()]


def tags(stack: str, kind: str) -> list[dict]:
    return [{"ResourceType": kind, "Tags": tag_list(stack)}]


def build_cluster(stack: str) -> dict[str, str]:
    """What `pulumi up` of a stack creates that can outlive a broken `pulumi destroy`."""
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16", TagSpecifications=tags(stack, "vpc"))["Vpc"]
    subnet = ec2.create_subnet(
        VpcId=vpc["VpcId"], CidrBlock="10.42.0.0/24", TagSpecifications=tags(stack, "subnet")
    )["Subnet"]
    group = ec2.create_security_group(
        GroupName=f"{stack}-nodes",
        Description="nodes",
        VpcId=vpc["VpcId"],
        TagSpecifications=tags(stack, "security-group"),
    )["GroupId"]
    address = ec2.allocate_address(Domain="vpc", TagSpecifications=tags(stack, "elastic-ip"))
    nat = ec2.create_nat_gateway(
        SubnetId=subnet["SubnetId"],
        AllocationId=address["AllocationId"],
        TagSpecifications=tags(stack, "natgateway"),
    )["NatGateway"]["NatGatewayId"]
    endpoint = ec2.create_vpc_endpoint(
        VpcId=vpc["VpcId"],
        ServiceName=f"com.amazonaws.{REGION}.ssm",
        VpcEndpointType="Interface",
        SubnetIds=[subnet["SubnetId"]],
        TagSpecifications=tags(stack, "vpc-endpoint"),
    )["VpcEndpoint"]["VpcEndpointId"]
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    instance = ec2.run_instances(
        ImageId=image,
        InstanceType="p4d.24xlarge",
        MinCount=1,
        MaxCount=1,
        SubnetId=subnet["SubnetId"],
        TagSpecifications=tags(stack, "instance"),
    )["Instances"][0]["InstanceId"]
    volume = ec2.create_volume(
        AvailabilityZone=f"{REGION}a", Size=500, TagSpecifications=tags(stack, "volume")
    )["VolumeId"]
    snapshot = ec2.create_snapshot(VolumeId=volume, TagSpecifications=tags(stack, "snapshot"))[
        "SnapshotId"
    ]
    interface = ec2.create_network_interface(
        SubnetId=subnet["SubnetId"], TagSpecifications=tags(stack, "network-interface")
    )["NetworkInterface"]["NetworkInterfaceId"]
    template = ec2.create_launch_template(
        LaunchTemplateName=f"{stack}-nodes",
        LaunchTemplateData={"ImageId": image},
        TagSpecifications=tags(stack, "launch-template"),
    )["LaunchTemplate"]["LaunchTemplateId"]
    logs = boto3.client("logs", region_name=REGION)
    logs.create_log_group(
        logGroupName=f"/aws/events/gpu-cluster/{stack}-nodes",
        tags=cluster_tags(stack_names(stack, REGION)),
    )
    return {
        "vpc": vpc["VpcId"],
        "subnet": subnet["SubnetId"],
        "group": group,
        "address": address["AllocationId"],
        "nat": nat,
        "endpoint": endpoint,
        "instance": instance,
        "volume": volume,
        "template": template,
        "snapshot": snapshot,
        "interface": interface,
    }


def sweeper(stack: str) -> Sweeper:
    return Sweeper(
        ec2=boto3.client("ec2", region_name=REGION),
        autoscaling=boto3.client("autoscaling", region_name=REGION),
        logs=boto3.client("logs", region_name=REGION),
        region=REGION,
        stack=stack,
    )


def sweeper_with_skips(stack: str) -> list[tuple[str, str]]:
    """What this endpoint could not list because it has no such API (moto, never AWS)."""
    probe = sweeper(stack)
    probe.find()
    assert probe.skipped == []  # nothing failed that AWS itself could answer
    return probe.unsupported


@mock_aws
def test_sweep_finds_exactly_what_a_partial_teardown_left_and_deletes_it(capsys):
    ours = build_cluster("train")
    theirs = build_cluster("other")
    ec2 = boto3.client("ec2", region_name=REGION)
    # a partial `pulumi destroy`: the endpoint and the template went, the rest stayed
    ec2.delete_vpc_endpoints(VpcEndpointIds=[ours["endpoint"]])
    ec2.delete_launch_template(LaunchTemplateId=ours["template"])
    found = sweeper("train").find()
    assert {(f.kind, f.resource_id) for f in found} == {
        ("instance", ours["instance"]),
        ("NAT gateway", ours["nat"]),
        ("Elastic IP", ours["address"]),
        ("EBS volume", ours["volume"]),
        ("EBS snapshot", ours["snapshot"]),
        ("network interface", ours["interface"]),
        ("security group", ours["group"]),
        ("log group", "/aws/events/gpu-cluster/train-nodes"),
        ("VPC", ours["vpc"]),
        ("subnet", ours["subnet"]),
    }
    assert sum(f.usd_per_hour for f in found) > 21  # the p4d node dominates
    # moto has no placement-group API: sweep says this endpoint cannot list it
    assert any(kind == "placement groups" for kind, _ in sweeper_with_skips("train"))
    assert main(["sweep", "--stack", "train"]) == FINDINGS  # leftovers are a finding
    out = capsys.readouterr().out
    assert "never swept" in out and "gpuc sweep --stack train --region us-east-1 --delete" in out
    assert main(["sweep", "--stack", "train", "--delete"]) == 2  # not confirmed: nothing gone
    assert len(sweeper("train").find()) == len(found)
    assert main(["sweep", "--stack", "train", "--delete", "--yes"]) == 0
    capsys.readouterr()
    left = [f for f in sweeper("train").find() if f.usd_per_hour > 0]
    assert left == []
    assert main(["sweep", "--stack", "train"]) == 0
    out = capsys.readouterr().out
    assert "nothing tagged gpu-cluster:stack-id=gpu-cluster/train/us-east-1" in out
    # the other stack's resources are untouched
    other = {f.resource_id for f in sweeper("other").find()}
    assert {theirs["instance"], theirs["nat"], theirs["volume"]} <= other


def test_status_and_sweep_end_to_end_against_a_moto_server(moto_server):
    """`gpuc` as a subprocess, its clients pointed at the server by AWS_ENDPOINT_URL."""
    from conftest import gpuc_at

    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_server)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.run_instances(
        ImageId=image,
        InstanceType="p4d.24xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=tags("train", "instance"),
    )
    ec2.create_volume(
        AvailabilityZone=f"{REGION}a", Size=500, TagSpecifications=tags("train", "volume")
    )

    def gpuc(*args: str):
        return gpuc_at(moto_server, *args)

    status = gpuc("status", "--stack", "train")
    assert status.returncode == 0, status.stderr
    assert "p4d.24xlarge" in status.stdout and "burning about $" in status.stdout
    sweep = gpuc("sweep", "--stack", "train")
    assert "instance" in sweep.stdout and "EBS volume" in sweep.stdout
    deleted = gpuc("sweep", "--stack", "train", "--delete", "--yes")
    assert deleted.returncode == 0, deleted.stdout + deleted.stderr
    again = gpuc("sweep", "--stack", "train", "--json")
    billing = [row for row in __import__("json").loads(again.stdout) if row["usdPerHour"] > 0]
    assert billing == []


def test_a_leftover_lustre_file_system_is_found_priced_and_deleted():
    from botocore.stub import Stubber

    fsx = boto3.client("fsx", region_name=REGION)
    stub = Stubber(fsx)
    system = {
        "FileSystemId": "fs-0123456789abcdef0",
        "Lifecycle": "AVAILABLE",
        "StorageCapacity": 2400,
        "LustreConfiguration": {"PerUnitStorageThroughput": 500},
        "Tags": tag_list("train"),
    }
    other = {
        **system,
        "FileSystemId": "fs-0fedcba9876543210",
        "Tags": tag_list("other"),
    }
    stub.add_response("describe_file_systems", {"FileSystems": [system, other]})
    stub.add_response(
        "delete_file_system",
        {"FileSystemId": "fs-0123456789abcdef0", "Lifecycle": "DELETING"},
        {"FileSystemId": "fs-0123456789abcdef0"},
    )
    with stub:
        probe = Sweeper(None, None, None, REGION, "train", fsx=fsx)
        (found,) = probe.file_systems()
        assert found.resource_id == "fs-0123456789abcdef0"
        assert found.usd_per_hour == pytest.approx(2400 * 0.29 / 730)
        probe.delete(found)
    stub.assert_no_pending_responses()


def _quiet_port() -> tuple[int, socket.socket]:
    """A TCP port that accepts connections and never answers (a black-holed endpoint)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    return listener.getsockname()[1], listener


def _closed_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("endpoint", ["closed", "silent"])
def test_sweep_with_the_endpoint_down_fails_and_claims_nothing(endpoint, tmp_path):
    import subprocess
    import sys

    listener = None
    if endpoint == "closed":
        port = _closed_port()
    else:
        port, listener = _quiet_port()
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    done = subprocess.run(
        [sys.executable, "-m", "gpu_cluster.infra.cli", "sweep", "--stack", "train", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    connections = 0
    if listener is not None:
        listener.setblocking(False)
        while True:  # every connection the sweep opened waits in the backlog, unanswered
            try:
                listener.accept()[0].close()
            except BlockingIOError:
                break
            connections += 1
        listener.close()
    assert done.returncode == 4, done.stderr
    assert "nothing tagged" not in done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    (details,) = error["problems"]
    every_kind = [kind_name(lister) for lister in full_sweeper("train").listers()]
    assert details["notChecked"] == every_kind and len(every_kind) == 31
    # bounded: the first call's 3 attempts (infra/aws: connect 5 s, read 10 s), not once per
    # kind and not botocore's default 60 s reads (the run's 120 s timeout catches those)
    assert 1 <= connections <= 3 if endpoint == "silent" else connections == 0, connections


@mock_aws
def test_sweep_and_status_look_in_the_stacks_own_region(monkeypatch, capsys):
    from gpu_cluster.infra import cli

    real = cli_stack_files.load_stack_config
    monkeypatch.setattr(
        "gpu_cluster.infra.stack_files.load_stack_config",
        lambda stack, root=None: {"aws:region": "eu-west-1"} if stack == "euro" else real(stack),
    )
    ec2 = boto3.client("ec2", region_name="eu-west-1")
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    tags = tag_list("euro", "eu-west-1")
    ec2.run_instances(
        ImageId=image,
        InstanceType="g5.xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )
    assert cli.main(["status", "--stack", "euro"]) == 0
    assert "g5.xlarge" in capsys.readouterr().out
    assert cli.main(["sweep", "--stack", "euro"]) == FINDINGS
    out = capsys.readouterr().out
    assert "in eu-west-1" in out and "--region eu-west-1 --delete" in out
    assert cli.stack_region("euro", "us-west-2") == "us-west-2"  # --region wins


def build_controls(stack: str) -> dict[str, str]:
    """What a stack's network, serving, cost controls and identity leave if `pulumi destroy`
    stops half way (names as Pulumi gives them: logical name, dash, random suffix)."""
    stack_tags = tag_list(stack)
    ec2 = boto3.client("ec2", region_name=REGION)
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16", TagSpecifications=tags(stack, "vpc"))["Vpc"]
    subnets = [
        ec2.create_subnet(
            VpcId=vpc["VpcId"],
            CidrBlock=cidr,
            AvailabilityZone=zone,
            TagSpecifications=tags(stack, "subnet"),
        )["Subnet"]["SubnetId"]
        for cidr, zone in (("10.42.0.0/24", f"{REGION}a"), ("10.42.1.0/24", f"{REGION}b"))
    ]
    table = ec2.create_route_table(VpcId=vpc["VpcId"], TagSpecifications=tags(stack, "route-table"))
    ec2.associate_route_table(RouteTableId=table["RouteTable"]["RouteTableId"], SubnetId=subnets[0])
    gateway = ec2.create_internet_gateway(TagSpecifications=tags(stack, "internet-gateway"))
    gateway_id = gateway["InternetGateway"]["InternetGatewayId"]
    ec2.attach_internet_gateway(InternetGatewayId=gateway_id, VpcId=vpc["VpcId"])
    elbv2 = boto3.client("elbv2", region_name=REGION)
    balancer = elbv2.create_load_balancer(
        Name=f"gpuc-{stack}", Subnets=subnets, Tags=stack_tags, Type="application"
    )["LoadBalancers"][0]["LoadBalancerArn"]
    target_group = elbv2.create_target_group(
        Name=f"gpuc-{stack}-8000", Protocol="HTTP", Port=8000, VpcId=vpc["VpcId"], Tags=stack_tags
    )["TargetGroups"][0]["TargetGroupArn"]
    elbv2.create_listener(
        LoadBalancerArn=balancer,
        Protocol="HTTP",
        Port=80,
        DefaultActions=[{"Type": "forward", "TargetGroupArn": target_group}],
    )
    iam = boto3.client("iam", region_name=REGION)
    trust = json.dumps(
        {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "ec2.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
    )
    role = f"{stack}-security-node-role-1a2b3c4"
    iam.create_role(RoleName=role, AssumeRolePolicyDocument=trust, Tags=stack_tags)
    access = {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*"}],
    }
    iam.put_role_policy(RoleName=role, PolicyName="access", PolicyDocument=json.dumps(access))
    managed = iam.create_policy(PolicyName=f"{stack}-managed", PolicyDocument=json.dumps(access))
    iam.attach_role_policy(RoleName=role, PolicyArn=managed["Policy"]["Arn"])
    profile = f"{stack}-security-node-profile-5d6e7f8"
    iam.create_instance_profile(InstanceProfileName=profile, Tags=stack_tags)
    iam.add_role_to_instance_profile(InstanceProfileName=profile, RoleName=role)
    sns = boto3.client("sns", region_name=REGION)
    topic = sns.create_topic(Name=f"{stack}-cost-alerts-9a8b7c6", Tags=stack_tags)["TopicArn"]
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    cloudwatch.put_metric_alarm(
        AlarmName=f"{stack}-cost-idle-stop-0f1e2d3",
        MetricName="CPUUtilization",
        Namespace="AWS/EC2",
        Statistic="Average",
        Period=300,
        EvaluationPeriods=1,
        Threshold=5,
        ComparisonOperator="LessThanThreshold",
        Tags=stack_tags,
    )
    events = boto3.client("events", region_name=REGION)
    rule = f"{stack}-nodes-group-events-4c5d6e7"
    events.put_rule(Name=rule, EventPattern='{"source": ["aws.autoscaling"]}', Tags=stack_tags)
    events.put_targets(Rule=rule, Targets=[{"Id": "log", "Arn": topic}])
    scheduler = boto3.client("scheduler", region_name=REGION)
    schedule = f"{stack}-cost-schedule-stop-8e9f0a1"
    scheduler.create_schedule(
        Name=schedule,
        Description=schedule_description(f"{stack}-cost", stack_names(stack), "stop at 20:00"),
        ScheduleExpression="cron(0 20 * * ? *)",
        FlexibleTimeWindow={"Mode": "OFF"},
        Target={"Arn": topic, "RoleArn": f"arn:aws:iam::123456789012:role/{role}"},
    )
    account = boto3.client("sts", region_name=REGION).get_caller_identity()["Account"]
    boto3.client("budgets", region_name=REGION).create_budget(
        AccountId=account,
        Budget={
            "BudgetName": budget_name(stack_names(stack)),
            "BudgetLimit": {"Amount": "100", "Unit": "USD"},
            "TimeUnit": "MONTHLY",
            "BudgetType": "COST",
        },
    )
    kms = boto3.client("kms", region_name=REGION)
    key = kms.create_key(Tags=[{"TagKey": t["Key"], "TagValue": t["Value"]} for t in stack_tags])
    key_id = key["KeyMetadata"]["KeyId"]
    kms.create_alias(AliasName=f"alias/gpu-cluster/{stack}-security", TargetKeyId=key_id)
    return {
        "vpc": vpc["VpcId"],
        "balancer": balancer,
        "target group": target_group,
        "role": role,
        "profile": profile,
        "topic": topic,
        "rule": rule,
        "schedule": f"default/{schedule}",
        "key": key_id,
    }


def full_sweeper(stack: str) -> Sweeper:
    from gpu_cluster.infra.cli import SWEPT_SERVICES

    clients: dict[str, Any] = {
        service: boto3.client(service, region_name=REGION) for service in SWEPT_SERVICES
    }
    return Sweeper(
        **clients,
        region=REGION,
        stack=stack,
    )


@mock_aws
def test_sweep_finds_the_network_controls_and_identity_a_stack_left_and_deletes_them(capsys):
    ours, theirs = build_controls("train"), build_controls("other")
    probe = full_sweeper("train")
    found = probe.find()
    assert probe.skipped == [], probe.skipped
    kinds = {f.kind for f in found}
    assert {
        "load balancer",
        "target group",
        "subnet",
        "route table",
        "internet gateway",
        "VPC",
        "schedule",
        "alarm",
        "event rule",
        "topic",
        "budget",
        "instance profile",
        "IAM role",
        "KMS key",
    } <= kinds, kinds
    ids = {f.resource_id for f in found}
    assert {ours[k] for k in ("vpc", "balancer", "role", "profile", "topic", "rule", "key")} <= ids
    assert ours["schedule"] in ids and budget_name(stack_names("train")) in ids
    assert not {theirs[k] for k in theirs} & ids  # nothing of the other stack
    balancer = next(f for f in found if f.kind == "load balancer")
    assert balancer.usd_per_hour == pytest.approx(0.0225)
    assert main(["sweep", "--stack", "train", "--delete", "--yes"]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert full_sweeper("train").find() == []
    kms = boto3.client("kms", region_name=REGION)
    assert kms.describe_key(KeyId=ours["key"])["KeyMetadata"]["KeyState"] == "PendingDeletion"
    assert kms.describe_key(KeyId=theirs["key"])["KeyMetadata"]["KeyState"] == "Enabled"
    left = {f.resource_id for f in full_sweeper("other").find()}
    assert {theirs["vpc"], theirs["role"], theirs["key"], theirs["schedule"]} <= left


@mock_aws
def test_the_stacks_dashboard_is_swept_and_the_same_stack_of_another_region_keeps_its_own(
    capsys,
):
    """Dashboards carry no tags and are account-wide (PutDashboard): matched by the name the
    program gives them (components/names.py), which holds the region."""
    cloudwatch = boto3.client("cloudwatch", region_name=REGION)
    ours = dashboard_name(stack_names("train"))
    west = dashboard_name(stack_names("train", region="eu-west-1"))
    assert ours != west
    for name in (ours, west, dashboard_name(stack_names("train-b"))):
        cloudwatch.put_dashboard(DashboardName=name, DashboardBody='{"widgets": []}')
    (found,) = [f for f in full_sweeper("train").find() if f.kind == "dashboard"]
    assert found.resource_id == ours
    assert found.usd_per_hour * 730 == pytest.approx(3.0)
    assert main(["sweep", "--stack", "train", "--delete", "--yes"]) == 0, capsys.readouterr()
    left = {d["DashboardName"] for d in cloudwatch.list_dashboards()["DashboardEntries"]}
    assert ours not in left and west in left and len(left) == 2
    assert [f for f in full_sweeper("train").find() if f.kind == "dashboard"] == []


def test_sweep_never_touches_the_data_stack(capsys):
    assert main(["sweep", "--stack", "data"]) == 3
    err = capsys.readouterr().err
    assert "is the data stack" in err and "never touches it" in err


@mock_aws
def test_a_protected_load_balancer_and_groups_that_name_each_other_are_deleted(capsys):
    """End to end against moto (which enforces neither refusal: the two stub tests below
    encode AWS's)."""
    ours = build_controls("train")
    ec2, elbv2 = boto3.client("ec2", region_name=REGION), boto3.client("elbv2", region_name=REGION)
    elbv2.modify_load_balancer_attributes(
        LoadBalancerArn=ours["balancer"],
        Attributes=[{"Key": "deletion_protection.enabled", "Value": "true"}],
    )
    alb, nodes = (
        ec2.create_security_group(
            GroupName=f"train-{role}",
            Description=role,
            VpcId=ours["vpc"],
            TagSpecifications=tags("train", "security-group"),
        )["GroupId"]
        for role in ("alb", "nodes")
    )
    ec2.authorize_security_group_ingress(
        GroupId=nodes,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 8000,
                "ToPort": 8000,
                "UserIdGroupPairs": [{"GroupId": alb}],
            }
        ],
    )
    ec2.authorize_security_group_egress(
        GroupId=alb,
        IpPermissions=[
            {
                "IpProtocol": "tcp",
                "FromPort": 8000,
                "ToPort": 8000,
                "UserIdGroupPairs": [{"GroupId": nodes}],
            }
        ],
    )
    assert main(["sweep", "--stack", "train", "--delete", "--yes"]) == 0, capsys.readouterr()
    assert full_sweeper("train").find() == []


@mock_aws
def test_a_cluster_never_takes_the_schedules_of_a_cluster_whose_name_it_starts():
    build_controls("train-b")
    kinds = {f.kind for f in full_sweeper("train").find()}
    assert "schedule" not in kinds and "budget" not in kinds


@mock_aws
def test_an_account_without_budgets_is_checked_not_skipped():
    probe = full_sweeper("train")
    assert list(probe.cost_budgets()) == []


def stubbed(service: str):
    from botocore.stub import Stubber

    api = boto3.client(
        service, region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    return api, Stubber(api)


def test_a_key_this_caller_cannot_read_is_not_the_stacks_and_does_not_stop_the_listing():
    kms, stub = stubbed("kms")
    stub.add_response(
        "list_keys", {"Keys": [{"KeyId": "other"}, {"KeyId": "ours"}], "Truncated": False}
    )
    stub.add_client_error(
        "list_resource_tags", "AccessDeniedException", expected_params={"KeyId": "other"}
    )
    stub.add_response(
        "list_resource_tags",
        {"Tags": [{"TagKey": t["Key"], "TagValue": t["Value"]} for t in tag_list("train")]},
        {"KeyId": "ours"},
    )
    stub.add_response("describe_key", {"KeyMetadata": {"KeyId": "ours", "KeyState": "Enabled"}})
    with stub:
        probe = Sweeper(None, None, None, REGION, "train", kms=kms)
        assert [f.resource_id for f in probe.kms_keys()] == ["ours"]


def test_a_service_linked_role_deletion_that_fails_is_reported_not_claimed():
    iam, stub = stubbed("iam")
    stub.add_response("delete_service_linked_role", {"DeletionTaskId": "task-1"})
    stub.add_response("get_service_linked_role_deletion_status", {"Status": "IN_PROGRESS"})
    stub.add_response(
        "get_service_linked_role_deletion_status",
        {"Status": "FAILED", "Reason": {"Reason": "a group still uses the role"}},
    )
    role = "AWSServiceRoleForAutoScaling_train-security"
    with stub:
        probe = Sweeper(None, None, None, REGION, "train", iam=iam, poll_delays=(0,))
        leftover = Leftover("IAM role", role, "/aws-service-role/autoscaling.amazonaws.com/", 0.0)
        (failure,) = probe.delete_all([leftover])
    assert "a group still uses the role" in failure[1]


def test_a_subnet_still_holding_released_interfaces_is_deleted_once_they_are_gone():
    ec2, stub = stubbed("ec2")
    stub.add_client_error("delete_subnet", "DependencyViolation")
    stub.add_response("delete_subnet", {})
    with stub:
        probe = Sweeper(ec2, None, None, REGION, "train", poll_delays=(0, 0))
        assert probe.delete_all([Leftover("subnet", "subnet-0123456789abcdef0", "", 0.0)]) == []
    stub.assert_no_pending_responses()


def test_errors_name_the_iam_action_that_grants_the_call():
    from gpu_cluster.infra.aws import call

    elbv2, stub = stubbed("elbv2")
    stub.add_client_error("delete_load_balancer", "AccessDenied")
    with stub, pytest.raises(Exception) as raised:
        call(elbv2, "elbv2", "DeleteLoadBalancer", LoadBalancerArn="arn:aws:elasticloadbalancing:x")
    assert "elasticloadbalancing:DeleteLoadBalancer" in str(raised.value)


def test_deletion_protection_is_turned_off_before_the_load_balancer_is_deleted():
    """AWS refuses DeleteLoadBalancer while deletion_protection.enabled is true (moto does not),
    so the stub expects the attribute change first."""
    elbv2, stub = stubbed("elbv2")
    arn = (
        "arn:aws:elasticloadbalancing:us-east-1:123456789012:loadbalancer/app/gpuc-train/"
        "50dc6c495c0c9188"
    )
    stub.add_response(
        "modify_load_balancer_attributes",
        {"Attributes": []},
        {
            "LoadBalancerArn": arn,
            "Attributes": [{"Key": "deletion_protection.enabled", "Value": "false"}],
        },
    )
    stub.add_response("delete_load_balancer", {}, {"LoadBalancerArn": arn})
    with stub:
        probe = Sweeper(None, None, None, REGION, "train", elbv2=elbv2)
        probe.delete(Leftover("load balancer", arn, "gpuc-train", 0.0225))
    stub.assert_no_pending_responses()


def test_rules_naming_another_group_are_revoked_before_the_groups_are_deleted():
    """AWS refuses DeleteSecurityGroup for a group another group's rule names (moto does not)."""
    ec2, stub = stubbed("ec2")
    alb, nodes = "sg-0aaaaaaaaaaaaaaaa", "sg-0bbbbbbbbbbbbbbbb"
    stub.add_response(
        "describe_security_group_rules",
        {
            "SecurityGroupRules": [
                {
                    "SecurityGroupRuleId": "sgr-01",
                    "GroupId": nodes,
                    "IsEgress": False,
                    "ReferencedGroupInfo": {"GroupId": alb},
                },
                {
                    "SecurityGroupRuleId": "sgr-02",
                    "GroupId": alb,
                    "IsEgress": True,
                    "ReferencedGroupInfo": {"GroupId": nodes},
                },
                {
                    "SecurityGroupRuleId": "sgr-03",
                    "GroupId": alb,
                    "IsEgress": False,
                    "CidrIpv4": "0.0.0.0/0",
                },
            ]
        },
    )
    stub.add_response(
        "revoke_security_group_ingress",
        {"Return": True},
        {"GroupId": nodes, "SecurityGroupRuleIds": ["sgr-01"]},
    )
    stub.add_response(
        "revoke_security_group_egress",
        {"Return": True},
        {"GroupId": alb, "SecurityGroupRuleIds": ["sgr-02"]},
    )
    stub.add_response("delete_security_group", {}, {"GroupId": alb})
    stub.add_response("delete_security_group", {}, {"GroupId": nodes})
    with stub:
        probe = Sweeper(ec2, None, None, REGION, "train")
        leftovers = [Leftover("security group", g, "", 0.0) for g in (alb, nodes)]
        assert probe.delete_all(leftovers) == []
    stub.assert_no_pending_responses()


@mock_aws
def test_a_sweep_in_one_region_leaves_the_same_stack_of_another_region_alone():
    """IAM roles, instance profiles, service-linked roles and budgets are account-wide: the
    live `train` of us-east-1 carries the stack tag `train` too. Sweeping `train` in eu-west-1
    matches by the stack id (project/stack/region), so it finds the leftovers of eu-west-1's
    `train` and none of us-east-1's; a role of an older gpu-cluster (no stack id) is not
    claimed either."""
    live = build_controls("train")  # us-east-1, running
    iam = boto3.client("iam", region_name=REGION)
    trust = iam.get_role(RoleName=live["role"])["Role"]["AssumeRolePolicyDocument"]
    west = tag_list("train", "eu-west-1")
    iam.create_role(
        RoleName="train-security-node-role-9z8y7x6",
        AssumeRolePolicyDocument=json.dumps(trust),
        Tags=west,
    )
    iam.create_role(
        RoleName="train-security-node-role-0ld0ld0",
        AssumeRolePolicyDocument=json.dumps(trust),
        Tags=[{"Key": "gpu-cluster:stack", "Value": "train"}],
    )
    from gpu_cluster.infra.cli import SWEPT_SERVICES

    clients: dict[str, Any] = {
        service: boto3.client(service, region_name="eu-west-1") for service in SWEPT_SERVICES
    }
    probe = Sweeper(
        **clients,
        region="eu-west-1",
        stack="train",
    )
    leftovers = probe.find()
    found = {(f.kind, f.resource_id) for f in leftovers}
    assert ("IAM role", "train-security-node-role-9z8y7x6") in found
    ids = {resource_id for _, resource_id in found}
    assert not {live["role"], live["profile"], "train-security-node-role-0ld0ld0"} & ids
    assert budget_name(stack_names("train")) not in ids  # us-east-1's budget
    probe.delete_all(leftovers)
    assert iam.get_role(RoleName=live["role"])["Role"]["RoleName"] == live["role"]
    names = {r["RoleName"] for r in iam.list_roles()["Roles"]}
    assert "train-security-node-role-9z8y7x6" not in names


def test_a_reservation_within_its_commitment_is_reported_and_never_cancelled():
    """A future-dated reservation (`gpuc capacity-reservation`) carries the stack's tags; within
    its commitment cancelling needs a paid cancellation quote (EC2 API
    CancelCapacityReservation), so the sweep names it and its end, and makes no cancel call; an
    uncommitted active one is cancelled as before."""
    from datetime import UTC, datetime, timedelta

    from botocore.stub import Stubber

    from gpu_cluster.infra.aws.sweep import COMMITTED

    ec2 = boto3.client("ec2", region_name=REGION)
    until = datetime.now(UTC) + timedelta(days=20)
    answer = {
        "CapacityReservations": [
            {
                "CapacityReservationId": "cr-0aaaaaaaaaaaaaaa1",
                "InstanceType": "g5.12xlarge",
                "TotalInstanceCount": 2,
                "State": "active",
                "CommitmentInfo": {"CommittedInstanceCount": 2, "CommitmentEndDate": until},
            },
            {
                "CapacityReservationId": "cr-0bbbbbbbbbbbbbbb2",
                "InstanceType": "g5.12xlarge",
                "TotalInstanceCount": 1,
                "State": "active",
            },
        ]
    }
    with Stubber(ec2) as stub:
        stub.add_response("describe_capacity_reservations", answer)
        probe = Sweeper(ec2, None, None, REGION, "train")
        found = list(probe.reservations())
        stub.add_response(
            "cancel_capacity_reservation",
            {"Return": True},
            {"CapacityReservationId": "cr-0bbbbbbbbbbbbbbb2"},
        )
        failures = probe.delete_all(found)
        stub.assert_no_pending_responses()  # one cancel call only: the uncommitted one
    kinds = {f.resource_id: f.kind for f in found}
    assert kinds == {
        "cr-0aaaaaaaaaaaaaaa1": COMMITTED,
        "cr-0bbbbbbbbbbbbbbb2": "capacity reservation",
    }
    committed = next(f for f in found if f.kind == COMMITTED)
    assert f"committed until {until:%Y-%m-%d}" in committed.detail
    ((left, why),) = failures
    assert left.resource_id == "cr-0aaaaaaaaaaaaaaa1" and "cancellation" in why
