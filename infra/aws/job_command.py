"""The `gpuc run`, `gpuc jobs`, `gpuc logs` and `gpuc cancel` commands: arguments in, text or
JSON out. They agree with each other: a stack without a stack file is refused with a did-you-mean
(its file names the cluster and region), the data and inference stacks are refused with one
message each, a job that does not exist gets one message (with the stack's jobs), every result
has --json with camelCase keys, and every error is the document outcome.report prints."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_cluster.components.jobs import workdir_key
from gpu_cluster.components.names import StackIdentity, key_alias
from gpu_cluster.infra.aws import call, client
from gpu_cluster.infra.aws.job_file import (
    JobFile,
    JobFileError,
    default_job_name,
    load_job_file,
    setup_issue,
)
from gpu_cluster.infra.aws.job_image import ImageError, check_image, image_context, parse_image
from gpu_cluster.infra.aws.jobs import (
    DEFAULT_MAX_RESTARTS,
    FAILED,
    START_WATCH_SECONDS,
    JobError,
    JobSpec,
    JobStatus,
    StartCheck,
    Workdir,
    cancel_job,
    check_name,
    check_spec_size,
    existing_job,
    job_log_lines,
    list_jobs,
    parse_env,
    run_job,
    slow_network_why,
    stack_bucket,
    store_spec,
    watch_start,
)
from gpu_cluster.infra.aws.workdir import stored
from gpu_cluster.infra.outcome import INPUT, OK, USAGE, CommandError, problem_dicts
from gpu_cluster.infra.problems import AwsError
from gpu_cluster.infra.stack_files import (
    StackFileError,
    available_stacks,
    load_stack_config,
    project_root,
)
from gpu_cluster.infra.suggest import suggest
from gpu_cluster.infra.workdir import (
    PackedWorkdir,
    WorkdirError,
    human,
    missing_script_hint,
    pack_workdir,
)

ROLE = "gpu-cluster:role"


def _clients(region: str) -> tuple[Any, Any]:
    return client("ec2", region), client("ssm", region)


def _failed(error: JobError) -> CommandError:
    return CommandError(error.code, str(error))


# --- which stack: the same rules for every jobs command -----------------------------------


def training_stacks(root: Path | None = None) -> list[str]:
    """The stacks whose nodes run jobs (role cluster, the default), by their stack files."""
    root = root or project_root()
    found = []
    for stack in available_stacks(root):
        try:
            role = load_stack_config(stack, root).get(ROLE) or "cluster"
        except StackFileError:
            continue
        if role == "cluster":
            found.append(stack)
    return found


def job_stack_settings(stack: str, root: Path | None = None) -> dict[str, str]:
    """The stack file's settings of a stack jobs run on, or the one refusal every jobs command
    gives: no stack file (the stacks and a did-you-mean; the file names the cluster and the
    region, so there is no guessing), the data stack, an inference stack."""
    try:
        settings = load_stack_config(stack, root)
    except StackFileError as error:
        raise CommandError(INPUT, str(error)) from error
    role = settings.get(ROLE) or "cluster"
    if role == "cluster":
        return settings
    stacks = training_stacks(root)
    where = (
        f"jobs run on the training stacks: {', '.join(stacks)} (e.g. --stack {stacks[-1]})"
        if stacks
        else "jobs run on a training stack (role: cluster, the default), and this project has none"
    )
    what = (
        "is the data stack (the bucket and key that keep datasets and checkpoints): it has no "
        "GPU nodes"
        if role == "data"
        else f"has role '{role}': its nodes serve a model, they do not run training jobs"
    )
    raise CommandError(INPUT, f"stack '{stack}' {what}; {where}")


def no_such_job(stack: str, name: str, names: list[str]) -> CommandError:
    """The one message for a job the stack does not have (gpuc jobs/logs/cancel --job)."""
    hint = suggest(name, names)
    listed = f"its jobs: {', '.join(names)}" if names else "it has no jobs"
    return CommandError(
        INPUT,
        f"stack '{stack}' has no job named '{name}': {hint}{listed} (gpuc jobs --stack {stack})",
        [
            {
                "path": "--job",
                "problem": f"stack '{stack}' has no job named '{name}'",
                "received": name,
                "allowed": ", ".join(names) or "(none yet)",
                "fix": hint.strip() or f"gpuc run --stack {stack} ... starts one",
            }
        ],
    )


def known_job(ssm: Any, stack: str, cluster: StackIdentity, name: str) -> JobSpec:
    spec = existing_job(ssm, cluster, name)
    if spec is None:
        raise no_such_job(stack, name, [status.spec.name for status in list_jobs(ssm, cluster)])
    return spec


# --- gpuc run -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RunFlags:
    """What `gpuc run` was given on the command line (None: not given)."""

    command: list[str] = field(default_factory=list)
    name: str | None = None
    max_restarts: int | None = None
    env: list[str] = field(default_factory=list)
    workdir: str | None = None
    setup: str | None = None
    image: str | None = None
    job_file: str | None = None


@dataclass(frozen=True)
class JobRequest:
    """The job to start: the flags over the job file, every value checked."""

    name: str
    command: list[str]
    max_restarts: int = DEFAULT_MAX_RESTARTS
    env: dict[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    setup: str = ""
    image: str = ""
    image_from: str = "--image"  # where the image was given, for its errors


def file_error(error: JobFileError) -> CommandError:
    return CommandError(INPUT, str(error), problem_dicts(error.problems))


def job_request(flags: RunFlags) -> JobRequest:
    """The flags over the job file (a flag wins; --env variable by variable), checked: a bad
    file is INPUT with every problem, a bad flag USAGE. Nothing has touched AWS yet."""
    try:
        job = load_job_file(flags.job_file) if flags.job_file else JobFile(Path("."))
    except JobFileError as error:
        raise file_error(error) from error
    command = list(flags.command) or list(job.command or [])
    if not command:
        also = f", or command: in {flags.job_file}" if flags.job_file else ""
        raise CommandError(
            USAGE, f"gpuc run: give the command after --, e.g. -- python train.py{also}"
        )
    try:
        if flags.name is not None:
            check_name(flags.name)
        env = {**job.env, **parse_env(flags.env)}
    except JobError as error:
        raise _failed(error) from error
    if flags.setup is not None and (why := setup_issue(flags.setup)):
        raise CommandError(
            USAGE,
            f"--setup {flags.setup[:60]!r}: {why}; give a shell command, e.g. --setup 'pip "
            "install -r requirements.txt' (a long one: a script in the workdir, --setup 'bash "
            "setup.sh')",
        )
    if flags.image is not None and not flags.image.strip():
        raise CommandError(
            USAGE, "--image '': give an image, e.g. --image nvcr.io/nvidia/pytorch:24.10-py3"
        )
    max_restarts = next(
        (v for v in (flags.max_restarts, job.max_restarts) if v is not None),
        DEFAULT_MAX_RESTARTS,
    )
    request = JobRequest(
        name=flags.name or job.name or default_job_name(command),
        command=command,
        max_restarts=max_restarts,
        env=env,
        workdir=Path(flags.workdir) if flags.workdir is not None else job.workdir,
        setup=flags.setup if flags.setup is not None else job.setup or "",
        image=flags.image if flags.image is not None else job.image or "",
        image_from="--image" if flags.image is not None else f"{flags.job_file}: image",
    )
    check_largest_spec(request)
    return request


def check_largest_spec(request: JobRequest) -> None:
    """The spec, at its largest once started (run_job adds the run, port, node count and the
    code's key), fits its SSM parameter: checked before anything is packed or uploaded."""
    digest = "0" * 64
    spec = JobSpec(
        request.name,
        request.command,
        request.max_restarts,
        request.env,
        created="2000-01-01T00:00:00Z",
        nodes=99999,
        run="0" * 12,
        port=29999,
        workdir=Workdir(workdir_key(digest), digest, 10**12) if request.workdir else None,
        setup=request.setup,
        image=request.image,
    )
    try:
        check_spec_size(spec)
    except JobError as error:
        raise _failed(error) from error


def code_in_bucket(ssm: Any, s3: Any, cluster: StackIdentity, packed: PackedWorkdir) -> bool | None:
    """Whether the stack's bucket holds this archive already, so the upload is skipped (None
    when it cannot be told here: run_job then says what is missing or refused)."""
    try:
        return stored(s3, stack_bucket(ssm, cluster), packed)
    except (AwsError, JobError):
        return None


def packed_workdir(request: JobRequest) -> PackedWorkdir | None:
    """The job's code, packed (None without a workdir); a folder it refuses is a message."""
    if request.workdir is None:
        return None
    try:
        return pack_workdir(request.workdir)
    except WorkdirError as error:
        raise CommandError(error.code, str(error)) from error


def checked_image(request: JobRequest, stack: str, region: str, settings: dict[str, str]) -> str:
    """The image, checked against the stack (its ECR repositories, its internet access) and,
    for an ECR image, looked up in its registry. Nothing is uploaded or started before."""
    if not request.image:
        return ""
    try:
        ref = parse_image(request.image)
        account = call(client("sts", region), "sts", "GetCallerIdentity")["Account"]
        ecr = client("ecr", ref.ecr_region or region) if ref.is_ecr else None
        check_image(request.image, image_context(settings, region, account, stack), ecr)
    except ImageError as error:
        where = f"{request.image_from}: " if request.image_from != "--image" else ""
        raise CommandError(error.code, f"{where}{error}") from error
    return request.image


def command_run(
    stack: str,
    cluster: StackIdentity,
    region: str,
    flags: RunFlags,
    as_json: bool,
    watch_seconds: float = START_WATCH_SECONDS,
    settings: dict[str, str] | None = None,
) -> int:
    """Read the job file and merge the flags over it, check everything (nothing uploaded or
    started from a bad input), pack the workdir, check the image, then start it."""
    request = job_request(flags)
    packed = packed_workdir(request)
    if hint := missing_script_hint(request.command, packed, Path.cwd()):
        print(f"warning: {hint}", file=sys.stderr)
    image = checked_image(request, stack, region, settings or {})
    ec2, ssm = _clients(region)
    s3 = client("s3", region) if packed is not None else None
    present = code_in_bucket(ssm, s3, cluster, packed) if packed is not None else None
    key = key_alias(cluster)
    try:
        spec, nodes, command_ids = run_job(
            ec2, ssm, region, stack, cluster, key, request.name, request.command,
            request.max_restarts, request.env, **code_arguments(packed, request.setup, image, s3),
        )  # fmt: skip
    except JobError as error:
        raise _failed(error) from error
    name = request.name
    code = code_json(packed, present)
    if code and not as_json:
        print(code_line(code))
    check = None
    if watch_seconds > 0:
        if not as_json:
            print(f"watching the start for {watch_seconds:g} s (--watch 0 skips)", file=sys.stderr)
        check = watch_start(ssm, cluster, spec, command_ids, nodes, watch_seconds)
        if check.all_failed(len(nodes)):
            # nothing half-started: no node that joins later starts a job that cannot run
            store_spec(ssm, cluster, key, dataclasses.replace(spec, state=FAILED))
            raise CommandError(INPUT, start_failure(stack, name, check))
    if as_json:
        document = {
            "job": name,
            "stack": stack,
            "nodes": nodes,
            "commandId": command_ids[0],  # the first batch's (one per 50 nodes: commandIds)
            "commandIds": command_ids,
            "spec": json.loads(spec.to_json()),
        }
        if code:
            document["code"] = code
        if check is not None:
            document["failedAtOnce"] = {
                **{node: f"could not start it: {why}" for node, why in check.not_started.items()},
                **check.failed,
            }
        dump(document)
        return OK
    print(
        f"job '{name}' started on {len(nodes)} node(s) of stack '{stack}' ({', '.join(nodes)}); "
        f"SSM command{'s' if len(command_ids) > 1 else ''} {', '.join(command_ids)}"
    )
    if check is not None and (check.failed or check.not_started):
        # some nodes failed at once, the others run on (elastic): say which
        lines = [f"warning: job '{name}' failed at once on some nodes:", *failure_lines(check)]
        lines.append(f"their output: gpuc logs --stack {stack} --job {name}")
        print("\n".join(lines), file=sys.stderr)
    print(
        f"follow it: gpuc jobs --stack {stack}; stop it: gpuc cancel --stack {stack} --job {name}"
    )
    return OK


def code_arguments(packed: PackedWorkdir | None, setup: str, image: str, s3: Any) -> dict[str, Any]:
    """run_job's keyword arguments for what was given (none for a plain command)."""
    given = {"workdir": packed, "s3": s3, "setup": setup, "image": image}
    return {key: value for key, value in given.items() if value}


def code_json(packed: PackedWorkdir | None, present: bool | None) -> dict[str, Any]:
    """What was uploaded of the job's code ({} without a workdir)."""
    if packed is None:
        return {}
    return {
        "files": len(packed.files),
        "bytes": packed.size,
        "sourceBytes": packed.source_bytes,
        "sha256": packed.sha256,
        "key": workdir_key(packed.sha256),
        "uploaded": None if present is None else not present,
    }


def code_line(code: dict[str, Any]) -> str:
    how = {True: "uploaded", False: "already in the bucket", None: "in the bucket"}
    files = f"{code['files']} file{'s' if code['files'] != 1 else ''}"
    return (
        f"code: {files}, {human(code['bytes'])}, sha256 {code['sha256'][:12]}…, "
        f"{how[code['uploaded']]}"
    )


def dump(document: Any) -> None:
    json.dump(document, sys.stdout, indent=2)
    sys.stdout.write("\n")


def failure_lines(check: StartCheck) -> list[str]:
    """Each node the job could not start or failed on, and why."""
    lines = [f"  {node}: could not start it: {why}" for node, why in check.not_started.items()]
    for node, detail in check.failed.items():
        why = slow_network_why(detail)
        lines.append(f"  {node}: {detail}" + (f" ({why})" if why else ""))
    return lines


def start_failure(stack: str, name: str, check: StartCheck) -> str:
    """Why the job stopped on every node at once, node by node, and where to look."""
    return "\n".join(
        [
            f"job '{name}' did not keep running on any node of stack '{stack}':",
            *failure_lines(check),
            f"its output: gpuc logs --stack {stack} --job {name}; the job is marked failed (no "
            "node starts it again); fix it and run it again under the same name",
        ]
    )


def status_json(status: JobStatus) -> dict[str, Any]:
    """A job and each node's own report, as the node wrote it (a setup or image pull failure's
    detail, several lines, unchanged), plus the cause of a slow network."""
    spec = json.loads(status.spec.to_json())
    return {
        **{key: value for key, value in spec.items() if key != "nodes"},
        "nodesAtStart": status.spec.nodes,
        "nodes": {
            node: {**report, "why": why}
            if (why := slow_network_why(report.get("detail", "")))
            else report
            for node, report in status.nodes.items()
        },
    }


def job_lines(status: JobStatus) -> list[str]:
    """A job's line, what it runs with, and a line per node (a detail of several lines, such
    as a failed setup's last output, indented under it)."""
    spec = status.spec
    lines = [f"{spec.name:<24}{spec.state:<11}{' '.join(spec.command)}"]
    if spec.image:
        lines.append(f"    image: {spec.image}")
    if spec.workdir:
        lines.append(f"    code: sha256 {spec.workdir.sha256[:12]}…, {human(spec.workdir.size)}")
    if spec.setup:
        first, *rest = spec.setup.splitlines() or [""]
        lines.append(
            f"    setup: {first}"
            + (f" (+{len(rest)} line{'s' if len(rest) > 1 else ''})" if rest else "")
        )
    for node, report in sorted(status.nodes.items()):
        first, *more = str(report.get("detail") or "").splitlines() or [""]
        detail = f" ({first})" if first else ""
        restarts = int(report.get("restarts") or 0)
        detail += f", restarted {restarts}x" if restarts else ""
        lines.append(
            f"    {node:<22}{report.get('state', '?')}{detail}  {report.get('updated', '')}"
        )
        lines += [f"        {line}" for line in more]
        if why := slow_network_why(report.get("detail", "")):
            lines.append(f"        why: {why}")
    return lines


def command_jobs(
    cluster: StackIdentity, region: str, stack: str, as_json: bool, job: str | None = None
) -> int:
    """The stack's jobs (or the one --job names: one object under --json) on each node."""
    _, ssm = _clients(region)
    jobs = list_jobs(ssm, cluster)
    if job is not None:
        chosen = [status for status in jobs if status.spec.name == job]
        if not chosen:
            raise no_such_job(stack, job, [status.spec.name for status in jobs])
        jobs = chosen
    if as_json:
        dump(status_json(jobs[0]) if job is not None else [status_json(j) for j in jobs])
        return OK
    if not jobs:
        print(f"stack '{stack}' has no jobs (gpuc run --stack {stack} -- python train.py)")
        return OK
    for status in jobs:
        print("\n".join(job_lines(status)))
    return OK


def command_cancel(
    stack: str, cluster: StackIdentity, region: str, name: str, as_json: bool = False
) -> int:
    ec2, ssm = _clients(region)
    known_job(ssm, stack, cluster, name)
    try:
        nodes = cancel_job(ec2, ssm, region, stack, cluster, key_alias(cluster), name)
    except JobError as error:
        raise _failed(error) from error
    if as_json:
        dump({"job": name, "stack": stack, "state": "cancelled", "nodes": nodes})
        return OK
    print(f"job '{name}' cancelled; stop sent to {len(nodes)} running node(s)")
    return OK


FOLLOW_SECONDS = 5


def command_logs(
    stack: str,
    cluster: StackIdentity,
    region: str,
    name: str,
    node: str | None,
    follow: bool,
    as_json: bool,
) -> int:
    """The job's output from every node, interleaved by time, each line with its node (--json:
    one object a line: timestamp, node, text); --follow keeps polling (Ctrl-C ends it)."""
    _, ssm = _clients(region)
    known_job(ssm, stack, cluster, name)
    logs = client("logs", region)
    start: int | None = None
    try:
        while True:
            lines = job_log_lines(logs, cluster, name, node, start)
            for line in lines:
                if as_json:
                    print(json.dumps(vars(line)))
                else:
                    print(f"{line.node}  {line.text}")
            sys.stdout.flush()
            if lines:
                start = lines[-1].timestamp + 1
            if not follow:
                return OK
            time.sleep(FOLLOW_SECONDS)
    except KeyboardInterrupt:
        return OK
