"""The NVMe scratch step on a booted node (tests/boot_harness.py): the Deep Learning AMI's LVM
volume present or not, 0, 1 and 8 disks, a reboot with the array under another md number, a
failing mdadm. mdadm, mkfs.xfs, blkid and mount are the harness's recording stubs; the step's
own logic runs for real under the node's temporary root."""

from __future__ import annotations

from pathlib import Path

import pytest
from boot_fakes import FakeImds, write_executable
from boot_harness import BootNode

from gpu_cluster.components.user_data import BootConfig, render_user_data

TRAIN = BootConfig("train", "us-east-1", 8, 8, 4, "b")
DISK = "dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS{:02d}"
UUID = "0b7e-uuid"  # what the harness's blkid answers


@pytest.fixture(scope="module")
def imds():
    with FakeImds() as server:
        yield server


def installed(tmp_path: Path, imds: FakeImds, nvme_disks: int = 8) -> BootNode:
    boot = BootConfig("train", "us-east-1", 8, nvme_disks, 4, "b")
    node = BootNode(tmp_path, render_user_data(boot), imds)
    done = node.install_only()
    assert done.returncode == 0, done.stderr
    return node


def attach(node: BootNode, disks: int) -> list[Path]:
    paths = [node.file(DISK.format(index)) for index in range(disks)]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    return paths


def scratch(node: BootNode) -> tuple[str, Path]:
    """Run the step; its log, and /mnt/nvme on the node."""
    done = node.step("gpu-cluster-scratch")
    assert done.returncode == 0, done.stderr  # never fatal
    return done.stderr, node.file("/mnt/nvme")


def result(node: BootNode) -> str:
    return node.read("/run/gpu-cluster/step-scratch").strip()


def mounted_by_uuid(node: BootNode) -> str:
    return f"mount -o noatime,nofail UUID={UUID} {node.file('/mnt/nvme')}"


def test_the_deep_learning_ami_volume_is_used_as_is(tmp_path, imds):
    node = installed(tmp_path, imds)
    attach(node, 8)  # the AMI's dlami-nvme service striped them already
    volume = node.file("/opt/dlami/nvme")
    volume.mkdir(parents=True)
    (node.harness / "mounts").write_text(f"{volume}\n")
    log, mount = scratch(node)
    assert node.calls() == []  # no teardown of the AMI's LVM volume, no mdadm, no mkfs
    assert mount.is_symlink() and mount.resolve() == volume.resolve()
    assert "ready at /mnt/nvme" in log and result(node) == "ok"
    assert volume.stat().st_mode & 0o7777 == 0o1777


def test_files_of_an_earlier_root_disk_fallback_are_kept_aside(tmp_path, imds):
    node = installed(tmp_path, imds)
    old = node.file("/mnt/nvme")
    old.mkdir(parents=True)
    (old / "checkpoint.pt").write_text("weights")  # a boot without the volume wrote here
    volume = node.file("/opt/dlami/nvme")
    volume.mkdir(parents=True)
    (node.harness / "mounts").write_text(f"{volume}\n")
    log, mount = scratch(node)
    assert mount.is_symlink() and mount.resolve() == volume.resolve()
    (aside,) = old.parent.glob("nvme.root-disk.*")
    assert (aside / "checkpoint.pt").read_text() == "weights"
    assert "moved the old /mnt/nvme folder aside" in log and result(node) == "ok"


def test_eight_disks_without_the_ami_volume_become_one_named_raid0_mounted_by_uuid(tmp_path, imds):
    node = installed(tmp_path, imds)
    disks = attach(node, 8)
    log, mount = scratch(node)
    array = str(node.file("/dev/md/gpuc-scratch"))
    calls = node.calls()
    (create,) = [c for c in calls if c.startswith("mdadm --create")]
    assert create.startswith(
        f"mdadm --create {array} --name=gpuc-scratch --level=0 --raid-devices=8"
    )
    assert create.split()[-8:] == [str(d) for d in disks]
    assert f"mkfs.xfs -f -L gpuc-scratch {array}" in calls
    assert calls[-1] == mounted_by_uuid(node)
    assert "8 disk(s)" in log and result(node) == "ok"
    assert not mount.is_symlink()  # the array is mounted at /mnt/nvme itself


