"""A user's whole path, in one test, against a moto server with the real boot scripts on every
node: a new user's first mistakes and the fixes gpuc gives them, the data stack, the train stack,
a first job with a workdir and requirements, a checkpoint on the bucket, a spot node lost and
replaced, the job resumed on the new node from that checkpoint, a scale-up by a config change,
`pulumi destroy` of the compute stack, `gpuc sweep` finding nothing, the dataset and
checkpoints still in the bucket, and serving the model: a service no one may call by accident,
behind AWS WAF, with a key that never shows, a zone swap that applies. Later features extend it.

Real: the program's own plan (the mock engine) for each stack and change, whose resources are
what the simulated `pulumi up` creates in moto and `pulumi destroy` removes (the user data, the
boot bundle, the bucket parameter, the group, the key's alias); `gpuc run` and `gpuc sweep` as
the CLI; the node's boot bundle fetched from the bucket; torchrun, pip and the user's script
(boto3 to the bucket, with the node role's credentials from IMDS). Simulated: SSM Run Command's
delivery (the command `gpuc run` sent, run on each node as root), spot's reclaim (the two-minute
notice's checkpoint, then the node gone and the group's replacement), the GPUs (gloo on CPU)."""

from __future__ import annotations

import base64
import json
import shlex
import time
from pathlib import Path

import boto3
import pytest
import test_job_survival
from boot_harness import JOB_USER, put_boot_bundle_in
from conftest import gpuc_at, stack_names
from test_job_survival import REGION, Cluster, running, wait_for
from wheels import wheel

from gpu_cluster.components.names import dashboard_name, job_parameter
from gpu_cluster.components.naming import cluster_tags
from gpu_cluster.components.user_data import decoded_user_data
from gpu_cluster.infra.errors import ConfigError
from gpu_cluster.infra.fixes import apply_fix
from gpu_cluster.infra.overrides import stack_config
from gpu_cluster.infra.plan.destroy import destroy, stop_paying_command
from gpu_cluster.infra.plan.engine import Plan, run_plan
from gpu_cluster.infra.plan.render import preview_json

TRAIN_IDS = stack_names("train", REGION)  # the program's and gpuc's names of stack train

torch = pytest.importorskip("torch", reason="the real torchrun (pip install -e '.[test]')")
pytestmark = test_job_survival.pytestmark  # root and iproute2: each node's own address

# The train stack as a small spot cluster of single-GPU nodes (gloo on CPU stands in for NCCL)
TRAIN = [
    ("--set", "instanceType=g5.xlarge"),
    ("--set", "efa=false"),
    ("--set", "purchaseOption=spot"),
    ("--set", "nodes=2"),
]
TEMPLATE = "train-nodes-launch-template"  # its physical name is the provider's (no name given)
DATASET = b"\x00\x01" * 512

# The user's script, in their workdir: reads the dataset and writes its checkpoints through
# boto3 (the node role), uses the package its requirements installed, all-reduces every step.
TRAIN_PY = """
import datetime, io, json, os, signal, time
import boto3, torch, journeylib
import torch.distributed as dist

bucket, prefix = os.environ["GPUC_CHECKPOINT_URI"][len("s3://"):].split("/", 1)
s3 = boto3.client("s3")
data = s3.get_object(Bucket=bucket, Key="datasets/tokens.bin")["Body"].read()
sim = os.environ["SIM_DIR"]
wanted = {"now": False}
signal.signal(signal.SIGUSR1, lambda *_: wanted.update(now=True))


def event(**fields):
    node = os.path.basename(os.path.dirname(os.environ["GPUC_ROOT"]))
    fields.update(node=node, time=time.time(), cwd=os.getcwd(), lib=journeylib.VERSION,
                  data=len(data))
    with open(os.path.join(sim, "events.jsonl"), "a") as f:
        f.write(json.dumps(fields) + "\\n")


def latest():
    try:
        return json.load(s3.get_object(Bucket=bucket, Key=prefix + "latest.json")["Body"])
    except s3.exceptions.NoSuchKey:
        return None


dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=30))
rank, world = dist.get_rank(), dist.get_world_size()
saved = latest()
step = saved["step"] + 1 if saved else 0
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
        with open(os.path.join(sim, "step"), "w") as f:
            f.write(str(step))
        if step % 25 == 0 or flags[1] > 0:
            body = json.dumps({"step": step, "why": "signal" if flags[1] > 0 else "periodic"})
            s3.put_object(Bucket=bucket, Key=prefix + "latest.json", Body=body.encode())
            event(event="checkpoint", **json.loads(body))  # the object is overwritten; not this
    step += 1
    time.sleep(0.05)
if rank == 0:
    event(event="finished", step=step)
dist.destroy_process_group()
"""


