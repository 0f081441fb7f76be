"""`gpuc audit`: one row per control over a stack's plan; a flipped default fails it."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pytest
from conftest import ROOT, plan_stack

from gpu_cluster.infra import cli
from gpu_cluster.infra.audit.command import plan_resources
from gpu_cluster.infra.outcome import FINDINGS, OK
from gpu_cluster.policy.pack import audit


def test_train_audit_lists_every_control_and_passes(capsys):
    assert cli.main(["audit", "--stack", "train", "--json"]) == OK
    document = json.loads(capsys.readouterr().out)
    controls = document["controls"]
    assert len(controls) >= 25
    assert {c["status"] for c in controls} <= {"pass", "not applicable", "suppressed"}
    assert all(c["fix"] and c["severity"] for c in controls)
    by_policy = {c["policy"]: c for c in controls}
    assert by_policy["ec2-170-launch-template-imdsv2"]["status"] == "pass"
    assert by_policy["ec2-170-launch-template-imdsv2"]["checked"] == ["train-nodes-launch-template"]
    # nothing of its type in the stack: never called a pass
    assert by_policy["elb-17-tls13-listener-policy"]["status"] == "not applicable"
    assert by_policy["elb-17-tls13-listener-policy"]["checked"] == []
    suppressed = by_policy["ec2-17-single-network-interface"]
    assert suppressed["status"] == "suppressed" and "EFA" in suppressed["suppressed"][0]["why"]
    assert document["summary"]["fail"] == 0


def test_text_rows_show_status_resources_and_reasons(capsys):
    assert cli.main(["audit", "--stack", "train"]) == OK
    out = capsys.readouterr().out
    assert out.startswith("gpuc audit train: ")
    assert any(
        line.startswith("EC2.170") and "pass" in line and "train-nodes-launch-template" in line
        for line in out.splitlines()
    )
    assert "suppressed on train-nodes-launch-template: EFA instances" in out


@pytest.fixture
def project_copy(tmp_path, monkeypatch):
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_a_public_ip_in_a_copy_of_a_stack_fails_with_the_control_and_fix(project_copy, capsys):
    dev = (project_copy / "stacks" / "Pulumi.dev.yaml").read_text()
    network = "  gpu-cluster:network:\n    publicIp: true\n"
    public = dev.replace("  gpu-cluster:rootVolume:", network + "  gpu-cluster:rootVolume:")
    assert public != dev
    (project_copy / "stacks" / "Pulumi.dev-public.yaml").write_text(public)
    assert cli.main(["audit", "--stack", "dev-public"]) == FINDINGS
    out = capsys.readouterr().out
    assert "EC2.25" in out and "FAIL dev-public-nodes-launch-template" in out
    assert "fix: set associatePublicIpAddress 'false'" in out


def _flipped(plan, type_: str, change) -> list:
    resources = plan_resources(plan)
    return [replace(r, props=change(dict(r.props))) if r.type == type_ else r for r in resources]


def test_imdsv1_or_an_unencrypted_disk_fails_its_control():
    plan = plan_stack("train")
    template = "aws:ec2/launchTemplate:LaunchTemplate"

    def imdsv1(props):
        return {**props, "metadataOptions": {**props["metadataOptions"], "httpTokens": "optional"}}

    def unencrypted(props):
        (mapping,) = props["blockDeviceMappings"]
        return {**props, "blockDeviceMappings": [{**mapping, "ebs": {"encrypted": "false"}}]}

    for change, control in ((imdsv1, "EC2.170"), (unencrypted, "EC2.181")):
        failing = [f for f in audit(_flipped(plan, template, change)) if f.status == "fail"]
        assert [f.control.id for f in failing] == [control]
        assert failing[0].failures[0][0] == "train-nodes-launch-template"


def test_a_config_error_is_an_input_error_not_an_audit(capsys, monkeypatch):
    from gpu_cluster.infra.outcome import INPUT

    bad = {"aws:region": "us-east-1", "gpu-cluster:nodez": "3"}
    monkeypatch.setattr("gpu_cluster.infra.stack_files.load_stack_config", lambda *a, **k: bad)
    assert cli.main(["audit", "--stack", "train"]) == INPUT
    assert "unknown key 'nodez'" in capsys.readouterr().err
