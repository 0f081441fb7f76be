"""A failure every new node shares must not replace nodes forever (issue 25, 4): the health
check counts each replacement per failure in SSM, and once one failure has replaced 3 nodes
within the hour the next node stays in its group, failed, and the alert topic says why."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import boto3
from botocore.loaders import Loader
from conftest import TRAIN_LIKE, plan_config
from harness_units import SELF, TRAIN, argument, aws_calls, health
from harness_units import nodes as nodes

LUSTRE = "fs-1.fsx.us-east-1.amazonaws.com@tcp:/abc"
NO_CLIENT = "failed: client-for-6.8.0-1021-aws"  # the AMI's kernel has no FSx client yet
COUNTER = "/gpu-cluster/train/train/replacements/lustre_client-for-6.8.0-1021-aws"
TOPIC = "arn:aws:sns:us-east-1:123456789012:train-cost-alerts-1a2b3c4"


def without_lustre_client(node) -> None:
    """The Lustre step failed the way it does on every node of this AMI."""
    node.file("/run/gpu-cluster").mkdir(parents=True, exist_ok=True)
    node.file("/run/gpu-cluster/step-lustre").write_text(f"{NO_CLIENT}\n")


def counted(*ages_and_ids: tuple[int, str]) -> str:
    now = int(time.time())
    return " ".join(f"{now - age}@{instance}" for age, instance in ages_and_ids)


def stub_node(nodes, counter: str | None):
    answers = [("alerts-topic", TOPIC), ("Tags[?Key==", "train-nodes-group")]
    if counter is not None:
        answers.insert(0, (f"ssm get-parameter --region us-east-1 --name {COUNTER}", counter))
    node = nodes.make(replace(TRAIN, lustre_target=LUSTRE), aws=answers)
    without_lustre_client(node)
    return node


def test_the_first_replacements_are_counted_per_failure(nodes):
    # two replacements this hour, one two hours ago, and this node's own earlier count
    node = stub_node(nodes, counted((600, "i-0aaa"), (120, "i-0bbb"), (7200, "i-0old"), (60, SELF)))
    before = int(time.time())
    assert node.step("gpu-cluster-health").returncode == 1
    after = int(time.time())
    assert health(node) == "failed:lustre:client-for-6.8.0-1021-aws"
    (put,) = aws_calls(node, "ssm", "put-parameter")
    assert argument(put, "--name") == COUNTER and argument(put, "--type") == "String"
    kept = argument(put, "--value").split()
    assert [word.split("@")[1] for word in kept] == ["i-0aaa", "i-0bbb", SELF]  # old one gone
    assert before <= int(kept[-1].split("@")[0]) <= after  # stamped when it was counted
    assert aws_calls(node, "autoscaling", "set-instance-health")  # replaced, as before
    assert not aws_calls(node, "sns", "publish")


def test_the_first_node_of_a_failure_starts_its_count(nodes):
    node = stub_node(nodes, None)  # no parameter yet: the stub answers nothing
    assert node.step("gpu-cluster-health").returncode == 1
    (put,) = aws_calls(node, "ssm", "put-parameter")
    assert [w.split("@")[1] for w in argument(put, "--value").split()] == [SELF]
    assert aws_calls(node, "autoscaling", "set-instance-health")


def test_after_three_replacements_within_the_hour_the_node_stays_and_says_why(nodes):
    node = stub_node(nodes, counted((3000, "i-0aaa"), (1800, "i-0bbb"), (600, "i-0ccc")))
    assert node.step("gpu-cluster-health").returncode == 1
    assert health(node) == "failed:lustre:client-for-6.8.0-1021-aws"  # still failed
    assert not aws_calls(node, "autoscaling", "set-instance-health")  # not replaced
    assert not aws_calls(node, "ssm", "put-parameter")
    (publish,) = aws_calls(node, "sns", "publish")
    assert argument(publish, "--topic-arn") == TOPIC
    assert argument(publish, "--subject") == "gpu-cluster train: a failure keeps replacing nodes"
    message = argument(publish, "--message")
    assert SELF in message and "lustre:client-for-6.8.0-1021-aws" in message
    assert "set-instance-health" in message  # what to do once the cause is fixed


def test_a_counter_name_fits_ssm_for_any_failure(nodes):
    """Parameter names: letters, digits and _.-/ (the failure's own ':' '/' ',' become _), at
    most 15 levels, 1011 characters with the ARN before them (SSM User Guide, "Creating
    Systems Manager parameters"); botocore's model: PutParameter Name 1-2048."""
    node = nodes.make(aws=[("Tags[?Key==", "train-nodes-group")])
    node.set_gpus(lost=[3])  # failed:nvidia-smi:exit-15,gpus:7/8: a ':' and a '/'
    node.kernel_log("NVRM: Xid (PCI:0000:a0:1d): 79, pid=1201, GPU has fallen off the bus.\n")
    assert node.step("gpu-cluster-health").returncode == 1
    (put,) = aws_calls(node, "ssm", "put-parameter")
    name = argument(put, "--name")
    assert name.startswith("/gpu-cluster/train/train/replacements/")
    cause = name.rsplit("/", 1)[1]
    assert cause and all(c.isalnum() or c in "_.-" for c in cause)
    assert (
        name.count("/") <= 15
        and len("arn:aws-us-gov:ssm:us-gov-west-1:123456789012:parameter" + name) <= 1011
    )
    shape = Loader().load_service_model("ssm", "service-2")["shapes"]["PSParameterName"]
    assert shape["min"] <= len(name) <= shape["max"]


def test_a_long_failure_is_cut_to_a_valid_name(nodes):
    node = stub_node(nodes, None)
    node.file("/run/gpu-cluster/step-lustre").write_text("failed: " + "x/" * 600 + "\n")
    assert node.step("gpu-cluster-health").returncode == 1
    (put,) = aws_calls(node, "ssm", "put-parameter")
    name = argument(put, "--name")
    assert len(name) == 250 and name.count("/") == 5


# --- the whole loop against moto, the real AWS CLI on each node ---------------------------


def test_a_shared_failure_replaces_three_nodes_then_alerts(nodes, moto_server):
    def client(service):
        return boto3.client(service, region_name="us-east-1", endpoint_url=moto_server)

    ec2, autoscaling, ssm, sns, sqs = map(client, ("ec2", "autoscaling", "ssm", "sns", "sqs"))
    image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
    ec2.create_launch_template(
        LaunchTemplateName="train-nodes",
        LaunchTemplateData={"ImageId": image, "InstanceType": "p4d.24xlarge"},
    )
    autoscaling.create_auto_scaling_group(
        AutoScalingGroupName="train-nodes-group",
        LaunchTemplate={"LaunchTemplateName": "train-nodes"},
        MinSize=0,
        MaxSize=4,
        DesiredCapacity=4,
        AvailabilityZones=["us-east-1a"],
    )
    topic = sns.create_topic(Name="train-cost-alerts")["TopicArn"]
    queue = sqs.create_queue(QueueName="inbox")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
    sns.subscribe(TopicArn=topic, Protocol="sqs", Endpoint=queue_arn["Attributes"]["QueueArn"])
    ssm.put_parameter(
        Name="/gpu-cluster/train/train/alerts-topic", Value=topic, Type="SecureString"
    )
    group = autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"][0]
    instances = [i["InstanceId"] for i in group["Instances"]]
    for instance in instances:  # each new node of the same AMI fails the same way
        node = nodes.make(
            replace(TRAIN, lustre_target=LUSTRE), endpoint=moto_server, instance_id=instance
        )
        without_lustre_client(node)
        done = node.step("gpu-cluster-health")
        assert done.returncode == 1, done.stderr
    health_of = {
        i["InstanceId"]: i["HealthStatus"]
        for i in autoscaling.describe_auto_scaling_instances()["AutoScalingInstances"]
    }
    assert [health_of[i] for i in instances] == ["Unhealthy"] * 3 + ["Healthy"]
    count = ssm.get_parameter(Name=COUNTER)["Parameter"]["Value"].split()
    assert [word.split("@")[1] for word in count] == instances[:3]
    (message,) = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10)["Messages"]
    body = json.loads(message["Body"])
    assert body["Subject"] == "gpu-cluster train: a failure keeps replacing nodes"
    assert instances[3] in body["Message"]


# --- what the node may do -----------------------------------------------------------------


def test_the_node_role_may_count_and_alert_for_its_own_stack_only():
    plan = plan_config({**TRAIN_LIKE}, "train")
    assert plan.error is None, plan.error
    policy = json.loads(plan.named("train-node-alerts-access").inputs["policy"])
    statements = {s["Sid"]: s for s in policy["Statement"]}
    assert set(statements) == {"FindAlertTopic", "TellAlertTopic", "CountReplacements"}
    count = statements["CountReplacements"]
    assert sorted(count["Action"]) == ["ssm:GetParameter", "ssm:PutParameter"]
    assert count["Resource"] == (
        "arn:aws:ssm:us-east-1:123456789012:parameter/gpu-cluster/train/train/replacements/*"
    )
    parameter = plan.named("train-alerts-topic")
    assert statements["FindAlertTopic"] == {
        "Sid": "FindAlertTopic",
        "Effect": "Allow",
        "Action": "ssm:GetParameter",
        "Resource": plan.state(parameter)["arn"],
    }
    topic = plan.state(plan.named("train-cost-alerts"))["arn"]
    assert statements["TellAlertTopic"]["Action"] == "sns:Publish"
    assert statements["TellAlertTopic"]["Resource"] == topic
    assert all(s["Effect"] == "Allow" and "Condition" not in s for s in statements.values())
    # the node already decrypts the topic parameter and encrypts for the topic with its key
    access = json.loads(plan.named("train-security-node-access").inputs["policy"])
    keys = next(s for s in access["Statement"] if s["Sid"] == "UseClusterKeys")
    assert {"kms:Decrypt", "kms:GenerateDataKey"} <= set(keys["Action"])
