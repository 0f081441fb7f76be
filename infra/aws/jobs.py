"""`gpuc run`, `gpuc jobs`, `gpuc cancel`: training jobs on a stack's running nodes.

A job's spec (command, restarts, environment, state) is one SSM SecureString parameter under
the cluster key, `/gpu-cluster/<stack's part>/jobs/<name>` (components/names.py), so a node that
joins later finds it at boot. Each node runs it under a systemd unit of its own
(boot/gpu-cluster-job.sh) and reports its state under `.../jobs/<name>/nodes/<instance id>`.
The nodes are found by the stack's tag in the stack's region, as `gpuc status` finds them: no
Pulumi state is needed.

AWS behaviour relied on (Systems Manager API reference): SendCommand with AWS-RunShellScript
runs on managed instances only (DescribeInstanceInformation lists them, PingStatus Online);
GetParametersByPath returns a hierarchy's parameters, nested ones with Recursive; a parameter
name may also be the path of others (/a/b and /a/b/c)."""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from gpu_cluster.components.jobs import (
    JOB_COMMAND,
    JOB_ENV_ALLOWED,
    NODE_ENV_NAMES,
    NODE_ENV_PREFIXES,
    workdir_key,
)
from gpu_cluster.components.names import (
    StackIdentity,
    job_bucket_parameter,
    job_parameter,
    jobs_log_group,
    jobs_path,
)
from gpu_cluster.infra.aws import call, client, emulator_lacks, paginate
from gpu_cluster.infra.aws.batches import (
    INSTANCE_INFORMATION_FILTER_VALUES,
    SEND_COMMAND_INSTANCE_IDS,
    chunks,
)
from gpu_cluster.infra.aws.status import Node, list_nodes
from gpu_cluster.infra.aws.workdir import upload_workdir
from gpu_cluster.infra.problems import AwsError
from gpu_cluster.infra.workdir import PackedWorkdir

JOB_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,39}$")
ACTIVE = "active"
CANCELLED = "cancelled"
FAILED = "failed"  # it stopped on every node at its start: no node starts it again
DEFAULT_MAX_RESTARTS = 3
SEND_TIMEOUT_SECONDS = 600  # the start command itself, not the job (a unit of its own)


class JobError(Exception):
    """A job request that cannot be carried out; nothing was started (the message says why)."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Workdir:
    """A job's code: a content-addressed archive in the stack's bucket (infra/workdir.py packs
    it, infra/aws/workdir.py uploads it); each node fetches it and checks the digest."""

    key: str
    sha256: str
    size: int  # bytes of the archive

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "sha256": self.sha256, "bytes": self.size}

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Workdir | None:
        if not data:
            return None
        return cls(str(data["key"]), str(data["sha256"]), int(data.get("bytes") or 0))


@dataclass(frozen=True)
class JobSpec:
    name: str
    command: list[str]
    max_restarts: int = DEFAULT_MAX_RESTARTS
    env: dict[str, str] = field(default_factory=dict)
    state: str = ACTIVE
    created: str = ""
    nodes: int = 0  # running nodes when it started (torchrun's --nnodes MIN:MAX takes 1:this)
    run: str = ""  # this run's id: each node's report carries it (clocks may disagree)
    port: int = 0  # its rendezvous port, its own among the cluster's active jobs (0: the default)
    workdir: Workdir | None = None  # the job's code, its working directory on every node
    setup: str = ""  # a shell command run once per node per job version, before torchrun
    image: str = ""  # a container image the job runs in ("": the AMI's own environment)

    def to_json(self) -> str:
        return json.dumps(
            {
                "name": self.name,
                "command": self.command,
                "maxRestarts": self.max_restarts,
                "env": self.env,
                "state": self.state,
                "created": self.created,
                "nodes": self.nodes,
                "run": self.run,
                "port": self.port,
                "workdir": self.workdir.to_dict() if self.workdir else None,
                "setup": self.setup,
                "image": self.image,
            },
            sort_keys=True,
        )

    @classmethod
    def from_json(cls, text: str) -> JobSpec:
        data = json.loads(text)
        return cls(
            name=data["name"],
            command=list(data["command"]),
            max_restarts=int(data.get("maxRestarts", DEFAULT_MAX_RESTARTS)),
            env=dict(data.get("env") or {}),
            state=data.get("state", ACTIVE),
            created=data.get("created", ""),
            nodes=int(data.get("nodes", 0)),
            run=str(data.get("run", "")),
            port=int(data.get("port") or 0),
            workdir=Workdir.from_dict(data.get("workdir")),
            setup=str(data.get("setup") or ""),
            image=str(data.get("image") or ""),
        )


# What a node's "slow network" report means (boot/gpu-cluster-jobs.sh reads NCCL_DEBUG=INFO at
# the job's start and stops it), and what to do: the node says which, this says why.
SLOW_NETWORK_WHY = {
    "TCP sockets": (
        "NCCL did not load the aws-ofi-nccl plugin (the Deep Learning AMI has it in "
        "/opt/amazon/ofi-nccl/lib); a container needs the plugin, libfabric and the "
        "/dev/infiniband devices (docker --device /dev/infiniband, or the EFA device plugin)"
    ),
    "libfabric provider": (
        "libfabric did not find the EFA devices (FI_PROVIDER set to another provider, or a "
        "container started without /dev/infiniband)"
    ),
    "EFA NICs": (
        "the job sees only some of the node's EFA devices: a container given only some "
        "/dev/infiniband/uverbs* devices, or NCCL_IB_HCA/FI_EFA_IFACE limiting them; "
        "all-reduce runs at that fraction of the node's bandwidth (SkyPilot #8391)"
    ),
}


def slow_network_why(detail: str) -> str:
    """The cause and the fix of a node's "slow network: ..." report ("" for other details)."""
    if not detail.startswith("slow network:"):
        return ""
    for key, why in SLOW_NETWORK_WHY.items():
        if key in detail:
            return f"{why}. Run anyway: gpuc run --env GPUC_ALLOW_SLOW_NETWORK=1 ..."
    return ""


