"""inference.access (issue 30, s1): who may call the service. Unset, the stack is refused; every
bad input is refused with its path, the value received, what is allowed and a fix that plans
when followed; the load balancer admits only the networks named (anyone only when public or
when keys or sign-in decide); OIDC/Cognito sign users in before the listener forwards; an API
key or client secret never appears in a plan, its JSON, its outputs or its state; public: true
is warned by every plan and failed by `gpuc audit`."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace
from typing import Any

import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from gpu_cluster.components.aws_limits import SECURITY_GROUP_INBOUND_RULES
from gpu_cluster.components.inference import https_actions, ingress_sources
from gpu_cluster.components.serving_config import Cognito, Oidc, ServiceAccess
from gpu_cluster.infra.audit.command import PUBLIC_SERVICE, access_findings, plan_resources
from gpu_cluster.infra.config import load_spec
from gpu_cluster.infra.errors import ConfigError, Problem
from gpu_cluster.infra.fixes import apply_fix
from gpu_cluster.infra.plan.engine import run_plan
from gpu_cluster.infra.plan.mocks import INGRESS_RULE, PlanMocks
from gpu_cluster.infra.plan.render import preview_json, text_tree
from gpu_cluster.infra.spec import SECRET_NOT_SHOWN
from gpu_cluster.infra.stack_files import load_stack_config
from gpu_cluster.infra.validation.service_access import MAX_SOURCES
from gpu_cluster.policy.pack import audit

INFERENCE = load_stack_config("inference", ROOT)
KEY = "gpu-cluster:inference"
LISTENER = "aws:lb/listener:Listener"
UNSET = object()
SECRET_KEY = "sk-live-0123456789abcdef-never-shown"
CLIENT_SECRET = "oidc-client-secret-never-shown-42"
CIPHERTEXT = "v1:AAAABBBBCCCCDDDD-ciphertext-never-shown"
POOL_ARN = "arn:aws:cognito-idp:us-east-1:123456789012:userpool/us-east-1_AbCdEf123"
OIDC = {
    "issuer": "https://login.example.com",
    "authorizationEndpoint": "https://login.example.com/oauth2/authorize",
    "tokenEndpoint": "https://login.example.com/oauth2/token",
    "userInfoEndpoint": "https://login.example.com/oauth2/userinfo",
    "clientId": "gpu-cluster",
    "clientSecret": {"secure": CIPHERTEXT},
}
COGNITO = {"userPoolArn": POOL_ARN, "userPoolClientId": "4abc123def", "userPoolDomain": "my-team"}
# a placeholder of a fix, as the user would fill it in
FILLED = {
    "<your network CIDR>": "198.51.100.0/24",
    "<your IPv4 network CIDR>": "198.51.100.0/24",
    "<prefix list id>": "pl-0123abcd",
    "<key>": SECRET_KEY,
    "<client secret>": CLIENT_SECRET,
    "<URL>": "https://login.example.com/oauth2/token",
    "<client id>": "gpu-cluster",
    "<user pool ARN>": POOL_ARN,
    "<app client id>": "4abc123def",
    "<domain prefix>": "my-team",
}


def config(access: Any = UNSET, **inference: Any) -> dict[str, str]:
    """The inference stage's stack with ``access`` (UNSET: none) and other inference keys."""
    settings = json.loads(INFERENCE[KEY])
    settings.pop("access", None)
    if access is not UNSET:
        settings["access"] = access
    settings.update(inference)
    return {**INFERENCE, KEY: json.dumps(settings)}


def problems(values: dict[str, str], secret: bool = False) -> list[Problem]:
    plan = run_plan("inference", values, secret_keys=[KEY] if secret else [])
    if plan.error is None:
        return []
    assert isinstance(plan.error, ConfigError), plan.error
    return plan.error.problems


def planned(values: dict[str, str], secret: bool = False):
    plan = run_plan("inference", values, secret_keys=[KEY] if secret else [])
    assert plan.error is None, plan.error
    return plan


