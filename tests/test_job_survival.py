"""A training job on real nodes of the boot harness survives the loss of any node, the one
hosting the rendezvous included, and never runs twice.

Real here: torchrun itself (torch's c10d rendezvous and elastic agent, CPU build) and a user's
train.py in the job user's home that all-reduces over gloo at every step; the job's systemd unit
(fake_systemd: User=ubuntu, WorkingDirectory=~, systemd's clean environment); the real AWS CLI
with the instance profile's credentials from each node's IMDS, against a moto server holding
the cluster's Auto Scaling group, which replaces a terminated node; `gpuc run`'s client path.
Each node has its own private address (added to this machine's loopback), so a node's
rendezvous store is reachable at the address EC2 lists for it, and gone when the node is.
Simulated: S3 (a shared folder for s3://<bucket>/checkpoints/<job>/) and the GPUs (gloo on CPU).

What it measures, per fault: the steps lost (the step the job had reached when the node went,
minus the step it resumed at) and the seconds from the loss to training again."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import replace
from pathlib import Path

import boto3
import pytest
from boot_fakes import FakeImds
from boot_harness import G5, JOB_USER, BootNode, eventually, put_boot_bundle_in, user_group
from conftest import stack_names
from test_boot_harness import TRAIN

from gpu_cluster.components.names import job_parameter, jobs_log_group, key_alias
from gpu_cluster.components.naming import cluster_tags
from gpu_cluster.components.user_data import render_user_data
from gpu_cluster.infra.aws.jobs import run_job

torch = pytest.importorskip("torch", reason="the real torchrun (pip install -e '.[test]')")
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("ip") is None,
    reason="nodes' addresses go on the loopback interface (root, iproute2)",
)

REGION = "us-east-1"
TRAIN_IDS = stack_names("train", REGION)  # the program's and gpuc's names of stack train
CHECKPOINT_EVERY = 20
RENDEZVOUS = "last_call_timeout=3,join_timeout=120"

# The user's script: resumes from the newest checkpoint, all-reduces every step (a lost peer
# fails the collective, as NCCL would), rank 0 checkpoints every CHECKPOINT_EVERY steps and on
# SIGUSR1 or the checkpoint file (the README's checkpoint contract), stops when told to finish.
TRAIN_PY = """
import datetime, json, os, signal, time
import torch
import torch.distributed as dist



sim = os.environ["SIM_DIR"]
node = os.path.basename(os.path.dirname(os.environ["GPUC_ROOT"]))
folder = os.path.join(sim, "bucket", os.environ["GPUC_CHECKPOINT_URI"].split("/", 3)[3])
os.makedirs(folder, exist_ok=True)
latest = os.path.join(folder, "latest.json")
wanted = {"now": False}
signal.signal(signal.SIGUSR1, lambda *_: wanted.update(now=True))


def event(**fields):
    fields.update(node=node, time=time.time(), cwd=os.getcwd())
    with open(os.path.join(sim, "events.jsonl"), "a") as f:
        f.write(json.dumps(fields) + "\\n")


def save(step, why):
    with open(latest + ".tmp", "w") as f:
        json.dump({"step": step, "why": why}, f)
    os.replace(latest + ".tmp", latest)
    event(event="checkpoint", step=step, why=why)  # the file is overwritten; the log is not


dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
step = json.load(open(latest))["step"] + 1 if os.path.exists(latest) else 0
event(event="start", step=step, world=world, rank=rank)
while True:
    finish = os.path.exists(os.path.join(sim, "finish"))
    now = wanted["now"] or os.path.exists(os.environ["GPUC_CHECKPOINT_FILE"])
    # cleared as it is read: a SIGUSR1 from here on asks the next step, never lost in between
    wanted["now"] = False
    flags = torch.tensor([float(finish), float(now)])
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    if flags[0] > 0:
        break
    if rank == 0:
        with open(os.path.join(sim, "step.tmp"), "w") as f:
            f.write(str(step))
        os.replace(os.path.join(sim, "step.tmp"), os.path.join(sim, "step"))
        if step % CHECKPOINT_EVERY == 0 or flags[1] > 0:
            save(step, "signal" if flags[1] > 0 else "periodic")
    step += 1
    time.sleep(0.05)
if rank == 0:
    event(event="finished", step=step)
