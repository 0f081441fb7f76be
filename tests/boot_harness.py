"""The boot harness: a node's rendered user data run as bash on this machine, every system path
under a temporary root (GPUC_ROOT), every command the node calls answered as the real AMI would.

- systemd: tests/fake_systemd.py runs units as systemd does (clean environment, User=,
  WorkingDirectory=, ordering, Restart=, KillMode=, timers); BootNode.reboot() stops every unit
  and starts what is enabled, power_off() loses the node (every process killed at once).
- IMDSv2: a real HTTP server (boot_fakes.FakeImds) reached with the real curl, faults
  injectable; it serves the instance profile's credentials, which the real AWS CLI takes.
- Time runs HARNESS_TIME_SCALE times faster on the node: `sleep` and systemd's RestartSec= and
  timers are scaled; the scripts keep their real delays (no test-only knobs).
- nvidia-smi, fi_info, lspci, apt-get, dpkg: boot_fakes' scripts printing the real formats;
  journalctl prints the node's kernel log.
- aws: a recording stub answering from a table, or the real AWS CLI against a moto server.
- Downloads from outside (release buckets, apt keys) succeed or fail as a test says.
Each test builds a BootNode, boots it (or runs one step as SSM Run Command would, as root with
the agent's clean environment) and reads what the node left behind.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from boot_fakes import (
    FakeImds,
    apt_scripts,
    fi_info_script,
    lspci_script,
    nvidia_smi_script,
    write_executable,
)

from gpu_cluster.components.boot_bundle import boot_bundle

BASH = shutil.which("bash") or "/bin/bash"
SYSTEMD_SOURCE = (Path(__file__).parent / "fake_systemd.py").read_text()
DOCKER_SOURCE = (Path(__file__).parent / "fake_docker.py").read_text()
TIME_SCALE = 30  # node seconds per harness second (sleep, RestartSec=, timers)
JOB_USER = "ubuntu"  # the Deep Learning AMI's user (components/user_data.JOB_USER)
# How long a test waits for something a node does before calling the node hung: far above
# any run on a busy machine. A guard against a hang, never a measure (timing lives in bench/).
HANG_GUARD = 600.0
NODES: list[BootNode] = []  # every node of the running test (conftest powers them off)
# What the harness adds to systemd's clean environment: where this machine's fakes are (on a
# real node every one of these is the default: IMDS at 169.254.169.254, AWS by region, /)
PLUMBING = (
    "HARNESS",
    "REAL_CURL",
    "GPUC_ROOT",
    "GPUC_IMDS",
    "AWS_EC2_METADATA_SERVICE_ENDPOINT",
    "AWS_ENDPOINT_URL",
    "HARNESS_TIME_SCALE",
    "GPUC_DISK_GLOB",
    "GPUC_ARRAY",
)
SLEEP = r"""#!/bin/bash
# sleep on the node: its time runs HARNESS_TIME_SCALE times faster than the harness's
k="${HARNESS_TIME_SCALE:-1}"
# what the node asked for, in node seconds: tests read waits here, never off a clock
[ -n "${HARNESS:-}" ] && echo "${1%s}" >> "$HARNESS/sleeps"
exec /bin/sleep "$(awk -v s="${1%s}" -v k="$k" 'BEGIN {printf "%.3f", s / k}')"
"""
REAL_CURL = shutil.which("curl") or "/usr/bin/curl"
PYTHON = sys.executable
VENV_BIN = str(Path(sys.executable).parent)


@dataclass(frozen=True)
class Hardware:
    """What lspci, nvidia-smi and fi_info see on an instance type."""

    gpu: str
    gpus: int
    efa_devices: int
    nvswitches: int


P4D = Hardware("A100-SXM4-40GB", 8, 4, 6)
P5_48XL = Hardware("H100 80GB HBM3", 8, 32, 4)
P5_4XL = Hardware("H100 80GB HBM3", 1, 0, 0)
G5 = Hardware("A10G", 1, 0, 0)
G6 = Hardware("L4", 1, 0, 0)
G4DN = Hardware("Tesla T4", 1, 0, 0)

AWS_STUB = r"""
import json, os, sys

