"""`gpuc preflight` checks against moto (EC2, STS, S3) and botocore's Stubber for Service Quotas,
which moto serves only for VPC quotas. Every check passes and fails on purpose."""

from __future__ import annotations

import json

import boto3
import pytest
from botocore.stub import Stubber
from conftest import TRAIN_LIKE
from moto import mock_aws

from gpu_cluster.components.dlami import dlami_image_name
from gpu_cluster.infra.aws import preflight
from gpu_cluster.infra.aws.preflight import FAIL, PASS, Clients, run_preflight
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.validation import ResolvedCluster


def cluster_spec(config: dict[str, str], stack: str) -> ResolvedCluster:
    """load_spec for a compute stack, typed as one."""
    spec = load_spec(config, stack)
    assert isinstance(spec, ResolvedCluster)
    return spec


def quotas_client(vcpus: float, code: str = "L-417A185B"):
    api = boto3.client("service-quotas", region_name="us-east-1")
    stub = Stubber(api)
    stub.add_response(
        "get_service_quota",
        {"Quota": {"QuotaCode": code, "Value": vcpus, "ServiceCode": "ec2"}},
        {"ServiceCode": "ec2", "QuotaCode": code},
    )
    stub.activate()
    return api


def clients(quota: float, monkeypatch, register_ami: bool = True) -> Clients:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    if register_ami:  # an x86_64 image under the release's name (moto keeps the base's arch)
        base = next(
            i
            for i in ec2.describe_images(Owners=["amazon"])["Images"]
            if i.get("Architecture") == "x86_64"
        )
        builder = ec2.run_instances(ImageId=base["ImageId"], MinCount=1, MaxCount=1)
        instance_id = builder["Instances"][0]["InstanceId"]
        ec2.create_image(InstanceId=instance_id, Name=dlami_image_name("x86_64"))
        ec2.terminate_instances(InstanceIds=[instance_id])
    # moto registers images under the caller's account, not Amazon's
    monkeypatch.setattr(preflight, "dlami", lambda: {"owner": "self"})
    return Clients(
        ec2=ec2,
        sts=boto3.client("sts", region_name="us-east-1"),
        quotas=quotas_client(quota),
        s3=boto3.client("s3", region_name="us-east-1"),
    )


def checks_of(config: dict, aws: Clients) -> dict:
    return {c.name: c for c in run_preflight(cluster_spec(config, "train"), aws)}


CREATE = {**TRAIN_LIKE, "gpu-cluster:storage": json.dumps({"source": "create"})}


@mock_aws
def test_a_ready_account_passes_every_check(monkeypatch):
    checks = checks_of(CREATE, clients(1000, monkeypatch))
    assert {name: c.status for name, c in checks.items()} == {
        "credentials": PASS,
        "offering": PASS,
        "vCPU quota": PASS,
        "AMI": PASS,
        "launch (dry run)": PASS,
        "bucket name": PASS,
    }
    assert checks["credentials"].value == "123456789012"
    assert checks["vCPU quota"].detail == (
        "'Running On-Demand P instances' is 1000 vCPUs; 0 run now, the cluster needs 384"
    )
    assert checks["bucket name"].detail == "gpuc-train-123456789012-us-east-1 is free"


@mock_aws
def test_a_zone_without_the_type_fails_and_names_the_zones_that_have_it(monkeypatch):
    from dataclasses import replace

    aws = clients(1000, monkeypatch, register_ami=False)
    spec = cluster_spec(
        {
            **TRAIN_LIKE,
            "gpu-cluster:instanceType": "p4de.24xlarge",
            "gpu-cluster:availabilityZone": "us-east-1b",
        },
        "train",
    )
    assert preflight.check_offering(spec, aws).status == PASS
    # the same stack in a zone whose offerings (in this account) lack the type
    check = preflight.check_offering(replace(spec, availability_zone="us-east-1a"), aws)
    assert check.status == FAIL
    assert check.detail == (
        "p4de.24xlarge is not offered in us-east-1a in this account; it is in: "
        "us-east-1b, us-east-1c"
    )
    assert check.fix == "pulumi config set availabilityZone us-east-1b"


@mock_aws
def test_a_small_quota_fails_with_what_to_request(monkeypatch):
    check = checks_of(TRAIN_LIKE, clients(96, monkeypatch))["vCPU quota"]
    assert check.status == FAIL
    assert "needs 384" in check.detail and "request at least 384 vCPUs" in check.fix
    assert "L-417A185B" in check.fix


