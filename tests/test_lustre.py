"""FSx for Lustre: planned only when asked for, encrypted with the cluster key, linked to the
bucket, with Lustre's ports between nodes and file system; validated; mounted by every node."""

from __future__ import annotations

import json
import platform

import pytest
from boot_fakes import FakeImds
from boot_harness import BootNode
from conftest import ROOT, TRAIN_LIKE, plan_config

from gpu_cluster.components.user_data import BootConfig, decoded_user_data, render_user_data
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.cost.model import estimate_cluster
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation import ResolvedCluster

FSX = {
    **TRAIN_LIKE,
    "gpu-cluster:fsx": json.dumps({"storageCapacityGib": 2400, "throughputPerTib": 500}),
}
FS = "aws:fsx/lustreFileSystem:LustreFileSystem"


def cluster_spec(config: dict[str, str], stack: str) -> ResolvedCluster:
    """load_spec for a compute stack, typed as one."""
    spec = load_spec(config, stack)
    assert isinstance(spec, ResolvedCluster)
    return spec


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
    spec = cluster_spec(FSX, "train")
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
        cluster_spec({**TRAIN_LIKE, "gpu-cluster:fsx": json.dumps(fsx)}, "train")
    (problem,) = error.value.problems
    assert problem.path == f"gpu-cluster:{path}" and problem.fix.endswith(fix)


TARGET = "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abcd"
KEY_URL = "https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc"


@pytest.fixture(scope="module")
def imds():
    with FakeImds() as server:
        yield server


def lustre_node(tmp_path, imds) -> BootNode:
    boot = BootConfig("train", "us-east-1", 8, 8, 4, "b", lustre_target=TARGET)
    node = BootNode(tmp_path, render_user_data(boot), imds)
    assert node.install_only().returncode == 0
    return node


def test_mount_script_installs_the_client_and_mounts(tmp_path, imds):
    node = lustre_node(tmp_path, imds)
    done = node.step("gpu-cluster-lustre")
    assert done.returncode == 0, done.stderr
    # the FSx apt repository, signed by its key, for this Ubuntu release
    assert KEY_URL in (node.harness / "downloads").read_text().splitlines()
    key = node.file("/usr/share/keyrings/fsx-ubuntu-public-key.gpg")
    assert key.read_text() == f"payload of {KEY_URL}\n"
    assert node.read("/etc/apt/sources.list.d/fsxlustreclientrepo.list") == (
        "deb [signed-by=/usr/share/keyrings/fsx-ubuntu-public-key.gpg] "  # the node's path
        "https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu noble main\n"
    )
    apt = [c[1:] for c in node.apt()["calls"] if c[0] == "apt-get"]
    (update,) = [c for c in apt if "update" in c]
    assert apt.index(update) == 0  # the FSx source alone: no route to the archive is needed
    assert "Dir::Etc::sourceparts=-" in update
    assert any(a.endswith("fsxlustreclientrepo.list") for a in update)
    kernel = platform.release()  # uname -r
    installs = [c[-2:] for c in apt if "install" in c]
    # the running kernel's modules, then the meta-package that follows them (it points at
    # this kernel here)
    assert installs == [
        ["install", f"lustre-client-modules-{kernel}"],
        ["install", "lustre-client-modules-aws"],
    ]
    assert all("DPkg::Lock::Timeout=600" in c for c in apt)
    assert node.calls() == [f"mount -t lustre -o relatime,flock {TARGET} {node.file('/fsx')}"]
    assert node.read("/run/gpu-cluster/step-lustre") == "ok\n"
    # the next boot: the client is there and so is the mount
    again = node.step("gpu-cluster-lustre")
    assert again.returncode == 0 and len(node.calls()) == 1
    assert len([c for c in node.apt()["calls"] if c[0] == "apt-get"]) == len(apt)


def test_the_mount_is_retried_and_a_lasting_failure_fails_the_step(tmp_path, imds):
    node = lustre_node(tmp_path / "creating", imds)
    (node.harness / "mount-failures").write_text("5")  # still creating for five tries
    done = node.step("gpu-cluster-lustre")
    assert done.returncode == 0, done.stderr
    assert len(node.calls()) == 6 and node.mounts() == [str(node.file("/fsx"))]
    assert node.read("/run/gpu-cluster/step-lustre") == "ok\n"

    node = lustre_node(tmp_path / "gone", imds)
    (node.harness / "mount-failures").write_text("6")
    done = node.step("gpu-cluster-lustre")
    assert done.returncode == 1  # the unit fails, and the health check sees why
    assert len(node.calls()) == 6 and node.mounts() == []
    assert node.read("/run/gpu-cluster/step-lustre") == "failed: mount\n"
    assert f"could not mount {TARGET}" in done.stderr


def test_no_client_for_the_kernel_is_the_reported_failure(tmp_path, imds):
    node = lustre_node(tmp_path, imds)
    node.set_apt(available=["lustre-client-modules-aws"])  # no modules built for this kernel
    done = node.step("gpu-cluster-lustre")
    assert done.returncode == 1 and node.calls() == []  # no mount without the client
    result = node.read("/run/gpu-cluster/step-lustre").strip()
    assert result == f"failed: client-for-{platform.release()}"


def test_the_meta_package_is_left_out_when_it_follows_another_kernel(tmp_path, imds):
    """lustre-client-modules-aws follows the newest kernel the FSx repository has: installed
    on an older kernel it brings another kernel's modules (and that kernel)."""
    node = lustre_node(tmp_path, imds)
    (node.harness / "lustre-aws-kernel").write_text("6.17.0-1019-aws\n")
    done = node.step("gpu-cluster-lustre")
    assert done.returncode == 0, done.stderr
    installs = [c for c in node.apt()["calls"] if c[0] == "apt-get" and "install" in c]
    assert [c[-1] for c in installs] == [f"lustre-client-modules-{platform.release()}"]
    assert "follows another kernel" in done.stderr
