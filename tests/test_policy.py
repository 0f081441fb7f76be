"""The security pack: every stack passes it, and every control fails a minimal violating
resource and passes a compliant one - through the pack and through CrossGuard's own argument
objects, as `pulumi preview --policy-pack policy` would call it."""

from __future__ import annotations

import base64
import copy
import json

import pytest
from conftest import ROOT, STACKS, plan_config, plan_stack

from gpu_cluster.infra.audit.command import plan_resources
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.policy import aws_types as t
from gpu_cluster.policy.pack import CONTROLS, audit
from gpu_cluster.policy.resources import Res
from gpu_cluster.policy.suppressions import SUPPRESSIONS

BY_NAME = {c.name: c for c in CONTROLS}
KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"


def res(type_: str, name: str = "subject", links: dict | None = None, **props) -> Res:
    """A resource whose `links` name the resources its inputs came from."""
    deps = {prop: tuple(f"urn:{n}" for n in names) for prop, names in (links or {}).items()}
    retain = props.pop("retain", None)
    return Res(f"urn:{name}", type_, name, props, False, retain, deps)


def bucket_with(type_: str, **props) -> list[Res]:
    return [res(t.BUCKETS[0]), res(type_, "config", {"bucket": ["subject"]}, **props)]


def ingress(cidr: str, port: int, protocol: str = "tcp") -> list[Res]:
    field = "cidrIpv6" if ":" in cidr else "cidrIpv4"
    rule = {field: cidr, "ipProtocol": protocol, "fromPort": port, "toPort": port}
    return [res(t.INGRESS_RULE, **rule)]


def policy_doc(*statements: dict) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def allow(action, resource="arn:aws:s3:::data/*") -> dict:
    return {"Effect": "Allow", "Action": action, "Resource": resource}


def trust(service: str) -> str:
    return policy_doc(
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    )


def template(**props) -> list[Res]:
    return [res(t.LAUNCH_TEMPLATE, **props)]


def efa_template(*rules: Res) -> list[Res]:
    nics = [{"interfaceType": "efa", "deviceIndex": 0}]
    lt = res(t.LAUNCH_TEMPLATE, links={"networkInterfaces": ["sg"]}, networkInterfaces=nics)
    return [lt, res(t.SECURITY_GROUP, "sg"), *rules]


def self_rule(type_: str, name: str) -> Res:
    links = {"securityGroupId": ["sg"], "referencedSecurityGroupId": ["sg"]}
    return res(type_, name, links, ipProtocol="-1")


def managed_node(policy_arn: str) -> list[Res]:
    lt = res(t.LAUNCH_TEMPLATE, links={"iamInstanceProfile": ["profile"]})
    return [
        lt,
        res(t.INSTANCE_PROFILE, "profile", {"role": ["role"]}),
        res(t.ROLE, "role"),
        res(t.ROLE_POLICY_ATTACHMENT, "ssm", {"role": ["role"]}, policyArn=policy_arn),
    ]


def selectors(*selected: list[tuple[str, list[str]]]) -> list[dict]:
    return [
        {"fieldSelectors": [{"field": f, "equals": values} for f, values in fields]}
        for fields in selected
    ]


S3_DATA = [("eventCategory", ["Data"]), ("resources.type", ["AWS::S3::Object"])]
EBS = {"encrypted": "true", "kmsKeyId": KEY}
TLS_DENY = {"Effect": "Deny", "Condition": {"Bool": {"aws:SecureTransport": "false"}}}
OLD_TLS_DENY = {"Effect": "Deny", "Condition": {"NumericLessThan": {"s3:TlsVersion": 1.2}}}