# (case, access (UNSET: none), other inference keys, the path refused, words of the problem)
BAD = [
    ("unset", UNSET, {}, "inference.access", "open to the whole internet"),
    ("empty", {}, {}, "inference.access", "open to the whole internet"),
    ("public false alone", {"public": False}, {}, "inference.access", "whole internet"),
    ("only a header", {"apiKeyHeader": "x-key"}, {}, "inference.access", "whole internet"),
    ("empty lists", {"cidrs": [], "apiKeys": []}, {}, "inference.access", "whole internet"),
    ("world cidr", {"cidrs": ["0.0.0.0/0"]}, {}, "inference.access.cidrs[0]", "whole internet"),
    (
        "world cidr with a key",
        {"cidrs": ["0.0.0.0/0"], "apiKeys": [{"secure": CIPHERTEXT}]},
        {},
        "inference.access.cidrs[0]",
        "whole internet",
    ),
    ("any /0", {"cidrs": ["10.0.0.0/0"]}, {}, "inference.access.cidrs[0]", "every address"),
    ("host bits", {"cidrs": ["203.0.113.7/24"]}, {}, "inference.access.cidrs[0]", "host bits"),
    ("no prefix length", {"cidrs": ["203.0.113.7"]}, {}, "inference.access.cidrs[0]", "address"),
    ("not a network", {"cidrs": ["my office"]}, {}, "inference.access.cidrs[0]", "not an IPv4"),
    ("octet too big", {"cidrs": ["10.0.0.256/32"]}, {}, "inference.access.cidrs[0]", "IPv4"),
    ("ipv6", {"cidrs": ["2001:db8::/32"]}, {}, "inference.access.cidrs[0]", "IPv6"),
    (
        "duplicate cidr",
        {"cidrs": ["10.0.0.0/8", "10.0.0.0/8"]},
        {},
        "inference.access.cidrs[1]",
        "the same as cidrs[0]",
    ),
    (
        "too many cidrs",
        {"cidrs": [f"10.{i}.0.0/16" for i in range(MAX_SOURCES + 1)]},
        {},
        "inference.access.cidrs",
        "inbound rules",
    ),
    (
        "cidrs and prefix lists past the quota",
        {
            "cidrs": [f"10.{i}.0.0/16" for i in range(MAX_SOURCES)],
            "prefixLists": ["pl-0123abcd"],
        },
        {},
        "inference.access.cidrs",
        f"AWS allows {SECURITY_GROUP_INBOUND_RULES}",
    ),
    (
        "prefix list id",
        {"prefixLists": ["pl-xyz"]},
        {},
        "inference.access.prefixLists[0]",
        "managed prefix list",
    ),
    (
        "prefix list upper case",
        {"prefixLists": ["PL-0123ABCD"]},
        {},
        "inference.access.prefixLists[0]",
        "managed prefix list",
    ),
    (
        "duplicate prefix list",
        {"prefixLists": ["pl-0123abcd", "pl-0123abcd"]},
        {},
        "inference.access.prefixLists[1]",
        "the same",
    ),
    (
        "public with cidrs",
        {"public": True, "cidrs": ["10.0.0.0/8"]},
        {},
        "inference.access.public",
        "cidrs limit",
    ),
    (
        "public with a key and cognito",
        {"public": True, "apiKeys": [{"secure": CIPHERTEXT}], "cognito": COGNITO},
        {},
        "inference.access.public",
        "apiKeys, cognito",
    ),
    ("oidc and cognito", {"oidc": OIDC, "cognito": COGNITO}, {}, "inference.access.cognito", "one"),
    (
        "oidc over http",
        {"oidc": {**OIDC, "issuer": "http://login.example.com"}},
        {},
        "inference.access.oidc.issuer",
        "HTTPS only",
    ),
    (
        "oidc endpoint without a scheme",
        {"oidc": {**OIDC, "tokenEndpoint": "login.example.com/token"}},
        {},
        "inference.access.oidc.tokenEndpoint",
        "HTTPS only",
    ),
    (
        "oidc without a client id",
        {"oidc": {**OIDC, "clientId": " "}},
        {},
        "inference.access.oidc.clientId",
        "empty",
    ),
    (
        "cognito arn",
        {"cognito": {**COGNITO, "userPoolArn": "arn:aws:cognito-idp:us-east-1:123:userpool/x"}},
        {},
        "inference.access.cognito.userPoolArn",
        "user pool ARN",
    ),
    (
        "cognito arn of another pool region",
        {
            "cognito": {
                **COGNITO,
                "userPoolArn": POOL_ARN.replace("pool/us-east-1", "pool/eu-west-1"),
            }
        },
        {},
        "inference.access.cognito.userPoolArn",
        "user pool ARN",
    ),
    (
        "cognito client id",
        {"cognito": {**COGNITO, "userPoolClientId": "a b"}},
        {},
        "inference.access.cognito.userPoolClientId",
        "app client id",
    ),
    (
        "cognito domain",
        {"cognito": {**COGNITO, "userPoolDomain": "My_Pool"}},
        {},
        "inference.access.cognito.userPoolDomain",
        "user pool domain",
    ),
    (
        "key in plain text",
        {"apiKeys": [SECRET_KEY]},
        {},
        "inference.access.apiKeys[0]",
        "plain text",
    ),
    (
        "second key in plain text",
        {"apiKeys": [{"secure": CIPHERTEXT}, SECRET_KEY]},
        {},
        "inference.access.apiKeys[1]",
        "plain text",
    ),
    (
        "client secret in plain text",
        {"oidc": {**OIDC, "clientSecret": CLIENT_SECRET}},
        {},
        "inference.access.oidc.clientSecret",
        "plain text",
    ),
    (
        "keys not a list",
        {"apiKeys": SECRET_KEY},
        {},
        "inference.access.apiKeys",
        "valid list",
    ),
    (
        "keys without the web ACL",
        {"apiKeys": [{"secure": CIPHERTEXT}]},
        {"waf": {"enabled": False}},
        "inference.waf.enabled",
        "web ACL",
    ),
]
IDS = [case[0] for case in BAD]