harness = os.environ["HARNESS"]
args = sys.argv[1:]
with open(os.path.join(harness, "aws-calls.jsonl"), "a") as calls:
    calls.write(json.dumps(args) + "\n")
path = os.path.join(harness, "aws.json")
table = json.load(open(path))
line = " ".join(args)
# The AWS CLI on a node has no configured region (the AMI ships none): without --region or
# AWS_REGION / AWS_DEFAULT_REGION it refuses, as every boot script's call must not.
configured = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
if "--region" not in args and not configured:
    sys.stderr.write("\nYou must specify a region. You can also configure your region by "
                     "running \"aws configure\".\n")
    sys.exit(253)
for needle, left in table.get("flaky", {}).items():  # fails that many times, then answers
    if needle in line and left > 0:
        table["flaky"][needle] = left - 1
        json.dump(table, open(path, "w"))
        sys.stderr.write("\nCould not connect to the endpoint URL\n")
        sys.exit(255)
for needle in table.get("down", []):
    if needle in line:
        sys.stderr.write(
            "\nCould not connect to the endpoint URL: \"https://ec2.us-east-1.amazonaws.com/\"\n"
        )
        sys.exit(255)
# S3 objects: files under $HARNESS/s3/<bucket>/<key> (what `pulumi up` or a test put there)
if args[:2] == ["s3", "cp"]:
    valued = {"--region", "--cli-connect-timeout", "--cli-read-timeout", "--endpoint-url"}
    paths, rest = [], iter(args[2:])
    for arg in rest:
        if arg in valued:
            next(rest, None)
        elif not arg.startswith("--"):
            paths.append(arg)
    if len(paths) == 2 and paths[0].startswith("s3://"):
        source = os.path.join(harness, "s3", paths[0][len("s3://"):])
        if not os.path.isfile(source):
            key = paths[0][len("s3://"):].split("/", 1)[-1]
            sys.stderr.write("fatal error: An error occurred (404) when calling the HeadObject "
                             f"operation: Key \"{key}\" does not exist\n")
            sys.exit(1)
        with open(source, "rb") as got, open(paths[1], "wb") as out:
            out.write(got.read())
        sys.exit(0)
for index, (needle, answer) in enumerate(table.get("answers", [])):
    if needle in line:
        if isinstance(answer, list):  # successive calls, successive answers (the last stays)
            answer = answer.pop(0) if len(answer) > 1 else answer[0]
            json.dump(table, open(path, "w"))
        sys.stdout.write(answer if answer.endswith("\n") or not answer else answer + "\n")
        break
"""

CURL = r"""#!/bin/bash
# IMDS and local endpoints: the real curl. Anything else is a download from outside the node.
for arg in "$@"; do
  case $arg in http://127.0.0.1:*) exec "$REAL_CURL" "$@" ;; esac
done
out="" url=""
while [ $# -gt 0 ]; do
  case $1 in -o) out=$2; shift ;; http*) url=$1 ;; esac
  shift
done
echo "$url" >> "$HARNESS/downloads"
blocked="$HARNESS/unreachable"
if grep -qxF "$url" "$blocked" 2>/dev/null || grep -qx '\*' "$blocked" 2>/dev/null; then
  echo "curl: (28) Failed to connect to ${url#https://} port 443 after 10001 ms:" \
    "Timeout was reached" >&2
  exit 28
