"""FSx for Lustre: planned only when asked for, encrypted with the cluster key, linked to the
bucket, with Lustre's ports between nodes and file system; validated; mounted by every node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from conftest import ROOT, TRAIN_LIKE, plan_config, write_stubs

from components.user_data import boot_script, decoded_user_data
from infra.config import load_spec
from infra.cost.model import estimate_cluster
from infra.errors import ConfigError
from infra.stack_files import load_stack_config

FSX = {
    **TRAIN_LIKE,
    "gpu-cluster:fsx": json.dumps({"storageCapacityGib": 2400, "throughputPerTib": 500}),
}
FS = "aws:fsx/lustreFileSystem:LustreFileSystem"


@pytest.fixture(scope="module")
def fsx_plan():
    plan = plan_config(FSX, stack="train")
    assert plan.error is None, plan.error
    return plan


def test_no_file_system_unless_asked_for(train_plan):
    assert not [r for r in train_plan.resources if r.type.startswith("aws:fsx/")]
    dev = plan_config(load_stack_config("dev", ROOT), stack="dev")
    assert not [r for r in dev.resources if r.type.startswith("aws:fsx/")]


def test_file_system_encrypted_with_the_cluster_key_in_the_node_subnet(fsx_plan):
    (fs,) = fsx_plan.of_type(FS)
    key = fsx_plan.state(fsx_plan.named("train-security-key"))["arn"]
    subnet = fsx_plan.state(fsx_plan.named("train-network-private"))["id"]
    assert fs.inputs["kmsKeyId"] == key
    assert fs.inputs["deploymentType"] == "PERSISTENT_2"
    assert fs.inputs["storageCapacity"] == 2400 and fs.inputs["perUnitStorageThroughput"] == 500
    assert fs.inputs["subnetIds"] == subnet


def test_only_checkpoints_and_outputs_go_back_to_the_bucket(fsx_plan):
    """Datasets are read-only to nodes; FSx exports with its own role, so /datasets must not
    export. Folders and prefixes are siblings: FSx refuses overlapping associations."""
    associations = {
        r.inputs["fileSystemPath"]: r
        for r in fsx_plan.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    }
    bucket = fsx_plan.outputs["bucketName"]
    assert sorted(associations) == ["/checkpoints", "/datasets", "/outputs"]
    for path, association in associations.items():
        assert association.inputs["dataRepositoryPath"] == f"s3://{bucket}{path}/"
        policies = association.inputs["s3"]
        assert policies["autoImportPolicy"]["events"] == ["NEW", "CHANGED", "DELETED"]
        exported = policies.get("autoExportPolicy", {}).get("events")
        assert exported == (None if path == "/datasets" else ["NEW", "CHANGED"])


def test_lustre_ports_open_between_nodes_and_file_system_only(fsx_plan):
    (fs,) = fsx_plan.of_type(FS)
    (fsx_sg,) = fs.inputs["securityGroupIds"]
    nodes_sg = fsx_plan.state(fsx_plan.named("train-network-nodes-sg"))["id"]
    rules = [
        r
        for r in fsx_plan.resources
        if r.type.startswith("aws:vpc/securityGroup") and r.name.startswith("train-lustre")
    ]
    ports = {(r.inputs["fromPort"], r.inputs["toPort"]) for r in rules}
    assert ports == {(988, 988), (1018, 1023)}
    assert all(r.inputs["ipProtocol"] == "tcp" and "cidrIpv4" not in r.inputs for r in rules)
    ingress_sources = {r.inputs["referencedSecurityGroupId"] for r in rules if "Ingress" in r.type}
    assert ingress_sources == {nodes_sg, fsx_sg}
    node_egress = [r for r in rules if r.inputs["securityGroupId"] == nodes_sg]
    assert {r.inputs["referencedSecurityGroupId"] for r in node_egress} == {fsx_sg}


def test_nodes_mount_it_and_wait_for_it(fsx_plan):
    (template,) = fsx_plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    script = decoded_user_data(template.inputs["userData"])
    (fs,) = fsx_plan.of_type(FS)
    state = fsx_plan.state(fs)
    target = f"{state['dnsName']}@tcp:/{state['mountName']}"
    assert f"LUSTRE_TARGET={target}" in script
    (group,) = fsx_plan.of_type("aws:autoscaling/group:Group")
    # depending on the component means depending on everything in it
    assert fs.urn in group.dependencies
    for folder in ("datasets", "checkpoints", "outputs"):
        assert fsx_plan.named(f"train-lustre-{folder}").urn in group.dependencies
    assert fsx_plan.outputs["lustre"].startswith(target)


def test_the_data_key_lets_fsx_reach_the_bucket_only_through_s3(fsx_plan):
    policy = json.loads(fsx_plan.named("train-security-key").inputs["policy"])
    (statement,) = [s for s in policy["Statement"] if s["Sid"] == "AllowFsxLustreDataRepositories"]
    assert statement["Condition"]["StringEquals"] == {
        "kms:CallerAccount": "123456789012",
        "kms:ViaService": "s3.us-east-1.amazonaws.com",
    }
    assert statement["Condition"]["ArnLike"]["aws:PrincipalArn"].endswith(
        "/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"
    )


def test_cost_includes_the_file_system():
    spec = load_spec(FSX, "train")
    (line,) = [x for x in estimate_cluster(spec).lines if x.item.startswith("FSx")]
    assert line.usd_per_hour == pytest.approx(2400 * 0.29 / 730)
    assert line.always_on


@pytest.mark.parametrize(
    ("fsx", "path", "fix"),
    [
        ({"deploymentType": "SCRATCH_2"}, "fsx.deploymentType", "fsx.deploymentType PERSISTENT_2"),
        ({"storageCapacityGib": 3000}, "fsx.storageCapacityGib", "fsx.storageCapacityGib 2400"),
        ({"throughputPerTib": 200}, "fsx.throughputPerTib", "fsx.throughputPerTib 250"),
    ],
)
def test_fsx_settings_are_checked(fsx, path, fix):
    with pytest.raises(ConfigError) as error:
        load_spec({**TRAIN_LIKE, "gpu-cluster:fsx": json.dumps(fsx)}, "train")
    (problem,) = error.value.problems
    assert problem.path == f"gpu-cluster:{path}" and problem.fix.endswith(fix)


def test_mount_script_installs_the_client_and_mounts(tmp_path):
    etc, bin_dir = tmp_path / "etc", tmp_path / "bin"
    etc.mkdir()
    bin_dir.mkdir()
    (etc / "cluster.env").write_text(
        f"LUSTRE_TARGET=fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd\nLUSTRE_MOUNT={tmp_path}/fsx\n"
    )
    calls = tmp_path / "calls"
    write_stubs(
        bin_dir,
        {
            "modinfo": "exit 0\n",  # the client is already installed
            "mountpoint": "exit 1\n",
            "mount": f'echo "mount $*" >> {calls}\n',
        },
    )
    script = tmp_path / "lustre.sh"
    script.write_text(boot_script("gpu-cluster-lustre.sh"))
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPUC_ETC": str(etc)}
    result = subprocess.run(
        [shutil.which("bash"), str(script)], env=env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    assert calls.read_text().strip() == (
        f"mount -t lustre -o relatime,flock fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd "
        f"{tmp_path}/fsx"
    )
