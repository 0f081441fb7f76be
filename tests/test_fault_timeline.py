"""A simulated fault timeline: a job on 4 nodes, one node interrupted, the group replaces it, the
new node starts the job by itself and resumes from the checkpoint.

Real here: `gpuc run`'s client path (infra/aws/jobs.run_job against a moto server), the Auto
Scaling group and its replacement of the terminated node (moto), every node's discovery and the
new node's boot-time job start (the boot scripts under the boot harness, calling the real AWS
CLI against the moto server: the SecureString spec decrypted with the cluster key), the job's
systemd unit and its torchrun arguments, the spot watcher's checkpoint signal (a real SIGUSR1 to
a real worker process), and the nodes' reports in SSM. Simulated: torchrun's rendezvous and the
training itself - a worker stand-in that advances a shared step counter, checkpoints every 100
steps (rank 0) or on SIGUSR1, and on start loads the newest checkpoint from a directory
standing in for s3://<bucket>/checkpoints/<job>/. What it measures: the step the job resumes
at, the steps lost with and without the SIGUSR1 handler, and the new node's AWS calls."""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import replace
from pathlib import Path

import boto3
import pytest
from boot_fakes import FakeImds
from boot_harness import P4D, PYTHON, BootNode
from gpu_cluster.components.jobs import cluster_key_alias, job_parameter, jobs_log_group
from gpu_cluster.components.naming import CLUSTER_TAG, MANAGED_BY_TAG, STACK_TAG
from gpu_cluster.components.user_data import render_user_data
from gpu_cluster.infra.aws.jobs import run_job
from test_boot_harness import TRAIN

REGION = "us-east-1"
CHECKPOINT_EVERY = 100  # steps: the notice's checkpoint is what saves the work

# torchrun's stand-in, the agent: records its arguments and runs one worker with
# TORCHELASTIC_RUN_ID, as torchrun does.
AGENT = f"""#!{PYTHON}
import json, os, subprocess, sys
sim, node = os.environ["SIM_DIR"], open(os.environ["HARNESS"] + "/instance-id").read()
open(f"{{sim}}/args-{{node}}", "w").write(json.dumps(sys.argv[1:]))
run_id = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--rdzv_id="))
worker = os.path.join(sim, "worker.py")
env = dict(os.environ, TORCHELASTIC_RUN_ID=run_id)
sys.exit(subprocess.call([sys.executable, worker, node], env=env))
"""

# The training stand-in. Rank 0 (the oldest node, first in /etc/gpu-cluster/nodes) advances the
# shared step and checkpoints every CHECKPOINT_EVERY steps; every worker checkpoints on SIGUSR1.
# "pause" stalls the gang (a peer gone: collectives hang); a new "generation" is torchrun
# restarting the worker group on a membership change: each worker reloads the newest checkpoint.
WORKER = """
import json, os, signal, sys, time
sim, node = os.environ["SIM_DIR"], sys.argv[1]
uri = os.environ["GPUC_CHECKPOINT_URI"]  # s3://<bucket>/checkpoints/<job>/
folder = os.path.join(sim, "bucket", uri.removeprefix("s3://").split("/", 1)[1])
os.makedirs(folder, exist_ok=True)
latest, step_file = os.path.join(folder, "latest.json"), os.path.join(sim, "step")
nodes = open(os.environ["GPUC_ROOT"] + "/etc/gpu-cluster/nodes").read().split()
rank0 = nodes[2] == node
wanted = {"now": False}
signal.signal(signal.SIGUSR1, lambda *_: wanted.__setitem__("now", True))

def read(name, default=""):
    path = os.path.join(sim, name)
    return open(path).read() if os.path.exists(path) else default

def save(step, why):
    with open(latest + ".tmp", "w") as f:
        json.dump({"step": step, "by": node, "why": why}, f)
    os.replace(latest + ".tmp", latest)

def resume():
    loaded = json.load(open(latest))["step"] if os.path.exists(latest) else -1
    with open(os.path.join(sim, f"resumed-{node}"), "a") as f:
        f.write(f"{loaded + 1}\\n")
    return loaded + 1

step, generation = resume(), read("generation")
ends = (os.path.join(sim, "stop"), os.path.join(sim, f"gone-{node}"))
while not any(os.path.exists(path) for path in ends):
    if read("generation") != generation:
        step, generation = resume(), read("generation")
    if os.path.exists(os.path.join(sim, "pause")):
        time.sleep(0.02)
        continue
    if rank0:
        step += 1
        with open(step_file + ".tmp", "w") as f:
            f.write(str(step))
        os.replace(step_file + ".tmp", step_file)
        if step % CHECKPOINT_EVERY == 0:
            save(step, "periodic")
    else:
        step = int(read("step", str(step)))
    if wanted["now"]:
        save(step, "signal")
        wanted["now"] = False
    time.sleep(0.02)
""".replace("CHECKPOINT_EVERY", str(CHECKPOINT_EVERY))