fi
if [ -n "$out" ] && [ "$out" != - ]; then echo "payload of $url" > "$out"
else echo "payload of $url"; fi
"""

SHELL_STUBS = {
    "journalctl": 'cat "$HARNESS/kernel.log" 2>/dev/null\n',
    "mountpoint": '[ "$1" = -q ] && shift\ngrep -qxF "$1" "$HARNESS/mounts"\n',
    "mount": (
        'echo "mount $*" >> "$HARNESS/calls"\n'
        'left=$(cat "$HARNESS/mount-failures" 2>/dev/null || echo 0)\n'
        'if [ "$left" -gt 0 ]; then echo $((left - 1)) > "$HARNESS/mount-failures"\n'
        '  echo "mount.lustre: mount failed: No such file or directory" >&2; exit 2; fi\n'
        'echo "${@: -1}" >> "$HARNESS/mounts"\n'
    ),
    "mount-s3.installed": (
        'echo "mount-s3 $*" >> "$HARNESS/calls"\necho "${@: -1}" >> "$HARNESS/mounts"\n'
    ),
    "modinfo": '[ -e "$HARNESS/lustre-installed" ]\n',
    # the -aws meta-package depends on the modules of the newest kernel the FSx repo has
    "apt-cache": (
        'newest=$(cat "$HARNESS/lustre-aws-kernel" 2>/dev/null || uname -r)\n'
        'printf "%s\\n  Depends: lustre-client-modules-%s\\n" "$2" "$newest"\n'
    ),
    "gpg": 'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\ncat > "$out"\n',
    "logger": "exit 0\n",
    # usermod: recorded, then the machine's own (the job user is this machine's user)
    "usermod": 'echo "usermod $*" >> "$HARNESS/calls"\nexec /usr/sbin/usermod "$@"\n',
    "mkfs.xfs": 'echo "mkfs.xfs $*" >> "$HARNESS/calls"\n',
    "blkid": (
        'case "$*" in *TYPE*) cat "$HARNESS/fstype" 2>/dev/null;; *UUID*) echo 0b7e-uuid;; esac\n'
    ),
    "mdadm": 'echo "mdadm $*" >> "$HARNESS/calls"\n[ "$1" != --assemble ]\n',
}

# the regional "latest" CloudWatch agent package's version (its bin/CWAGENT_VERSION)
AGENT_LATEST = "1.300071.0b1270"
APT_WRAPPER = r"""#!/bin/bash
# The fake apt-get, then what an install leaves on the node (commands, kernel modules).
AGENT_LATEST=AGENT_LATEST_VERSION
"$HARNESS/bin-fakes/apt-get" "$@" || exit $?
for arg in "$@"; do
  case $arg in
    */mount-s3.deb) cp "$HARNESS/bin/mount-s3.installed" "$HARNESS/bin/mount-s3" ;;
    lustre-client-modules-*) touch "$HARNESS/lustre-installed" ;;
    */amazon-cloudwatch-agent.deb)
      ctl="$GPUC_ROOT/opt/aws/amazon-cloudwatch-agent/bin/amazon-cloudwatch-agent-ctl"
      mkdir -p "$(dirname "$ctl")"
      printf '#!/bin/bash\necho "amazon-cloudwatch-agent-ctl $*" >> "$HARNESS/calls"\n' > "$ctl"
      chmod 755 "$ctl"
      echo "$AGENT_LATEST" > "$(dirname "$ctl")/CWAGENT_VERSION" ;;  # as the package writes it
  esac