# policy name -> (violating resources, compliant resources); the subject is named "subject".
CASES: dict[str, tuple[list[Res], list[Res]]] = {
    "ec2-8-instance-imdsv2": (
        [res(t.INSTANCE, metadataOptions={"httpTokens": "optional"})],
        [res(t.INSTANCE, metadataOptions={"httpTokens": "required"})],
    ),
    "ec2-170-launch-template-imdsv2": (
        template(metadataOptions={"httpTokens": "optional"}),
        template(metadataOptions={"httpTokens": "required"}),
    ),
    "imds-hop-limit-one": (
        template(metadataOptions={"httpPutResponseHopLimit": 2}),
        template(metadataOptions={"httpPutResponseHopLimit": 1}),
    ),
    "ec2-9-instance-no-public-ipv4": (
        [res(t.INSTANCE, associatePublicIpAddress=True)],
        [res(t.INSTANCE, associatePublicIpAddress=False)],
    ),
    "ec2-15-subnet-no-auto-public-ip": (
        [res(t.SUBNET, mapPublicIpOnLaunch=True)],
        [res(t.SUBNET, mapPublicIpOnLaunch=False)],
    ),
    "ec2-25-launch-template-no-public-ip": (
        template(networkInterfaces=[{"associatePublicIpAddress": "true"}]),
        template(networkInterfaces=[{"associatePublicIpAddress": "false"}]),
    ),
    "ec2-17-single-network-interface": (
        template(networkInterfaces=[{"deviceIndex": 0}, {"deviceIndex": 1}]),
        template(networkInterfaces=[{"deviceIndex": 0}]),
    ),
    "ec2-3-volumes-encrypted": (
        [res(t.VOLUME, encrypted=True)],  # the AWS managed key, not a customer key
        [res(t.VOLUME, encrypted=True, kmsKeyId=KEY)],
    ),
    "ec2-181-launch-template-ebs-encrypted": (
        template(blockDeviceMappings=[{"deviceName": "/dev/sda1", "ebs": {"encrypted": "false"}}]),
        template(blockDeviceMappings=[{"deviceName": "/dev/sda1", "ebs": EBS}]),
    ),
    "efa-self-referencing-rules": (
        efa_template(self_rule(t.INGRESS_RULE, "in")),  # no egress rule
        efa_template(self_rule(t.INGRESS_RULE, "in"), self_rule(t.EGRESS_RULE, "out")),
    ),
    "ec2-7-ebs-default-encryption": (
        [res(t.EBS_DEFAULT_ENCRYPTION, enabled=False)],
        [res(t.EBS_DEFAULT_ENCRYPTION, enabled=True)],
    ),
    "ec2-182-snapshot-block-public-access": (
        [res(t.SNAPSHOT_BLOCK_PUBLIC_ACCESS, state="unblocked")],
        [res(t.SNAPSHOT_BLOCK_PUBLIC_ACCESS, state="block-all-sharing")],
    ),
    "no-secrets-in-user-data": (
        template(userData=base64.b64encode(b"export WANDB_API_KEY=0123abcd4567ef89\n").decode()),
        template(userData=base64.b64encode(b"WANDB_API_KEY=$(aws ssm get-parameter)\n").decode()),
    ),
    "ec2-2-default-security-group-closed": (
        [res(t.VPC)],  # never adopted: AWS's default group allows all
        [res(t.VPC), res(t.DEFAULT_SG, "default", {"vpcId": ["subject"]}, ingress=[], egress=[])],
    ),
    "ec2-13-no-world-ssh": (ingress("0.0.0.0/0", 22), ingress("10.0.0.0/8", 22)),
    "ec2-14-no-world-rdp": (ingress("::/0", 3389), ingress("10.0.0.0/8", 3389)),
    "ec2-19-no-world-high-risk-ports": (
        [res(t.SECURITY_GROUP, ingress=[{"cidrBlocks": ["0.0.0.0/0"], "protocol": "-1"}])],
        [res(t.SECURITY_GROUP, ingress=[{"cidrBlocks": ["10.0.0.0/8"], "protocol": "-1"}])],
    ),
    "ec2-18-world-only-authorized-ports": (ingress("0.0.0.0/0", 8443), ingress("0.0.0.0/0", 443)),
    "ec2-6-vpc-flow-logs": (
        [res(t.VPC), res(t.FLOW_LOG, "log", {"vpcId": ["subject"]}, trafficType="ACCEPT")],
        [res(t.VPC), res(t.FLOW_LOG, "log", {"vpcId": ["subject"]}, trafficType="ALL")],
    ),
    "s3-8-block-public-access": (
        bucket_with(t.PUBLIC_ACCESS_BLOCK, blockPublicAcls=True, blockPublicPolicy=False),
        bucket_with(
            t.PUBLIC_ACCESS_BLOCK,
            blockPublicAcls=True,
            blockPublicPolicy=True,
            ignorePublicAcls=True,
            restrictPublicBuckets=True,
        ),
    ),
    "s3-5-require-tls": (
        bucket_with(t.BUCKET_POLICY, policy=policy_doc(TLS_DENY)),  # TLS 1.0 still allowed
        bucket_with(t.BUCKET_POLICY, policy=policy_doc(TLS_DENY, OLD_TLS_DENY)),
    ),
    "s3-12-no-acls": (
        bucket_with(t.OWNERSHIP, rule={"objectOwnership": "ObjectWriter"}),
        bucket_with(t.OWNERSHIP, rule={"objectOwnership": "BucketOwnerEnforced"}),
    ),
    "s3-17-sse-kms": (
        bucket_with(
            t.ENCRYPTION[0],
            rules=[{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}],
        ),
        bucket_with(
            t.ENCRYPTION[0],
            rules=[
                {
                    "applyServerSideEncryptionByDefault": {
                        "sseAlgorithm": "aws:kms",
                        "kmsMasterKeyId": KEY,
                    }
                }
            ],
        ),
    ),
    "s3-14-versioning": (
        bucket_with(t.VERSIONING[0], versioningConfiguration={"status": "Suspended"}),
        bucket_with(t.VERSIONING[0], versioningConfiguration={"status": "Enabled"}),
    ),
    "s3-9-server-access-logging": (
        [res(t.BUCKETS[0])],
        bucket_with(t.LOGGING[0], targetBucket="logs", targetPrefix="access/"),
    ),
    "s3-13-lifecycle": (
        bucket_with(t.LIFECYCLE[0], rules=[{"id": "x", "status": "Disabled"}]),
        bucket_with(t.LIFECYCLE[0], rules=[{"id": "x", "status": "Enabled"}]),
    ),
    "kms-4-key-rotation": (
        [res(t.KMS_KEY, enableKeyRotation=False)],
        [res(t.KMS_KEY, enableKeyRotation=True)],
    ),
    "kms-5-key-not-public": (
        [
            res(
                t.KMS_KEY,
                policy=policy_doc({"Effect": "Allow", "Principal": "*", "Action": "kms:*"}),
            )
        ],
        [
            res(
                t.KMS_KEY,
                policy=policy_doc(
                    {
                        "Effect": "Allow",
                        "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
                        "Action": "kms:*",
                    }
                ),
            )
        ],
    ),
    "kms-3-key-deletion-protected": (
        [res(t.KMS_KEY, deletionWindowInDays=7)],
        [res(t.KMS_KEY, deletionWindowInDays=30)],
    ),
    "iam-1-no-admin-policies": (
        [res(t.INLINE_POLICIES[0], policy=policy_doc(allow("*", "*")))],
        [res(t.INLINE_POLICIES[0], policy=policy_doc(allow("s3:GetObject")))],
    ),
    "iam-21-no-service-wildcards": (
        [res(t.MANAGED_POLICY, policy=policy_doc(allow("s3:*")))],
        [res(t.MANAGED_POLICY, policy=policy_doc(allow(["s3:GetObject", "s3:ListBucket"])))],
    ),
    "kms-1-managed-policy-decrypt-scoped": (
        [res(t.MANAGED_POLICY, policy=policy_doc(allow("kms:Decrypt", "*")))],
        [res(t.MANAGED_POLICY, policy=policy_doc(allow("kms:Decrypt", KEY)))],
    ),
    "kms-2-inline-policy-decrypt-scoped": (
        [res(t.INLINE_POLICIES[0], policy=policy_doc(allow("kms:ReEncryptFrom", "*")))],
        [res(t.INLINE_POLICIES[0], policy=policy_doc(allow("kms:ReEncryptFrom", KEY)))],
    ),
    "iam-role-trust-scoped": (
        [
            res(t.ROLE, assumeRolePolicy=trust("lambda.amazonaws.com")),
            res(t.INSTANCE_PROFILE, "profile", {"role": ["subject"]}),
        ],
        [
            res(t.ROLE, assumeRolePolicy=trust("ec2.amazonaws.com")),
            res(t.INSTANCE_PROFILE, "profile", {"role": ["subject"]}),
        ],
    ),
    "ssm-1-managed-by-systems-manager": (
        managed_node("arn:aws:iam::aws:policy/ReadOnlyAccess"),
        managed_node("arn:aws:iam::aws:policy/AmazonSSMManagedInstanceCore"),
    ),
    "cloudwatch-16-log-retention": (
        [res(t.LOG_GROUP, retentionInDays=30, kmsKeyId=KEY)],
        [res(t.LOG_GROUP, retentionInDays=365, kmsKeyId=KEY)],
    ),
    "log-groups-encrypted-with-cmk": (
        [res(t.LOG_GROUP, retentionInDays=365)],
        [res(t.LOG_GROUP, retentionInDays=365, kmsKeyId=KEY)],
    ),
    "cloudtrail-1-multi-region-management-events": (
        [res(t.TRAIL, isMultiRegionTrail=False)],
        [res(t.TRAIL, isMultiRegionTrail=True)],
    ),
    "cloudtrail-2-encrypted": ([res(t.TRAIL)], [res(t.TRAIL, kmsKeyId=KEY)]),
    "cloudtrail-4-log-file-validation": (
        [res(t.TRAIL, enableLogFileValidation=False)],
        [res(t.TRAIL, enableLogFileValidation=True)],
    ),
    "s3-22-object-write-events": (
        [res(t.TRAIL, advancedEventSelectors=selectors([*S3_DATA, ("readOnly", ["true"])]))],
        [res(t.TRAIL, advancedEventSelectors=selectors(S3_DATA))],
    ),
    "s3-23-object-read-events": (
        [res(t.TRAIL, advancedEventSelectors=selectors([*S3_DATA, ("readOnly", ["false"])]))],
        [res(t.TRAIL, advancedEventSelectors=selectors([*S3_DATA, ("readOnly", ["true"])]))],
    ),
    "elb-1-http-redirects-to-https": (
        [res(t.LISTENER[0], protocol="HTTP", defaultActions=[{"type": "forward"}])],
        [
            res(
                t.LISTENER[0],
                protocol="HTTP",
                defaultActions=[{"type": "redirect", "redirect": {"protocol": "HTTPS"}}],
            )
        ],
    ),
    "elb-17-tls13-listener-policy": (
        [res(t.LISTENER[0], protocol="HTTPS", sslPolicy="ELBSecurityPolicy-2016-08")],
        [res(t.LISTENER[0], protocol="HTTPS", sslPolicy="ELBSecurityPolicy-TLS13-1-2-Res-2021-06")],
    ),
    "elb-16-alb-has-web-acl": (
        [res(t.LOAD_BALANCER[0], loadBalancerType="application", internal=False)],
        [
            res(t.LOAD_BALANCER[0], loadBalancerType="application", internal=False),
            res(t.WEB_ACL_ASSOCIATION, "association", {"resourceArn": ["subject"]}),
        ],
    ),
    "secrets-are-secure-strings": (
        [res(t.SSM_PARAMETER, type="String", keyId=KEY)],
        [res(t.SSM_PARAMETER, type="SecureString", keyId=KEY)],
    ),
    "stateful-resources-retained": (
        [res(t.BUCKETS[0], retain=False)],
        [res(t.BUCKETS[0], retain=True)],
    ),
}