def group_with_four_nodes(endpoint: str) -> tuple[list[dict], str]:
    """The cluster's group in moto, as the stack creates it: 4 nodes, the cluster and stack
    tags propagated; its instances (oldest first) and their VPC."""
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=endpoint)
    autoscaling = boto3.client("autoscaling", region_name=REGION, endpoint_url=endpoint)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.create_launch_template(
        LaunchTemplateName="train-nodes-lt",
        LaunchTemplateData={"ImageId": image, "InstanceType": "p4d.24xlarge"},
    )
    subnet = ec2.describe_subnets()["Subnets"][0]["SubnetId"]
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="train-nodes-group",
        LaunchTemplate={"LaunchTemplateName": "train-nodes-lt"},
        MinSize=4,
        MaxSize=4,
        DesiredCapacity=4,
        VPCZoneIdentifier=subnet,
        Tags=[
            {"Key": key, "Value": value, "PropagateAtLaunch": True}
            for key, value in {CLUSTER_TAG: "train", STACK_TAG: "train", **MANAGED_BY_TAG}.items()
        ],
    )
    return running(ec2), ec2.describe_subnets()["Subnets"][0]["VpcId"]


def running(ec2) -> list[dict]:
    reservations = ec2.describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )["Reservations"]
    instances = [i for r in reservations for i in r["Instances"]]
    return sorted(instances, key=lambda i: (i["LaunchTime"], i["InstanceId"]))


class Cluster:
    """The harness nodes of one simulated cluster, each with its own IMDS and root."""

    def __init__(self, folder: Path, endpoint: str, vpc: str, sim: Path) -> None:
        self.folder, self.endpoint, self.vpc, self.sim = folder, endpoint, vpc, sim
        self.nodes: dict[str, BootNode] = {}
        self.imds: list[FakeImds] = []
        self.threads: dict[str, threading.Thread] = {}
        self.user_data = render_user_data(
            replace(TRAIN, spot=True, jobs_log_group=jobs_log_group("train"))
        )

    def node(self, instance: dict) -> BootNode:
        """A booted node: health passed, the node list built from EC2 (the real CLI)."""
        imds = FakeImds(
            instance_id=instance["InstanceId"],
            vpc_id=self.vpc,
            local_ipv4=instance["PrivateIpAddress"],
        ).start()
        self.imds.append(imds)
        node = BootNode(
            self.folder / instance["InstanceId"],
            self.user_data,
            imds,
            P4D,
            aws_endpoint=self.endpoint,
        )
        node.install_only()
        env_file = node.file("/etc/gpu-cluster/cluster.env")
        env_file.write_text(env_file.read_text().replace("JOB_USER=ubuntu", "JOB_USER=nobody"))
        (node.harness / "instance-id").write_text(instance["InstanceId"])
        agent = node.harness / "bin/torchrun"
        agent.write_text(AGENT)
        agent.chmod(0o755)
        node.file("/etc/gpu-cluster/health").write_text("ok\n")
        node.file("/run/gpu-cluster").mkdir(parents=True, exist_ok=True)
        node.file("/run/gpu-cluster/health-checked").write_text("")
        done = node.step("gpu-cluster-nodes", env=self.env)
        assert done.returncode == 0, done.stderr
        self.nodes[instance["InstanceId"]] = node
        return node

    @property
    def env(self) -> dict[str, str]:
        return {"SIM_DIR": str(self.sim), "HARNESS_DAEMON_SECONDS": "60"}

    def start(self, instance_id: str, *step: str) -> None:
        """A step that starts the job's unit (which runs until the simulation stops it)."""
        node = self.nodes[instance_id]
        result: dict = {}

        def run() -> None:
            result["done"] = node.step(*step, env=self.env, timeout=90)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        self.threads[instance_id] = thread

    def stop(self) -> None:
        (self.sim / "stop").write_text("")
        for thread in self.threads.values():
            thread.join(timeout=30)
        for imds in self.imds:
            imds.stop()