# Rendezvous ports: one per active job, so two jobs never join each other's c10d store. The
# nodes' security group allows all traffic between members (EFA needs it), so any port works;
# torchrun's default is 29500 (torch.distributed.run).
FIRST_PORT, LAST_PORT = 29500, 29999


def free_port(jobs: list[JobSpec]) -> int:
    """The lowest rendezvous port no active job of the cluster uses."""
    used = {job.port or FIRST_PORT for job in jobs if job.state == ACTIVE}
    for port in range(FIRST_PORT, LAST_PORT + 1):
        if port not in used:
            return port
    raise JobError(
        f"{len(used)} jobs are active on this cluster, one per rendezvous port "
        f"{FIRST_PORT}-{LAST_PORT}: cancel some first (gpuc jobs, gpuc cancel)",
        3,
    )


def stack_nodes(ec2: Any, cluster: StackIdentity) -> list[Node]:
    """The stack's running nodes (its stack-id tag), never another stack's."""
    return [
        n for n in list_nodes(ec2, cluster.region) if n.belongs_to(cluster) and n.state == "running"
    ]


# A job's spec is one SSM parameter of the standard tier: its value at most 4 KB (Systems
# Manager API reference, PutParameter: "Standard parameters have a value limit of 4 KB").
SPEC_LIMIT_BYTES = 4096


def check_spec_size(spec: JobSpec) -> None:
    """The spec fits its parameter: at most 4 KB, and no ``{{ }}`` (PutParameter: "You can't
    include values wrapped in double brackets {{}}": SSM refuses the value)."""
    text = spec.to_json()
    if "{{" in text:
        raise JobError(
            "the job's command, --setup or --env holds '{{': SSM Parameter Store refuses "
            "values with {{...}} in them; put that text in a script in --workdir (e.g. --setup "
            "'bash setup.sh'); nothing was started",
            2,
        )
    size = len(text.encode())
    if size > SPEC_LIMIT_BYTES:
        raise JobError(
            f"the job's spec is {size} bytes (its command, --setup and --env): SSM keeps at most "
            f"{SPEC_LIMIT_BYTES}; put long commands in a script in --workdir (e.g. --setup "
            "'bash setup.sh'); nothing was started",
            2,
        )


