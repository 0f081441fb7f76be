"""The inference stage: HTTPS (TLS 1.3) endpoint, two zones, scaling, Triton batching."""

from __future__ import annotations

import ipaddress
import json
import re
import subprocess
import sys

import pytest
from boot_fakes import FakeImds
from boot_harness import G4DN, BootNode
from conftest import ROOT, plan_config

from gpu_cluster.components.user_data import (
    BootConfig,
    ServingBoot,
    boot_script,
    decoded_user_data,
    render_serving_user_data,
    render_user_data,
)
from gpu_cluster.infra import cli
from gpu_cluster.infra.audit.command import plan_resources
from gpu_cluster.infra.outcome import OK
from gpu_cluster.infra.spec import DEFAULT_VPC_CIDR
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.policy.pack import audit

INFERENCE = load_stack_config("inference", ROOT)
LISTENER = "aws:lb/listener:Listener"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
IMAGE = "nvcr.io/nvidia/tritonserver:25.01-py3"


def planned(**settings):
    config = dict(INFERENCE)
    if settings:
        inference = json.loads(config["gpu-cluster:inference"])
        for path, value in settings.items():
            target = inference
            *parents, last = path.split(".")
            for parent in parents:
                target = target.setdefault(parent, {})
            target[last] = value
        config["gpu-cluster:inference"] = json.dumps(inference)
    return plan_config(config, "inference")


@pytest.fixture(scope="module")
def plan():
    result = planned()
    assert result.error is None, result.error
    return result


def state(plan, name):
    return plan.state(plan.named(name))