dist.destroy_process_group()
""".replace("CHECKPOINT_EVERY", str(CHECKPOINT_EVERY))


def cluster_group(endpoint: str, count: int) -> tuple[list[dict], str]:
    """The cluster's group in moto, as the stack creates it; its instances (oldest first)."""
    ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=endpoint)
    autoscaling = boto3.client("autoscaling", region_name=REGION, endpoint_url=endpoint)
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.create_launch_template(
        LaunchTemplateName="train-nodes-lt",
        LaunchTemplateData={"ImageId": image, "InstanceType": "g5.xlarge"},
    )
    subnet = ec2.describe_subnets()["Subnets"][0]
    tags = cluster_tags(TRAIN_IDS)  # as the program tags the nodes (the stack id too)
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="train-nodes-group",
        LaunchTemplate={"LaunchTemplateName": "train-nodes-lt"},
        MinSize=count,
        MaxSize=count,
        DesiredCapacity=count,
        VPCZoneIdentifier=subnet["SubnetId"],
        Tags=[{"Key": k, "Value": v, "PropagateAtLaunch": True} for k, v in tags.items()],
    )
    kms = boto3.client("kms", region_name=REGION, endpoint_url=endpoint)
    kms.create_alias(
        AliasName=key_alias(TRAIN_IDS), TargetKeyId=kms.create_key()["KeyMetadata"]["KeyId"]
    )
    return running(ec2), subnet["VpcId"]


def running(ec2) -> list[dict]:
    found = [
        i
        for r in ec2.describe_instances(
            Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
        )["Reservations"]
        for i in r["Instances"]
    ]
    return sorted(found, key=lambda i: (i["LaunchTime"], i["InstanceId"]))


class Cluster:
    """Harness nodes of one cluster in moto, each with its own IMDS, root and address."""

    def __init__(self, folder: Path, endpoint: str, vpc: str, sim: Path) -> None:
        self.folder, self.endpoint, self.vpc, self.sim = folder, endpoint, vpc, sim
        self.nodes: dict[str, BootNode] = {}
        self.addresses: list[str] = []
        self.servers: list[FakeImds] = []
        boot = replace(
            TRAIN,
            gpus_per_node=1,
            nvme_disk_count=1,
            efa_interfaces=0,
            nvswitch=False,
            row_remapping=False,
            jobs_log_group=jobs_log_group(TRAIN_IDS),
            stack="train",
        )
        self.user_data = render_user_data(boot)
        # what `pulumi up` put in the stack's bucket: the boot bundle the user data names
        put_boot_bundle_in(
            boto3.client("s3", region_name=REGION, endpoint_url=endpoint), self.user_data
        )
        self.ec2 = boto3.client("ec2", region_name=REGION, endpoint_url=endpoint)
        self.ssm = boto3.client("ssm", region_name=REGION, endpoint_url=endpoint)
        self.autoscaling = boto3.client("autoscaling", region_name=REGION, endpoint_url=endpoint)

    def node(self, instance: dict) -> BootNode:
        """A node past its boot steps: health passed, the node list built from EC2."""
        address = instance["PrivateIpAddress"]
        # `replace`, not `add`: an address a killed run left on lo is taken over, not an error
        subprocess.run(["ip", "addr", "replace", f"{address}/32", "dev", "lo"], check=True)
        self.addresses.append(address)
        imds = FakeImds(
            instance_id=instance["InstanceId"], vpc_id=self.vpc, local_ipv4=address
        ).start()
        self.servers.append(imds)
        node = BootNode(
            self.folder / instance["InstanceId"], self.user_data, imds, G5, self.endpoint
        )
        assert node.install_only().returncode == 0
        script = node.file(f"/home/{JOB_USER}/train.py")
        script.write_text(TRAIN_PY)
        shutil.chown(script, JOB_USER, user_group(JOB_USER))
        node.file("/etc/gpu-cluster/health").write_text("ok\n")
        node.file("/run/gpu-cluster").mkdir(parents=True, exist_ok=True)
        node.file("/run/gpu-cluster/health-checked").write_text("")
        done = node.step("gpu-cluster-nodes")
        assert done.returncode == 0, done.stderr
        self.nodes[instance["InstanceId"]] = node
        return node

    def lose(self, instance_id: str) -> None:
        """The node is gone at once (a spot reclaim's end, a hardware fault): every process on
        it dies, and EC2 terminates it; the group launches a replacement."""
        self.nodes[instance_id].power_off()
        self.autoscaling.terminate_instance_in_auto_scaling_group(
            InstanceId=instance_id, ShouldDecrementDesiredCapacity=False
        )

    def close(self) -> None:
        for node in self.nodes.values():
            node.power_off()
        for server in self.servers:
            server.stop()
        for address in self.addresses:
            subprocess.run(["ip", "addr", "del", f"{address}/32", "dev", "lo"], check=False)


def events(sim: Path) -> list[dict]:
    path = sim / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def wait_for(predicate, what: str) -> None:
    eventually(predicate, f"the job did not get there: {what}")


def step_now(sim: Path) -> int:
    path = sim / "step"
    return int(path.read_text()) if path.exists() else -1


