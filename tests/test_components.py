"""Component assertions on what the engine receives for the train stack (and variants)."""

from __future__ import annotations

import json

from boot_fakes import FakeImds
from boot_harness import P4D, BootNode
from conftest import TRAIN_LIKE, only, plan_config

from gpu_cluster.components.user_data import decoded_user_data

LT = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
GROUP = "aws:autoscaling/group:Group"
KEY = "aws:kms/key:Key"


def test_four_p4d_nodes_in_one_auto_scaling_group(train_plan):
    template = only(train_plan, LT)
    group = only(train_plan, GROUP)
    assert train_plan.of_type(INSTANCE) == []
    assert template.inputs["instanceType"] == "p4d.24xlarge"
    inputs = group.inputs
    assert inputs["maxSize"] == inputs["desiredCapacity"] == 4
    assert inputs["minSize"] == 0  # the idle stop may scale it to zero
    assert inputs["launchTemplate"] == {"id": train_plan.state(template)["id"], "version": "1"}
    assert template.urn in group.dependencies
    node_subnet = train_plan.state(train_plan.named("train-network-private"))["id"]
    assert inputs["vpcZoneIdentifiers"] == [node_subnet]
    group_name = train_plan.state(train_plan.named("train-nodes-placement"))["name"]
    assert inputs["placementGroup"] == group_name
    assert inputs["instanceMaintenancePolicy"] == {
        "minHealthyPercentage": 0,
        "maxHealthyPercentage": 100,
    }
    assert inputs["healthCheckType"] == "EC2"
    assert "instanceRefresh" not in inputs and "mixedInstancesPolicy" not in inputs
    assert group.parent == train_plan.named("train-nodes").urn
    tags = {t["key"]: t for t in inputs["tags"]}
    assert all(t["propagateAtLaunch"] for t in tags.values())
    assert tags["gpu-cluster:name"]["value"] == "train"


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
    # the group launches every interface into its own (private) subnet
    node_subnet = train_plan.state(train_plan.named("train-network-private"))["id"]
    assert all("subnetId" not in n for n in nics)
    assert only(train_plan, GROUP).inputs["vpcZoneIdentifiers"] == [node_subnet]


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
    assert resources["ReadClusterObjects"] == f"arn:aws:s3:::{bucket}/*"
    # datasets are read-only to nodes: writes and deletes only under checkpoints/ and outputs/
    assert resources["WriteCheckpointsAndOutputs"] == [
        f"arn:aws:s3:::{bucket}/checkpoints/*",
        f"arn:aws:s3:::{bucket}/outputs/*",
    ]
    actions = {s["Sid"]: s["Action"] for s in access["Statement"]}
    assert actions["ReadClusterObjects"] == "s3:GetObject"
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
    group = train_plan.named("train-network-flow-logs")
    assert (
        group.inputs["kmsKeyId"] == train_plan.state(train_plan.named("train-security-key"))["arn"]
    )


def test_user_data_builds_raid0_and_node_list(train_plan, tmp_path):
    script = decoded_user_data(only(train_plan, LT).inputs["userData"])
    assert 'mdadm --create "$ARRAY" --name="$LABEL" --level=0' in script
    assert "boot_unit gpu-cluster-scratch 'NVMe scratch space'" in script
    assert 'systemctl enable "$1.service"' in script
    cluster_env = script.split("<<'ENV'\n")[1].split("\nENV\n")[0].splitlines()
    assert {"NVME_DISKS=8", "EFA_INTERFACES=4", "SPOT=false"} <= set(cluster_env)
    # the node count comes from the node's Auto Scaling group, not from the template
    assert "describe-auto-scaling-groups" in script
    assert not [line for line in cluster_env if line.startswith(("NODE_COUNT=", "NNODES="))]
    assert "{{" not in script  # every placeholder was filled
    # The plan's user data on a p4d node: the 8 disks become one array, the group's nodes a list.
    with FakeImds() as imds:
        node = BootNode(tmp_path, script, imds, P4D)
        assert node.install_only().returncode == 0
        for index in range(8):
            disk = node.file(f"/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_AWS{index}")
            disk.parent.mkdir(parents=True, exist_ok=True)
            disk.touch()
        assert node.step("gpu-cluster-scratch").returncode == 0
        (create,) = [c for c in node.calls() if c.startswith("mdadm --create")]
        assert "--level=0 --raid-devices=8" in create
        me = imds.metadata["instance-id"]
        node.answer_aws(
            [
                ("aws:autoscaling:groupName", "train-nodes-group"),
                ("describe-auto-scaling-groups", "2"),
                (
                    "--filters",
                    f"2026-12-01T08:05:00+00:00\ti-0later\t10.0.1.40\tNone\n"
                    f"2026-12-01T08:00:00+00:00\t{me}\t10.0.1.23\tNone",
                ),
            ]
        )
        done = node.step("gpu-cluster-nodes")
        assert done.returncode == 0, done.stderr
    assert node.read("/etc/gpu-cluster/nodes").splitlines() == [
        f"0\t10.0.1.23\t{me}",
        "1\t10.0.1.40\ti-0later",
    ]
    torchrun = node.env_file("/etc/gpu-cluster/torchrun.env")
    assert torchrun["NNODES"] == "2" and torchrun["NPROC_PER_NODE"] == "8"
    assert torchrun["MASTER_ADDR"] == "10.0.1.23" and "FI_PROVIDER" not in torchrun