def planned(stack: str, overrides: list[tuple[str, str]]) -> Plan:
    plan = run_plan(stack, stack_config(stack, overrides))
    assert plan.error is None, plan.error
    return plan


def one(plan: Plan, type_: str, suffix: str = "") -> dict:
    found = [r for r in plan.of_type(type_) if r.name.endswith(suffix)]
    assert len(found) == 1, [r.name for r in found]
    return plan.state(found[0])


class Deployment:
    """What `pulumi up` of a plan leaves in moto, and what `pulumi destroy` removes."""

    def __init__(self, endpoint: str) -> None:
        def aws(service: str):
            return boto3.client(service, region_name=REGION, endpoint_url=endpoint)

        self.s3, self.ssm, self.kms = aws("s3"), aws("ssm"), aws("kms")
        self.ec2, self.autoscaling, self.logs = aws("ec2"), aws("autoscaling"), aws("logs")
        self.iam, self.cloudwatch = aws("iam"), aws("cloudwatch")

    def live_role_elsewhere(self, identity) -> str:
        """A node role of `identity`'s stack, running in its own region (IAM is account-wide)."""
        name = f"{identity.cluster}-security-node-role-e1sewhe"
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {
                    "Effect": "Allow",
                    "Principal": {"Service": "ec2.amazonaws.com"},
                    "Action": "sts:AssumeRole",
                }
            ],
        }
        tags = [{"Key": k, "Value": v} for k, v in cluster_tags(identity).items()]
        self.iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust), Tags=tags)
        return name

    def data_stack(self, plan: Plan) -> str:
        bucket = one(plan, "aws:s3/bucket:Bucket", "data-bucket")["bucket"]
        self.s3.create_bucket(Bucket=bucket)
        return bucket

    def train_stack(self, plan: Plan) -> str:
        """The compute stack's resources the nodes and gpuc use; the nodes' user data."""
        template = one(plan, "aws:ec2/launchTemplate:LaunchTemplate")
        user_data = decoded_user_data(template["userData"])
        bundle = one(plan, "aws:s3/bucketObjectv2:BucketObjectv2", "boot-bundle")
        self.s3.put_object(
            Bucket=bundle["bucket"], Key=bundle["key"], Body=bundle["content"].encode()
        )
        put_boot_bundle_in(self.s3, user_data)  # the same key and bytes: no-op if so
        parameter = one(plan, "aws:ssm/parameter:Parameter", "job-bucket")
        self.ssm.put_parameter(Name=parameter["name"], Value=bundle["bucket"], Type="SecureString")
        for alias in plan.of_type("aws:kms/alias:Alias"):
            key = self.kms.create_key()["KeyMetadata"]["KeyId"]
            self.kms.create_alias(AliasName=plan.state(alias)["name"], TargetKeyId=key)
        board = one(plan, "aws:cloudwatch/dashboard:Dashboard")
        self.cloudwatch.put_dashboard(
            DashboardName=board["dashboardName"], DashboardBody=board["dashboardBody"]
        )
        group = one(plan, "aws:autoscaling/group:Group")
        image = self.ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        self.ec2.create_launch_template(
            LaunchTemplateName=TEMPLATE,
            LaunchTemplateData={"ImageId": image, "InstanceType": "g5.xlarge"},
        )
        subnet = self.ec2.describe_subnets()["Subnets"][0]
        self.autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=group["name"],
            LaunchTemplate={"LaunchTemplateName": TEMPLATE},
            MinSize=int(group["minSize"]),
            MaxSize=int(group["maxSize"]),
            DesiredCapacity=int(group["desiredCapacity"]),
            VPCZoneIdentifier=subnet["SubnetId"],
            # the nodes carry the group's tags as the program sets them (the stack id too)
            Tags=[
                {"Key": t["key"], "Value": t["value"], "PropagateAtLaunch": t["propagateAtLaunch"]}
                for t in group["tags"]
            ],
        )
        return user_data

    def scale(self, group: dict) -> None:
        self.autoscaling.update_auto_scaling_group(
            AutoScalingGroupName=group["name"],
            MinSize=int(group["minSize"]),
            MaxSize=int(group["maxSize"]),
            DesiredCapacity=int(group["desiredCapacity"]),
        )

    def destroy_train(self, plan: Plan) -> None:
        """`pulumi destroy`: every resource of the compute stack's plan that was created here;
        nothing of the data stack (it is read through a StackReference). The engine runs it:
        nothing in the stack is protected (infra/plan/destroy.py)."""
        assert destroy(plan).runs and stop_paying_command(plan) == "pulumi destroy -s train"
        group = one(plan, "aws:autoscaling/group:Group")["name"]
        self.autoscaling.delete_auto_scaling_group(AutoScalingGroupName=group, ForceDelete=True)
        for reservation in self.ec2.describe_instances()["Reservations"]:
            ids = [i["InstanceId"] for i in reservation["Instances"]]
            self.ec2.terminate_instances(InstanceIds=ids)
        self.ec2.delete_launch_template(LaunchTemplateName=TEMPLATE)
        bundle = one(plan, "aws:s3/bucketObjectv2:BucketObjectv2", "boot-bundle")
        self.s3.delete_object(Bucket=bundle["bucket"], Key=bundle["key"])
        self.ssm.delete_parameter(
            Name=one(plan, "aws:ssm/parameter:Parameter", "job-bucket")["name"]
        )
        for alias in plan.of_type("aws:kms/alias:Alias"):
            self.kms.delete_alias(AliasName=plan.state(alias)["name"])
        board = one(plan, "aws:cloudwatch/dashboard:Dashboard")["dashboardName"]
        self.cloudwatch.delete_dashboards(DashboardNames=[board])

    def live_dashboard_elsewhere(self, identity) -> str:
        """The same stack's dashboard, live in another region (dashboards are account-wide)."""
        name = dashboard_name(identity)
        self.cloudwatch.put_dashboard(DashboardName=name, DashboardBody='{"widgets": []}')
        return name