def stack_bucket(ssm: Any, cluster: StackIdentity) -> str:
    """The stack's bucket, as `pulumi up` recorded it (components/names.job_bucket_parameter)."""
    name = job_bucket_parameter(cluster)
    try:
        parameter = call(ssm, "ssm", "GetParameter", Name=name, WithDecryption=True)
    except AwsError as error:
        if error.code == "ParameterNotFound":
            raise JobError(
                f"stack '{cluster.stack}' has not recorded its bucket ({name}): run `pulumi up` "
                "with this version of gpu-cluster first; nothing was started",
                4,
            ) from error
        raise
    return parameter["Parameter"]["Value"]


def check_name(name: str) -> None:
    if not JOB_NAME.match(name):
        raise JobError(
            f"--name {name!r}: a job name is 1-40 lowercase letters, digits and '-', starting "
            "with a letter or digit (it names a systemd unit and an SSM parameter)",
            2,
        )


def existing_job(ssm: Any, cluster: StackIdentity, name: str) -> JobSpec | None:
    try:
        parameter = call(
            ssm, "ssm", "GetParameter", Name=job_parameter(cluster, name), WithDecryption=True
        )
    except AwsError as error:
        if error.code == "ParameterNotFound":
            return None
        raise
    return JobSpec.from_json(parameter["Parameter"]["Value"])


def unreachable(ssm: Any, instance_ids: list[str]) -> list[str] | None:
    """The nodes SSM cannot run a command on (None when this endpoint cannot tell); asked
    about INSTANCE_INFORMATION_FILTER_VALUES nodes at a time."""
    online: set[str] = set()
    try:
        for batch in chunks(instance_ids, INSTANCE_INFORMATION_FILTER_VALUES):
            listed = paginate(
                ssm,
                "ssm",
                "DescribeInstanceInformation",
                "InstanceInformationList",
                Filters=[{"Key": "InstanceIds", "Values": batch}],
            )
            online |= {i["InstanceId"] for i in listed if i.get("PingStatus") == "Online"}
    except NotImplementedError:  # moto's in-process mock has no such API
        return None
    except AwsError as error:
        if emulator_lacks(error):
            return None
        raise
    return sorted(set(instance_ids) - online)


def failed_starts(ssm: Any, command_ids: str | list[str]) -> dict[str, str]:
    """Nodes whose start command (one per batch of nodes) ended other than Success, with its
    output ({} when this endpoint cannot tell)."""
    if isinstance(command_ids, str):
        command_ids = [command_ids]
    try:
        invocations = [
            invocation
            for command_id in command_ids
            for invocation in paginate(
                ssm,
                "ssm",
                "ListCommandInvocations",
                "CommandInvocations",
                CommandId=command_id,
                Details=True,
            )
        ]
    except NotImplementedError:  # moto's in-process mock
        return {}
    except AwsError as error:
        if emulator_lacks(error):
            return {}
        raise
    return {
        i["InstanceId"]: (
            " ".join((p.get("Output") or "").strip() for p in i.get("CommandPlugins") or []).strip()
            or i.get("StatusDetails", i["Status"])
        )
        for i in invocations
        if i["Status"] in FINISHED and i["Status"] != "Success"
    }


def store_spec(
    ssm: Any, cluster: StackIdentity, key_alias: str, spec: JobSpec, **extra: Any
) -> None:
    """The job's spec, encrypted with the cluster key, replacing the last one."""
    call(
        ssm,
        "ssm",
        "PutParameter",
        Name=job_parameter(cluster, spec.name),
        Value=spec.to_json(),
        Type="SecureString",
        KeyId=key_alias,
        Overwrite=True,
        **extra,
    )