@mock_aws
def test_a_missing_ami_fails_and_the_dry_run_is_skipped(monkeypatch):
    checks = checks_of(TRAIN_LIKE, clients(1000, monkeypatch, register_ami=False))
    assert checks["AMI"].status == FAIL and "no image" in checks["AMI"].detail
    assert checks["launch (dry run)"].status == "warn"


def test_dry_run_errors_become_advice():
    class Refusing:
        def run_instances(self, **kwargs):
            from botocore.exceptions import ClientError

            assert kwargs["DryRun"] is True
            raise ClientError(
                {"Error": {"Code": "InsufficientInstanceCapacity", "Message": "none"}},
                "RunInstances",
            )

    spec = cluster_spec(TRAIN_LIKE, "train")
    aws = Clients(ec2=Refusing(), sts=None, quotas=None, s3=None)
    check = preflight.check_dry_run(spec, aws, "ami-0123456789abcdef0")
    assert (
        check.status == FAIL
        and check.detail == "RunInstances refused: InsufficientInstanceCapacity"
    )
    assert "capacity reservation or a Capacity Block" in check.fix


@pytest.mark.parametrize(("error", "status"), [("404", PASS), ("403", FAIL)])
def test_bucket_name_taken_elsewhere_fails(error, status):
    class Bucket:
        def head_bucket(self, Bucket):
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": error, "Message": ""}}, "HeadBucket")

    spec = cluster_spec(CREATE, "train")
    check = preflight.check_bucket(spec, Clients(None, None, None, Bucket()), "123456789012")
    assert check is not None and check.status == status


def spot_clients(score: int) -> Clients:
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(ec2)
    stub.add_response(
        "describe_spot_price_history",
        {
            "SpotPriceHistory": [
                {
                    "AvailabilityZone": "us-east-1a",
                    "SpotPrice": "7.88",
                    "InstanceType": "p4d.24xlarge",
                },
                {
                    "AvailabilityZone": "us-east-1b",
                    "SpotPrice": "2.47",
                    "InstanceType": "p4d.24xlarge",
                },
            ]
        },
    )
    stub.add_response(
        "get_spot_placement_scores",
        {
            "SpotPlacementScores": [
                {"Region": "us-east-1", "AvailabilityZoneId": "use1-az6", "Score": score}
            ]
        },
        {
            "InstanceTypes": ["p4d.24xlarge"],
            "TargetCapacity": 4,
            "SingleAvailabilityZone": True,
            "RegionNames": ["us-east-1"],
        },
    )
    stub.add_response(
        "describe_availability_zones",
        {"AvailabilityZones": [{"ZoneName": "us-east-1a", "ZoneId": "use1-az6"}]},
    )
    stub.activate()
    return Clients(ec2=ec2, sts=None, quotas=None, s3=None)


@pytest.mark.parametrize(("score", "status"), [(9, PASS), (2, "warn")])
def test_spot_prices_per_zone_and_the_placement_score(score, status):
    spec = cluster_spec({**TRAIN_LIKE, "gpu-cluster:purchaseOption": "spot"}, "train")
    check = preflight.check_spot(spec, spot_clients(score))
    assert check is not None and check.status == status
    assert check.detail == (
        f"prices: us-east-1a $7.88, us-east-1b $2.47; placement score in us-east-1a: {score}"
    )


def test_no_spot_check_for_on_demand():
    no_clients = Clients(None, None, None, None)
    assert preflight.check_spot(cluster_spec(TRAIN_LIKE, "train"), no_clients) is None


