"""The data-bucket mount script, run with stubs for curl, apt-get, mount-s3 and mountpoint."""

from __future__ import annotations

import os
import shutil
import subprocess

from conftest import write_stubs

from components.user_data import boot_script

BASH = shutil.which("bash")


def run(tmp_path, *, installed=False, download_ok=True, mounted=False):
    etc, bin_dir = tmp_path / "etc", tmp_path / "bin"
    etc.mkdir()
    bin_dir.mkdir()
    (etc / "cluster.env").write_text(
        f"REGION=us-east-1\nDATA_BUCKET=gpuc-data-1\nSCRATCH={tmp_path}/nvme\n"
        f"DATA_MOUNT={tmp_path}/data\n"
    )
    calls = tmp_path / "calls"
    stubs = {
        "curl": f'echo "curl $*" >> {calls}\n' + ("" if download_ok else "exit 22\n"),
        "apt-get": f'echo "apt-get $*" >> {calls}\n',
        "mountpoint": "exit 0\n" if mounted else "exit 1\n",
    }
    if installed:
        stubs["mount-s3"] = f'echo "mount-s3 $*" >> {calls}\n'
    write_stubs(bin_dir, stubs)
    script = tmp_path / "data.sh"
    script.write_text(boot_script("gpu-cluster-data.sh"))
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "GPUC_ETC": str(etc),
        "GPUC_FUSE_CONF": str(tmp_path / "fuse.conf"),
    }
    result = subprocess.run([BASH, str(script)], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr  # never fatal
    return result.stdout, calls.read_text().splitlines() if calls.exists() else []


def test_mounts_the_bucket_read_only_with_its_cache_on_nvme(tmp_path):
    out, calls = run(tmp_path, installed=True)
    (mount,) = [c for c in calls if c.startswith("mount-s3")]
    assert mount == (
        f"mount-s3 --read-only --allow-other --cache {tmp_path}/nvme/s3-cache --region us-east-1 "
        f"gpuc-data-1 {tmp_path}/data"
    )
    assert (tmp_path / "fuse.conf").read_text() == "user_allow_other\n"
    assert "s3://gpuc-data-1 at" in out


def test_installs_mountpoint_from_its_release_bucket_first(tmp_path):
    _, calls = run(tmp_path)
    (download,) = [c for c in calls if c.startswith("curl")]
    assert "https://s3.amazonaws.com/mountpoint-s3-release/latest/x86_64/mount-s3.deb" in download
    assert any(c.startswith("apt-get install -y") for c in calls)


def test_without_a_route_to_the_release_boot_goes_on(tmp_path):
    out, calls = run(tmp_path, download_ok=False)
    assert not any(c.startswith(("apt-get", "mount-s3")) for c in calls)
    assert "could not install Mountpoint" in out


def test_an_existing_mount_is_left_alone(tmp_path):
    _, calls = run(tmp_path, installed=True, mounted=True)
    assert not any(c.startswith("mount-s3") for c in calls)