def test_stack_outputs(train_plan):
    out = train_plan.outputs
    assert out["vcpuQuotasNeeded"] == {"Running On-Demand P instances": 384}
    assert out["totalGpus"] == 32 and out["nodeCount"] == 4
    assert out["purchaseOption"] == "on-demand"
    group = train_plan.state(only(train_plan, GROUP))["name"]
    assert out["nodeGroupName"] == group
    assert f"Name=tag:aws:autoscaling:groupName,Values={group}" in out["listNodesCommand"]
    (ssm,) = out["ssmSessionCommands"]
    assert ssm.startswith("aws ssm start-session --region us-east-1 --target $(") and group in ssm
    # one command on every node: c10d rendezvous assigns ranks
    assert out["torchrunCommand"] == "gpuc-torchrun train.py"
    run = out["runOnEveryNodeCommand"]
    assert f"--targets Key=tag:aws:autoscaling:groupName,Values={group}" in run
    assert "AWS-RunShellScript" in run and "gpuc-torchrun train.py" in run
    parameters = json.loads(run.split("--parameters '")[1].split("'")[0])
    assert parameters["executionTimeout"] == ["172800"]  # not SSM's default hour
    assert "nodePrivateIps" not in out and "instanceIds" not in out


def test_components_parent_chain_and_names(train_plan):
    cluster = train_plan.named("train")
    assert cluster.type == "gpu-cluster:index:GpuCluster"
    for child in ("train-security", "train-network", "train-nodes"):
        assert train_plan.named(child).parent == cluster.urn
    for resource in train_plan.resources:
        if resource.custom and resource.type != "pulumi:pulumi:StackReference":
            assert resource.name.startswith("train-"), resource.name


def assert_closed_to_public(plan, prefix: str) -> None:
    """The bucket's four public-access blocks are on and its ACLs are off (owner enforced)."""
    block = plan.named(f"{prefix}public-access-block").inputs
    assert all(
        block[k]
        for k in (
            "blockPublicAcls",
            "blockPublicPolicy",
            "ignorePublicAcls",
            "restrictPublicBuckets",
        )
    )
    ownership = plan.named(f"{prefix}ownership").inputs
    assert ownership["rule"]["objectOwnership"] == "BucketOwnerEnforced"


def test_created_bucket_is_protected_retained_and_locked_down():
    config = {**TRAIN_LIKE, "gpu-cluster:nodes": "1", "gpu-cluster:storage": '{"source": "create"}'}
    plan = plan_config(config, stack="solo")
    assert plan.error is None, plan.error
    bucket = plan.named("solo-data-bucket")
    assert bucket.protect and bucket.retain_on_delete
    assert plan.named("solo-security-key").protect  # the key now guards data
    store_children = [r for r in plan.resources if r.parent == plan.named("solo-data").urn]
    assert all(r.retain_on_delete for r in store_children)
    assert_closed_to_public(plan, "solo-data-")
    (rule,) = plan.named("solo-data-encryption").inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
    assert (
        rule["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"]
        == plan.state(plan.named("solo-security-key"))["arn"]
    )
    assert rule["bucketKeyEnabled"] is True
    versioning = plan.named("solo-data-versioning").inputs
    assert versioning["versioningConfiguration"]["status"] == "Enabled"
    policy = json.loads(plan.named("solo-data-tls-only").inputs["policy"])
    conditions = [s["Condition"] for s in policy["Statement"] if s["Effect"] == "Deny"]
    assert {"Bool": {"aws:SecureTransport": "false"}} in conditions
    assert {"NumericLessThan": {"s3:TlsVersion": "1.2"}} in conditions
    lifecycle = plan.named("solo-data-lifecycle")
    (rule,) = lifecycle.inputs["rules"]
    assert rule["abortIncompleteMultipartUpload"]["daysAfterInitiation"] >= 1