done
"""


class BootNode:
    """One node under a temporary root, with its fakes; see the module docstring."""

    def __init__(
        self,
        folder: Path,
        user_data: str,
        imds: FakeImds,
        hardware: Hardware = P4D,
        aws_endpoint: str | None = None,
        time_scale: float = TIME_SCALE,
    ) -> None:
        self.folder, self.imds, self.hardware = folder, imds, hardware
        self.time_scale = time_scale
        self.root, self.harness = folder / "root", folder / "harness"
        self.bin = self.harness / "bin"
        fakes = self.harness / "bin-fakes"
        for path in (self.root / "etc", self.root / "run", self.bin, fakes):
            path.mkdir(parents=True, exist_ok=True)
        (self.root / "etc/os-release").write_text("VERSION_CODENAME=noble\nID=ubuntu\n")
        # the EFA driver's device files, one per EFA device (what a container is given)
        for index in range(hardware.efa_devices):
            device = self.root / f"dev/infiniband/uverbs{index}"
            device.parent.mkdir(parents=True, exist_ok=True)
            device.touch()
        (self.harness / "mounts").write_text("")
        self.user_data = folder / "user-data.sh"
        self.user_data.write_text(user_data)
        self.smi_state, self.apt_state = self.harness / "smi.json", self.harness / "apt.json"
        self.set_gpus(model=hardware.gpu, count=hardware.gpus)
        self.apt_state.write_text("{}")
        write_executable(self.bin / "nvidia-smi", nvidia_smi_script(self.smi_state, PYTHON))
        write_executable(self.bin / "fi_info", fi_info_script(hardware.efa_devices, PYTHON))
        write_executable(
            self.bin / "lspci",
            lspci_script(hardware.nvswitches, hardware.gpus, PYTHON, model=hardware.gpu),
        )
        for name, text in apt_scripts(self.apt_state, PYTHON).items():
            write_executable(fakes / name, text)
        write_executable(self.bin / "dpkg", (fakes / "dpkg").read_text())
        apt = APT_WRAPPER.replace("AGENT_LATEST_VERSION", AGENT_LATEST)
        write_executable(self.bin / "apt-get", apt)
        write_executable(self.bin / "systemctl", f"#!{PYTHON}\n{SYSTEMD_SOURCE}")
        write_executable(self.bin / "docker", f"#!{PYTHON}\n{DOCKER_SOURCE}")
        write_executable(self.bin / "sleep", SLEEP)
        self.folder.chmod(0o755)
        traversable(self.folder)
        # the fakes record what the job user's processes call too
        self.harness.chmod(0o1777)
        records = ("aws-calls.jsonl", "calls", "journal", "downloads", "aws.json", "docker.json")
        for record in records:
            (self.harness / record).touch()
            (self.harness / record).chmod(0o666)
        job_home(self.root)
        python_for_every_user()
        NODES.append(self)
        write_executable(self.bin / "curl", CURL)
        for name, body in SHELL_STUBS.items():
            write_executable(self.bin / name, "#!/bin/bash\n" + body)
        self.aws_endpoint = aws_endpoint
        if aws_endpoint is None:
            write_executable(self.bin / "aws", f"#!{PYTHON}\n{AWS_STUB}")
            self.answer_aws()
            self.put_boot_bundle()
        else:  # the real AWS CLI, its requests checked as the tests' own (conftest reads)
            write_executable(self.bin / "aws", checked_aws_cli())

    # --- what the node sees -----------------------------------------------------------------

    def s3_object(self, bucket: str, key: str) -> Path:
        """An object of the stub's S3 (``aws s3 cp s3://bucket/key``), as a file."""
        return self.harness / "s3" / bucket / key

    def put_boot_bundle(self) -> None:
        """The boot bundle where `pulumi up` puts it (the stack's bucket, at the key the user
        data names), for a node whose AWS is the stub."""
        values = cluster_env(self.user_data.read_text())
        if "BUNDLE_KEY" in values:
            target = self.s3_object(values["DATA_BUCKET"], values["BUNDLE_KEY"])
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(boot_bundle())

    def set_gpus(self, **state: Any) -> None:
        """nvidia-smi's state (boot_fakes.nvidia_smi_script), merged into what is there."""
        current = json.loads(self.smi_state.read_text()) if self.smi_state.exists() else {}
        self.smi_state.write_text(json.dumps({**current, **state}))

    def set_apt(self, **state: Any) -> None:
        current = json.loads(self.apt_state.read_text())
        self.apt_state.write_text(json.dumps({**current, **state}))

    def apt(self) -> dict[str, Any]:
        return json.loads(self.apt_state.read_text())

    def answer_aws(self, answers: list[tuple[str, str]] | None = None, down=(), flaky=None) -> None:
        """The aws stub: the first answer whose text is in the command line (a list: one per
        call, the last repeated); `down`: calls containing these texts fail as with no route
        to the endpoint; `flaky`: {text: n} calls fail n times, then answer."""
        table = {"answers": answers or [], "down": list(down), "flaky": dict(flaky or {})}
        (self.harness / "aws.json").write_text(json.dumps(table))

    def ami_agent(self, version: str) -> None:
        """The AMI ships the CloudWatch agent at ``version`` (as a DLAMI does)."""
        folder = self.file("/opt/aws/amazon-cloudwatch-agent/bin")
        folder.mkdir(parents=True, exist_ok=True)
        ctl = 'echo "amazon-cloudwatch-agent-ctl $*" >> "$HARNESS/calls"\n'
        write_executable(folder / "amazon-cloudwatch-agent-ctl", f"#!/bin/bash\n{ctl}")
        (folder / "CWAGENT_VERSION").write_text(f"{version}\n")

    def unreachable(self, *urls: str) -> None:
        """Downloads from these URLs ("*": from anywhere outside) time out."""
        (self.harness / "unreachable").write_text("".join(f"{u}\n" for u in urls))

    def kernel_log(self, text: str) -> None:
        (self.harness / "kernel.log").write_text(text)

    def activate(self, *units: str) -> None:
        """Units the AMI runs (nvidia-fabricmanager.service, ...)."""
        state = self.systemd()
        state["external"] = [*state.get("external", []), *units]
        state["active"] += list(units)
        (self.harness / "systemd.json").write_text(json.dumps(state))

    # --- running it -------------------------------------------------------------------------

    @property
    def plumbing(self) -> dict[str, str]:
        """Where this machine keeps what a real node has at its default place."""
        env = {
            "HARNESS": str(self.harness),
            "REAL_CURL": REAL_CURL,
            "GPUC_ROOT": str(self.root),
            "GPUC_IMDS": self.imds.url,
            "AWS_EC2_METADATA_SERVICE_ENDPOINT": self.imds.url + "/",
            "HARNESS_TIME_SCALE": str(self.time_scale),
            "GPUC_DISK_GLOB": str(self.root / "dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_*"),
            "GPUC_ARRAY": str(self.root / "dev/md/gpuc-scratch"),
        }
        if self.aws_endpoint:
            env["AWS_ENDPOINT_URL"] = self.aws_endpoint
        return env

    @property
    def env(self) -> dict[str, str]:
        """systemd's clean environment for a root unit (and SSM Run Command's, which runs as
        root from the agent's unit), plus the plumbing: no AWS keys, no region, no delays."""
        path_prefix = f"{self.bin}:{VENV_BIN}:"
        return {
            "PATH": path_prefix + "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8",
            "HARNESS_PATH_PREFIX": path_prefix,
            "HARNESS_PASS": " ".join(PLUMBING),
            **self.plumbing,
        }

    def boot(self, timeout: float = 180) -> subprocess.CompletedProcess:
        """Run the whole user data, as cloud-init does on first boot (later boots run only the
        enabled units: reboot())."""
        return subprocess.run(
            [BASH, str(self.user_data)],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.root,
        )

    def step(self, name: str, *args: str, timeout: float = 120, **kwargs: Any):
        """Run one installed program (/usr/local/sbin/NAME or /usr/local/bin/NAME) as SSM Run
        Command does: as root, in the agent's clean environment. ``env``: more harness-only
        variables, passed on to the units it starts."""
        program = self.root / "usr/local/sbin" / name
        if not program.exists():
            program = self.root / "usr/local/bin" / name
        extra = kwargs.pop("env", {})
        env = {**self.env, **extra}
        env["HARNESS_PASS"] = " ".join([*PLUMBING, *extra])
        return subprocess.run(
            [BASH, str(program), *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=kwargs.pop("cwd", self.root),
            **kwargs,
        )

    def systemctl(self, *args: str, env: dict[str, str] | None = None):
        """`systemctl ARGS` on the node (as root), e.g. ("stop", "gpu-cluster-job@x")."""
        extra = env or {}
        full = {**self.env, **extra, "HARNESS_PASS": " ".join([*PLUMBING, *extra])}
        return subprocess.run(
            [str(self.bin / "systemctl"), *args], env=full, capture_output=True, text=True,
            timeout=120,
        )  # fmt: skip

    def unit_state(self, unit: str) -> str:
        unit = unit if "." in unit else unit + ".service"
        return self.systemd().get("units", {}).get(unit, {}).get("state", "inactive")

    def wait_unit(self, unit: str, *states: str) -> str:
        """Wait until ``unit`` is in one of ``states`` (default: it has stopped)."""
        wanted = states or ("inactive", "failed")
        eventually(
            lambda: self.unit_state(unit) in wanted,
            lambda: f"{unit} is {self.unit_state(unit)}, not {wanted}: {self.journal()}",
        )
        return self.unit_state(unit)

    def journal(self) -> str:
        path = self.harness / "journal"
        return path.read_text() if path.exists() else ""

    def power_off(self) -> None:
        """The node is lost: every process it runs is killed at once (no unit stops cleanly):
        its units' sessions, and whatever left them (torch starts its workers in sessions of
        their own) - every process that carries this node's plumbing."""
        mark = f"HARNESS={self.harness}".encode()
        for _ in range(3):
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) == os.getpid():
                    continue
                try:
                    environ = (entry / "environ").read_bytes().split(b"\0")
                except OSError:
                    continue
                if mark in environ:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(int(entry.name), signal.SIGKILL)
        state = self.systemd()
        for session in state.get("sessions", []):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(session, signal.SIGKILL)
        for unit in state.get("units", {}).values():
            if unit.get("pid"):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(unit["pid"], signal.SIGKILL)
        if state.get("units"):
            state["units"] = {}
            state["sessions"] = []
            state["active"] = list(state.get("external", []))
            (self.harness / "systemd.json").write_text(json.dumps(state))

    def reboot(self, env: dict[str, str] | None = None) -> None:
        """A clean reboot: every running unit stopped (its KillSignal, its stop timeout), the
        tmpfs /run emptied, then the next boot: every enabled unit started (cloud-init does not
        run the user data again)."""
        for unit, record in reversed(list(self.systemd().get("units", {}).items())):
            if record.get("state") in ("active", "activating"):
                self.systemctl("stop", unit, env=env)
        self.power_off()
        shutil.rmtree(self.root / "run", ignore_errors=True)
        (self.root / "run").mkdir()
        for unit in self.systemd().get("enabled", []):
            self.systemctl("start", "--no-block", unit, env=env)

    def install_only(self) -> subprocess.CompletedProcess:
        """Write every file and unit of the user data (units enabled) without starting any."""
        return subprocess.run(
            [BASH, str(self.user_data)],
            env={**self.env, "HARNESS_INSTALL_ONLY": "1"},
            capture_output=True,
            text=True,
            timeout=180,
            cwd=self.root,
        )

    # --- what it left behind ----------------------------------------------------------------

    def file(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    def read(self, path: str) -> str:
        return self.file(path).read_text()

    def systemd(self) -> dict[str, Any]:
        path = self.harness / "systemd.json"
        return (
            json.loads(path.read_text()) if path.exists() else {"active": [], "log": [], "runs": []}
        )

    def aws_calls(self) -> list[list[str]]:
        path = self.harness / "aws-calls.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines()]

    def calls(self) -> list[str]:
        path = self.harness / "calls"
        return path.read_text().splitlines() if path.exists() else []

    def mounts(self) -> list[str]:
        return (self.harness / "mounts").read_text().splitlines()

    def env_file(self, path: str) -> dict[str, str]:
        return dict(line.split("=", 1) for line in self.read(path).splitlines() if "=" in line)


def checked_aws_cli() -> str:
    """The real AWS CLI (this machine's), every request checked against botocore's service
    model (tests/botocore_limits.py) and each refusal written to the tests' record: systemd's
    clean environment carries neither PYTHONPATH nor the record's name, so both are written
    into the script."""
    record = os.environ.get("BOTOCORE_LIMITS_RECORD", "")
    return (
        f"#!{PYTHON}\n"
        "import runpy, sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "import botocore_limits\n"
        "del sys.path[0]\n"
        f"botocore_limits.install({record!r} or None)\n"
        f"sys.argv[0] = {str(Path(VENV_BIN) / 'aws')!r}\n"
        "runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )


def cluster_env(user_data: str) -> dict[str, str]:
    """cluster.env's values as a rendered user data writes them (shell-quoted)."""
    import shlex

    body = user_data.split("<<'ENV'\n", 1)[1].split("\nENV\n", 1)[0]
    return {
        key: (shlex.split(value) or [""])[0]
        for key, _, value in (line.partition("=") for line in body.splitlines())
    }


def put_boot_bundle_in(s3: Any, user_data: str) -> None:
    """What `pulumi up` does for a node whose AWS is a moto server: the boot bundle in the
    stack's bucket (created if missing), at the key the user data names."""
    values = cluster_env(user_data)
    bucket = values["DATA_BUCKET"]
    if bucket not in {b["Name"] for b in s3.list_buckets().get("Buckets", [])}:
        s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key=values["BUNDLE_KEY"], Body=boot_bundle().encode())


class Nodes:
    """BootNodes under one folder, each with its own IMDS (stopped with stop()); ``aws``: the
    stub's answers (``default_aws`` when None), ``install``: the user data written first."""

    def __init__(self, folder: Path, default_aws=(), install: bool = False) -> None:
        self.folder, self.default_aws, self.install = folder, list(default_aws), install
        self.servers: list[FakeImds] = []

    def make(
        self,
        boot,
        hardware: Hardware = P4D,
        aws: list[tuple[str, str]] | None = None,
        endpoint: str | None = None,
        instance_id: str = "i-0abc1234def567890",
        user_data: str | None = None,
    ) -> BootNode:
        from gpu_cluster.components.user_data import render_user_data

        imds = FakeImds(instance_id=instance_id).start()
        self.servers.append(imds)
        node = BootNode(
            self.folder / f"node{len(self.servers)}",
            user_data or render_user_data(boot),
            imds,
            hardware,
            aws_endpoint=endpoint,
        )
        if hardware.nvswitches:
            node.activate("nvidia-fabricmanager.service")
        if endpoint is None:
            node.answer_aws(self.default_aws if aws is None else aws)
        else:  # what `pulumi up` put in the stack's bucket
            import boto3

            s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=endpoint)
            put_boot_bundle_in(s3, node.user_data.read_text())
        if self.install:
            assert node.install_only().returncode == 0
        return node

    def stop(self) -> None:
        for server in self.servers:
            server.stop()


