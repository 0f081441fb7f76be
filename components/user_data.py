"""Node boot: the scripts under components/boot/, rendered with this cluster's values into
gzip-compressed user data.

EC2 takes at most 16 KB of user data before base64 (components/aws_limits.py); cloud-init
inflates gzip user data and runs it as if it were not compressed (cloud-init docs, "User data
formats": gzip). Only the steps a stack uses are on it, comments are left in the files under
boot/ (where they are read), and the gzip header carries no time stamp, so the same stack
renders the same bytes and `pulumi up` sees no change.

The user data is identical on every node and does not depend on the node count, so resizing
a group never changes the launch template. A node finds its cluster through EC2 (the cluster
tag and its Auto Scaling group's desired capacity) and a systemd timer keeps the node list
current as the group replaces nodes."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shlex
from dataclasses import dataclass

from gpu_cluster.components.aws_limits import user_data_text
from gpu_cluster.components.boot_bundle import bundle_key, bundle_sha256
from gpu_cluster.components.boot_files import BOOT_DIR as BOOT_DIR
from gpu_cluster.components.boot_files import CONSTANTS, boot_script, fill
from gpu_cluster.components.boot_files import RENDEZVOUS_PORT as RENDEZVOUS_PORT
from gpu_cluster.components.boot_files import flush_left as flush_left
from gpu_cluster.components.cloudwatch_agent import PROFILE_PATH, AgentProfile, render_agent_config
from gpu_cluster.components.jobs import JOB_LOG_DIR
from gpu_cluster.components.names import (
    DEFAULT_PROJECT,
    StackIdentity,
    alerts_topic_parameter,
    bundle_folder,
    jobs_path,
    replacements_parameter,
)

SCRATCH_MOUNT = "/mnt/nvme"
DATA_MOUNT = "/mnt/data"
LUSTRE_MOUNT = "/fsx"
TORCHRUN_WRAPPER = "gpuc-torchrun"
SPOT_WATCH = "/usr/local/sbin/gpu-cluster-spot-watch"
JOB_USER = "ubuntu"  # the Deep Learning AMI's user; jobs run as this user
COMMENT_LINE = re.compile(r"^[ \t]*#(?!!| shellcheck).*\n", re.MULTILINE)
# A comment after code: blanks, "# ", then no quote to the end of the line (so never a "#"
# inside a string). The boot files' units, JSON and Python heredocs hold none that are data.
INLINE_COMMENT = re.compile(r"(?<=\S)[ \t]+# (?!shellcheck)[^\n'\"`]*$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class BootConfig:
    cluster: str
    region: str
    gpus_per_node: int
    nvme_disk_count: int
    efa_interfaces: int
    bucket: str
    spot: bool = False
    nvswitch: bool = False  # the type's GPUs hang off NVSwitch: the fabric manager must run
    nvswitch_pci_id: str = ""  # how lspci lists that NVSwitch ("" where it does not)
    # all-reduce busbw a healthy run over 1, 2, 3+ nodes reaches, and the bench's pass line
    # ("1:X,2:Y,3:Z", bandwidth.node_count_tables; "": it only reports)
    expected_busbw_table: str = ""
    busbw_pass_table: str = ""
    bench_max_bytes: int = 2**30  # the bench's largest message: the plateau
    lustre_target: str = ""  # <dns>@tcp:/<mount name> of the cluster's FSx for Lustre
    secrets_path: str = ""  # the SSM hierarchy of the cluster's secrets ("" for none)
    jobs_log_group: str = ""  # where the CloudWatch agent ships the jobs' output ("" for none)
    node_log_group: str = ""  # where it ships the units' log lines ("" for none)
    row_remapping: bool = False  # the GPUs remap rows (A100, H100, ...): see boot/*-health.sh
    internet: bool = True  # a NAT gateway: installs from outside AWS's regional buckets work
    stack: str = ""  # the stack's name, for the commands a node's alerts give
    gang_timeout_seconds: int = 0  # all or nothing (boot/gpu-cluster-nodes.sh); 0: off
    topology: bool = False  # EC2 answers DescribeInstanceTopology for the type (ec2_topology.py)
    identity: StackIdentity | None = None  # whose names (None: this project's stack `stack`)

    @property
    def names(self) -> StackIdentity:
        stack = self.stack or self.cluster
        return self.identity or StackIdentity(DEFAULT_PROJECT, stack, self.region, self.cluster)


@dataclass(frozen=True, slots=True)
class BootStep:
    """One boot step: boot/<script> installed as /usr/local/sbin/<name>, run by boot_unit."""

    name: str
    script: str
    description: str
    after: str
    wants: str = ""
    options: str = ""
    arguments: str = ""


def without_comments(script: str) -> str:
    """The script without comments (shebangs and shellcheck directives stay)."""
    return INLINE_COMMENT.sub("", COMMENT_LINE.sub("", script))


def boot_unit_function() -> str:
    """boot-unit.sh without its shebang: the boot_unit() every template uses."""
    return boot_script("boot-unit.sh").split("\n", 1)[1].rstrip("\n")


def install_file(path: str, text: str) -> str:
    """A quoted heredoc that writes ``text`` to ``$R<path>``."""
    return f"cat > \"$R{path}\" <<'SCRIPT'\n{text.rstrip(chr(10))}\nSCRIPT"


def step_block(step: BootStep) -> str:
    """Install the step's script and unit (enabled, not started)."""
    script = fill(boot_script(step.script), CONSTANTS)
    call = [step.name, step.description, step.after, step.wants, step.options, step.arguments]
    while call[-1] == "":
        call.pop()
    return "\n".join(
        [
            install_file(f"/usr/local/sbin/{step.name}", script),
            "boot_unit " + " ".join(shlex.quote(part) for part in call),
        ]
    )