def test_every_control_has_a_case_and_unique_policy_name():
    assert sorted(CASES) == sorted(BY_NAME)
    assert len(BY_NAME) == len(CONTROLS) >= 25


@pytest.mark.parametrize("name", sorted(CASES))
def test_control_fails_the_violation_and_passes_the_compliant(name):
    control = BY_NAME[name]
    bad, good = CASES[name]
    (finding,) = audit(bad, [control])
    assert finding.status == "fail"
    assert {resource for resource, _ in finding.failures} == {"subject"}
    (finding,) = audit(good, [control])
    assert finding.status == "pass" and "subject" in finding.checked


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_passes_every_applicable_control(stack):
    plan = plan_stack(stack)
    assert plan.error is None
    findings = audit(plan_resources(plan))
    assert [(f.control.id, f.failures) for f in findings if f.failures] == []
    listed = {(s.control, s.resources) for s in SUPPRESSIONS}
    used = {(f.control.name, resource) for f in findings for resource, why in f.suppressed if why}
    assert all(any(c == name for c, _ in listed) for name, _ in used)


def test_suppressions_are_the_documented_ones_and_nothing_else():
    data = {f.control.name: f for f in audit(plan_resources(plan_stack("data")))}
    train = {f.control.name: f for f in audit(plan_resources(plan_stack("train")))}
    assert [r for r, _ in data["s3-17-sse-kms"].suppressed] == ["data-data-access-logs"]
    assert [r for r, _ in data["s3-9-server-access-logging"].suppressed] == [
        "data-data-access-logs"
    ]
    assert sorted(data["s3-17-sse-kms"].checked) == ["data-data-access-logs", "data-data-bucket"]
    assert [r for r, _ in train["ec2-17-single-network-interface"].suppressed] == [
        "train-nodes-launch-template"
    ]
    assert all(s.why and s.control in BY_NAME for s in SUPPRESSIONS)