def traversable(folder: Path) -> None:
    """Let the job user reach the node's root (pytest's temporary folders are 0700)."""
    for parent in [folder, *folder.parents]:
        if parent == Path("/"):
            break
        mode = parent.stat().st_mode
        if not mode & 0o001:
            parent.chmod(mode | 0o011)


def python_for_every_user() -> None:
    """The job user runs this machine's Python (the real AWS CLI, torch): as on the AMI, where
    /opt/pytorch is everyone's, its folders must be traversable (pyenv keeps it under /root)."""
    for path in (Path(os.path.realpath(sys.executable)), Path(VENV_BIN)):
        traversable(path.parent if path.is_file() else path)


def job_home(root: Path) -> None:
    """The AMI's job user and its home (what `User=ubuntu` and `WorkingDirectory=~` need):
    the user on this machine, the home under the node's root."""
    import pwd

    try:
        pwd.getpwnam(JOB_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--create-home", "--user-group", "--shell", "/bin/bash", JOB_USER],
            check=True, capture_output=True,
        )  # fmt: skip
    # the AMI has Docker: its group exists (a job in a container adds the job user to it)
    subprocess.run(["groupadd", "-f", "docker"], check=True, capture_output=True)
    subprocess.run(["gpasswd", "-d", JOB_USER, "docker"], check=False, capture_output=True)
    home = root / "home" / JOB_USER
    home.mkdir(parents=True, exist_ok=True)
    shutil.chown(home, JOB_USER, user_group(JOB_USER))