def refused(access: Any, extra: dict[str, Any], path: str) -> tuple[dict[str, str], Problem]:
    values = config(access, **extra)
    found = {p.path: p for p in problems(values)}
    assert f"gpu-cluster:{path}" in found, sorted(found)
    return values, found[f"gpu-cluster:{path}"]


@pytest.mark.parametrize(("access", "extra", "path", "words"), [c[1:] for c in BAD], ids=IDS)
def test_a_bad_access_is_refused_with_its_path_value_allowed_and_fix(access, extra, path, words):
    _, problem = refused(access, extra, path)
    assert words in problem.problem, problem
    assert problem.allowed and problem.fix.startswith(("pulumi config", "put the CIDRs")), problem
    if (path.endswith(("apiKeys", "]")) and "apiKeys" in path) or path.endswith("clientSecret"):
        assert problem.received == SECRET_NOT_SHOWN
    text = f"{problem.received} {problem.problem} {problem.allowed} {problem.fix}"
    assert SECRET_KEY not in text and CLIENT_SECRET not in text and CIPHERTEXT not in text


def filled(fix: str) -> str:
    for placeholder, value in FILLED.items():
        fix = fix.replace(placeholder, value)
    assert not re.search(r"<[^>]+>", fix), fix
    return fix


@pytest.mark.parametrize(("access", "extra", "path", "words"), [c[1:] for c in BAD], ids=IDS)
def test_the_fix_followed_plans(access, extra, path, words):
    """The fix as written (its placeholders filled in as the user would), and the stack plans;
    a --secret fix marks the key secret as the CLI does."""
    values, problem = refused(access, extra, path)
    fixed = apply_fix(values, filled(problem.fix))
    plan = run_plan("inference", fixed, secret_keys=[KEY] if "--secret" in problem.fix else [])
    assert plan.error is None, (problem.fix, plan.error)


def test_every_new_key_has_a_bad_input_in_the_table():
    """Each key of inference.access is refused at least once above (the table is the spec)."""
    named = {re.sub(r"\[\d+\]", "", case[3]).removeprefix("inference.access.") for case in BAD}
    keys = {"cidrs", "prefixLists", "apiKeys", "public", "oidc.issuer", "oidc.clientSecret"}
    keys |= {"oidc.tokenEndpoint", "oidc.clientId", "cognito", "cognito.userPoolArn"}
    keys |= {"cognito.userPoolClientId", "cognito.userPoolDomain", "inference.access"}
    assert keys <= named, keys - named


# --- what is allowed plans, and the load balancer admits whom access names ------------------

INGRESS_CASES = {
    "cidrs": ({"cidrs": ["203.0.113.0/24", "10.8.0.0/16"]}, {"203.0.113.0/24", "10.8.0.0/16"}),
    "prefix lists": ({"prefixLists": ["pl-0123abcd"]}, {"pl-0123abcd"}),
    "cidrs and a key": (
        {"cidrs": ["203.0.113.0/24"], "apiKeys": [{"secure": CIPHERTEXT}]},
        {"203.0.113.0/24"},
    ),
    "public": ({"public": True}, {"0.0.0.0/0"}),
    "a key only": ({"apiKeys": [{"secure": CIPHERTEXT}]}, {"0.0.0.0/0"}),
    "oidc only": ({"oidc": OIDC}, {"0.0.0.0/0"}),
    "cognito only": ({"cognito": COGNITO}, {"0.0.0.0/0"}),
}


