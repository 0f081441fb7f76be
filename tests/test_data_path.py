"""The data-bucket mount step on a booted node (tests/boot_harness.py): Mountpoint for Amazon
S3 from its release bucket through the harness's download wrapper and fake apt-get, mount-s3
and mountpoint as the harness's recording stubs."""

from __future__ import annotations

import shutil

import pytest
from boot_fakes import FakeImds
from boot_harness import BootNode
from conftest import TRAIN_LIKE, plan_config

from gpu_cluster.components.user_data import BootConfig, render_user_data

RELEASE = "https://s3.amazonaws.com/mountpoint-s3-release/latest/x86_64/mount-s3.deb"


@pytest.fixture(scope="module")
def imds():
    with FakeImds() as server:
        yield server


def data_step(
    tmp_path, imds, *, installed=False, internet=True, mounted=False, blocked=(), scratch="ok"
):
    """Install the node, run gpu-cluster-data after the scratch step's result (``scratch``:
    "ok" on the NVMe volume, as the unit ordering has it); the node and the step's log."""
    boot = BootConfig("train", "us-east-1", 8, 8, 4, "gpuc-data-1", internet=internet)
    node = BootNode(tmp_path, render_user_data(boot), imds)
    assert node.install_only().returncode == 0
    node.file("/run/gpu-cluster").mkdir(parents=True, exist_ok=True)
    node.file("/run/gpu-cluster/step-scratch").write_text(f"{scratch}\n")
    node.unreachable(*blocked)
    if installed:  # the AMI has Mountpoint already
        shutil.copy(node.bin / "mount-s3.installed", node.bin / "mount-s3")
    if mounted:
        (node.harness / "mounts").write_text(f"{node.file('/mnt/data')}\n")
    done = node.step("gpu-cluster-data")
    assert done.returncode == 0, done.stderr  # never fatal
    return node, done.stderr


def mounts_s3(node: BootNode) -> list[str]:
    return [c for c in node.calls() if c.startswith("mount-s3")]


def apt_calls(node: BootNode) -> list[list[str]]:
    return [c[1:] for c in node.apt().get("calls", []) if c[0] == "apt-get"]


def downloads(node: BootNode) -> list[str]:
    path = node.harness / "downloads"
    return path.read_text().splitlines() if path.exists() else []


def result(node: BootNode) -> str:
    return node.read("/run/gpu-cluster/step-data").strip()


def test_mounts_the_bucket_read_only_with_its_cache_on_nvme(tmp_path, imds):
    node, log = data_step(tmp_path, imds, installed=True)
    (mount,) = mounts_s3(node)
    assert mount == (
        "mount-s3 --read-only --allow-other --cache /mnt/nvme/s3-cache --region us-east-1 "
        f"gpuc-data-1 {node.file('/mnt/data')}"
    )
    assert node.file("/mnt/nvme/s3-cache").is_dir()
    assert node.read("/etc/fuse.conf") == "user_allow_other\n"
    assert "s3://gpuc-data-1 at /mnt/data" in log and result(node) == "ok"
    assert downloads(node) == [] and apt_calls(node) == []  # nothing installed


@pytest.mark.parametrize(
    "scratch", ["ok: root volume", "failed: NVMe not set up; /mnt/nvme is on the root volume"]
)
def test_without_nvme_scratch_the_mount_caches_nothing_on_the_root_volume(tmp_path, imds, scratch):
    """Mountpoint's own cache bound leaves only 5% of the disk free; on the root volume the
    cache would fill the disk the agents and checkpoints need (and gp3 reads slower than S3)."""
    node, log = data_step(tmp_path, imds, installed=True, scratch=scratch)
    (mount,) = mounts_s3(node)
    assert "--cache" not in mount.split()
    assert mount.startswith("mount-s3 --read-only --allow-other --region us-east-1 gpuc-data-1")
    assert "(no cache)" in log and result(node) == "ok"


def test_the_plan_says_where_the_read_cache_is():
    with_nvme = plan_config({**TRAIN_LIKE}, "train")
    assert "read cache on /mnt/nvme" in with_nvme.outputs["dataPath"]
    arm = {"gpu-cluster:instanceType": "g5g.xlarge", "gpu-cluster:nodes": "1"}  # no NVMe
    without = plan_config({**TRAIN_LIKE, **arm}, "arm")
    assert without.error is None, without.error
    assert "no read cache: no NVMe" in without.outputs["dataPath"]


def test_installs_mountpoint_from_its_release_bucket_first(tmp_path, imds):
    node, log = data_step(tmp_path, imds)
    assert downloads(node) == [RELEASE]
    update, install = apt_calls(node)
    # a fresh index first: Ubuntu 24.04's libfuse2t64 is found only with one
    assert update[-1] == "update" and "DPkg::Lock::Timeout=600" in update
    assert install[-2] == "install" and install[-1].endswith("/mount-s3.deb")
    assert "DPkg::Lock::Timeout=600" in install and "-y" in install
    assert {"mount-s3", "libfuse2t64"} <= set(node.apt()["installed"])
    assert len(mounts_s3(node)) == 1  # then mounted with what it installed
    assert "installed Mountpoint" in log and result(node) == "ok"


@pytest.mark.parametrize("internet", [True, False])
def test_without_a_route_to_the_release_boot_goes_on(tmp_path, imds, internet):
    if internet:  # a NAT gateway, but the release bucket does not answer
        node, log = data_step(tmp_path, imds, blocked=[RELEASE])
        assert downloads(node) == [RELEASE] and f"could not download {RELEASE}" in log
        assert result(node) == "failed: download"
    else:  # no NAT gateway: nothing outside the VPC is tried
        node, log = data_step(tmp_path, imds, internet=False)
        assert downloads(node) == []
        assert "no NAT gateway" in log and result(node) == "skipped"
    assert apt_calls(node) == [] and mounts_s3(node) == []
    assert not (node.bin / "mount-s3").exists()


def test_an_existing_mount_is_left_alone(tmp_path, imds):
    node, log = data_step(tmp_path, imds, installed=True, mounted=True)
    assert mounts_s3(node) == []
    assert "already at /mnt/data" in log and result(node) == "ok"