def power_off_every_node() -> None:
    while NODES:
        NODES.pop().power_off()


def moto_instance(endpoint: str, tags: dict[str, str] | None = None) -> str:
    """An instance in the moto server at ``endpoint``; its id."""
    import boto3

    ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=endpoint)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    spec = (
        [
            {
                "ResourceType": "instance",
                "Tags": [{"Key": k, "Value": v} for k, v in (tags or {}).items()],
            }
        ]
        if tags
        else []
    )
    reply = ec2.run_instances(
        ImageId=image,
        InstanceType="p4d.24xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=spec,
    )
    return reply["Instances"][0]["InstanceId"]


def run_as(user: str, command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """``command`` as ``user`` (the tests run as root, as cloud-init does)."""
    return subprocess.run(
        ["setpriv", f"--reuid={user}", f"--regid={user_group(user)}", "--init-groups", *command],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def user_group(user: str) -> str:
    import grp
    import pwd

    return grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name


def environ_of(env: dict[str, str]) -> dict[str, str]:
    return {**os.environ, **env}


def eventually(holds: Callable[[], object], what: str | Callable[[], str]) -> None:
    """Wait until ``holds()``; fail (saying ``what``) only when the node looks hung."""
    deadline = time.monotonic() + HANG_GUARD
    while not holds():
        if time.monotonic() > deadline:
            raise AssertionError(f"hung ({HANG_GUARD:.0f} s): {what() if callable(what) else what}")
        time.sleep(0.05)