def load_balancer_ingress(plan) -> dict[str, set[int]]:
    group = plan.state(plan.named("inference-service-alb-sg"))["id"]
    sources: dict[str, set[int]] = {}
    for rule in plan.of_type(INGRESS_RULE):
        if rule.inputs["securityGroupId"] == group:
            source = rule.inputs.get("cidrIpv4") or rule.inputs["prefixListId"]
            sources.setdefault(source, set()).add(rule.inputs["fromPort"])
    return sources


@pytest.mark.parametrize(("access", "sources"), INGRESS_CASES.values(), ids=list(INGRESS_CASES))
def test_the_load_balancer_admits_only_the_networks_named(access, sources):
    plan = planned(config(access))
    assert load_balancer_ingress(plan) == {source: {443, 80} for source in sources}


def test_an_open_network_keeps_the_rule_names_it_had_before_access():
    """public (or keys only): the rules are the ones a stack made before access existed, so an
    update changes nothing; each CIDR's rules are named by the CIDR, not its position."""
    public = planned(config({"public": True}))
    assert {r.name for r in public.of_type(INGRESS_RULE) if "alb-in" in r.name} == {
        "inference-service-alb-in-443",
        "inference-service-alb-in-80",
    }
    two = planned(config({"cidrs": ["10.8.0.0/16", "203.0.113.0/24"]}))
    one = planned(config({"cidrs": ["203.0.113.0/24"]}))
    assert {r.name for r in one.of_type(INGRESS_RULE)} < {r.name for r in two.of_type(INGRESS_RULE)}
    # the group's description changed; a group made with the old one is kept (no replacement)
    group = two.named("inference-service-alb-sg")
    assert "description" in group.ignore_changes


def test_a_component_with_no_access_admits_no_one():
    assert ingress_sources(ServiceAccess()) == {}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.ip_addresses(v=4).map(lambda a: f"{a}/32"), max_size=MAX_SOURCES, unique=True),
    st.booleans(),
    st.booleans(),
)
def test_sources_are_the_networks_or_the_world_only_when_none_is_named(cidrs, key, sign_in):
    access = ServiceAccess(
        cidrs=tuple(cidrs),
        api_keys=("k",) if key else (),
        cognito=Cognito(POOL_ARN, "c", "d") if sign_in else None,
    )
    sources = ingress_sources(access)
    values = {next(iter(s.values())) for s in sources.values()}
    if cidrs:
        assert values == set(cidrs)
    else:
        assert values == ({"0.0.0.0/0"} if key or sign_in else set())
    assert len(sources) * 2 <= SECURITY_GROUP_INBOUND_RULES


def test_the_mocks_refuse_a_security_group_past_its_inbound_rules():
    """What AWS would refuse, for every plan: the 61st inbound rule of a group."""
    mocks = PlanMocks("us-east-1", ["us-east-1a"])
    for index in range(SECURITY_GROUP_INBOUND_RULES + 2):
        inputs = {"securityGroupId": "sg-0123abcd", "cidrIpv4": f"10.0.{index}.0/24"}
        mocks.new_resource(SimpleNamespace(typ=INGRESS_RULE, name=f"r{index}", inputs=inputs))  # pyright: ignore[reportArgumentType]
    assert len(mocks.refused) == 1
    assert f"at most {SECURITY_GROUP_INBOUND_RULES}" in mocks.refused[0].allowed


# --- sign-in at the listener -----------------------------------------------------------------


def test_cognito_signs_users_in_before_the_listener_forwards():
    plan = planned(config({"cognito": COGNITO}))
    (https,) = [r for r in plan.of_type(LISTENER) if r.inputs["protocol"] == "HTTPS"]
    sign_in, forward = https.inputs["defaultActions"]
    assert sign_in["type"] == "authenticate-cognito" and sign_in["order"] == 1
    assert sign_in["authenticateCognito"] == COGNITO
    assert forward["type"] == "forward" and forward["order"] == 2
    assert forward["targetGroupArn"] == plan.state(plan.named("inference-service-targets"))["arn"]