def test_single_on_demand_node_is_a_plain_instance_without_placement_group():
    config = {
        **TRAIN_LIKE,
        "gpu-cluster:instanceType": "g5.xlarge",
        "gpu-cluster:nodes": "1",
    }
    plan = plan_config(config, stack="dev1")
    assert plan.error is None, plan.error
    assert plan.of_type("aws:ec2/placementGroup:PlacementGroup") == []
    assert plan.of_type(GROUP) == []
    nics = only(plan, LT).inputs["networkInterfaces"]
    assert len(nics) == 1 and plan.outputs["torchrunCommand"] == "gpuc-torchrun train.py"
    assert nics[0]["subnetId"] == plan.state(plan.named("dev1-network-private"))["id"]
    assert "runOnEveryNodeCommand" not in plan.outputs
    node = only(plan, INSTANCE)
    # "$Default": template changes never show as a diff on the running box; a replacement
    # launches the current default version
    assert node.inputs["launchTemplate"]["version"] == "$Default"
    # only the version is ignored: the provider's Read stores a number in its place
    assert node.ignore_changes == ("launchTemplate.version",) and node.delete_before_replace
    # no trigger: its type changes in place; what a stop and start cannot change is in the
    # template's (architecture, placement group, NIC layout, file system)
    assert node.replacement_trigger is None
    assert only(plan, LT).replacement_trigger == "x86_64//0.0:interface/"
    assert plan.outputs["instanceIds"] == [plan.state(node)["id"]]
    # a login shell of the job user: Session Manager's default sh reads no /etc/profile.d
    assert plan.outputs["ssmSessionCommands"] == [
        f"aws ssm start-session --region us-east-1 --target {plan.state(node)['id']} "
        '--document-name AWS-StartInteractiveCommand --parameters command="sudo -iu ubuntu"'
    ]


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
    # a pinned id keeps resolving after its owner deprecates it
    (lookup,) = [a for t, a in plan.invokes if t == "aws:ec2/getAmi:getAmi"]
    assert lookup["includeDeprecated"] is True


def test_default_ami_is_a_pinned_deep_learning_ami_release(train_plan):
    """Every node boots the same AMI: a release found by its image name (deprecated ones
    included), never whatever the "latest" SSM parameter says that day."""
    from gpu_cluster.components.dlami import dlami, dlami_image_name
    from gpu_cluster.infra.plan.mocks import MOCK_AMI

    template = only(train_plan, LT).inputs
    assert [t for t, _ in train_plan.invokes if t.startswith("aws:ssm/getParameter")] == []
    (lookup,) = [a for t, a in train_plan.invokes if t == "aws:ec2/getAmi:getAmi"]
    expected = (
        f"Deep Learning OSS Nvidia Driver AMI GPU PyTorch 2.9 (Ubuntu 24.04) {dlami()['release']}"
    )
    assert dlami_image_name("x86_64") == expected
    assert lookup["filters"] == [{"name": "name", "values": [expected]}]
    assert lookup["owners"] == ["amazon"] and lookup["includeDeprecated"] is True
    assert template["imageId"] == MOCK_AMI["x86_64"] == train_plan.outputs["amiId"]
    assert train_plan.outputs["amiName"] == expected
    assert template["blockDeviceMappings"][0]["deviceName"] == "/dev/sda1"


def test_moving_to_another_ami_is_an_explicit_setting():
    from gpu_cluster.components.dlami import dlami_parameter

    newer = plan_config({**TRAIN_LIKE, "gpu-cluster:ami": '{"release": "20261009"}'}, "train")
    assert newer.error is None, newer.error
    (lookup,) = [a for t, a in newer.invokes if t == "aws:ec2/getAmi:getAmi"]
    assert lookup["filters"][0]["values"][0].endswith(" 20261009")
    latest = plan_config({**TRAIN_LIKE, "gpu-cluster:ami": '{"release": "latest"}'}, "train")
    assert latest.error is None, latest.error
    parameters = [a["name"] for t, a in latest.invokes if t.startswith("aws:ssm/getParameter")]
    assert parameters == [dlami_parameter("x86_64")]
    (by_id,) = [a for t, a in latest.invokes if t == "aws:ec2/getAmi:getAmi"]
    assert by_id["includeDeprecated"] is True


def test_scaling_up_resizes_the_group_and_leaves_the_template_alone(train_plan):
    """`pulumi config set nodes 8` on train: same template and trigger, only the sizes change."""
    from conftest import ROOT

    from gpu_cluster.infra.stack_files import load_stack_config

    config = {**load_stack_config("train", ROOT), "gpu-cluster:nodes": "8"}
    bigger = plan_config(config, stack="train")
    assert bigger.error is None, bigger.error
    assert only(bigger, LT).inputs == only(train_plan, LT).inputs
    before, after = only(train_plan, GROUP), only(bigger, GROUP)
    changed = {k for k in before.inputs if before.inputs[k] != after.inputs.get(k)}
    assert changed == {"maxSize", "desiredCapacity"}  # minSize stays 0 (idle stop)
    assert after.inputs["desiredCapacity"] == 8
    assert after.replacement_trigger == before.replacement_trigger
    # no ignore_changes anywhere: replacements never reuse old inputs
    assert all(r.ignore_changes == () for r in bigger.resources)