def signal_checkpoints(sim: Path) -> list[dict]:
    """The job's checkpoints asked for by a notice (SIGUSR1 or the checkpoint file)."""
    return [e for e in events(sim) if e["event"] == "checkpoint" and e["why"] == "signal"]


def started_after(sim: Path, moment: float, world: int, node: str | None = None) -> list[dict]:
    return [
        e
        for e in events(sim)
        if e["event"] == "start" and e["time"] > moment and e["world"] == world
        and (node is None or e["node"] == node)
    ]  # fmt: skip


def report(ssm, instance_id: str) -> dict:
    name = f"{job_parameter(TRAIN_IDS, 'pretrain')}/nodes/{instance_id}"
    return json.loads(ssm.get_parameter(Name=name)["Parameter"]["Value"])


@pytest.fixture
def cluster(moto_server, tmp_path, request):
    sim = tmp_path / "sim"
    sim.mkdir()
    sim.chmod(0o777)
    instances, vpc = cluster_group(moto_server, getattr(request, "param", 3))
    built = Cluster(tmp_path / "nodes", moto_server, vpc, sim)
    yield built, instances
    built.close()


def start_job(cluster: Cluster, name: str = "pretrain", env: dict | None = None):
    spec, ids, _ = run_job(
        cluster.ec2, cluster.ssm, REGION, "train", TRAIN_IDS, key_alias(TRAIN_IDS), name,
        ["python", "train.py"], max_restarts=10,
        env={"SIM_DIR": str(cluster.sim), "GLOO_SOCKET_IFNAME": "lo",
             "GPUC_RDZV_CONF": RENDEZVOUS, **(env or {})},
    )  # fmt: skip
    for instance_id in ids:  # what SSM Run Command then runs on each node
        done = cluster.nodes[instance_id].step("gpu-cluster-jobs", "start", name)
        assert done.returncode == 0, done.stderr
    return spec


def test_the_job_survives_losing_the_rendezvous_host_and_any_other_node_and_never_reruns(cluster):
    cluster, instances = cluster
    sim = cluster.sim
    for instance in instances:
        cluster.node(instance)
    host, second, third = (i["InstanceId"] for i in instances)
    spec = start_job(cluster)
    # elastic (--nnodes 1:3, last call 3 s): on a busy machine the first node may start
    # training before the others arrive, and the group re-forms as they join; what counts is
    # that all three train together before a node is lost
    wait_for(lambda: len(started_after(sim, 0, 3)) >= 3, what="3 nodes in one rendezvous")
    wait_for(lambda: step_now(sim) >= 30, what="3 nodes training")
    first = started_after(sim, 0, 3)
    assert len({e["node"] for e in first}) == 3
    # the job ran where the README says: the job user's home, where train.py is
    assert all(e["cwd"].endswith(f"/root/home/{JOB_USER}") for e in first)
    assert report(cluster.ssm, host)["detail"].startswith("rendezvous ")

    figures = {}

    def measure(what: str, lost_node: str, world: int) -> None:
        at_loss, moment = step_now(sim), time.time()
        cluster.lose(lost_node)
        wait_for(lambda: started_after(sim, moment, world), what=f"{what}: training again")
        resumed = min(e["step"] for e in started_after(sim, moment, world))
        figures[what] = (
            at_loss - resumed + 1,
            started_after(sim, moment, world)[0]["time"] - moment,
        )
        assert 0 <= at_loss - resumed + 1 <= CHECKPOINT_EVERY + 40  # the checkpoint's interval

    # 1. the node hosting the rendezvous (the oldest) goes: the survivors re-form on the next
    measure("rendezvous host lost", host, world=2)
    assert report(cluster.ssm, second)["detail"] == f"rendezvous {instances[1]['PrivateIpAddress']}"
    # 2. its replacement boots, finds the job and joins the re-formed rendezvous
    (replacement,) = [
        i for i in running(cluster.ec2) if i["InstanceId"] not in (host, second, third)
    ]
    moment = time.time()
    fresh = cluster.node(replacement)
    assert fresh.step("gpu-cluster-jobs", "boot").returncode == 0
    wait_for(lambda: started_after(sim, moment, 3, replacement["InstanceId"]), what="joined")
    figures["replacement joins"] = (0, started_after(sim, moment, 3)[0]["time"] - moment)
    # 3. a node that does not host the rendezvous goes: torchrun's agents re-form themselves
    measure("non-host node lost", third, world=2)
    # 4. the job finishes: done on every node left, recorded there
    (sim / "finish").write_text("")
    for node in (second, replacement["InstanceId"]):
        cluster.nodes[node].wait_unit("gpu-cluster-job@pretrain")
        assert report(cluster.ssm, node)["state"] == "done"
        assert report(cluster.ssm, node)["run"] == spec.run
    starts = len([e for e in events(sim) if e["event"] == "start"])
    # 5. a reboot of a node that ran it, and a new node for the lost one: neither runs it again
    rebooted = cluster.nodes[replacement["InstanceId"]]
    rebooted.reboot()
    rebooted.wait_unit("gpu-cluster-jobs", "active", "failed")
    assert "has finished (done)" in rebooted.journal()
    (late,) = [i for i in running(cluster.ec2) if i["InstanceId"] not in cluster.nodes]
    newcomer = cluster.node(late)
    done = newcomer.step("gpu-cluster-jobs", "start", "pretrain")
    assert done.returncode == 0 and "has finished (done)" in done.stderr
    time.sleep(3)
    assert len([e for e in events(sim) if e["event"] == "start"]) == starts
    print()
    for what, (lost, seconds) in figures.items():
        print(f"{what}: {lost} step(s) lost, training again {seconds:.1f} s later")