def start_lines(steps: list[BootStep], first: tuple[str, ...] = (), last: tuple[str, ...] = ()):
    """Once everything is installed: start what runs beside the steps, the steps in order,
    then the timers."""
    starts = [
        f"start_step {step.name}" + (" background" if "background" in step.options else "")
        for step in steps
    ]
    return "\n".join(["systemctl daemon-reload", *first, *starts, *last])


def node_env(
    cluster: str, region: str, gpus: int, nvme_disks: int, bucket: str, stack_id: str
) -> dict:
    """cluster.env's keys every node has (training and inference), shell-quoted."""
    return {
        "CLUSTER": shlex.quote(cluster),
        "STACK_ID": shlex.quote(stack_id),  # project/stack/region (components/names.py)
        "REGION": shlex.quote(region),
        "GPUS_PER_NODE": str(gpus),
        "NVME_DISKS": str(nvme_disks),
        "DATA_BUCKET": shlex.quote(bucket),
        "SCRATCH": shlex.quote(SCRATCH_MOUNT),
    }


def agent_profile_file(profile: AgentProfile) -> str:
    """The stack's CloudWatch agent profile (components/cloudwatch_agent.py), which the
    gpu-metrics step hands to the agent: rendered here, it differs per stack (stack id, EFA,
    log groups) with no logic on the node."""
    return install_file(PROFILE_PATH, render_agent_config(profile))


def env_lines(values: dict[str, str]) -> str:
    return "\n".join(f"{key}={value}" for key, value in values.items())


def assemble(env: dict[str, str], installs: list[str], starts: str) -> str:
    """The user data: cluster.env, the shared library, boot_unit(), every file and unit, then
    the starts."""
    return without_comments(
        fill(
            boot_script("user-data.sh"),
            {
                "CLUSTER_ENV": env_lines(env),
                "LIB_SCRIPT": boot_script("gpu-cluster-lib.sh"),
                "BOOT_UNIT": boot_unit_function(),
                "STEPS": "\n\n".join([*installs, starts]),
            },
        )
    )


SCRATCH_STEP = BootStep(
    "gpu-cluster-scratch",
    "gpu-cluster-scratch.sh",
    "NVMe scratch space",
    "local-fs.target dlami-nvme.service",
    "dlami-nvme.service",
)
GPU_METRICS_STEP = BootStep(
    "gpu-cluster-gpu-metrics",
    "gpu-cluster-gpu-metrics.sh",
    "GPU utilization metrics",
    "network-online.target",
    options="background retry",  # nothing waits for the agent's install (the dpkg lock)
)