def test_oidc_signs_users_in_first_with_the_client_secret_a_secret():
    secret = object()
    oidc = Oidc("https://i", "https://a", "https://t", "https://u", "client", secret)
    sign_in, forward = https_actions(ServiceAccess(oidc=oidc), "arn:targets")
    assert (sign_in["type"], sign_in["order"], forward["type"], forward["order"]) == (
        "authenticate-oidc",
        1,
        "forward",
        2,
    )
    assert sign_in["authenticate_oidc"]["issuer"] == "https://i"
    plan = planned(config({"oidc": OIDC}))
    (https,) = [r for r in plan.of_type(LISTENER) if r.inputs["protocol"] == "HTTPS"]
    assert CIPHERTEXT not in json.dumps(https.inputs)
    # no sign-in: the listener only forwards, as before access existed
    assert [a["type"] for a in https_actions(ServiceAccess(cidrs=("10.0.0.0/8",)), "t")] == [
        "forward"
    ]


EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"


@pytest.mark.parametrize(
    ("access", "signs_in"),
    [({"oidc": OIDC}, True), ({"cognito": COGNITO}, True), ({"cidrs": ["10.0.0.0/8"]}, False)],
    ids=["oidc", "cognito", "cidrs"],
)
def test_the_load_balancer_may_reach_the_identity_provider_only_when_it_signs_users_in(
    access, signs_in
):
    """With OIDC or Cognito the load balancer calls the provider's token and user info
    endpoints itself: its group lets it out on 443 then, and otherwise only to the nodes."""
    plan = planned(config(access))
    balancer = plan.named("inference-service-alb-sg")
    outbound = [
        r.inputs
        for r in plan.of_type(EGRESS)
        if r.property_dependencies.get("securityGroupId") == (balancer.urn,)
    ]
    to_provider = [e for e in outbound if e.get("cidrIpv4") == "0.0.0.0/0"]
    assert [(e["fromPort"], e["toPort"]) for e in to_provider] == ([(443, 443)] if signs_in else [])
    assert any("referencedSecurityGroupId" in e for e in outbound)  # the nodes, always


# --- secrets never shown ----------------------------------------------------------------------


def everything_shown(plan) -> str:
    """What a plan shows anywhere: its tree, its JSON, its outputs and its state."""
    return "\n".join(
        [
            text_tree(plan),
            json.dumps(preview_json(plan), default=str),
            json.dumps(plan.outputs, default=str),
            json.dumps(plan.states, default=str),
        ]
    )


def test_a_key_in_the_stack_file_as_ciphertext_is_never_shown():
    access = {"apiKeys": [{"secure": CIPHERTEXT}], "oidc": OIDC}
    shown = everything_shown(planned(config(access)))
    assert CIPHERTEXT not in shown


def test_a_key_decrypted_by_the_cli_is_never_shown():
    """Under `pulumi up` the program receives the values and the key is a secret one."""
    access = {
        "apiKeys": [SECRET_KEY, SECRET_KEY[::-1]],
        "oidc": {**OIDC, "clientSecret": CLIENT_SECRET},
    }
    plan = planned(config(access), secret=True)
    shown = everything_shown(plan)
    for value in (SECRET_KEY, SECRET_KEY[::-1], CLIENT_SECRET):
        assert value not in shown
    assert plan.outputs["serving"]["access"]["apiKeys"] == 2


def test_gpuc_plan_json_never_shows_a_key(capsys, monkeypatch):
    from gpu_cluster.infra import cli

    values = config({"apiKeys": [{"secure": CIPHERTEXT}], "oidc": OIDC})
    monkeypatch.setattr("gpu_cluster.infra.overrides.stack_config", lambda stack, overrides: values)
    capsys.readouterr()
    assert cli.main(["plan", "--stack", "inference", "--json"]) == 0
    out = capsys.readouterr()
    assert '"steps"' in out.out
    assert CIPHERTEXT not in out.out + out.err


# --- public: warned by every plan, failed by the audit --------------------------------------


def test_public_is_warned_by_every_plan_and_failed_by_the_audit():
    plan = planned(config({"public": True}))
    (warning,) = [w for w in plan.outputs["configWarnings"] if "public" in w]
    assert "anyone on the internet" in warning and "gpuc audit" in warning
    (finding,) = access_findings(plan)
    assert finding.control is PUBLIC_SERVICE and finding.status == "fail"
    assert finding.failures == [
        (
            "inference-service-alb",
            "inference.access.public is true: anyone on the internet may call the service",
        )
    ]
    assert audit(plan_resources(plan))  # the pack still runs beside it


