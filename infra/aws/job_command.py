"""The `gpuc run`, `gpuc jobs` and `gpuc cancel` commands: arguments in, text or JSON out."""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from typing import Any

from gpu_cluster.components.jobs import cluster_key_alias
from gpu_cluster.infra.aws import client
from gpu_cluster.infra.aws.jobs import (
    FAILED,
    START_WATCH_SECONDS,
    JobError,
    JobStatus,
    StartCheck,
    cancel_job,
    job_log_lines,
    list_jobs,
    parse_env,
    run_job,
    slow_network_why,
    store_spec,
    watch_start,
)
from gpu_cluster.infra.outcome import INPUT, OK, CommandError


def _clients(region: str) -> tuple[Any, Any]:
    return client("ec2", region), client("ssm", region)


def _failed(error: JobError) -> CommandError:
    return CommandError(error.code, str(error))


def command_run(
    stack: str,
    cluster: str,
    region: str,
    name: str,
    command: list[str],
    max_restarts: int,
    as_json: bool,
    env: list[str] | None = None,
    watch_seconds: float = START_WATCH_SECONDS,
) -> int:
    ec2, ssm = _clients(region)
    key = cluster_key_alias(cluster)
    try:
        spec, nodes, command_id = run_job(
            ec2, ssm, region, stack, cluster, key, name, command, max_restarts,
            parse_env(env or []),
        )  # fmt: skip
    except JobError as error:
        raise _failed(error) from error
    check = None
    if watch_seconds > 0:
        if not as_json:
            print(f"watching the start for {watch_seconds:g} s (--watch 0 skips)", file=sys.stderr)
        check = watch_start(ssm, cluster, spec, command_id, nodes, watch_seconds)
        if check.all_failed(len(nodes)):
            # nothing half-started: no node that joins later starts a job that cannot run
            store_spec(ssm, cluster, key, dataclasses.replace(spec, state=FAILED))
            raise CommandError(INPUT, start_failure(stack, name, check))
    if as_json:
        json.dump(
            {
                "job": name,
                "nodes": nodes,
                "commandId": command_id,
                "spec": json.loads(spec.to_json()),
            },
            sys.stdout,
            indent=2,
        )
        sys.stdout.write("\n")
        return OK
    print(
        f"job '{name}' started on {len(nodes)} node(s) of stack '{stack}' ({', '.join(nodes)}); "
        f"SSM command {command_id}"
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
    spec = status.spec
    return {
        "name": spec.name,
        "state": spec.state,
        "command": spec.command,
        "maxRestarts": spec.max_restarts,
        "created": spec.created,
        "nodes": {
            node: {**report, "why": why}
            if (why := slow_network_why(report.get("detail", "")))
            else report
            for node, report in status.nodes.items()
        },
    }


def command_jobs(cluster: str, region: str, stack: str, as_json: bool) -> int:
    _, ssm = _clients(region)
    jobs = list_jobs(ssm, cluster)
    if as_json:
        json.dump([status_json(j) for j in jobs], sys.stdout, indent=2)
        sys.stdout.write("\n")
        return OK
    if not jobs:
        print(f"stack '{stack}' has no jobs (gpuc run --stack {stack} -- python train.py)")
        return OK
    for job in jobs:
        spec = job.spec
        print(f"{spec.name:<24}{spec.state:<11}{' '.join(spec.command)}")
        for node, report in sorted(job.nodes.items()):
            detail = f" ({report['detail']})" if report.get("detail") else ""
            restarts = int(report.get("restarts") or 0)
            detail += f", restarted {restarts}x" if restarts else ""
            print(f"    {node:<22}{report.get('state', '?')}{detail}  {report.get('updated', '')}")
            if why := slow_network_why(report.get("detail", "")):
                print(f"        why: {why}")
    return OK


def command_cancel(stack: str, cluster: str, region: str, name: str) -> int:
    ec2, ssm = _clients(region)
    try:
        nodes = cancel_job(ec2, ssm, region, stack, cluster, cluster_key_alias(cluster), name)
    except JobError as error:
        raise _failed(error) from error
    print(f"job '{name}' cancelled; stop sent to {len(nodes)} running node(s)")
    return OK


FOLLOW_SECONDS = 5


def command_logs(
    cluster: str, region: str, name: str, node: str | None, follow: bool, as_json: bool
) -> int:
    """The job's output from every node, interleaved by time, each line with its node;
    --follow keeps polling (Ctrl-C ends it)."""
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