def deliver(cluster: Cluster, command_id: str) -> None:
    """SSM Run Command: the command `gpuc run` sent, run on each of its nodes as root."""
    command = cluster.ssm.list_commands(CommandId=command_id)["Commands"][0]
    (line,) = command["Parameters"]["commands"]
    program, *args = shlex.split(line)
    for instance_id in command["InstanceIds"]:
        done = cluster.nodes[instance_id].step(Path(program).name, *args)
        assert done.returncode == 0, done.stderr


def events(sim: Path) -> list[dict]:
    path = sim / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def starts(sim: Path, after: float = 0, world: int | None = None) -> list[dict]:
    return [
        e for e in events(sim)
        if e["event"] == "start" and e["time"] > after and world in (None, e["world"])
    ]  # fmt: skip


def first_mistakes() -> None:
    """0. A new user's first tries (issue 29): a key their stage ignores is refused with the
    stage and the key; money typed as they write it gets a fix that keeps it, and plans."""
    refused = run_plan("data", stack_config("data", [("--set", "gangTimeoutMinutes=30")]))
    assert isinstance(refused.error, ConfigError), refused.error
    (problem,) = refused.error.problems
    assert problem.path == "gpu-cluster:gangTimeoutMinutes" and "data" in problem.problem
    config = stack_config("train", [*TRAIN, ("--set-path", "budget.monthlyUsd=$300")])
    typed = run_plan("train", config)
    assert isinstance(typed.error, ConfigError), typed.error
    (problem,) = typed.error.problems
    fixed = run_plan("train", apply_fix(config, problem.fix))
    assert fixed.error is None, fixed.error
    assert json.loads(fixed.config["gpu-cluster:budget"])["monthlyUsd"] == 300