def test_changing_instance_type_replaces_the_group_first(train_plan):
    """A type (or NIC layout) change replaces the group, deleting the old nodes first."""
    other = plan_config({**TRAIN_LIKE, "gpu-cluster:instanceType": "p5.48xlarge"}, stack="train")
    assert other.error is None, other.error
    before, after = only(train_plan, GROUP), only(other, GROUP)
    assert before.replacement_trigger != after.replacement_trigger
    assert after.replacement_trigger.startswith("p5.48xlarge/") and "31.0:efa-only" in (
        after.replacement_trigger
    )
    assert before.delete_before_replace and after.delete_before_replace


def test_multi_interface_templates_never_set_associate_public_ip(train_plan):
    """EC2 rejects AssociatePublicIpAddress when a launch has several network interfaces."""
    nics = only(train_plan, LT).inputs["networkInterfaces"]
    assert len(nics) == 5 and all("associatePublicIpAddress" not in n for n in nics)
    single = plan_config(
        {**TRAIN_LIKE, "gpu-cluster:instanceType": "g5.xlarge", "gpu-cluster:nodes": "1"},
        stack="dev1",
    )
    (nic,) = only(single, LT).inputs["networkInterfaces"]
    assert nic["associatePublicIpAddress"] == "false"


def test_imds_hop_limit_is_one_unless_containers_use_a_bridge_network(train_plan):
    assert only(train_plan, LT).inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1
    assert only(train_plan, LT).inputs["monitoring"] == {"enabled": True}  # 1-minute metrics
    bridge = plan_config({**TRAIN_LIKE, "gpu-cluster:containerNetwork": "bridge"}, stack="train")
    assert bridge.error is None, bridge.error
    assert only(bridge, LT).inputs["metadataOptions"]["httpPutResponseHopLimit"] == 2


def test_the_cluster_key_serves_only_this_stacks_log_groups(train_plan):
    key = train_plan.named("train-security-key")
    statements = {s["Sid"]: s for s in json.loads(key.inputs["policy"])["Statement"]}
    logs = statements["AllowCloudWatchLogsForThisStack"]["Condition"]["ArnLike"]
    patterns = logs["kms:EncryptionContext:aws:logs:arn"]
    assert patterns == [
        "arn:aws:logs:us-east-1:123456789012:log-group:/gpu-cluster/train-*",
        "arn:aws:logs:us-east-1:123456789012:log-group:/aws/events/gpu-cluster/train-*",
    ]
    from fnmatch import fnmatch

    for group in ("train-network-flow-logs", "train-nodes-events"):
        name = train_plan.named(group).inputs["name"]
        arn = f"arn:aws:logs:us-east-1:123456789012:log-group:{name}"
        assert any(fnmatch(arn, pattern) for pattern in patterns), name


def test_data_bucket_access_is_logged_to_a_locked_down_bucket():
    plan = plan_stack_data()
    data = plan.named("data-data-bucket")
    logs = plan.named("data-data-access-logs")
    assert logs.protect and logs.retain_on_delete
    logging = plan.named("data-data-access-logging").inputs
    assert logging["bucket"] == plan.state(data)["id"]
    assert logging["targetBucket"] == plan.state(logs)["id"] and logging["targetPrefix"] == "logs/"
    (rule,) = plan.named("data-data-access-logs-encryption").inputs["rules"]
    assert rule["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "AES256"}
    assert_closed_to_public(plan, "data-data-access-logs-")
    policy = json.loads(plan.named("data-data-access-logs-policy").inputs["policy"])
    (allow,) = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"Service": "logging.s3.amazonaws.com"}
    assert allow["Resource"] == plan.state(logs)["arn"] + "/logs/*"
    assert allow["Condition"] == {
        "ArnLike": {"aws:SourceArn": plan.state(data)["arn"]},
        "StringEquals": {"aws:SourceAccount": "123456789012"},
    }
    assert {"Bool": {"aws:SecureTransport": "false"}} in [
        s["Condition"] for s in policy["Statement"] if s["Effect"] == "Deny"
    ]


def plan_stack_data():
    from conftest import plan_stack

    plan = plan_stack("data")
    assert plan.error is None, plan.error
    return plan
