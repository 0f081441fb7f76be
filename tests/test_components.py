"""Component assertions on what the engine receives for the train stack (and variants)."""

from __future__ import annotations

import json

from conftest import TRAIN_LIKE, plan_config

LT = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
KEY = "aws:kms/key:Key"


def only(plan, type_):
    found = plan.of_type(type_)
    assert len(found) == 1, [r.name for r in found]
    return found[0]


def test_four_p4d_nodes_from_one_launch_template(train_plan):
    template = only(train_plan, LT)
    nodes = train_plan.of_type(INSTANCE)
    assert len(nodes) == 4
    assert template.inputs["instanceType"] == "p4d.24xlarge"
    lt_id = train_plan.state(template)["id"]
    for node in nodes:
        assert template.urn in node.dependencies
        assert node.inputs["launchTemplate"]["version"] == "1"
        assert node.inputs["launchTemplate"]["id"] == lt_id
        assert node.parent == train_plan.named("train-nodes").urn
    assert sorted(n.inputs["tags"]["gpu-cluster:node-index"] for n in nodes) == ["0", "1", "2", "3"]


def test_efa_interface_on_each_of_four_network_cards(train_plan):
    nics = only(train_plan, LT).inputs["networkInterfaces"]
    efa = [n for n in nics if n.get("interfaceType") == "efa-only"]
    assert sorted(n["networkCardIndex"] for n in efa) == [0, 1, 2, 3]
    primary = [n for n in nics if n["networkCardIndex"] == 0 and n["deviceIndex"] == 0]
    assert len(primary) == 1 and "interfaceType" not in primary[0]
    sg = train_plan.state(train_plan.named("train-network-nodes-sg"))["id"]
    assert all(n["securityGroups"] == [sg] for n in nics)


def test_one_cluster_placement_group_in_the_template(train_plan):
    group = only(train_plan, "aws:ec2/placementGroup:PlacementGroup")
    assert group.inputs["strategy"] == "cluster"
    placement = only(train_plan, LT).inputs["placement"]
    assert placement["groupName"] == train_plan.state(group)["name"]
    assert placement["availabilityZone"] == "us-east-1a"


def test_imdsv2_required_with_hop_limit(train_plan):
    meta = only(train_plan, LT).inputs["metadataOptions"]
    assert meta["httpTokens"] == "required"
    assert meta["httpEndpoint"] == "enabled"
    assert 1 <= meta["httpPutResponseHopLimit"] <= 2


def test_root_volume_encrypted_with_the_cluster_key(train_plan):
    (mapping,) = only(train_plan, LT).inputs["blockDeviceMappings"]
    ebs = mapping["ebs"]
    key = train_plan.named("train-security-key")
    assert ebs["encrypted"] == "true" and ebs["volumeType"] == "gp3"
    assert ebs["kmsKeyId"] == train_plan.state(key)["arn"]
    assert ebs["volumeSize"] == 500 and mapping["deviceName"] == "/dev/sda1"


def test_no_public_ip_anywhere(train_plan):
    nics = only(train_plan, LT).inputs["networkInterfaces"]
    assert all(n.get("associatePublicIpAddress", "false") == "false" for n in nics)
    for subnet in train_plan.of_type("aws:ec2/subnet:Subnet"):
        assert subnet.inputs.get("mapPublicIpOnLaunch") is False
    node_subnet = train_plan.state(train_plan.named("train-network-private"))["id"]
    assert all(n["subnetId"] == node_subnet for n in nics)


def test_efa_security_group_rules_self_referencing_and_closed_to_world(train_plan):
    sg_id = train_plan.state(train_plan.named("train-network-nodes-sg"))["id"]
    ingress = [
        r
        for r in train_plan.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.inputs["securityGroupId"] == sg_id
    ]
    egress = [
        r
        for r in train_plan.of_type("aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule")
        if r.inputs["securityGroupId"] == sg_id
    ]
    assert len(ingress) == 1
    assert ingress[0].inputs["referencedSecurityGroupId"] == sg_id
    assert ingress[0].inputs["ipProtocol"] == "-1"
    assert any(
        r.inputs.get("referencedSecurityGroupId") == sg_id and r.inputs["ipProtocol"] == "-1"
        for r in egress
    )
    assert all("cidrIpv4" not in r.inputs for r in ingress)
    default_sg = only(train_plan, "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup")
    assert default_sg.inputs.get("ingress", []) == [] and default_sg.inputs.get("egress", []) == []


