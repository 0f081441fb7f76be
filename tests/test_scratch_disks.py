"""The NVMe scratch script against fake device lists: the Deep Learning AMI's LVM volume present
or not, 0, 1 and 8 disks, a reboot with the array under another md number, a failing mdadm.
System tools are stubs that log their calls; the script's own logic runs for real."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import write_stubs

from components.user_data import BootConfig, boot_script, render_user_data

BASH = shutil.which("bash")
STUBS = {
    # mountpoint -q PATH: mounted when listed in $STATE/mounts
    "mountpoint": 'grep -qxF "$2" "$STATE/mounts"\n',
    "mount": 'echo "mount $*" >> "$STATE/calls"; echo "${@: -1}" >> "$STATE/mounts"\n',
    "mkfs.xfs": 'echo "mkfs.xfs $*" >> "$STATE/calls"\n',
    "blkid": (
        'case "$*" in\n'
        '  *TYPE*) cat "$STATE/fstype" 2>/dev/null;;\n'
        "  *UUID*) echo 0b7e4e2a-uuid;;\n"
        "esac\n"
    ),
    "mdadm": (
        'echo "mdadm $*" >> "$STATE/calls"\n'
        'case "$1" in\n'
        '  --assemble) exit "$(cat "$STATE/assemble_rc" 2>/dev/null || echo 1)";;\n'
        '  --create) exit "$(cat "$STATE/create_rc" 2>/dev/null || echo 0)";;\n'
        "esac\n"
    ),
}


@pytest.fixture
def node(tmp_path):
    state, bin_dir, disks = tmp_path / "state", tmp_path / "bin", tmp_path / "disks"
    for folder in (state, bin_dir, disks, tmp_path / "etc"):
        folder.mkdir()
    (state / "mounts").write_text("")
    (state / "calls").write_text("")
    write_stubs(bin_dir, STUBS)
    script = tmp_path / "scratch.sh"
    script.write_text(boot_script("gpu-cluster-scratch.sh"))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STATE": str(state),
        "GPUC_ETC": str(tmp_path / "etc"),
        "GPUC_DLAMI_NVME": str(tmp_path / "opt-dlami-nvme"),
        "GPUC_DISK_GLOB": str(disks / "nvme-Amazon_EC2_NVMe_Instance_Storage_*"),
        "GPUC_ARRAY": str(tmp_path / "md-gpuc-scratch"),
    }
    return tmp_path, script, env


def boot(node, disks: int, nvme_disks: int | None = None) -> tuple[str, list[str], Path]:
    root, script, env = node
    for index in range(disks):
        (root / "disks" / f"nvme-Amazon_EC2_NVMe_Instance_Storage_AWS{index:02d}").touch()
    scratch = root / "mnt-nvme"
    (root / "etc" / "cluster.env").write_text(
        f"NVME_DISKS={disks if nvme_disks is None else nvme_disks}\nSCRATCH={scratch}\n"
    )
    assert BASH is not None
    result = subprocess.run([BASH, str(script)], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr  # never fatal
    calls = (root / "state" / "calls").read_text().splitlines()
    return result.stdout, calls, scratch


def test_the_deep_learning_ami_volume_is_used_as_is(node):
    root = node[0]
    (root / "opt-dlami-nvme").mkdir()
    (root / "state" / "mounts").write_text(f"{root / 'opt-dlami-nvme'}\n")
    out, calls, scratch = boot(node, disks=8)
    assert calls == []  # no teardown of the AMI's LVM volume, no mdadm, no mkfs
    assert scratch.is_symlink() and scratch.resolve() == (root / "opt-dlami-nvme").resolve()
    assert "ready at" in out


def test_eight_disks_without_the_ami_volume_become_one_named_raid0_mounted_by_uuid(node):
    out, calls, scratch = boot(node, disks=8)
    array = str(node[0] / "md-gpuc-scratch")
    create = next(c for c in calls if c.startswith("mdadm --create"))
    assert create.startswith(
        f"mdadm --create {array} --name=gpuc-scratch --level=0 --raid-devices=8"
    )
    assert create.count("nvme-Amazon_EC2_NVMe_Instance_Storage_") == 8
    assert f"mkfs.xfs -f -L gpuc-scratch {array}" in calls
    assert f"mount -o noatime,nofail UUID=0b7e4e2a-uuid {scratch}" in calls
    assert "8 disk(s)" in out


def test_one_disk_is_formatted_and_mounted_without_an_array(node):
    _, calls, scratch = boot(node, disks=1)
    assert not any(c.startswith("mdadm") for c in calls)
    disk = node[0] / "disks" / "nvme-Amazon_EC2_NVMe_Instance_Storage_AWS00"
    assert f"mkfs.xfs -f -L gpuc-scratch {disk}" in calls
    assert f"mount -o noatime,nofail UUID=0b7e4e2a-uuid {scratch}" in calls


def test_a_reboot_reuses_the_array_whatever_its_md_number(node):
    root = node[0]
    (root / "md127").touch()  # the kernel assembled the array again, under another number
    (root / "md-gpuc-scratch").symlink_to(root / "md127")  # its name still points at it
    (root / "state" / "fstype").write_text("xfs\n")  # the data from before the reboot
    _, calls, scratch = boot(node, disks=8)
    assert not any(c.startswith(("mdadm --create", "mkfs.xfs")) for c in calls)
    assert f"mount -o noatime,nofail UUID=0b7e4e2a-uuid {scratch}" in calls


def test_no_disks_or_a_failing_mdadm_leave_a_folder_and_boot_goes_on(node):
    out, calls, scratch = boot(node, disks=0, nvme_disks=8)  # disks never showed up
    assert scratch.is_dir() and "no NVMe instance-store disk" in out
    (node[0] / "state" / "create_rc").write_text("1")
    _, calls, scratch = boot(node, disks=8)
    assert any(c.startswith("mdadm --create") for c in calls)
    assert not any(c.startswith("mkfs.xfs") for c in calls) and scratch.is_dir()


def test_a_type_without_instance_store_uses_the_root_volume(node):
    out, calls, scratch = boot(node, disks=0, nvme_disks=0)
    assert calls == [] and scratch.is_dir() and "no instance store" in out


def test_user_data_never_lets_scratch_stop_discovery():
    script = render_user_data(BootConfig("train", "us-east-1", 8, 8, 4, "b"))
    assert "set -e" not in script.split("\n", 3)[2]  # no errexit for the bootstrap
    assert 'systemctl start "$1.service" ||' in script  # every boot unit is non-fatal
    scratch = script.index("boot_unit gpu-cluster-scratch ")
    assert scratch < script.index("/usr/local/sbin/gpu-cluster-nodes --wait")
    assert "/etc/fstab" not in script  # mounted by the unit on every boot, by UUID