def test_bridge_containers_show_as_the_reason_for_hop_limit_two():
    from gpu_cluster.components.launch_template import CONTAINER_NETWORK_TAG
    from gpu_cluster.policy.suppressions import CONTAINER_NETWORK_TAG as READ_BY_POLICY

    assert CONTAINER_NETWORK_TAG == READ_BY_POLICY
    config = {**load_stack_config("train", ROOT), "gpu-cluster:containerNetwork": "bridge"}
    plan = plan_config(config, stack="train")
    (hop,) = [f for f in audit(plan_resources(plan)) if f.control.name == "imds-hop-limit-one"]
    assert hop.status == "suppressed"
    assert "containerNetwork: bridge" in hop.suppressed[0][1]
    (template,) = plan.of_type(t.LAUNCH_TEMPLATE)
    assert template.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 2


# CrossGuard: the same cases through pulumi-policy's own argument objects.


def _options():
    from pulumi_policy import PolicyCustomTimeouts, PolicyResourceOptions

    return PolicyResourceOptions(
        protect=False,
        ignore_changes=[],
        delete_before_replace=None,
        aliases=[],
        custom_timeouts=PolicyCustomTimeouts(0, 0, 0),
        additional_secret_outputs=[],
    )


def crossguard_violations(name: str, resources: list[Res]) -> list[tuple[str, str | None]]:
    from pulumi_policy import (
        PolicyResource,
        ResourceValidationArgs,
        StackValidationArgs,
        StackValidationPolicy,
    )
    from pulumi_policy.proxy import unknown_checking_proxy

    from gpu_cluster.policy.crossguard import policy

    reported: list[tuple[str, str | None]] = []

    def report(message: str, urn: str | None = None) -> None:
        reported.append((message, urn))

    crossguard = policy(BY_NAME[name])

    def props(r: Res):
        """As pulumi-policy's analyzer hands them over: read-only Mapping/Sequence proxies."""
        return unknown_checking_proxy(copy.deepcopy(dict(r.props)))

    if isinstance(crossguard, StackValidationPolicy):
        objects = {
            r.urn: PolicyResource(r.type, props(r), r.urn, r.name, _options(), None, None, [], {})
            for r in resources
        }
        for r in resources:
            objects[r.urn].property_dependencies = {
                prop: [objects[u] for u in urns if u in objects]
                for prop, urns in r.property_dependencies.items()
            }
        crossguard.validate(StackValidationArgs(list(objects.values())), report)
    else:
        for r in resources:
            args = ResourceValidationArgs(r.type, props(r), r.urn, r.name, _options(), None)
            crossguard.validate(args, report)
    return reported