USERS_NETWORK = "198.51.100.0/24"
API_KEY = "journey-key-0123456789abcdef"


def serve_the_model(endpoint: str, bucket: str) -> None:
    """10. Serving the model (issue 30): the inference stage without `access` is refused, and
    its fix, with the user's network filled in, plans; the listener's group admits that network
    only; AWS WAF guards the load balancer; a key set with --secret never shows in the plan's
    JSON; swapping the second zone applies in one update."""
    config = stack_config("inference", [])
    settings = json.loads(config["gpu-cluster:inference"])
    settings.pop("access")
    config["gpu-cluster:inference"] = json.dumps(settings)
    refused = run_plan("inference", config)
    assert isinstance(refused.error, ConfigError), refused.error
    (problem,) = refused.error.problems
    assert problem.path == "gpu-cluster:inference.access" and "internet" in problem.problem
    fix = problem.fix.replace("<your network CIDR>", USERS_NETWORK)
    served = run_plan("inference", apply_fix(config, fix))
    assert served.error is None, served.error
    policies = [served.state(r)["policy"] for r in served.of_type("aws:iam/rolePolicy:RolePolicy")]
    assert any(f"arn:aws:s3:::{bucket}" in p for p in policies if isinstance(p, str))
    balancer_group = served.named("inference-service-alb-sg").urn
    ingress = [
        served.state(r)
        for r in served.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.property_dependencies.get("securityGroupId") == (balancer_group,)
    ]
    sources = {r.get("cidrIpv4") for r in ingress}
    assert sources == {USERS_NETWORK}, sources
    association = one(served, "aws:wafv2/webAclAssociation:WebAclAssociation")
    balancer = one(served, "aws:lb/loadBalancer:LoadBalancer")
    assert association["resourceArn"] == balancer["arn"]
    settings["access"] = {"cidrs": [USERS_NETWORK], "apiKeys": [API_KEY]}
    config["gpu-cluster:inference"] = json.dumps(settings)
    keyed = run_plan("inference", config, secret_keys=["gpu-cluster:inference"])
    assert keyed.error is None, keyed.error
    assert API_KEY not in json.dumps(preview_json(keyed))
    swap = gpuc_at(
        endpoint, "diff", "--stack", "inference",
        "--set-path", "inference.availabilityZones[1]=us-east-1c",
    )  # fmt: skip
    assert swap.returncode == 0 and "The change applies as planned." in swap.stdout, swap.stdout