@pytest.mark.parametrize("access", [c[0] for c in INGRESS_CASES.values() if not c[0].get("public")])
def test_limited_access_passes_the_audit_and_warns_nothing(access):
    plan = planned(config(access))
    assert not [w for w in plan.outputs["configWarnings"] if "public" in w]
    (finding,) = access_findings(plan)
    assert finding.status == "pass" and finding.checked == ["inference-service-alb"]


def test_the_audit_of_a_stack_without_a_service_has_no_access_finding():
    plan = planned(config({"cidrs": ["203.0.113.0/24"]}))
    assert access_findings(SimpleNamespace(outputs={}, resources=plan.resources)) == []  # pyright: ignore[reportArgumentType]


def test_the_stack_file_says_who_may_call_it():
    settings = json.loads(INFERENCE[KEY])
    assert settings["access"] == {"cidrs": ["203.0.113.0/24"]}
    assert (ROOT / "stacks" / "Pulumi.inference.yaml").read_text().count("VPN range") == 1


def test_load_spec_hands_the_component_the_access():
    spec = load_spec(
        config({"cidrs": ["203.0.113.0/24"], "apiKeys": [{"secure": CIPHERTEXT}]}), "inference"
    )
    access = spec.inference.access  # pyright: ignore[reportAttributeAccessIssue,reportOptionalMemberAccess]
    assert access.cidrs == ("203.0.113.0/24",) and len(access.api_keys) == 1
    assert CIPHERTEXT not in repr(access)


# --- your own program: InferenceServiceArgs --------------------------------------------------

PROGRAM = """
import pulumi
from gpu_cluster import InferenceService, InferenceServiceArgs

InferenceService("serve", InferenceServiceArgs(
    instance_type="g5.xlarge",
    inference={{
        "availability_zones": ["us-east-1a", "us-east-1b"],
        "tls": {{"certificate_arn": "arn:aws:acm:us-east-1:123456789012:certificate/"
                "00000000-0000-0000-0000-000000000000"}},
        "access": {access},
    }},
))
"""


def plan_program(tmp_path, access: str):
    path = tmp_path / "__main__.py"
    path.write_text(PROGRAM.format(access=access))
    return run_plan("dev", {"aws:region": "us-east-1"}, program=path, project="mine")


def test_a_program_passes_keys_and_a_client_secret_as_outputs(tmp_path, capsys, caplog):
    url = "https://login.example.com"
    oidc = (
        f'{{"issuer": "{url}", "authorization_endpoint": "{url}/a", "token_endpoint": '
        f'"{url}/t", "user_info_endpoint": "{url}/u", "client_id": "c", '
        f'"client_secret": pulumi.Output.secret("{CLIENT_SECRET}")}}'
    )
    access = (
        f'{{"api_keys": [pulumi.Output.secret("{SECRET_KEY}"), "{SECRET_KEY[::-1]}"], '
        f'"oidc": {oidc}}}'
    )
    plan = plan_program(tmp_path, access)
    assert plan.error is None, plan.error
    printed = capsys.readouterr()
    shown = everything_shown(plan) + printed.out + printed.err + caplog.text
    for value in (SECRET_KEY, SECRET_KEY[::-1], CLIENT_SECRET):
        assert value not in shown
    # the plain string is wrapped as a secret, and the user is told it is in their source
    assert "InferenceServiceArgs.inference.access.api_keys[1] is a plain string" in caplog.text


def test_a_program_without_access_is_refused_by_argument(tmp_path):
    plan = plan_program(tmp_path, "{}")
    paths = [p.path for p in plan.error.problems]  # pyright: ignore[reportOptionalMemberAccess,reportAttributeAccessIssue]
    assert paths == ["InferenceServiceArgs.inference.access"], paths


def test_a_program_with_an_empty_key_is_refused(tmp_path):
    plan = plan_program(tmp_path, '{"api_keys": [""]}')
    paths = [p.path for p in plan.error.problems]  # pyright: ignore[reportOptionalMemberAccess,reportAttributeAccessIssue]
    assert "inference.access.api_keys[0]" in " ".join(paths), paths