def test_kms_key_rotation_policy_alias_and_retention(train_plan):
    key = train_plan.named("train-security-key")
    assert key.inputs["enableKeyRotation"] is True
    policy = json.loads(key.inputs["policy"])
    root = next(s for s in policy["Statement"] if s["Sid"] == "EnableIamPolicies")
    assert root["Principal"] == {"AWS": "arn:aws:iam::123456789012:root"}
    assert key.retain_on_delete
    alias = train_plan.named("train-security-key-alias")
    assert alias.inputs["name"].startswith("alias/")


def test_instance_role_trusts_only_ec2_with_ssm_and_scoped_access(train_plan):
    role = train_plan.named("train-security-node-role")
    trust = json.loads(role.inputs["assumeRolePolicy"])
    principals = [s["Principal"] for s in trust["Statement"]]
    assert principals == [{"Service": "ec2.amazonaws.com"}]
    attachment = train_plan.named("train-security-node-ssm")
    assert attachment.inputs["policyArn"].endswith(":iam::aws:policy/AmazonSSMManagedInstanceCore")
    access = json.loads(train_plan.named("train-security-node-access").inputs["policy"])
    resources = {s["Sid"]: s["Resource"] for s in access["Statement"]}
    bucket = train_plan.outputs["bucketName"]
    assert resources["ListClusterBucket"] == f"arn:aws:s3:::{bucket}"
    assert resources["ReadWriteClusterObjects"] == f"arn:aws:s3:::{bucket}/*"
    assert "*" not in resources["UseClusterKeys"]
    assert len(resources["UseClusterKeys"]) == 2  # the cluster key and the data stack's key


def test_network_endpoints_nat_and_flow_logs(train_plan):
    services = sorted(
        r.inputs["serviceName"] for r in train_plan.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    )
    assert services == sorted(
        f"com.amazonaws.us-east-1.{s}" for s in ("s3", "ssm", "ssmmessages", "ec2messages")
    )
    assert len(train_plan.of_type("aws:ec2/natGateway:NatGateway")) == 1
    flow = only(train_plan, "aws:ec2/flowLog:FlowLog")
    assert flow.inputs["trafficType"] == "ALL"
    group = only(train_plan, "aws:cloudwatch/logGroup:LogGroup")
    assert (
        group.inputs["kmsKeyId"] == train_plan.state(train_plan.named("train-security-key"))["arn"]
    )


def test_user_data_builds_raid0_and_node_list(train_plan):
    import base64

    script = base64.b64decode(only(train_plan, LT).inputs["userData"]).decode()
    assert "mdadm --create /dev/md0 --level=0" in script
    assert "NVME_DISKS=8" in script and "EFA_INTERFACES=4" in script
    assert "/etc/gpu-cluster/nodes" in script and "/etc/gpu-cluster/torchrun.env" in script
    # rank and size come from the node's own tags, so the script is the same on every node
    assert "tags/instance/gpu-cluster:node-index" in script
    assert "tags/instance/gpu-cluster:node-count" in script
    assert "NODE_COUNT=" not in script.split("cat > /usr/local/sbin")[0]


def test_stack_outputs(train_plan):
    out = train_plan.outputs
    assert out["onDemandQuota"] == {"quota": "Running On-Demand P instances", "vcpusNeeded": 384}
    assert out["totalGpus"] == 32 and out["nodeCount"] == 4
    assert len(out["nodePrivateIps"]) == 4
    assert len(out["ssmSessionCommands"]) == 4
    assert [c.rsplit(" ", 1)[1] for c in out["ssmSessionCommands"]] == out["instanceIds"]
    assert all(i.startswith("i-") for i in out["instanceIds"])
    assert all(c.startswith("aws ssm start-session") for c in out["ssmSessionCommands"])
    master = out["nodePrivateIps"][0]
    for rank, command in enumerate(out["torchrunCommands"]):
        assert f"--node_rank={rank}" in command and f"--rdzv_endpoint={master}:29500" in command
        assert "--nnodes=4 --nproc_per_node=8" in command


def test_components_parent_chain_and_names(train_plan):
    cluster = train_plan.named("train")
    assert cluster.type == "gpu-cluster:index:GpuCluster"
    for child in ("train-security", "train-network", "train-nodes"):
        assert train_plan.named(child).parent == cluster.urn
    for resource in train_plan.resources:
        if resource.custom and resource.type != "pulumi:pulumi:StackReference":
            assert resource.name.startswith("train-"), resource.name