def own_proc(node: BootNode) -> str:
    """A /proc with only this harness node's processes (every harness node shares this
    machine's /proc; a real node sees only its own)."""
    folder = node.folder / "proc"
    folder.mkdir(exist_ok=True)
    mark = f"GPUC_ROOT={node.root}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if mark in environ.split(b"\0") and not (folder / entry.name).exists():
            (folder / entry.name).symlink_to(entry)
    return str(folder)


def wait_for(predicate, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "the simulation did not get there"
        time.sleep(0.05)


def step_now(sim: Path) -> int:
    path = sim / "step"
    return int(path.read_text()) if path.exists() else -1


@pytest.mark.skipif(os.geteuid() != 0, reason="the job unit's files belong to the job user")
def test_an_interrupted_node_is_replaced_and_the_job_resumes_from_its_checkpoint(
    moto_server, tmp_path
):
    sim = tmp_path / "sim"
    sim.mkdir()
    (sim / "worker.py").write_text(WORKER)
    instances, vpc = group_with_four_nodes(moto_server)
    assert len(instances) == 4
    kms = boto3.client("kms", region_name=REGION, endpoint_url=moto_server)
    key = kms.create_key()["KeyMetadata"]["KeyId"]
    kms.create_alias(AliasName=cluster_key_alias("train"), TargetKeyId=key)
    cluster = Cluster(tmp_path / "nodes", moto_server, vpc, sim)
    try:
        for instance in instances:
            cluster.node(instance)
        oldest = instances[0]
        rendezvous = f"--rdzv_endpoint={oldest['PrivateIpAddress']}:29500"

        # t0: gpuc run stores the spec and sends the start to every node (what SSM's Run
        # Command then executes on each node is run here, on each harness node)
        ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=moto_server)
        ssm = boto3.client("ssm", region_name=REGION, endpoint_url=moto_server)
        _, ids, _ = run_job(
            ec2, ssm, REGION, "train", "train", cluster_key_alias("train"), "train",
            ["python", "train.py"], env={"SIM_DIR": str(sim)},
        )  # fmt: skip
        assert sorted(ids) == sorted(i["InstanceId"] for i in instances)
        for instance_id in ids:
            cluster.start(instance_id, "gpu-cluster-jobs", "start", "train")
        wait_for(lambda: step_now(sim) >= 40)

        # t1: the spot interruption notice on the third node: its watcher signals the worker
        victim = cluster.nodes[instances[2]["InstanceId"]]
        victim.imds.metadata["spot/instance-action"] = (
            '{"action": "terminate", "time": "2026-12-01T08:22:00Z"}'
        )
        at_notice, noticed = step_now(sim), time.monotonic()
        watch = victim.step("gpu-cluster-spot-watch", "--once", env={"GPUC_PROC": own_proc(victim)})
        assert watch.returncode == 0, watch.stderr
        checkpoint = sim / "bucket/checkpoints/train/latest.json"
        wait_for(
            lambda: checkpoint.exists() and json.loads(checkpoint.read_text())["why"] == "signal"
        )
        saved = json.loads(checkpoint.read_text())
        signal_seconds = time.monotonic() - noticed
        assert saved["by"] == instances[2]["InstanceId"] and saved["step"] >= at_notice

        # t2: the node is gone (the two minutes compressed): the gang stalls, torchrun restarts
        # the 3 survivors from the newest checkpoint; the group launches a replacement
        time.sleep(0.3)
        (sim / "pause").write_text("")
        time.sleep(0.1)
        at_termination = step_now(sim)
        (sim / f"gone-{instances[2]['InstanceId']}").write_text("")
        on_termination = json.loads(checkpoint.read_text())["step"]
        restart(sim, "1")
        wait_for(lambda: resumed(sim, oldest["InstanceId"])[-1] == on_termination + 1)
        autoscaling = boto3.client("autoscaling", region_name=REGION, endpoint_url=moto_server)
        autoscaling.terminate_instance_in_auto_scaling_group(
            InstanceId=instances[2]["InstanceId"], ShouldDecrementDesiredCapacity=False
        )
        now_running = running(ec2)
        (new,) = [i for i in now_running if i["InstanceId"] not in ids]
        assert len(now_running) == 4

        # t3: the new node boots: discovery, then the stack's active jobs, by itself
        booting = time.monotonic()
        fresh = cluster.node(new)
        rows = [line.split("\t") for line in fresh.read("/etc/gpu-cluster/nodes").splitlines()]
        listed = [row[2] for row in rows]
        assert listed[0] == oldest["InstanceId"] and new["InstanceId"] in listed
        assert instances[2]["InstanceId"] not in listed and len(listed) == 4
        cluster.start(new["InstanceId"], "gpu-cluster-jobs", "boot")
        wait_for(lambda: resumed(sim, new["InstanceId"]))
        join_seconds = time.monotonic() - booting
        # the rendezvous re-forms at the same place: the new node's torchrun is the others'
        ours = json.loads((sim / f"args-{new['InstanceId']}").read_text())
        theirs = json.loads((sim / f"args-{oldest['InstanceId']}").read_text())
        assert ours == theirs
        assert "--nnodes=1:4" in ours and rendezvous in ours and "--rdzv_id=train" in ours
        # torchrun restarts the group with 4: everyone resumes from the same checkpoint
        (sim / "pause").write_text("")
        time.sleep(0.1)
        on_join = json.loads(checkpoint.read_text())["step"]
        restart(sim, "2")
        for node in (new["InstanceId"], oldest["InstanceId"]):
            wait_for(lambda node=node: resumed(sim, node)[-1] == on_join + 1)

        # what is lost: the steps since the checkpoint the notice triggered
        lost = at_termination - on_termination
        assert on_termination >= saved["step"] >= at_notice
        assert 0 <= lost <= at_termination - at_notice
        periodic_only = at_termination % CHECKPOINT_EVERY
        print(
            f"\nnotice at step {at_notice}, its checkpoint at {saved['step']}, node gone at "
            f"{at_termination}: the 3 survivors resume at {on_termination + 1} ({lost} step(s) "
            f"lost; {periodic_only} with only the periodic checkpoint); with the new node all 4 "
            f"resume at {on_join + 1}. On this machine: notice to checkpoint {signal_seconds:.1f} "
            f"s; the new node's discovery and job start {join_seconds:.1f} s"
        )
        wait_for(lambda: reported(ssm, new["InstanceId"]) == "running")
    finally:
        cluster.stop()
    # every node reported its own state of this run; the gone node's report is its last
    assert reported(ssm, oldest["InstanceId"]) in ("running", "done")


def restart(sim: Path, generation: str) -> None:
    """torchrun restarting the worker group (the gang resumes)."""
    (sim / "generation").write_text(generation)
    (sim / "pause").unlink()


def resumed(sim: Path, instance_id: str) -> list[int]:
    """The steps a node's worker (re)started at, in order."""
    path = sim / f"resumed-{instance_id}"
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def reported(ssm, instance_id: str) -> str | None:
    try:
        value = ssm.get_parameter(Name=f"{job_parameter('train', 'train')}/nodes/{instance_id}")
    except ssm.exceptions.ParameterNotFound:
        return None
    return json.loads(value["Parameter"]["Value"])["state"]