def tell_nodes(
    ssm: Any,
    ids: list[str],
    verb: str,
    name: str,
    comment: str,
    parameters: dict[str, list[str]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """`gpu-cluster-jobs VERB NAME` on each node, through SSM Run Command (``comment``: the
    gpuc command that sent it; ``parameters``: the document's others). One request: at most
    SEND_COMMAND_INSTANCE_IDS nodes (tell_in_batches sends more)."""
    commands = {"commands": [f"{JOB_COMMAND} {verb} {shlex.quote(name)}"]}
    parameters = {**commands, **(parameters or {})}
    return call(
        ssm,
        "ssm",
        "SendCommand",
        InstanceIds=ids,
        DocumentName="AWS-RunShellScript",
        Comment=f"{comment} {name}"[:100],
        Parameters=parameters,
        **extra,
    )


def tell_in_batches(
    ssm: Any, ids: list[str], verb: str, name: str, comment: str, **options: Any
) -> tuple[list[str], list[str], dict[str, AwsError]]:
    """tell_nodes in batches of SEND_COMMAND_INSTANCE_IDS: (command ids, nodes told, the
    error of each batch that failed by its first node). ``options``: tell_nodes' own; with
    ``stop_at_failure`` no batch is sent after one failed."""
    stop_at_failure = options.pop("stop_at_failure", False)
    command_ids: list[str] = []
    told: list[str] = []
    failed: dict[str, AwsError] = {}
    for batch in chunks(ids, SEND_COMMAND_INSTANCE_IDS):
        try:
            sent = tell_nodes(ssm, batch, verb, name, comment, **options)
        except AwsError as error:
            failed[batch[0]] = error
            if stop_at_failure:
                break
            continue
        command_ids.append(sent["Command"]["CommandId"])
        told += batch
    return command_ids, told, failed


def run_job(
    ec2: Any,
    ssm: Any,
    region: str,
    stack: str,
    cluster: StackIdentity,
    key_alias: str,
    name: str,
    command: list[str],
    max_restarts: int = DEFAULT_MAX_RESTARTS,
    env: dict[str, str] | None = None,
    now: datetime | None = None,
    *,
    workdir: PackedWorkdir | None = None,
    setup: str = "",
    image: str = "",
    s3: Any = None,
) -> tuple[JobSpec, list[str], list[str]]:
    """Store the spec, then start it on every running node: (spec, node ids, the command ids,
    one per batch of SEND_COMMAND_INSTANCE_IDS nodes).
    ``workdir``: the job's code, uploaded (once: content-addressed) to the stack's bucket
    after every other check passed; ``setup``, ``image``: see JobSpec."""
    check_name(name)
    if not command:
        raise JobError("gpuc run: give the command after --, e.g. -- python train.py", 2)
    nodes = stack_nodes(ec2, cluster)
    if not nodes:
        raise JobError(
            f"stack '{stack}' has no running node in {region}: start it first (pulumi up, or "
            f"gpuc resume --stack {stack}); nothing was started",
            4,
        )
    ids = [n.instance_id for n in nodes]
    current = existing_job(ssm, cluster, name)
    if current is not None and current.state == ACTIVE:
        raise JobError(
            f"a job named '{name}' is already running on stack '{stack}': gpuc cancel --stack "
            f"{stack} --job {name} first, or give another --name; nothing was started",
            3,
        )
    missing = unreachable(ssm, ids)
    if missing:
        raise JobError(
            f"node(s) {', '.join(missing)} of stack '{stack}' are not reachable by SSM (agent "
            "not registered or offline; see `systemctl status amazon-ssm-agent` through the "
            "console, or wait for a booting node); nothing was started",
            4,
        )
    spec = JobSpec(
        name=name,
        command=list(command),
        max_restarts=max_restarts,
        env=dict(env or {}),
        created=(now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        nodes=len(ids),
        run=uuid.uuid4().hex[:12],
        port=free_port([status.spec for status in list_jobs(ssm, cluster)]),
        workdir=(
            Workdir(workdir_key(workdir.sha256), workdir.sha256, workdir.size) if workdir else None
        ),
        setup=setup,
        image=image,
    )
    check_spec_size(spec)
    if workdir is not None:
        bucket = stack_bucket(ssm, cluster)
        upload_workdir(s3 if s3 is not None else client("s3", region), bucket, workdir)
    store_spec(
        ssm, cluster, key_alias, spec, Description=f"gpu-cluster job {name} of stack {stack}"
    )
    command_ids, told, failed = tell_in_batches(
        ssm,
        ids,
        "start",
        name,
        "gpuc run",
        TimeoutSeconds=SEND_TIMEOUT_SECONDS,
        parameters={"executionTimeout": [str(SEND_TIMEOUT_SECONDS)]},
        stop_at_failure=True,
    )
    if failed:
        (error,) = failed.values()
        # nothing half-started: a later node must not find a job that never ran, and the
        # batches already sent are stopped
        call(ssm, "ssm", "DeleteParameter", Name=job_parameter(cluster, name))
        if not told:
            raise error
        _, _, not_stopped = tell_in_batches(ssm, told, "stop", name, "gpuc run")
        undone = (
            "they were told to stop it; nothing was left running"
            if not not_stopped
            else "telling them to stop it failed too ("
            + "; ".join(str(e) for e in not_stopped.values())
            + f"): run gpuc cancel --stack {stack} --job {name}"
        )
        raise AwsError(
            f"{error} The job reached {len(told)} of {len(ids)} node(s) before this; {undone}",
            error.code,
        ) from error
    return spec, ids, command_ids


ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
# SSM Run Command invocation states that are final (ListCommandInvocations, Status)
# (Undeliverable, Terminated, DeliveryTimedOut, ... are StatusDetails under these)
FINISHED = {"Success", "Failed", "TimedOut", "Cancelled"}
START_WATCH_SECONDS = 30  # a job that fails at once fails inside this (torchrun's restarts)


def parse_env(pairs: list[str]) -> dict[str, str]:
    """`--env NAME=VALUE` pairs; a bad one is a usage error naming it. The job's shell reads
    them before it starts torchrun, so the node's own variables are refused."""
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not ENV_NAME.match(name):
            raise JobError(
                f"--env {pair!r}: give NAME=VALUE, NAME upper-case letters, digits and '_' not "
                "starting with a digit (e.g. --env NCCL_DEBUG=WARN)",
                2,
            )
        if name not in JOB_ENV_ALLOWED and (
            name in NODE_ENV_NAMES or name.startswith(NODE_ENV_PREFIXES)
        ):
            raise JobError(
                f"--env {name}: the node sets {name} itself (its cluster settings, the AWS CLI, "
                "gpu-cluster or torchrun); choose another name for your job's variable",
                2,
            )
        env[name] = value
    return env


def of_this_run(report: dict[str, Any], spec: JobSpec) -> bool:
    """A node's report of this run of the job, not of an earlier run under the same name: it
    carries the run's id (a spec from before run ids: the node's time against the spec's,
    both RFC 3339 UTC to the second)."""
    if spec.run:
        return report.get("run") == spec.run
    return str(report.get("updated", "")) >= spec.created


def node_reports(ssm: Any, cluster: StackIdentity, spec: JobSpec) -> dict[str, dict[str, Any]]:
    """Each node's own report of this run of a job: instance id -> {"state", "detail", ...}."""
    reports: dict[str, dict[str, Any]] = {}
    prefix = f"{job_parameter(cluster, spec.name)}/nodes/"
    for parameter in paginate(
        ssm, "ssm", "GetParametersByPath", "Parameters", Path=prefix.rstrip("/")
    ):
        try:
            report = json.loads(parameter["Value"])
        except json.JSONDecodeError:
            continue
        if of_this_run(report, spec):
            reports[parameter["Name"].removeprefix(prefix)] = report
    return reports


@dataclass(frozen=True)
class StartCheck:
    """What the nodes said in the first seconds: who could not start it, who it failed on."""

    not_started: dict[str, str]  # node -> the start command's error
    failed: dict[str, str]  # node -> its report's detail
    reported: int  # nodes that reported at all

    def all_failed(self, nodes: int) -> bool:
        return len(self.not_started) + len(self.failed) >= nodes > 0


def watch_start(
    ssm: Any,
    cluster: StackIdentity,
    spec: JobSpec,
    command_ids: str | list[str],
    ids: list[str],
    seconds: float = START_WATCH_SECONDS,
    sleep=None,
    clock=None,
) -> StartCheck:
    """Poll the start command and the nodes' reports for ``seconds``; stop early once every
    node has failed or finished."""
    sleep = sleep or time.sleep
    clock = clock or time.monotonic
    deadline = clock() + seconds
    while True:
        not_started = failed_starts(ssm, command_ids)
        reports = node_reports(ssm, cluster, spec)
        failed = {
            node: report.get("detail") or "failed"
            for node, report in reports.items()
            if node in ids and report.get("state") == "failed"
        }
        check = StartCheck(not_started, failed, len(reports))
        settled = sum(1 for r in reports.values() if r.get("state") in ("failed", "done"))
        if check.all_failed(len(ids)) or settled >= len(ids) or clock() >= deadline:
            return check
        sleep(2)


@dataclass(frozen=True)
class JobStatus:
    spec: JobSpec
    nodes: dict[str, dict[str, Any]]  # instance id -> {"state", "restarts", "updated"}


def list_jobs(ssm: Any, cluster: StackIdentity) -> list[JobStatus]:
    """Every job of the cluster with each node's own report."""
    specs: dict[str, JobSpec] = {}
    reports: dict[str, dict[str, dict[str, Any]]] = {}
    prefix = jobs_path(cluster) + "/"
    for parameter in paginate(
        ssm,
        "ssm",
        "GetParametersByPath",
        "Parameters",
        Path=jobs_path(cluster),
        Recursive=True,
        WithDecryption=True,
    ):
        relative = parameter["Name"].removeprefix(prefix).split("/")
        if len(relative) == 1:
            specs[relative[0]] = JobSpec.from_json(parameter["Value"])
        elif len(relative) == 3 and relative[1] == "nodes":
            try:
                report = json.loads(parameter["Value"])
            except json.JSONDecodeError:
                report = {"state": parameter["Value"]}
            reports.setdefault(relative[0], {})[relative[2]] = report
    return [
        JobStatus(
            specs[name],
            {
                node: report
                for node, report in reports.get(name, {}).items()
                if of_this_run(report, specs[name])
            },
        )
        for name in sorted(specs)
    ]


def cancel_job(
    ec2: Any, ssm: Any, region: str, stack: str, cluster: StackIdentity, key_alias: str, name: str
) -> list[str]:
    """Mark the job cancelled (no node starts it again) and stop it where it runs."""
    current = existing_job(ssm, cluster, name)
    if current is None:
        raise JobError(f"stack '{stack}' has no job named '{name}' (gpuc jobs --stack {stack})", 3)
    store_spec(ssm, cluster, key_alias, dataclasses.replace(current, state=CANCELLED))
    ids = [n.instance_id for n in stack_nodes(ec2, cluster)]
    _, _, failed = tell_in_batches(ssm, ids, "stop", name, "gpuc cancel")
    if failed:
        missed = [
            node
            for batch in chunks(ids, SEND_COMMAND_INSTANCE_IDS)
            if batch[0] in failed
            for node in batch
        ]
        first = next(iter(failed.values()))
        raise AwsError(
            f"job '{name}' is cancelled (no node starts it again), but the stop did not reach "
            f"{len(missed)} of {len(ids)} node(s) ({', '.join(missed)}): {first} Run gpuc "
            f"cancel --stack {stack} --job {name} again to stop it there",
            first.code,
        )
    return ids


@dataclass(frozen=True)
class LogLine:
    timestamp: int  # ms since the epoch, as CloudWatch Logs keeps it
    node: str  # the stream: one per node (the instance id)
    text: str


def job_log_lines(
    logs: Any,
    cluster: StackIdentity,
    name: str,
    node: str | None = None,
    start_ms: int | None = None,
) -> list[LogLine]:
    """The job's output from every node (or one), oldest first, its name prefix removed."""
    marker = f"[{name}] "
    arguments: dict[str, Any] = {
        "logGroupName": jobs_log_group(cluster),
        # the name as a quoted term (a filter pattern's brackets mean fields); the exact
        # "[name] " prefix is checked here
        "filterPattern": f'"{name}"',
    }
    if node:
        arguments["logStreamNames"] = [node]
    if start_ms is not None:
        arguments["startTime"] = start_ms
    found = [
        LogLine(event["timestamp"], event["logStreamName"], event["message"])
        for event in paginate(logs, "logs", "FilterLogEvents", "events", **arguments)
        if event["message"].startswith(marker)
    ]
    return sorted(
        (LogLine(line.timestamp, line.node, line.text.removeprefix(marker)) for line in found),
        key=lambda line: (line.timestamp, line.node),
    )