def test_https_listener_with_tls13_and_the_validated_certificate(plan):
    listeners = {r.inputs["port"]: r.inputs for r in plan.of_type(LISTENER)}
    https, http = listeners[443], listeners[80]
    assert https["protocol"] == "HTTPS"
    assert https["sslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-Res-2021-06"
    validated = state(plan, "inference-service-certificate-valid")["certificateArn"]
    assert (
        https["certificateArn"] == validated == state(plan, "inference-service-certificate")["arn"]
    )
    (forward,) = https["defaultActions"]
    assert forward["targetGroupArn"] == state(plan, "inference-service-targets")["arn"]
    (redirect,) = http["defaultActions"]
    assert redirect["type"] == "redirect"
    assert redirect["redirect"] == {"protocol": "HTTPS", "port": "443", "statusCode": "HTTP_301"}


def test_certificate_is_dns_validated_in_the_zone_and_the_name_points_at_the_alb(plan):
    certificate = plan.named("inference-service-certificate").inputs
    assert certificate == {
        **certificate,
        "domainName": "api.example.com",
        "validationMethod": "DNS",
    }
    record = plan.named("inference-service-certificate-validation").inputs
    option = state(plan, "inference-service-certificate")["domainValidationOptions"][0]
    assert record["zoneId"] == "Z0123456789EXAMPLE"
    assert record["name"] == option["resourceRecordName"] and record["type"] == "CNAME"
    alias = plan.named("inference-service-alias").inputs
    alb = state(plan, "inference-service-alb")
    assert alias["name"] == "api.example.com" and alias["type"] == "A"
    assert alias["aliases"][0]["name"] == alb["dnsName"]
    assert plan.outputs["url"] == "https://api.example.com"


def test_only_the_load_balancer_is_open_and_nodes_accept_only_it(plan):
    alb_group = state(plan, "inference-service-alb-sg")["id"]
    nodes_group = state(plan, "inference-network-nodes-sg")["id"]
    # from outside the VPC: the stack file's inference.access.cidrs, to the load balancer only
    vpc = ipaddress.IPv4Network(DEFAULT_VPC_CIDR)
    callers = [
        r.inputs
        for r in plan.of_type(INGRESS)
        if r.inputs.get("cidrIpv4")
        and not ipaddress.IPv4Network(r.inputs["cidrIpv4"]).subnet_of(vpc)
    ]
    assert sorted((r["fromPort"], r["securityGroupId"], r["cidrIpv4"]) for r in callers) == [
        (80, alb_group, "203.0.113.0/24"),
        (443, alb_group, "203.0.113.0/24"),
    ]
    to_nodes = [
        r.inputs for r in plan.of_type(INGRESS) if r.inputs["securityGroupId"] == nodes_group
    ]
    from_outside = [r for r in to_nodes if r.get("referencedSecurityGroupId") != nodes_group]
    assert from_outside == [
        {
            **from_outside[0],
            "referencedSecurityGroupId": alb_group,
            "fromPort": 8000,
            "toPort": 8000,
            "ipProtocol": "tcp",
        }
    ]
    (alb_out,) = [
        r.inputs for r in plan.of_type(EGRESS) if r.inputs["securityGroupId"] == alb_group
    ]
    assert alb_out["referencedSecurityGroupId"] == nodes_group and alb_out["fromPort"] == 8000


def test_two_zones_for_the_load_balancer_and_the_nodes(plan):
    subnets = {r.name: r.inputs for r in plan.of_type("aws:ec2/subnet:Subnet")}
    ids = {name: state(plan, name)["id"] for name in subnets}
    group = plan.named("inference-service-group").inputs
    zones = {
        subnets[n]["availabilityZone"] for n, i in ids.items() if i in group["vpcZoneIdentifiers"]
    }
    assert zones == {"us-east-1a", "us-east-1b"}
    alb = plan.named("inference-service-alb").inputs
    alb_zones = {subnets[n]["availabilityZone"] for n, i in ids.items() if i in alb["subnets"]}
    assert alb_zones == {"us-east-1a", "us-east-1b"}
    for name, inputs in subnets.items():
        if "public" in name:  # an ALB needs a /27 or larger in each zone
            assert ipaddress.ip_network(inputs["cidrBlock"]).prefixlen <= 27
    cidrs = [ipaddress.ip_network(i["cidrBlock"]) for i in subnets.values()]
    assert not any(a.overlaps(b) for k, a in enumerate(cidrs) for b in cidrs[k + 1 :])
    assert alb["dropInvalidHeaderFields"] is True and alb["enableDeletionProtection"] is True
    assert alb["accessLogs"]["enabled"] is True


def test_scaling_warmup_and_held_out_of_service_until_ready(plan):
    group = plan.named("inference-service-group").inputs
    assert (group["minSize"], group["maxSize"]) == (2, 6)
    assert "desiredCapacity" not in group  # target tracking owns it
    assert group["healthCheckType"] == "ELB" and group["healthCheckGracePeriod"] == 600
    assert group["defaultInstanceWarmup"] == 600
    (hook,) = group["initialLifecycleHooks"]
    assert hook["lifecycleTransition"] == "autoscaling:EC2_INSTANCE_LAUNCHING"
    assert hook["heartbeatTimeout"] == 600 and hook["defaultResult"] == "ABANDON"
    policy = plan.named("inference-service-scaling").inputs
    assert policy["policyType"] == "TargetTrackingScaling"
    assert policy["estimatedInstanceWarmup"] == 600
    tracking = policy["targetTrackingConfiguration"]
    assert tracking["targetValue"] == 1000
    spec = tracking["predefinedMetricSpecification"]
    alb, targets = state(plan, "inference-service-alb"), state(plan, "inference-service-targets")
    assert spec == {
        "predefinedMetricType": "ALBRequestCountPerTarget",
        "resourceLabel": f"{alb['arnSuffix']}/{targets['arnSuffix']}",
    }
    launch = json.loads(plan.named("inference-service-node-launch").inputs["policy"])
    own = launch["Statement"][0]
    assert own["Action"] == [
        "autoscaling:CompleteLifecycleAction",
        "autoscaling:RecordLifecycleActionHeartbeat",
        "autoscaling:SetInstanceProtection",
    ]
    group_name = state(plan, "inference-service-group")["name"]
    prefix = own["Resource"].split("autoScalingGroupName/")[1]
    assert prefix == "inference-service-group-*" and group_name.startswith(prefix[:-1])
    scaling = plan.named("inference-service-scaling")
    assert plan.named("inference-service-https").urn in scaling.dependencies


def test_scaling_on_gpu_utilization():
    result = planned(**{"scaling.metric": "gpuUtilization", "scaling.target": 70})
    assert result.error is None
    tracking = result.named("inference-service-scaling").inputs["targetTrackingConfiguration"]
    custom = tracking["customizedMetricSpecification"]
    assert (custom["namespace"], custom["metricName"]) == (
        "gpu-cluster",
        "nvidia_smi_utilization_gpu",
    )
    group = result.state(result.named("inference-service-group"))["name"]
    assert custom["metricDimensions"] == [{"name": "AutoScalingGroupName", "value": group}]


def test_user_data_carries_the_batching_settings(plan):
    (template,) = plan.of_type("aws:ec2/launchTemplate:LaunchTemplate")
    script = decoded_user_data(template.inputs["userData"])
    assert "BATCH_SIZES=4,8\n" in script and "QUEUE_DELAY_US=100\n" in script
    assert "SERVER_IMAGE=nvcr.io/nvidia/tritonserver:25.01-py3\n" in script
    assert "MODEL_PREFIX=models/\n" in script and "boot_unit gpu-cluster-model-server" in script
    assert template.inputs["metadataOptions"]["httpTokens"] == "required"
    assert "networkInterfaces" not in template.inputs  # no public IP
    root = template.inputs["blockDeviceMappings"][0]["ebs"]
    assert (
        root["encrypted"] == "true"
        and root["kmsKeyId"] == state(plan, "inference-security-key")["arn"]
    )


def test_dynamic_batching_is_written_into_every_model_config(tmp_path):
    program = boot_script("gpu-cluster-model-server.sh").split("<<'PY'\n")[1].split("\nPY\n")[0]
    (tmp_path / "resnet").mkdir()
    (tmp_path / "resnet" / "config.pbtxt").write_text(
        'name: "resnet"\nmax_batch_size: 16\ndynamic_batching { preferred_batch_size: [ 2 ] }\n'
    )
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.pbtxt").write_text('name: "bert"\nmax_batch_size: 8\n')
    env = {"GPUC_BATCH_SIZES": "4,8", "GPUC_QUEUE_DELAY_US": "100"}
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    for model in ("resnet", "bert"):
        text = (tmp_path / model / "config.pbtxt").read_text()
        assert text.count("dynamic_batching") == 1
        assert "preferred_batch_size: [ 4, 8 ]" in text
        assert "max_queue_delay_microseconds: 100" in text
        assert "preferred_batch_size: [ 2 ]" not in text


def test_batching_leaves_unbatched_models_and_ensembles_alone_and_caps_sizes(tmp_path):
    program = boot_script("gpu-cluster-model-server.sh").split("<<'PY'\n")[1].split("\nPY\n")[0]
    configs = {
        "unbatched": 'name: "unbatched"\nmax_batch_size: 0\n',
        "pipeline": 'name: "pipeline"\nplatform: "ensemble"\nmax_batch_size: 8\n',
        "small": 'name: "small"\nmax_batch_size: 4\n',
    }
    for model, text in configs.items():
        (tmp_path / model).mkdir()
        (tmp_path / model / "config.pbtxt").write_text(text)
    env = {"GPUC_BATCH_SIZES": "4,8", "GPUC_QUEUE_DELAY_US": "100"}
    done = subprocess.run(
        [sys.executable, "-c", program, str(tmp_path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    for model in ("unbatched", "pipeline"):  # Triton refuses batching there
        assert (tmp_path / model / "config.pbtxt").read_text() == configs[model]
    small = (tmp_path / "small" / "config.pbtxt").read_text()
    assert "preferred_batch_size: [ 4 ]" in small  # 8 is above its max_batch_size


@pytest.fixture(scope="module")
def imds():
    with FakeImds(instance_type="g4dn.xlarge") as server:
        yield server


def serving_boot(port: int = 8000, metrics_port: int | None = None) -> ServingBoot:
    return ServingBoot(
        cluster="x",
        region="us-east-1",
        gpus_per_node=1,
        nvme_disk_count=1,
        bucket="gpuc-data-1",
        model_prefix="models/",
        server_kind="triton",
        image=IMAGE,
        port=port,
        server_args=("--log-verbose=1",),
        readiness_path="/v2/health/ready",
        batch_sizes=(4, 8),
        queue_delay_us=100,
        warmup_seconds=60,
        lifecycle_hook="x-launch",
        metrics_port=metrics_port,
        metrics_log_group="/gpu-cluster/x-metrics" if metrics_port else "",
    )


def test_the_container_has_its_own_unit_not_the_boot_steps(tmp_path, imds, ready_server):
    """The boot step runs as gpu-cluster-model-server.service: rewriting and starting that
    unit from inside it would wait on itself for ever. The container's own unit is enabled,
    and (re)started once its image is pulled."""
    node = BootNode(tmp_path, render_serving_user_data(serving_boot(ready_server)), imds, G4DN)
    assert node.install_only().returncode == 0
    step_unit = node.read("/etc/systemd/system/gpu-cluster-model-server.service")
    installed = len(node.systemd()["log"])  # the user data's own enables and starts
    node.answer_aws([("describe-auto-scaling-instances", "x-group")])
    done = node.step("gpu-cluster-model-server", timeout=60)
    assert done.returncode == 0, done.stderr
    assert node.read("/etc/systemd/system/gpu-cluster-model-server.service") == step_unit
    container = node.read("/etc/systemd/system/gpu-cluster-model-container.service")
    assert f"--gpus all --network host --shm-size 1g -v /mnt/nvme/models:/models {IMAGE}" in (
        container
    )
    log = node.systemd()["log"][installed:]
    assert not [a for a in log if any(w.startswith("gpu-cluster-model-server") for w in a)]
    unit = "gpu-cluster-model-container.service"
    assert ["enable", unit] in log and ["restart", unit] in log
    assert log.index(["enable", unit]) < log.index(["restart", unit])
    calls = node.calls()
    pull = calls.index(f"docker pull -q {IMAGE}")
    # the first start (the stub container exits at once, so its unit's Restart= starts it again)
    starts = [i for i, c in enumerate(calls) if c.startswith("docker run --rm --name model-server")]
    run = starts[0]
    assert pull < run  # the container starts once its image is there
    (complete,) = [c for c in node.aws_calls() if "complete-lifecycle-action" in c]
    assert complete[complete.index("--lifecycle-action-result") + 1] == "CONTINUE"


def test_access_logs_go_to_a_locked_down_bucket_the_elb_account_writes(plan):
    policy = json.loads(plan.named("inference-service-alb-logs-policy").inputs["policy"])
    (allow,) = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert allow["Principal"] == {"AWS": "arn:aws:iam::127311923021:root"}  # us-east-1
    assert allow["Resource"].endswith("/alb/AWSLogs/123456789012/*")


def test_the_security_audit_passes_with_the_elb_controls(plan):
    findings = {f.control.id: f for f in audit(plan_resources(plan))}
    assert findings["ELB.1"].status == "pass" and findings["ELB.17"].status == "pass"
    assert findings["EC2.18"].status == "pass"
    assert not [f for f in findings.values() if f.status == "fail"]


@pytest.mark.parametrize(
    ("settings", "path", "words"),
    [
        (
            {"availabilityZones": ["us-east-1a"]},
            "gpu-cluster:inference.availabilityZones",
            "two or more",
        ),
        (
            {
                "tls": {
                    "policy": "ELBSecurityPolicy-2016-08",
                    "domain": "a.example.com",
                    "hostedZoneId": "Z1",
                }
            },
            "gpu-cluster:inference.tls.policy",
            "TLS 1.3",
        ),
        ({"minNodes": 4, "maxNodes": 2}, "gpu-cluster:inference.maxNodes", "fewer than minNodes"),
        (
            {"tls": {"domain": "api.example.com"}},
            "gpu-cluster:inference.tls.hostedZoneId",
            "hosted zone",
        ),
        ({"tls": {}}, "gpu-cluster:inference.tls", "needs a certificate"),
        (
            {"tls": {"certificateArn": "not-an-arn"}},
            "gpu-cluster:inference.tls.certificateArn",
            "ACM",
        ),
    ],
)
def test_invalid_serving_configs_are_refused(settings, path, words):
    inference = {**json.loads(INFERENCE["gpu-cluster:inference"]), **settings}
    result = plan_config({**INFERENCE, "gpu-cluster:inference": json.dumps(inference)}, "inference")
    assert result.error is not None
    problems = {p.path: p for p in result.error.problems}
    assert words in problems[path].problem and problems[path].fix


def test_an_air_gapped_service_cannot_pull_its_server():
    network = json.dumps({"natGateway": False})
    result = plan_config({**INFERENCE, "gpu-cluster:network": network}, "inference")
    assert result.error is not None
    assert [p.path for p in result.error.problems] == ["gpu-cluster:network.natGateway"]


def test_a_gpu_slice_cannot_serve():
    result = plan_config({**INFERENCE, "gpu-cluster:instanceType": "g6f.large"}, "inference")
    assert result.error is not None
    assert any("fraction of a GPU" in p.problem for p in result.error.problems)


def test_cost_at_min_and_max_and_per_thousand_requests(capsys):
    assert cli.main(["cost", "--stack", "inference", "--json"]) == OK
    serving = json.loads(capsys.readouterr().out)["serving"]
    assert (serving["minNodes"], serving["maxNodes"]) == (2, 6)
    assert serving["usdPerMonthAtMax"] > serving["usdPerMonthAtMin"] > 0
    argv = ["cost", "--stack", "inference", "--requests-per-second", "200", "--json"]
    assert cli.main(argv) == OK
    busy = json.loads(capsys.readouterr().out)["serving"]
    assert busy["nodesForLoad"] == 6  # 200 req/s at 25 per T4 needs 8: capped at the maximum
    assert cli.main(["cost", "--stack", "inference"]) == OK
    out = capsys.readouterr().out
    assert re.search(r"\$[\d.]+ per 1,000 requests", out)
    assert "Application Load Balancer" in out


def test_plan_shows_the_endpoint_zones_scaling_and_server(capsys):
    assert cli.main(["plan", "--stack", "inference"]) == OK
    out = capsys.readouterr().out
    assert (
        "Endpoint: https://api.example.com (HTTPS, ELBSecurityPolicy-TLS13-1-2-Res-2021-06" in out
    )
    assert "Serving: 2-6 nodes across us-east-1a, us-east-1b" in out
    assert "Batching: preferred [4, 8], max queue delay 100 us" in out


@pytest.mark.parametrize("serving", [False, True])
def test_metrics_agent_config_adds_the_model_server_only_when_serving(tmp_path, imds, serving):
    if serving:
        user_data = render_serving_user_data(serving_boot(metrics_port=8002))
    else:
        user_data = render_user_data(BootConfig("train", "us-east-1", 8, 8, 4, "b"))
    node = BootNode(tmp_path, user_data, imds, G4DN)
    assert node.install_only().returncode == 0
    node.answer_aws([("describe-auto-scaling-instances", "x-group")])
    done = node.step("gpu-cluster-gpu-metrics")
    assert done.returncode == 0, done.stderr
    agent = node.file("/opt/aws/amazon-cloudwatch-agent/etc")
    config = json.loads((agent / "gpu-cluster.json").read_text())
    assert "utilization_gpu" in config["metrics"]["metrics_collected"]["nvidia_gpu"]["measurement"]
    assert (
        f"amazon-cloudwatch-agent-ctl -a fetch-config -m ec2 -s -c file:{agent}/gpu-cluster.json"
        in node.calls()
    )
    assert node.read("/run/gpu-cluster/step-gpu-metrics") == "ok\n"
    if not serving:
        assert "logs" not in config and not (agent / "prometheus.yaml").exists()
        return
    prometheus = config["logs"]["metrics_collected"]["prometheus"]
    assert prometheus["log_group_name"] == "/gpu-cluster/x-metrics"
    assert prometheus["emf_processor"]["metric_namespace"] == "gpu-cluster/ModelServer"
    # the path on the node (the harness roots it under GPUC_ROOT)
    assert (
        prometheus["prometheus_config_path"]
        == "/opt/aws/amazon-cloudwatch-agent/etc/prometheus.yaml"
    )
    assert "localhost:8002" in (agent / "prometheus.yaml").read_text()


def test_model_server_metrics_log_group_is_encrypted_and_the_node_may_write_it(plan):
    group = plan.named("inference-model-server-metrics").inputs
    assert group["name"] == "/gpu-cluster/inference-model-server-metrics"
    assert group["kmsKeyId"] == state(plan, "inference-security-key")["arn"]
    assert group["retentionInDays"] == 365
    access = json.loads(plan.named("inference-model-server-metrics-access").inputs["policy"])
    arn = state(plan, "inference-model-server-metrics")["arn"]
    assert access["Statement"][0]["Resource"] == [arn, f"{arn}:*"]


def test_load_balancer_and_target_group_names_fit_the_32_character_limit():
    config = {**INFERENCE, "gpu-cluster:clusterName": "serving-long-name-20"}
    result = plan_config(config, "inference-production-eu")
    assert result.error is None, result.error
    names = [
        r.inputs["name"]
        for r in result.resources
        if r.type in ("aws:lb/loadBalancer:LoadBalancer", "aws:lb/targetGroup:TargetGroup")
    ]
    assert len(names) == 2 and len(set(names)) == 2
    assert all(len(n) <= 32 and re.fullmatch(r"[a-zA-Z0-9-]+", n) for n in names)
    from gpu_cluster.components.names import bounded_name

    assert re.fullmatch(r"[a-zA-Z0-9-]+", bounded_name("gpuc-serving-prod_eu.1"))
    assert not any(n.startswith("internal-") or n.endswith("-") for n in names)


def test_server_arguments_must_survive_a_systemd_command_line():
    inference = json.loads(INFERENCE["gpu-cluster:inference"])
    inference["server"] = {"args": ["--log-verbose=1", "--model-control-mode explicit"]}
    result = plan_config({**INFERENCE, "gpu-cluster:inference": json.dumps(inference)}, "inference")
    assert result.error is not None
    assert [p.path for p in result.error.problems] == ["gpu-cluster:inference.server.args[1]"]


def test_diff_knows_a_new_port_replaces_the_target_group(capsys):
    argv = ["diff", "--stack", "inference", "--set-path", "inference.server.port=8080", "--json"]
    assert cli.main(argv) == OK
    changes = {c["role"]: c for c in json.loads(capsys.readouterr().out)["changes"]}
    assert changes["service-targets"]["change"] == "replace"
    assert changes["service-https"]["change"] == "update"  # forwards to the new group


def test_a_slow_or_failing_image_pull_keeps_the_launch_hook_alive(tmp_path, imds, ready_server):
    """The image is pulled before the warm-up clock, retried, with heartbeats while it runs."""
    node = BootNode(tmp_path, render_serving_user_data(serving_boot(ready_server)), imds, G4DN)
    assert node.install_only().returncode == 0
    node.answer_aws([("describe-auto-scaling-instances", "x-group")])
    (node.harness / "pull-failures").write_text("2")
    done = node.step("gpu-cluster-model-server", timeout=60)
    assert done.returncode == 0, done.stderr
    pulls = [c for c in node.calls() if c.startswith("docker pull")]
    assert len(pulls) == 3
    heartbeats = [c for c in node.aws_calls() if "record-lifecycle-action-heartbeat" in c]
    assert heartbeats  # the hook is kept open from the start, not only once the server runs
    (complete,) = [c for c in node.aws_calls() if "complete-lifecycle-action" in c]
    assert complete[complete.index("--lifecycle-action-result") + 1] == "CONTINUE"
    assert node.read("/run/gpu-cluster/step-model-server") == "ok\n"


def test_a_model_that_cannot_be_copied_abandons_the_launch_at_once(tmp_path, imds, ready_server):
    node = BootNode(tmp_path, render_serving_user_data(serving_boot(ready_server)), imds, G4DN)
    assert node.install_only().returncode == 0
    node.answer_aws([("describe-auto-scaling-instances", "x-group")], down=["s3 sync"])
    done = node.step("gpu-cluster-model-server", timeout=60)
    assert done.returncode == 1
    (complete,) = [c for c in node.aws_calls() if "complete-lifecycle-action" in c]
    assert complete[complete.index("--lifecycle-action-result") + 1] == "ABANDON"
    assert not [c for c in node.calls() if c.startswith("docker pull")]
    assert node.read("/run/gpu-cluster/step-model-server").startswith("failed: could not copy")