def cluster_steps(boot: BootConfig) -> list[BootStep]:
    """The boot steps of a training node, in order; optional ones only where used."""
    steps = [
        SCRATCH_STEP,
        BootStep(
            "gpu-cluster-data",
            "gpu-cluster-data.sh",
            "data bucket mount",
            "gpu-cluster-scratch.service network-online.target",
        ),
    ]
    if boot.lustre_target:
        steps.append(
            BootStep(
                "gpu-cluster-lustre",
                "gpu-cluster-lustre.sh",
                "FSx for Lustre mount",
                "network-online.target",
            )
        )
    if boot.secrets_path:
        steps.append(
            BootStep(
                "gpu-cluster-secrets",
                "gpu-cluster-secrets.sh",
                "cluster secrets from SSM Parameter Store",
                "network-online.target",
            )
        )
    steps.append(GPU_METRICS_STEP)
    # not after the GPU metrics step: the CloudWatch agent's install may wait up to ~50 min for
    # the dpkg lock (apt_run), and health, discovery and the gang clock must not wait with it
    # (the health check reads that step's result as it stands: pending is not missing)
    health_after = "gpu-cluster-scratch.service"
    if boot.lustre_target:
        health_after += " gpu-cluster-lustre.service"
    if boot.secrets_path:
        health_after += " gpu-cluster-secrets.service"
    steps += [
        BootStep(
            "gpu-cluster-health",
            "gpu-cluster-health.sh",
            "node health check",
            f"{health_after} nvidia-fabricmanager.service network-online.target",
        ),
        BootStep(
            "gpu-cluster-nodes",
            "gpu-cluster-nodes.sh",
            "the node list and torchrun environment (first boot: waits for the group)",
            "gpu-cluster-health.service network-online.target",
            options="background",
            arguments="--wait",
        ),
        BootStep(
            "gpu-cluster-jobs",
            "gpu-cluster-bundle.sh",  # the jobs program itself is in the boot bundle
            "the stack's active training jobs (gpuc run), once healthy and discovered",
            "gpu-cluster-nodes.service gpu-cluster-health.service network-online.target",
            options="background retry",  # SSM not answering yet: again in two minutes
            arguments="boot",
        ),
    ]
    return steps


def render_user_data(boot: BootConfig) -> str:
    """The bash cloud-init script of a training node; every string value is shell-quoted."""
    env = {
        **node_env(
            boot.cluster,
            boot.region,
            boot.gpus_per_node,
            boot.nvme_disk_count,
            boot.bucket,
            boot.names.stack_id,
        ),
        "EFA_INTERFACES": str(boot.efa_interfaces),
        "DATA_MOUNT": shlex.quote(DATA_MOUNT),
        "LUSTRE_MOUNT": shlex.quote(LUSTRE_MOUNT),
        "LUSTRE_TARGET": shlex.quote(boot.lustre_target),
        "SPOT": "true" if boot.spot else "false",
        "NVSWITCH": "true" if boot.nvswitch else "false",
        "NVSWITCH_PCI_ID": shlex.quote(boot.nvswitch_pci_id),
        "ROW_REMAP": "true" if boot.row_remapping else "false",
        "INTERNET": "true" if boot.internet else "false",
        "EXPECTED_BUSBW_TABLE": shlex.quote(boot.expected_busbw_table or "0:0"),
        "BUSBW_PASS_TABLE": shlex.quote(boot.busbw_pass_table or "0:0"),
        "BENCH_MAX_BYTES": str(boot.bench_max_bytes),
        "SECRETS_PATH": shlex.quote(boot.secrets_path),
        "JOB_USER": JOB_USER,
        "JOBS_LOG_GROUP": shlex.quote(boot.jobs_log_group),
        "JOB_LOG_DIR": shlex.quote(JOB_LOG_DIR),
        "STACK": shlex.quote(boot.names.stack),
        # the names the nodes use, computed once (components/names.py), never in the scripts
        "JOBS_PATH": shlex.quote(jobs_path(boot.names)),
        "ALERTS_PARAMETER": shlex.quote(alerts_topic_parameter(boot.names)),
        "REPLACEMENTS_PATH": shlex.quote(replacements_parameter(boot.names)),
        "GANG_TIMEOUT": str(boot.gang_timeout_seconds),
        "TOPOLOGY": "true" if boot.topology else "false",
        "BUNDLE_KEY": shlex.quote(bundle_key(bundle_folder(boot.names))),
        "BUNDLE_SHA256": bundle_sha256(),
    }
    steps = cluster_steps(boot)
    profile = AgentProfile(
        stack_id=boot.names.stack_id,
        efa=boot.efa_interfaces > 0,
        node_log_group=boot.node_log_group,
        jobs_log_group=boot.jobs_log_group,
        job_log_files=f"{JOB_LOG_DIR}/*.log",
    )
    installs = [agent_profile_file(profile), *(step_block(step) for step in steps)]
    if boot.spot:
        installs.append(install_file(SPOT_WATCH, boot_script("gpu-cluster-spot-watch.sh")))
    installs.append(
        fill(
            boot_script("user-data-cluster.sh").split("\n", 1)[1],
            {"TORCHRUN_SCRIPT": boot_script("gpuc-torchrun.sh")},
        )
    )
    # the spot watcher first (a notice may come while the steps run), the timers last
    spot = ("systemctl start gpu-cluster-spot-watch.service",) if boot.spot else ()
    timers = (
        "systemctl start gpu-cluster-nodes-refresh.timer gpu-cluster-health-watch.timer"
        " gpu-cluster-activity.timer",
    )
    return assemble(env, installs, start_lines(steps, spot, timers))


