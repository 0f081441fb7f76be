"""Shared fixtures: the offline plan engine is the tests' only harness."""

from __future__ import annotations

import json
import os
import stat
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import botocore_limits
import pytest
from hypothesis import settings

from gpu_cluster.components.names import DEFAULT_PROJECT, StackIdentity
from gpu_cluster.infra.plan.engine import Plan, run_plan
from gpu_cluster.infra.stack_files import load_stack_config, project_root

# Every botocore request checked against the service model as AWS checks it (max, pattern,
# enum): this process's, and those of the AWS CLI and `gpuc` the tests run as subprocesses
# (tests/model_checked/sitecustomize.py; the boot harness's `aws` names the record itself).
# Each refusal is recorded in one file; _no_request_aws_refuses fails the test that made it.
MODEL_RECORD = Path(tempfile.mkdtemp(prefix="botocore-limits-")) / "refused.jsonl"
MODEL_RECORD.touch()
MODEL_RECORD.chmod(0o666)  # the harness's job user runs the AWS CLI too
MODEL_RECORD.parent.chmod(0o755)
botocore_limits.install(str(MODEL_RECORD))
os.environ["PYTHONPATH"] = os.pathsep.join(
    [str(Path(__file__).parent / "model_checked"), *filter(None, [os.environ.get("PYTHONPATH")])]
)

# boto3 code is only ever tested against moto; make any real endpoint unreachable.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

# Hypothesis' default 200 ms deadline per example is a wall-clock assertion: a busy machine
# fails it. Timing lives in bench/; examples here are judged by what they return.
settings.register_profile("house", deadline=None)
settings.load_profile("house")

ROOT = project_root()
STACKS = ("data", "dev", "experiment", "inference", "train")

TRAIN_LIKE = {
    "aws:region": "us-east-1",
    "gpu-cluster:availabilityZone": "us-east-1a",
    "gpu-cluster:instanceType": "p4d.24xlarge",
    "gpu-cluster:nodes": "4",
    "gpu-cluster:storage": '{"source": "stack", "stack": "organization/gpu-cluster/data"}',
}


# Tests that power on harness nodes share this machine's state a real fleet would not: the job
# user (`ubuntu`) and its groups, torchrun's rendezvous ports, the Docker group. Under
# pytest-xdist (`-n`), they run in one group, one at a time, while the rest run beside them.
NODE_FIXTURES = {"make_node", "nodes", "cluster", "imds", "ready_server"}
NODE_CALLS = ("BootNode(", "Cluster(", "Nodes(")
# What makes a test take seconds rather than milliseconds: a process, a server, moto's AWS, a
# whole stack planned in the test itself. `-m "not slow"` (the inner loop) leaves those out.
SLOW_FIXTURES = {"moto_server", "project_copy", "refreshed", "s3", "ecr"}
SLOW_CALLS = (
    "subprocess", "gpuc_at(", "mock_aws", "main([", "plan_stack(", "plan_config(", "run_plan(",
    "plan_for(", "_plan(", "gpuc(", "outcome(",
)  # fmt: skip


def _source(item: pytest.Item) -> str:
    import inspect

    function = getattr(item, "function", None)
    try:
        return inspect.getsource(function) if function else ""
    except (OSError, TypeError):
        return ""


def pytest_itemcollected(item: pytest.Item) -> None:
    """Harness-node tests: one xdist group. Those and the other heavy ones: slow. (Marked as each
    test is collected, before any pytest_collection_modifyitems: xdist's reads the groups.)"""
    fixtures = set(getattr(item, "fixturenames", ()))
    source = _source(item)
    if fixtures & NODE_FIXTURES or any(call in source for call in NODE_CALLS):
        item.add_marker(pytest.mark.xdist_group("nodes"))
        item.add_marker(pytest.mark.slow)
    elif fixtures & SLOW_FIXTURES or any(call in source for call in SLOW_CALLS):
        item.add_marker(pytest.mark.slow)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under `--dist loadgroup` xdist names each grouped test `<id>@<group>`; a test whose group
    was lost would run beside the rest of its group (see pyproject's pytest pin)."""
    if getattr(session.config.option, "loadgroup", False):  # set on xdist workers only
        lost = [
            item.nodeid
            for item in session.items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid
        ]
        if lost:
            raise pytest.UsageError(f"xdist did not group {len(lost)} tests, e.g. {lost[0]}")


def stack_names(
    stack: str = "train", region: str = "us-east-1", cluster: str | None = None
) -> StackIdentity:
    """A stack of this project as the program and gpuc name it (components/names.py)."""
    return StackIdentity(DEFAULT_PROJECT, stack, region, cluster or stack)


def plan_stack(stack: str) -> Plan:
    return run_plan(stack, load_stack_config(stack, ROOT))


def write_stubs(folder: Path, stubs: dict[str, str]) -> None:
    """Executable bash stand-ins for commands: `{name: body}` written into `folder`."""
    for name, body in stubs.items():
        path = folder / name
        path.write_text("#!/bin/bash\n" + body)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)


def only(plan: Plan, type_: str):
    """The one resource of `type_` in `plan` (fails, naming what it found, unless exactly one)."""
    found = plan.of_type(type_)
    assert len(found) == 1, [r.name for r in found]
    return found[0]


def plan_config(config: dict[str, str], stack: str = "test") -> Plan:
    return run_plan(stack, config)


@pytest.fixture(autouse=True)
def _no_request_aws_refuses():
    """A test fails when any request it made (in process or in a subprocess) is one AWS would
    refuse, even when the code under test caught the error (tests/botocore_limits.py)."""
    MODEL_RECORD.write_text("")
    botocore_limits.take()
    yield
    botocore_limits.take()
    lines = MODEL_RECORD.read_text().splitlines()
    refused = [json.loads(line)["refused"] for line in lines if line.strip()]
    if refused:
        pytest.fail(
            "request(s) AWS would refuse (botocore's service model):\n" + "\n".join(refused),
            pytrace=False,
        )


@pytest.fixture(autouse=True)
def _no_node_outlives_its_test():
    """Every harness node's units and timers stop with the test (a real node's die with it)."""
    yield
    import sys

    harness = sys.modules.get("boot_harness")
    if harness is not None:
        harness.power_off_every_node()


@pytest.fixture(scope="session")
def train_plan() -> Plan:
    plan = plan_stack("train")
    assert plan.error is None, plan.error
    return plan


@pytest.fixture
def moto_server():
    """A moto server on a free loopback port, the way a real endpoint is reached."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request
    from pathlib import Path

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(f"{url}/moto-api/", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    yield url
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:  # werkzeug still serving a kept-alive connection
        server.kill()
        server.wait()


def gpuc_at(endpoint: str, *args: str):
    """`gpuc` as a subprocess, its AWS clients pointed at ``endpoint`` by AWS_ENDPOINT_URL
    (a moto server: the way a real endpoint is reached)."""
    import subprocess
    import sys

    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }
    return subprocess.run(
        [sys.executable, "-m", "gpu_cluster.infra.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def ready_server():
    """What answers the server's readiness path on 127.0.0.1 once the container runs."""

    class Ready(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/v2/health/ready" else 404)
            self.end_headers()

        def log_message(self, format, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Ready)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()