def test_gpuc_preflight_end_to_end_against_a_moto_server(moto_server, tmp_path):
    """`gpuc` as a subprocess, its boto3 clients pointed at the server by AWS_ENDPOINT_URL."""
    import os
    import shutil
    import subprocess
    import sys

    from conftest import ROOT

    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": moto_server,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "PYTHONPATH": str(ROOT),
    }
    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=moto_server)
    base = next(
        i
        for i in ec2.describe_images(Owners=["amazon"])["Images"]
        if i.get("Architecture") == "x86_64"
    )
    project = tmp_path / "project"
    (project / "stacks").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", project)
    train = (ROOT / "stacks" / "Pulumi.train.yaml").read_text()
    train += f"  gpu-cluster:ami:\n    id: {base['ImageId']}\n    architecture: x86_64\n"
    (project / "stacks" / "Pulumi.train.yaml").write_text(train)
    result = subprocess.run(
        [sys.executable, "-m", "gpu_cluster.infra.cli", "preflight", "--stack", "train"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = result.stdout
    assert "Preflight for stack 'train' (us-east-1, us-east-1a):" in out, result.stderr
    assert "PASS  credentials        account 123456789012" in out
    assert "PASS  offering           p4d.24xlarge is offered in us-east-1a" in out
    assert "WARN  vCPU quota" in out  # moto serves no EC2 quotas: reported, not guessed
    assert f"PASS  AMI                {base['ImageId']}" in out
    assert "PASS  launch (dry run)   RunInstances would be allowed" in out
    assert result.returncode == 0, out + result.stderr


@mock_aws
def test_an_ami_from_ssm_resolves_through_the_parameter(monkeypatch):
    aws = clients(1000, monkeypatch)
    aws.ssm = boto3.client("ssm", region_name="us-east-1")
    image = aws.ec2.describe_images(Owners=["self"])["Images"][0]["ImageId"]
    aws.ssm.put_parameter(Name="/team/gpu-ami", Value=image, Type="String")
    ok = preflight.check_ami(
        cluster_spec(
            {**TRAIN_LIKE, "gpu-cluster:ami": json.dumps({"ssmParameter": "/team/gpu-ami"})},
            "train",
        ),
        aws,
    )
    assert ok.status == PASS and ok.value == image
    missing = preflight.check_ami(
        cluster_spec(
            {**TRAIN_LIKE, "gpu-cluster:ami": json.dumps({"ssmParameter": "/team/none"})}, "train"
        ),
        aws,
    )
    assert missing.status == FAIL
    assert missing.detail == "SSM parameter /team/none does not resolve (ParameterNotFound)"


def test_missing_credentials_fail_the_first_check():
    sts = boto3.client("sts", region_name="us-east-1")
    stub = Stubber(sts)
    stub.add_client_error("get_caller_identity", "ExpiredToken", "The security token expired")
    stub.activate()
    quotas = boto3.client("service-quotas", region_name="us-east-1")
    Stubber(quotas).activate()  # no response queued: the quota check reports, not crashes
    aws = Clients(ec2=_Nothing(), sts=sts, quotas=quotas, s3=None)
    checks = {c.name: c for c in run_preflight(cluster_spec(TRAIN_LIKE, "train"), aws)}
    assert checks["credentials"].status == FAIL
    assert "sts:GetCallerIdentity failed: ExpiredToken" in checks["credentials"].detail


class _Nothing:
    """An EC2 client whose every call fails the way an unreachable endpoint does."""

    def __getattr__(self, name):
        from gpu_cluster.infra.errors import AwsError

        def fail(*args, **kwargs):
            raise AwsError("ec2 unreachable", "EndpointConnectionError")

        if name == "waiter_names":
            return []
        return fail


def test_a_reservation_that_does_not_fit_fails_preflight():
    ec2 = boto3.client("ec2", region_name="us-east-1")
    stub = Stubber(ec2)
    stub.add_response(
        "describe_capacity_reservations",
        {
            "CapacityReservations": [
                {
                    "CapacityReservationId": "cr-0123456789abcdef0",
                    "InstanceType": "p4d.24xlarge",
                    "AvailabilityZone": "us-east-1a",
                    "TotalInstanceCount": 2,
                    "AvailableInstanceCount": 2,
                    "State": "active",
                    "ReservationType": "default",
                    "InstancePlatform": "Linux/UNIX",
                }
            ]
        },
    )
    stub.activate()
    spec = cluster_spec(
        {
            **TRAIN_LIKE,
            "gpu-cluster:purchaseOption": "capacity-reservation",
            "gpu-cluster:capacityReservation": json.dumps({"id": "cr-0123456789abcdef0"}),
        },
        "train",
    )
    check = preflight.check_reservation(spec, Clients(ec2=ec2, sts=None, quotas=None, s3=None))
    assert check is not None and check.status == FAIL
    assert check.detail == "the capacity reservation cr-0123456789abcdef0 holds 2 instances"
    assert check.fix == "pulumi config set nodes 2"


def test_preflight_checks_what_a_data_stack_can_get_wrong(capsys):
    from moto import mock_aws

    from gpu_cluster.infra.cli import main

    with mock_aws():
        assert main(["preflight", "--stack", "data", "--json"]) == 0
        checks = {c["name"]: c for c in json.loads(capsys.readouterr().out)}
        assert checks["credentials"]["status"] == "pass"
        bucket = checks["bucket name"]
        assert bucket["status"] == "pass" and "is free" in bucket["detail"]
        name = bucket["detail"].split()[0]
        assert name == "gpuc-data-123456789012-us-east-1"
        boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=name)
        assert main(["preflight", "--stack", "data"]) == 0
        out = capsys.readouterr().out
        assert "already exists in this account" in out and "pulumi import" in out