def test_one_disk_is_formatted_and_mounted_without_an_array(tmp_path, imds):
    node = installed(tmp_path, imds)
    (disk,) = attach(node, 1)
    scratch(node)
    calls = node.calls()
    assert not any(c.startswith("mdadm") for c in calls)
    assert f"mkfs.xfs -f -L gpuc-scratch {disk}" in calls
    assert mounted_by_uuid(node) in calls and result(node) == "ok"


def test_a_reboot_reuses_the_array_whatever_its_md_number(tmp_path, imds):
    node = installed(tmp_path, imds)
    attach(node, 8)
    md127 = node.file("/dev/md127")  # the kernel assembled the array again, under another number
    md127.touch()
    node.file("/dev/md/gpuc-scratch").parent.mkdir(parents=True)
    node.file("/dev/md/gpuc-scratch").symlink_to(md127)  # its name still points at it
    (node.harness / "fstype").write_text("xfs\n")  # the data from before the reboot
    scratch(node)
    calls = node.calls()
    assert not any(c.startswith(("mdadm", "mkfs.xfs")) for c in calls)
    assert mounted_by_uuid(node) in calls and result(node) == "ok"


def test_no_disks_or_a_failing_mdadm_leave_a_folder_and_boot_goes_on(tmp_path, imds):
    node = installed(tmp_path / "no-disks", imds)  # 8 disks expected, none showed up
    log, mount = scratch(node)
    assert mount.is_dir() and not mount.is_symlink() and "no NVMe instance-store disk" in log
    assert node.calls() == [] and result(node).startswith("failed: NVMe not set up")

    node = installed(tmp_path / "mdadm-fails", imds)
    attach(node, 8)
    write_executable(
        node.bin / "mdadm",
        '#!/bin/bash\necho "mdadm $*" >> "$HARNESS/calls"\n'
        'echo "mdadm: cannot open /dev/nvme1n1: Device or resource busy" >&2\nexit 1\n',
    )
    log, mount = scratch(node)
    calls = node.calls()
    assert any(c.startswith("mdadm --create") for c in calls)
    assert not any(c.startswith(("mkfs.xfs", "mount")) for c in calls)
    assert mount.is_dir() and mount.stat().st_mode & 0o7777 == 0o1777
    assert result(node).startswith("failed: NVMe not set up")


def test_a_type_without_instance_store_uses_the_root_volume(tmp_path, imds):
    node = installed(tmp_path, imds, nvme_disks=0)
    log, mount = scratch(node)
    assert node.calls() == [] and mount.is_dir() and "no instance store" in log
    assert result(node) == "ok: root volume"


def heredoc_free(script: str) -> str:
    """The user data's own lines: every installed file's heredoc body left out."""
    lines, inside = [], None
    for line in script.splitlines():
        if inside is not None:
            inside = None if line == inside else inside
            continue
        if "<<'" in line:
            inside = line.split("<<'")[1].split("'")[0]
        lines.append(line)
    return "\n".join(lines)


def test_user_data_never_lets_scratch_stop_discovery(tmp_path, imds):
    script = render_user_data(TRAIN)
    own = heredoc_free(script)
    assert "set -uo pipefail" in own and "set -e" not in own  # no errexit for the bootstrap
    assert 'systemctl start "$1.service" ||' in own  # every boot unit is non-fatal
    assert own.index("boot_unit gpu-cluster-scratch ") < own.index("boot_unit gpu-cluster-nodes ")
    assert "/etc/fstab" not in script  # mounted by the unit on every boot, by UUID
    # A whole boot where the scratch step dies: the node list is still built after it.
    node = BootNode(tmp_path, script, imds)
    attach(node, 8)
    write_executable(node.bin / "mdadm", "#!/bin/bash\nkill -9 $PPID\n")
    node.answer_aws(
        [
            ("aws:autoscaling:groupName", "None"),
            (
                "--filters",
                f"2026-12-01T08:00:00+00:00\t{imds.metadata['instance-id']}\t10.0.1.23\tNone",
            ),
        ]
    )
    done = node.boot()
    assert done.returncode == 0, done.stderr
    assert "gpu-cluster-scratch failed" in done.stderr
    node.wait_unit("gpu-cluster-nodes", "active", "failed")  # started in the background
    runs = {run["unit"]: run["rc"] for run in node.systemd()["runs"]}
    assert runs["gpu-cluster-scratch.service"] != 0
    assert runs["gpu-cluster-nodes.service"] == 0
    assert node.read("/etc/gpu-cluster/nodes").split() == [
        "0",
        "10.0.1.23",
        imds.metadata["instance-id"],
    ]
