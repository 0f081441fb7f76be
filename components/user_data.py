"""Node boot: the scripts under components/boot/, rendered with this cluster's values.

The user data is identical on every node and does not depend on the node count, so resizing
a group never changes the launch template. A node finds its cluster through EC2 (the cluster
tag and its Auto Scaling group's desired capacity) and a systemd timer keeps the node list
current as the group replaces nodes."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from components.naming import CLUSTER_TAG

BOOT_DIR = Path(__file__).parent / "boot"
SCRATCH_MOUNT = "/mnt/nvme"
DATA_MOUNT = "/mnt/data"
LUSTRE_MOUNT = "/fsx"
RENDEZVOUS_PORT = 29500
TORCHRUN_WRAPPER = "gpuc-torchrun"
PLACEHOLDER = re.compile(r"\{\{([A-Z_]+)\}\}")


@dataclass(frozen=True, slots=True)
class BootConfig:
    cluster: str
    region: str
    gpus_per_node: int
    nvme_disk_count: int
    efa_interfaces: int
    bucket: str
    spot: bool = False
    nvswitch: bool = False  # the GPUs hang off NVSwitch: the fabric manager must run
    expected_busbw_gbytes: float = 0.0  # all-reduce bus bandwidth the network allows
    lustre_target: str = ""  # <dns>@tcp:/<mount name> of the cluster's FSx for Lustre
    secrets_path: str = ""  # the SSM hierarchy of the cluster's secrets ("" for none)


@cache
def boot_script(name: str) -> str:
    return (BOOT_DIR / name).read_text()


def fill(template: str, values: dict[str, str]) -> str:
    """Replace every ``{{NAME}}``; a placeholder without a value is a bug, not a blank."""

    def value(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return PLACEHOLDER.sub(value, template)


def boot_unit_function() -> str:
    """boot-unit.sh without its shebang and header: the boot_unit() both templates use."""
    return boot_script("boot-unit.sh").split("\n", 2)[2].rstrip("\n")


def render_user_data(boot: BootConfig) -> str:
    """The bash cloud-init script; every string value is shell-quoted."""
    constants = {"CLUSTER_TAG": CLUSTER_TAG, "RENDEZVOUS_PORT": str(RENDEZVOUS_PORT)}
    return fill(
        boot_script("user-data.sh"),
        {
            "CLUSTER": shlex.quote(boot.cluster),
            "REGION": shlex.quote(boot.region),
            "GPUS_PER_NODE": str(boot.gpus_per_node),
            "NVME_DISKS": str(boot.nvme_disk_count),
            "EFA_INTERFACES": str(boot.efa_interfaces),
            "DATA_BUCKET": shlex.quote(boot.bucket),
            "SCRATCH": shlex.quote(SCRATCH_MOUNT),
            "DATA_MOUNT": shlex.quote(DATA_MOUNT),
            "DATA_SCRIPT": boot_script("gpu-cluster-data.sh").rstrip("\n"),
            "LUSTRE_MOUNT": shlex.quote(LUSTRE_MOUNT),
            "LUSTRE_TARGET": shlex.quote(boot.lustre_target),
            "LUSTRE_SCRIPT": boot_script("gpu-cluster-lustre.sh").rstrip("\n"),
            "SPOT": "true" if boot.spot else "false",
            "NVSWITCH": "true" if boot.nvswitch else "false",
            "EXPECTED_BUSBW": f"{boot.expected_busbw_gbytes:g}",
            "HEALTH_SCRIPT": boot_script("gpu-cluster-health.sh").rstrip("\n"),
            "ALLREDUCE_BENCH": boot_script("allreduce_bench.py").rstrip("\n"),
            "NODES_SCRIPT": fill(boot_script("gpu-cluster-nodes.sh"), constants).rstrip("\n"),
            "TORCHRUN_SCRIPT": boot_script("gpuc-torchrun.sh").rstrip("\n"),
            "SPOT_WATCH_SCRIPT": boot_script("gpu-cluster-spot-watch.sh").rstrip("\n"),
            "SCRATCH_SCRIPT": boot_script("gpu-cluster-scratch.sh").rstrip("\n"),
            "BOOT_UNIT": boot_unit_function(),
            "SECRETS_PATH": shlex.quote(boot.secrets_path),
            "GPU_METRICS_SCRIPT": boot_script("gpu-cluster-gpu-metrics.sh").rstrip("\n"),
            "SECRETS_SCRIPT": boot_script("gpu-cluster-secrets.sh").rstrip("\n"),
        },
    )


@dataclass(frozen=True, slots=True)
class ServingBoot:
    """What an inference node's boot needs (see boot/inference-user-data.sh)."""

    cluster: str
    region: str
    gpus_per_node: int
    nvme_disk_count: int
    bucket: str
    model_prefix: str
    server_kind: str
    image: str
    port: int
    server_args: tuple[str, ...]
    readiness_path: str
    batch_sizes: tuple[int, ...]
    queue_delay_us: int
    warmup_seconds: int
    lifecycle_hook: str
    metrics_port: int | None = None  # the server's Prometheus port (Triton: 8002)
    metrics_log_group: str = ""