def test_a_users_whole_path(moto_server, tmp_path):
    deploy = Deployment(moto_server)
    first_mistakes()
    # 1. the data stack: its bucket, and the user's dataset in it
    data = planned("data", [])
    bucket = deploy.data_stack(data)
    deploy.s3.put_object(Bucket=bucket, Key="datasets/tokens.bin", Body=DATASET)
    # 2. the train stack: its plan reads the data stack's bucket, and `pulumi up` creates it
    plan = planned("train", TRAIN)
    # its dashboard: the stack output opens the one the stack creates
    board = one(plan, "aws:cloudwatch/dashboard:Dashboard")
    assert plan.outputs["dashboardUrl"].endswith(f"#dashboards:name={board['dashboardName']}")
    # the boot bundle and the bucket gpuc run reads (a provider secret: shown as [secret]) are
    # the data stack's bucket
    assert one(plan, "aws:s3/bucketObjectv2:BucketObjectv2", "boot-bundle")["bucket"] == bucket
    assert not plan.of_type("aws:s3/bucket:Bucket")  # the data stack's, not this stack's
    user_data = deploy.train_stack(plan)
    template = one(plan, "aws:ec2/launchTemplate:LaunchTemplate")
    assert len(base64.b64decode(template["userData"])) <= 14 * 1024  # the project's budget
    sim = tmp_path / "sim"
    sim.mkdir()
    sim.chmod(0o777)
    cluster = Cluster(tmp_path / "nodes", moto_server, "", sim)
    cluster.user_data = user_data
    try:
        instances = running(cluster.ec2)
        cluster.vpc = instances[0]["VpcId"]
        for instance in instances:
            cluster.node(instance)
        # 3. the first job: the user's folder (with a wheel its requirements name) and setup
        workdir = tmp_path / "project"
        (workdir / "wheels").mkdir(parents=True)
        (workdir / "train.py").write_text(TRAIN_PY)
        (workdir / "wheels/journeylib-1.0-py3-none-any.whl").write_bytes(wheel("journeylib", "1.0"))
        (workdir / "requirements.txt").write_text("./wheels/journeylib-1.0-py3-none-any.whl\n")
        (workdir / ".gitignore").write_text("outputs/\n")
        (workdir / "outputs").mkdir()
        (workdir / "outputs/big.bin").write_bytes(b"0" * 1000)
        started = gpuc_at(
            moto_server, "run", "--stack", "train", "--name", "pretrain", "--json",
            "--workdir", str(workdir), "--setup", "pip install --no-index -r requirements.txt",
            "--env", f"SIM_DIR={sim}", "--env", "GLOO_SOCKET_IFNAME=lo",
            "--env", "GPUC_RDZV_CONF=last_call_timeout=3,join_timeout=120",
            "--watch", "0", "--", "python", "train.py",
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        result = json.loads(started.stdout)
        digest = result["spec"]["workdir"]["sha256"]
        deliver(cluster, result["commandId"])
        wait_for(lambda: len(starts(sim, world=2)) >= 2, what="2 nodes training")
        first = starts(sim, world=2)
        assert {e["lib"] for e in first} == {"1.0"} and {e["data"] for e in first} == {1024}
        assert all(e["cwd"].endswith(f"/home/{JOB_USER}/gpuc-jobs/pretrain") for e in first)
        # the archive: uploaded once, what .gitignore leaves out never shipped
        archives = deploy.s3.list_objects_v2(Bucket=bucket, Prefix="code/")["Contents"]
        assert [a["Key"] for a in archives] == [f"code/{digest}.tar.gz"]
        again = gpuc_at(
            moto_server, "run", "--stack", "train", "--name", "pretrain", "--workdir",
            str(workdir), "--watch", "0", "--", "python", "train.py",
        )  # fmt: skip
        assert again.returncode != 0 and "already running" in again.stderr  # nothing started
        # 4. a checkpoint on the bucket
        checkpoint = "checkpoints/pretrain/latest.json"

        def saved() -> dict | None:
            try:
                body = deploy.s3.get_object(Bucket=bucket, Key=checkpoint)["Body"].read()
            except deploy.s3.exceptions.NoSuchKey:
                return None
            return json.loads(body)

        wait_for(lambda: (saved() or {}).get("step", -1) >= 25, what="checkpoint")
        # 5. a spot node is reclaimed: the two-minute notice's checkpoint, then it is gone and
        # the group launches a replacement
        spot = instances[1]["InstanceId"]
        notice = '{"action": "terminate", "time": "2026-12-02T10:02:00Z"}'
        for node in cluster.nodes.values():
            assert node.step("gpu-cluster-jobs", "checkpoint", notice).returncode == 0

        # a periodic save can overwrite the notice's a step later: the job's log keeps both
        def noticed() -> list[dict]:
            return [e for e in events(sim) if e["event"] == "checkpoint" and e["why"] == "signal"]

        wait_for(noticed, what="the notice's checkpoint")
        at_notice = noticed()[0]["step"]
        moment = time.time()
        cluster.lose(spot)
        (replacement,) = [i for i in running(cluster.ec2) if i["InstanceId"] not in cluster.nodes]
        fresh = cluster.node(replacement)
        assert fresh.step("gpu-cluster-jobs", "boot").returncode == 0
        # 6. the job resumed with the new node, from the checkpoint, with the same code
        wait_for(lambda: len(starts(sim, moment, world=2)) >= 2, what="resumed")
        resumed = starts(sim, moment, world=2)
        assert min(e["step"] for e in resumed) >= at_notice + 1
        home = fresh.file(f"/home/{JOB_USER}/gpuc-jobs/pretrain.sha256")
        assert home.read_text().strip() == digest
        # 7. scale-up by a config change: the group grows, the launch template stays (no node
        # replaced); the new node boots with the same bundle and takes the job's code
        bigger = planned("train", [*TRAIN[:-1], ("--set", "nodes=3")])
        assert (
            one(bigger, "aws:ec2/launchTemplate:LaunchTemplate")["userData"]
            == one(plan, "aws:ec2/launchTemplate:LaunchTemplate")["userData"]
        )
        deploy.scale(one(bigger, "aws:autoscaling/group:Group"))
        (third,) = [i for i in running(cluster.ec2) if i["InstanceId"] not in cluster.nodes]
        grown = cluster.node(third)
        assert grown.step("gpu-cluster-jobs", "boot").returncode == 0
        wait_for(lambda: grown.file(f"/home/{JOB_USER}/gpuc-jobs/pretrain.sha256").exists(),
                 what="the new node's copy of the code")  # fmt: skip
        # the job finishes
        (sim / "finish").write_text("")
        for instance_id in (instances[0]["InstanceId"], replacement["InstanceId"]):
            cluster.nodes[instance_id].wait_unit("gpu-cluster-job@pretrain")
            report = json.loads(
                cluster.ssm.get_parameter(
                    Name=f"{job_parameter(TRAIN_IDS, 'pretrain')}/nodes/{instance_id}"
                )["Parameter"]["Value"]
            )
            assert report["state"] == "done"
        # 8. `pulumi destroy` of the compute stack; `gpuc sweep` finds nothing left
        for node in cluster.nodes.values():
            node.power_off()
        deploy.destroy_train(bigger)
        # the same stack, live in another region, has account-wide roles tagged `train` too
        elsewhere = deploy.live_role_elsewhere(stack_names("train", "eu-west-1"))
        west_board = deploy.live_dashboard_elsewhere(stack_names("train", "eu-west-1"))
        swept = gpuc_at(moto_server, "sweep", "--stack", "train")
        assert swept.returncode == 0, swept.stderr
        assert "nothing" in swept.stdout.lower(), swept.stdout
        assert deploy.iam.get_role(RoleName=elsewhere)["Role"]["RoleName"] == elsewhere
        boards = deploy.cloudwatch.list_dashboards()["DashboardEntries"]
        assert [b["DashboardName"] for b in boards] == [west_board]  # ours went with destroy
        # 9. the data stays: the dataset and the checkpoints
        assert deploy.s3.get_object(Bucket=bucket, Key="datasets/tokens.bin")["Body"].read() == (
            DATASET
        )
        assert (saved() or {})["step"] >= at_notice
        serve_the_model(moto_server, bucket)
    finally:
        cluster.close()