CROSSGUARD = sorted(n for n in CASES if BY_NAME[n].audit_only is None)


@pytest.mark.parametrize("name", CROSSGUARD)
def test_crossguard_policy_reports_the_control_id_and_fix(name):
    control = BY_NAME[name]
    bad, good = CASES[name]
    reported = crossguard_violations(name, bad)
    assert reported and all(urn == "urn:subject" for _, urn in reported)
    assert all(m.startswith(f"[{control.id}] subject:") and control.fix in m for m, _ in reported)
    assert crossguard_violations(name, good) == []


def test_crossguard_policies_carry_severity_and_framework():
    from gpu_cluster.policy.crossguard import policies

    built = {p.name: p for p in policies()}
    assert set(built) == set(CROSSGUARD)
    ssh, imds = built["ec2-13-no-world-ssh"], built["imds-hop-limit-one"]
    assert ssh.severity is not None and ssh.framework is not None and imds.framework is not None
    assert ssh.severity.value == "high" and ssh.framework.reference == "EC2.13"
    assert imds.framework.name == "nist-800-53"


def test_crossguard_skips_a_value_unknown_during_preview():
    """pulumi-policy raises UnknownValueError on an unknown and reports it as advisory."""
    from pulumi.runtime.rpc import UNKNOWN
    from pulumi_policy import ResourceValidationArgs, ResourceValidationPolicy
    from pulumi_policy.proxy import UnknownValueError, unknown_checking_proxy

    from gpu_cluster.policy.crossguard import policy

    props = unknown_checking_proxy({"enableKeyRotation": UNKNOWN})
    args = ResourceValidationArgs(t.KMS_KEY, props, "urn:k", "k", _options(), None)
    rotation = policy(BY_NAME["kms-4-key-rotation"])
    assert isinstance(rotation, ResourceValidationPolicy)
    with pytest.raises(UnknownValueError):
        rotation.validate(args, lambda *a: None)