def render_serving_user_data(boot: ServingBoot) -> str:
    """The inference node's cloud-init script; every string value is shell-quoted."""
    return fill(
        boot_script("inference-user-data.sh"),
        {
            "CLUSTER": shlex.quote(boot.cluster),
            "REGION": shlex.quote(boot.region),
            "GPUS_PER_NODE": str(boot.gpus_per_node),
            "NVME_DISKS": str(boot.nvme_disk_count),
            "DATA_BUCKET": shlex.quote(boot.bucket),
            "SCRATCH": shlex.quote(SCRATCH_MOUNT),
            "SECRETS_PATH": "''",
            "MODEL_PREFIX": shlex.quote(boot.model_prefix),
            "SERVER_KIND": shlex.quote(boot.server_kind),
            "SERVER_IMAGE": shlex.quote(boot.image),
            "SERVER_PORT": str(boot.port),
            "SERVER_ARGS": shlex.quote(" ".join(boot.server_args)),
            "READINESS_PATH": shlex.quote(boot.readiness_path),
            "BATCH_SIZES": ",".join(str(size) for size in boot.batch_sizes),
            "QUEUE_DELAY_US": str(boot.queue_delay_us),
            "WARMUP_SECONDS": str(boot.warmup_seconds),
            "LIFECYCLE_HOOK": shlex.quote(boot.lifecycle_hook),
            "MODEL_METRICS_PORT": str(boot.metrics_port or "''"),
            "MODEL_METRICS_LOG_GROUP": shlex.quote(boot.metrics_log_group),
            "BOOT_UNIT": boot_unit_function(),
            "SCRATCH_SCRIPT": boot_script("gpu-cluster-scratch.sh").rstrip("\n"),
            "GPU_METRICS_SCRIPT": boot_script("gpu-cluster-gpu-metrics.sh").rstrip("\n"),
            "MODEL_SERVER_SCRIPT": boot_script("gpu-cluster-model-server.sh").rstrip("\n"),
        },
    )


def torchrun_command(script: str = "train.py") -> str:
    """What every node runs to start a job (rendezvous and sizes come from torchrun.env)."""
    return f"{TORCHRUN_WRAPPER} {script}"


ALLREDUCE_BENCH_PATH = "/usr/local/lib/gpu-cluster/allreduce_bench.py"


def run_on_every_node_command(
    region: str, target_key: str, target_value: str, script: str = "train.py"
) -> str:
    """An SSM Run Command that starts the job on every node of a group at once."""
    command = f"cd /home/ubuntu && sudo -u ubuntu {torchrun_command(script)}"
    return (
        f"aws ssm send-command --region {region} --document-name AWS-RunShellScript "
        f"--targets Key=tag:{target_key},Values={target_value} "
        f'--parameters \'{{"commands":["{command}"]}}\''
    )