def test_the_stack_file_schema_takes_a_secret_where_a_key_belongs():
    """An editor checking the stack file against the schema accepts {secure: ...} in apiKeys
    and oidc.clientSecret (what `pulumi config set --secret` writes), and only there."""
    import copy

    import jsonschema
    import yaml

    from gpu_cluster.infra.reference.schema import stack_schema

    schema = stack_schema()
    document = yaml.safe_load((ROOT / "stacks" / "Pulumi.inference.yaml").read_text())
    document["config"][KEY]["access"] = {"apiKeys": [{"secure": CIPHERTEXT}], "oidc": OIDC}
    jsonschema.validate(document, schema, cls=jsonschema.Draft7Validator)
    wrong = copy.deepcopy(document)
    wrong["config"][KEY]["access"]["cidrs"] = [{"secure": CIPHERTEXT}]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wrong, schema, cls=jsonschema.Draft7Validator)


KEYS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=12, max_size=40)


@settings(max_examples=30, deadline=None)
@given(
    st.one_of(KEYS, st.lists(KEYS, min_size=1, max_size=3), st.dictionaries(KEYS, KEYS)),
    KEYS,
)
def test_a_problem_never_shows_a_key_or_client_secret_whatever_its_shape(keys, client_secret):
    """Plain text, a string where a list belongs, a mapping: the value is never in a message."""
    access = {"apiKeys": keys, "oidc": {**OIDC, "clientSecret": client_secret}}
    try:
        load_spec(config(access), "inference")
    except ConfigError as error:
        text = str(error)
    else:  # pragma: no cover - plain text is always refused
        raise AssertionError("a plain-text key planned")
    values = [keys] if isinstance(keys, str) else [*keys, *getattr(keys, "values", list)()]
    for value in [*values, client_secret]:
        assert value not in text


def test_rotating_a_key_changes_no_resource_but_the_web_acls_rules():
    """Rotation without downtime: add the new key, move the clients, remove the old one; each
    step plans with the same resources (the same URNs: nothing replaced, added or deleted), so
    each `pulumi up` updates the web ACL's rules in place (WAF UpdateWebACL)."""
    old, new = SECRET_KEY, SECRET_KEY[::-1]
    steps = [[old], [old, new], [new]]
    plans = [planned(config({"apiKeys": keys}), secret=True) for keys in steps]
    urns = [{r.urn for r in plan.resources} for plan in plans]
    assert urns[0] == urns[1] == urns[2]
    assert [plan.outputs["serving"]["access"]["apiKeys"] for plan in plans] == [1, 2, 1]
    for plan in plans:
        assert old not in everything_shown(plan) and new not in everything_shown(plan)


# --- the smoke test a user runs -----------------------------------------------------------------


@pytest.mark.parametrize("keyed", [True, False], ids=["api keys", "networks only"])
def test_the_smoke_test_runs_in_a_shell_with_the_key_from_the_environment(tmp_path, keyed):
    """`bash -c "$(pulumi stack output smokeTestCommand)"`: both requests run, with the key
    header from $GPUC_API_KEY when the web ACL wants one (the key itself is never in the
    output), and a clear stop when the variable is unset."""
    import subprocess

    from gpu_cluster.infra.program import smoke_test_command

    stub = tmp_path / "curl"
    stub.write_text('#!/bin/sh\nprintf "%s|" "$@" >> "$CALLS"; echo >> "$CALLS"\n')
    stub.chmod(0o755)
    command = smoke_test_command(
        "https://api.example.com", "triton", "/v2/health/ready", "x-api-key" if keyed else None
    )
    assert SECRET_KEY not in command
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "CALLS": str(tmp_path / "calls")}
    ran = subprocess.run(
        ["bash", "-c", command], env={**env, "GPUC_API_KEY": SECRET_KEY}, capture_output=True
    )
    assert ran.returncode == 0, ran.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 2  # the readiness check, then the request (&& ran in the shell)
    for call in calls:
        assert (f"-H|x-api-key: {SECRET_KEY}|" in call) == keyed, call
    assert calls[1].count("https://api.example.com/v2/repository/index") == 1
    if keyed:
        (tmp_path / "calls").unlink()
        unset = subprocess.run(["bash", "-c", command], env=env, capture_output=True, text=True)
        assert unset.returncode != 0 and "set GPUC_API_KEY" in unset.stderr
        assert not (tmp_path / "calls").exists()