@pytest.mark.parametrize("cluster", [2], indirect=True)
def test_two_jobs_at_once_each_have_their_own_rendezvous(cluster):
    cluster, instances = cluster
    for instance in instances:
        cluster.node(instance)
    for job in ("one", "two"):
        (cluster.sim / job).mkdir()
        (cluster.sim / job).chmod(0o777)
    one = start_job(cluster, "one", env={"SIM_DIR": str(cluster.sim / "one")})
    two = start_job(cluster, "two", env={"SIM_DIR": str(cluster.sim / "two")})
    assert one.port != two.port
    for job in ("one", "two"):
        # elastic (--nnodes 1:2): a node that arrives after torch's last call (3 s here) finds
        # the first training alone, and the group re-forms with both
        wait_for(
            lambda job=job: any(
                e["event"] == "start" and e["world"] == 2 for e in events(cluster.sim / job)
            ),
            what=f"job {job} training on both nodes",
        )
        starts = [e for e in events(cluster.sim / job) if e["event"] == "start"]
        # each job's group holds its own workers: never the other job's (a shared rendezvous
        # would make a world of 4)
        assert max(e["world"] for e in starts) == 2 and starts[-1]["world"] == 2


@pytest.mark.parametrize("cluster", [2], indirect=True)
def test_a_schedule_stop_during_a_job_checkpoints_first_and_the_job_resumes_at_the_start(cluster):
    """The working-hours stop: the schedule's checkpoint notice (gpu-cluster-jobs checkpoint,
    sent by SSM ahead of the stop), then every node stops (its units stopped cleanly); at the
    next start each node's boot starts the job again, from the notice's checkpoint."""
    cluster, instances = cluster
    sim = cluster.sim
    for instance in instances:
        cluster.node(instance)
    start_job(cluster)
    wait_for(lambda: step_now(sim) >= CHECKPOINT_EVERY + 5, what="2 nodes training")
    notice = '{"action": "stop", "reason": "schedule", "time": "2026-12-01T19:00:00Z"}'
    told = [node.step("gpu-cluster-jobs", "checkpoint", notice) for node in cluster.nodes.values()]
    assert all(done.returncode == 0 for done in told), [done.stderr for done in told]
    checkpoint = sim / "bucket/checkpoints/pretrain/latest.json"
    # the notice's checkpoint is in the job's log (a periodic save a step later overwrites the
    # file); the failure names what each node did with the notice
    eventually(
        lambda: signal_checkpoints(sim),
        lambda: (
            "no checkpoint for the notice; the nodes said: "
            + " | ".join(done.stdout + done.stderr for done in told)
        ),
    )
    saved = signal_checkpoints(sim)[0]["step"]
    moment = time.time()
    # StopInstances on every node at once, then StartInstances
    import threading

    stops = [threading.Thread(target=node.reboot) for node in cluster.nodes.values()]
    for thread in stops:
        thread.start()
    for thread in stops:
        thread.join(timeout=120)
    # the notice comes ahead of the stop (15 min on AWS): training went on, and the newest
    # checkpoint when the nodes stopped is what the job resumes from
    at_stop, newest = step_now(sim), json.loads(checkpoint.read_text())["step"]
    assert newest >= saved
    wait_for(lambda: len(started_after(sim, moment, 2)) >= 2, what="resumed")
    resumed = min(e["step"] for e in started_after(sim, moment, 2))
    assert resumed == newest + 1
    assert all(report(cluster.ssm, i)["state"] == "running" for i in cluster.nodes)
    print(
        f"\nschedule stop: notice's checkpoint at {saved}, newest {newest}, stopped at "
        f"{at_stop}: {at_stop - newest} "
        f"step(s) lost (periodic only: {at_stop % CHECKPOINT_EVERY}); training again "
        f"{started_after(sim, moment, 2)[0]['time'] - moment:.1f} s after the stop began"
    )