def test_crossguard_respects_suppressions():
    lt = res(
        t.LAUNCH_TEMPLATE,
        networkInterfaces=[{"interfaceType": "efa"}, {"interfaceType": "efa-only"}],
    )
    assert crossguard_violations("ec2-17-single-network-interface", [lt]) == []


def test_main_builds_the_pack_as_the_pulumi_cli_runs_it(monkeypatch):
    """`pulumi preview --policy-pack policy` runs __main__.py with the pack directory first on
    sys.path (python language host: `python -m pulumi.policy`, then runpy.run_path); the
    PolicyPack constructor (which would start the analyzer server) is replaced here."""
    import runpy
    import sys

    import pulumi_policy

    built = {}

    def record(**kwargs):
        built.update(kwargs)

    monkeypatch.setattr(pulumi_policy, "PolicyPack", lambda **kwargs: record(**kwargs))
    monkeypatch.setattr(sys, "path", [str(ROOT / "policy"), *sys.path[1:]])
    runpy.run_path(str(ROOT / "policy"), run_name="__main__")
    assert built["name"] == "gpu-cluster-security"
    assert sorted(p.name for p in built["policies"]) == CROSSGUARD


def test_the_docs_control_table_is_the_generated_one():
    from gpu_cluster.policy.table import markdown

    readme = (ROOT / "docs" / "concepts" / "security.md").read_text()
    start = readme.index("<!-- controls: generated by `python -m gpu_cluster.policy.table` -->\n")
    table = readme[start:].split("\n", 1)[1].split("\n<!-- /controls -->")[0]
    assert table == markdown()
    assert all(f"`{c.name}`" in table for c in CONTROLS)


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_passes_the_crossguard_pack(stack):
    """Each stack's plan through every CrossGuard policy, props proxied as pulumi-policy does."""
    resources = plan_resources(plan_stack(stack))
    found = {name: crossguard_violations(name, resources) for name in CROSSGUARD}
    assert {name: v for name, v in found.items() if v} == {}


def test_a_secret_in_gzip_user_data_is_found():
    """Templates carry gzip user data (cloud-init inflates it): the control reads through it."""
    from gpu_cluster.components.user_data import user_data_payload

    control = BY_NAME["no-secrets-in-user-data"]
    leaky = template(userData=user_data_payload("export WANDB_API_KEY=0123abcd4567ef89\n"))
    clean = template(userData=user_data_payload("WANDB_API_KEY=$(aws ssm get-parameter)\n"))
    assert audit(leaky, [control])[0].status == "fail"
    assert audit(clean, [control])[0].status == "pass"