def test_created_bucket_is_protected_retained_and_locked_down():
    config = {**TRAIN_LIKE, "gpu-cluster:nodes": "1", "gpu-cluster:storage": '{"source": "create"}'}
    plan = plan_config(config, stack="solo")
    assert plan.error is None, plan.error
    bucket = only(plan, "aws:s3/bucket:Bucket")
    assert bucket.protect and bucket.retain_on_delete
    assert plan.named("solo-security-key").protect  # the key now guards data
    store_children = [r for r in plan.resources if r.parent == plan.named("solo-data").urn]
    assert all(r.retain_on_delete for r in store_children)
    block = only(plan, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock").inputs
    assert all(
        block[k]
        for k in (
            "blockPublicAcls",
            "blockPublicPolicy",
            "ignorePublicAcls",
            "restrictPublicBuckets",
        )
    )
    ownership = only(plan, "aws:s3/bucketOwnershipControls:BucketOwnershipControls").inputs
    assert ownership["rule"]["objectOwnership"] == "BucketOwnerEnforced"
    (rule,) = only(
        plan,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    ).inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    assert (
        rule["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"]
        == plan.state(plan.named("solo-security-key"))["arn"]
    )
    assert rule["bucketKeyEnabled"] is True
    versioning = only(plan, "aws:s3/bucketVersioning:BucketVersioning").inputs
    assert versioning["versioningConfiguration"]["status"] == "Enabled"
    policy = json.loads(only(plan, "aws:s3/bucketPolicy:BucketPolicy").inputs["policy"])
    conditions = [s["Condition"] for s in policy["Statement"] if s["Effect"] == "Deny"]
    assert {"Bool": {"aws:SecureTransport": "false"}} in conditions
    assert {"NumericLessThan": {"s3:TlsVersion": "1.2"}} in conditions
    lifecycle = only(plan, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration")
    (rule,) = lifecycle.inputs["rules"]
    assert rule["abortIncompleteMultipartUpload"]["daysAfterInitiation"] >= 1


def test_single_node_without_efa_has_no_placement_group():
    config = {
        **TRAIN_LIKE,
        "gpu-cluster:instanceType": "g5.xlarge",
        "gpu-cluster:nodes": "1",
    }
    plan = plan_config(config, stack="dev1")
    assert plan.error is None, plan.error
    assert plan.of_type("aws:ec2/placementGroup:PlacementGroup") == []
    nics = only(plan, LT).inputs["networkInterfaces"]
    assert len(nics) == 1 and "torchrunCommands" not in plan.outputs


def test_p5_cluster_gets_32_efa_interfaces_per_node():
    config = {**TRAIN_LIKE, "gpu-cluster:instanceType": "p5.48xlarge", "gpu-cluster:nodes": "2"}
    plan = plan_config(config, stack="h100")
    assert plan.error is None, plan.error
    nics = only(plan, LT).inputs["networkInterfaces"]
    assert sum(n.get("interfaceType") == "efa-only" for n in nics) == 32
    assert plan.outputs["efaInterfacesPerNode"] == 32


def test_custom_ami_root_device_comes_from_ec2():
    config = {
        **TRAIN_LIKE,
        "gpu-cluster:nodes": "1",
        "gpu-cluster:ami": '{"id": "ami-0123456789abcdef0", "architecture": "x86_64"}',
    }
    plan = plan_config(config, stack="custom")
    assert plan.error is None, plan.error
    template = only(plan, LT).inputs
    assert template["imageId"] == "ami-0123456789abcdef0"
    # The mock EC2 answers /dev/xvda for non-DLAMI images: proof the lookup was made and used.
    assert template["blockDeviceMappings"][0]["deviceName"] == "/dev/xvda"


def test_default_ami_is_the_deep_learning_ami_for_the_architecture(train_plan):
    from components.cluster import dlami_parameter
    from infra.plan.mocks import MOCK_AMI

    template = only(train_plan, LT).inputs
    parameters = [a["name"] for t, a in train_plan.invokes if t.startswith("aws:ssm/getParameter")]
    assert parameters == [dlami_parameter("x86_64")]
    assert "/aws/service/deeplearning/ami/x86_64/" in parameters[0]
    assert template["imageId"] == MOCK_AMI["x86_64"]
    assert template["blockDeviceMappings"][0]["deviceName"] == "/dev/sda1"


def test_user_data_is_valid_bash(train_plan, tmp_path):
    import base64
    import shutil
    import subprocess

    bash = shutil.which("bash")
    assert bash is not None
    script = tmp_path / "user-data.sh"
    script.write_bytes(base64.b64decode(only(train_plan, LT).inputs["userData"]))
    result = subprocess.run([bash, "-n", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_scaling_up_adds_nodes_without_touching_running_ones(train_plan):
    """`pulumi config set nodes 8` on train: same template, nodes 0-3 change only a tag."""
    from conftest import ROOT

    from infra.stack_files import load_stack_config

    config = {**load_stack_config("train", ROOT), "gpu-cluster:nodes": "8"}
    bigger = plan_config(config, stack="train")
    assert bigger.error is None, bigger.error
    assert only(bigger, LT).inputs == only(train_plan, LT).inputs
    before = {r.name: r for r in train_plan.of_type(INSTANCE)}
    after = {r.name: r for r in bigger.of_type(INSTANCE)}
    assert set(before) < set(after) and len(after) == 8
    for name, node in before.items():
        grown = after[name]
        assert {k: v for k, v in grown.inputs.items() if k != "tags"} == {
            k: v for k, v in node.inputs.items() if k != "tags"
        }
        assert grown.inputs["tags"]["gpu-cluster:node-count"] == "8"
        assert node.inputs["tags"]["gpu-cluster:node-count"] == "4"
        # a new template version (e.g. a new Deep Learning AMI) never replaces a running node
        assert grown.ignore_changes == ("launchTemplate",)
        assert grown.replacement_trigger == node.replacement_trigger
        assert grown.replacement_trigger.startswith("p4d.24xlarge/subnet-")


def test_changing_instance_type_replaces_the_nodes(train_plan):
    """Nodes ignore template changes, so what needs a new node must say so explicitly."""
    other = plan_config({**TRAIN_LIKE, "gpu-cluster:instanceType": "p5.48xlarge"}, stack="train")
    assert other.error is None, other.error
    before = {r.name: r.replacement_trigger for r in train_plan.of_type(INSTANCE)}
    after = {r.name: r.replacement_trigger for r in other.of_type(INSTANCE)}
    assert set(before) == set(after)
    for name, trigger in before.items():
        assert trigger and after[name] and trigger != after[name]
        assert after[name].startswith("p5.48xlarge/") and "31.0:efa-only" in after[name]


def test_node_list_refresh_script_runs(tmp_path):
    """Run the node's refresh script with stub `curl` (IMDS) and `aws` (EC2) on this machine."""
    import os
    import shutil
    import stat
    import subprocess

    from components.user_data import BootConfig, render_user_data

    etc = tmp_path / "etc"
    etc.mkdir()
    script = render_user_data(BootConfig("train", "us-east-1", 8, 8, 4, "bucket-1"))
    env_file = script.split("cat > /etc/gpu-cluster/cluster.env <<'ENV'\n")[1].split("\nENV\n")[0]
    refresh = script.split("<<'SCRIPT'\n")[1].split("\nSCRIPT\n")[0]
    (etc / "cluster.env").write_text(env_file + "\n")
    program = tmp_path / "refresh.sh"
    program.write_text(refresh.replace("/etc/gpu-cluster", str(etc)))
    stubs = tmp_path / "bin"
    stubs.mkdir()
    (stubs / "curl").write_text(
        '#!/bin/bash\ncase "$*" in\n  *node-index*) echo 1;;\n  *node-count*) echo 3;;\n'
        "  *) echo token;;\nesac\n"
    )
    (stubs / "aws").write_text(
        "#!/bin/bash\nprintf '2\\t10.42.0.12\\n0\\t10.42.0.10\\n1\\t10.42.0.11\\n'\n"
    )
    for stub in stubs.iterdir():
        stub.chmod(stub.stat().st_mode | stat.S_IEXEC)
    env = {**os.environ, "PATH": f"{stubs}:{os.environ['PATH']}"}
    bash = shutil.which("bash")
    assert bash is not None
    result = subprocess.run([bash, str(program), "--wait"], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert (etc / "nodes").read_text().split("\n")[:3] == [
        "0\t10.42.0.10",
        "1\t10.42.0.11",
        "2\t10.42.0.12",
    ]
    torchrun = dict(line.split("=", 1) for line in (etc / "torchrun.env").read_text().splitlines())
    assert torchrun["NNODES"] == "3" and torchrun["NODE_RANK"] == "1"
    assert torchrun["MASTER_ADDR"] == "10.42.0.10" and torchrun["NPROC_PER_NODE"] == "8"
    assert torchrun["FI_PROVIDER"] == "efa" and torchrun["DATA_BUCKET"] == "bucket-1"