@dataclass(frozen=True, slots=True)
class ServingBoot:
    """What an inference node's boot needs (see boot/gpu-cluster-model-server.sh)."""

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
    stack_id: str = ""  # project/stack/region (components/names.py)
    node_log_group: str = ""  # where the agent ships the units' log lines ("" for none)


def render_serving_user_data(boot: ServingBoot) -> str:
    """The inference node's cloud-init script; every string value is shell-quoted."""
    env = {
        **node_env(
            boot.cluster,
            boot.region,
            boot.gpus_per_node,
            boot.nvme_disk_count,
            boot.bucket,
            boot.stack_id,
        ),
        "EFA_INTERFACES": "0",
        "NVSWITCH": "false",
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
    }
    steps = [
        SCRATCH_STEP,
        GPU_METRICS_STEP,
        BootStep(
            "gpu-cluster-model-server",
            "gpu-cluster-model-server.sh",
            "model server",
            "gpu-cluster-scratch.service docker.service network-online.target",
        ),
    ]
    profile = AgentProfile(
        stack_id=boot.stack_id,
        node_log_group=boot.node_log_group,
        model_metrics_log_group=boot.metrics_log_group if boot.metrics_port else "",
    )
    installs = [agent_profile_file(profile), *(step_block(step) for step in steps)]
    return assemble(env, installs, start_lines(steps))


def user_data_payload(script: str) -> str:
    """What the launch template carries: the script gzip-compressed (no time stamp), base64."""
    return base64.b64encode(gzip.compress(script.encode(), compresslevel=9, mtime=0)).decode()


def decoded_user_data(encoded: str) -> str:
    """The script back from a launch template's user data."""
    return user_data_text(encoded)


def torchrun_command(script: str = "train.py") -> str:
    """What every node runs to start a job (rendezvous and sizes come from torchrun.env)."""
    return f"{TORCHRUN_WRAPPER} {script}"


ALLREDUCE_BENCH_PATH = "/usr/local/lib/gpu-cluster/allreduce_bench.py"


# AWS-RunShellScript stops a command after its executionTimeout, 3600 s by default and at most
# 172800 (SSM document AWS-RunShellScript): a training run gets the maximum.
RUN_COMMAND_TIMEOUT_SECONDS = 172800


def run_on_every_node_command(
    region: str, target_key: str, target_value: str, script: str = "train.py", setup: str = ""
) -> str:
    """An SSM Run Command that starts the job on every node of a group at once (``setup``: a
    command run as root first)."""
    command = f"cd /home/ubuntu && sudo -u ubuntu {torchrun_command(script)}"
    commands = json.dumps([*([setup] if setup else []), command])
    return (
        f"aws ssm send-command --region {region} --document-name AWS-RunShellScript "
        f"--targets Key=tag:{target_key},Values={target_value} "
        f'--parameters \'{{"commands":{commands},'
        f'"executionTimeout":["{RUN_COMMAND_TIMEOUT_SECONDS}"]}}\' '
        f"--timeout-seconds 600"
    )


def bench_install_command() -> str:
    """Writes allreduce_bench.py on the node (the NCCL test brings it: the user data has no room
    for a script only that test runs)."""
    payload = base64.b64encode(
        gzip.compress(without_comments(boot_script("allreduce_bench.py")).encode(), 9, mtime=0)
    ).decode()
    return (
        f"install -d /usr/local/lib/gpu-cluster && echo {payload} | base64 -d | gunzip > "
        f"{ALLREDUCE_BENCH_PATH} && chmod 644 {ALLREDUCE_BENCH_PATH}"
    )
