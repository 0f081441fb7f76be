"""role: inference - who may call the service (inference.access): source networks, API keys
checked at the edge, sign-in at the load balancer, or explicitly anyone.

Unset, the stack is refused: the load balancer is internet-facing, so a service is never open to
the whole internet by accident. API keys and the OIDC client secret are Pulumi secrets: offline
the stack file holds their ciphertext (the spec a stand-in, infra/spec.py SecretText); under the
Pulumi CLI the program receives the decrypted values, and the `inference` key is listed among the
stack's secret keys when any value in it was set with --secret (pulumi/pulumi
sdk/go/common/resource/config/value.go: an object holding a secure value is secure). A value is
never shown in a problem."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import replace

from pulumi.runtime.config import is_config_secret

from gpu_cluster.components.aws_limits import SECURITY_GROUP_INBOUND_RULES
from gpu_cluster.components.serving_config import Cognito, Oidc, ServiceAccess
from gpu_cluster.infra.problems import NOT_SET, Problem
from gpu_cluster.infra.spec import (
    PROJECT,
    SECRET_NOT_SHOWN,
    SECRET_STAND_IN,
    InferenceAccessSpec,
    InferenceSpec,
)
from gpu_cluster.infra.validation.common import key

ACCESS = "inference.access"
# Each CIDR or prefix list takes two inbound rules of the load balancer's group (443 and 80).
RULES_PER_SOURCE = 2
MAX_SOURCES = SECURITY_GROUP_INBOUND_RULES // RULES_PER_SOURCE
# EC2 API reference, ManagedPrefixList: PrefixListId "pl-" and 8 or 17 hexadecimal digits (as
# every EC2 id; infra/validation/existing_network.py checks subnets and groups alike).
PREFIX_LIST_ID = re.compile(r"^pl-(?:[0-9a-f]{8}|[0-9a-f]{17})$")
# Cognito API reference, UserPoolType Arn and Id: <region>_<letters and digits>; ClientId [\w+]+.
# The pool may be in any region: ELB's AuthenticateCognitoActionConfig (API reference) asks for its
# ARN and names no region constraint, so the ARN's shape is checked, not its region.
USER_POOL_ARN = re.compile(
    r"^arn:aws[-a-z]*:cognito-idp:(?P<region>[a-z]{2}(?:-[a-z]+)+-\d):\d{12}:"
    r"userpool/(?P=region)_[0-9A-Za-z]+$"
)
USER_POOL_CLIENT_ID = re.compile(r"^[\w+]{1,128}$")
# ELB API reference, AuthenticateCognitoActionConfig UserPoolDomain: the user pool's domain
# prefix (Cognito: lower-case letters, digits and hyphens) or its custom domain's full name.
USER_POOL_DOMAIN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$"
)
OIDC_URLS = ("issuer", "authorizationEndpoint", "tokenEndpoint", "userInfoEndpoint")
SECRET_PATHS = (f"{ACCESS}.apiKeys", f"{ACCESS}.oidc.clientSecret")
OPEN_FIX = (
    f"pulumi config set --path {ACCESS}.cidrs[0] <your network CIDR> (or for anyone on the "
    f"internet: pulumi config set --path {ACCESS}.public true)"
)


def problem(path: str, received, what: str, allowed: str, fix: str) -> Problem:
    return Problem(path=key(path), received=received, problem=what, allowed=allowed, fix=fix)


def access_problems(settings: InferenceSpec) -> list[Problem]:
    """Everything wrong with inference.access (and the web ACL it needs for API keys)."""
    access = settings.access
    if access is None or not (
        access.cidrs or access.prefix_lists or _authenticated(access) or access.public
    ):
        return [
            problem(
                ACCESS,
                NOT_SET
                if access is None
                else access.model_dump(by_alias=True, exclude_defaults=True),
                "nothing says who may call the service: the load balancer is internet-facing, so "
                "the service would be open to the whole internet",
                "cidrs or prefixLists (the networks that may connect), apiKeys, oidc or cognito "
                "(checked at the edge), or public: true (anyone, flagged)",
                OPEN_FIX,
            )
        ]
    found = _network_problems(access)
    found += _contradictions(access)
    found += _secret_problems(access)
    found += _sign_in_problems(access)
    if access.api_keys and not settings.waf.enabled:
        found.append(
            problem(
                "inference.waf.enabled",
                False,
                "API keys are checked by the web ACL: without it any request would pass",
                "true with apiKeys",
                "pulumi config set --path inference.waf.enabled true",
            )
        )
    return found


def _authenticated(access: InferenceAccessSpec) -> bool:
    return bool(access.api_keys or access.oidc or access.cognito)


def _network_problems(access: InferenceAccessSpec) -> list[Problem]:
    found: list[Problem] = []
    seen: dict[str, int] = {}
    for index, text in enumerate(access.cidrs):
        path = f"{ACCESS}.cidrs[{index}]"
        try:
            network = ipaddress.ip_network(text, strict=False)
        except ValueError:
            found.append(
                problem(
                    path,
                    text,
                    "not an IPv4 network",
                    "an IPv4 CIDR, e.g. 203.0.113.0/24 (one address: 203.0.113.7/32)",
                    f"pulumi config set --path {path} <your network CIDR>",
                )
            )
            continue
        if network.version != 4:
            found.append(
                problem(
                    path,
                    text,
                    "an IPv6 network: the load balancer listens on IPv4",
                    "an IPv4 CIDR, e.g. 203.0.113.0/24",
                    f"pulumi config set --path {path} <your IPv4 network CIDR>",
                )
            )
            continue
        if network.prefixlen == 0:
            found.append(
                problem(
                    path,
                    text,
                    "every address: the service would be open to the whole internet",
                    "a network of your callers; anyone on the internet is public: true",
                    f"pulumi config rm --path {ACCESS}.cidrs"
                    if _authenticated(access)
                    else f"pulumi config rm --path {ACCESS}.cidrs && pulumi config set --path "
                    f"{ACCESS}.public true",
                )
            )
            continue
        if "/" not in text or str(network) != text:
            found.append(
                problem(
                    path,
                    text,
                    "not a network: an address without its prefix length"
                    if "/" not in text
                    else f"host bits are set: the network is {network}",
                    "an IPv4 CIDR whose address is the network's first, e.g. 203.0.113.0/24",
                    f"pulumi config set --path {path} {network}",
                )
            )
            continue
        if str(network) in seen:
            found.append(_duplicate(path, text, f"{ACCESS}.cidrs[{seen[str(network)]}]"))
        seen.setdefault(str(network), index)
    lists: dict[str, int] = {}
    for index, text in enumerate(access.prefix_lists):
        path = f"{ACCESS}.prefixLists[{index}]"
        if not PREFIX_LIST_ID.match(text):
            lower = text.strip().lower()
            found.append(
                problem(
                    path,
                    text,
                    "not a managed prefix list id",
                    "pl- and 8 or 17 hexadecimal digits, e.g. pl-0123456789abcdef0",
                    f"pulumi config set --path {path} "
                    + (lower if PREFIX_LIST_ID.match(lower) else "<prefix list id>"),
                )
            )
        elif text in lists:
            found.append(_duplicate(path, text, f"{ACCESS}.prefixLists[{lists[text]}]"))
        lists.setdefault(text, index)
    sources = len(access.cidrs) + len(access.prefix_lists)
    if sources > MAX_SOURCES:
        found.append(
            problem(
                f"{ACCESS}.cidrs",
                f"{len(access.cidrs)} CIDRs and {len(access.prefix_lists)} prefix lists",
                f"each takes {RULES_PER_SOURCE} inbound rules of the load balancer's security "
                f"group (443 and 80), {sources * RULES_PER_SOURCE} in all; AWS allows "
                f"{SECURITY_GROUP_INBOUND_RULES} by default (Amazon VPC quotas; a prefix list "
                "counts as its maximum entries)",
                f"at most {MAX_SOURCES} CIDRs and prefix lists together",
                f"put the CIDRs in one managed prefix list, then pulumi config rm --path "
                f"{ACCESS}.cidrs && pulumi config set --path {ACCESS}.prefixLists[0] "
                "<prefix list id>",
            )
        )
    return found


def _duplicate(path: str, text: str, first: str) -> Problem:
    return problem(
        path,
        text,
        f"the same as {first.removeprefix(ACCESS + '.')}",
        "each network once",
        f"pulumi config rm --path {path}",
    )


def _contradictions(access: InferenceAccessSpec) -> list[Problem]:
    found = []
    if access.public:
        limits = [
            name
            for name, value in (
                ("cidrs", access.cidrs),
                ("prefixLists", access.prefix_lists),
                ("apiKeys", access.api_keys),
                ("oidc", access.oidc),
                ("cognito", access.cognito),
            )
            if value
        ]
        if limits:
            found.append(
                problem(
                    f"{ACCESS}.public",
                    True,
                    f"public: true says anyone may call the service, and {', '.join(limits)} "
                    "limit who may",
                    "public: true alone, or the limits without it",
                    f"pulumi config rm --path {ACCESS}.public (keeps the limits), or for anyone "
                    "remove them instead: "
                    + " && ".join(f"pulumi config rm --path {ACCESS}.{name}" for name in limits),
                )
            )
    if access.oidc and access.cognito:
        found.append(
            problem(
                f"{ACCESS}.cognito",
                "set",
                "the listener signs users in with one provider: oidc and cognito are both set",
                "oidc or cognito",
                f"pulumi config rm --path {ACCESS}.cognito (or pulumi config rm --path "
                f"{ACCESS}.oidc)",
            )
        )
    return found


def _secret_problems(access: InferenceAccessSpec) -> list[Problem]:
    """A key or client secret in plain text in the stack file (never its value)."""
    runtime_secret = is_config_secret(f"{PROJECT}:inference")
    given = [(f"{ACCESS}.apiKeys[{i}]", k, "<key>") for i, k in enumerate(access.api_keys)]
    if access.oidc is not None:
        given.append((f"{ACCESS}.oidc.clientSecret", access.oidc.client_secret, "<client secret>"))
    return [
        problem(
            path,
            SECRET_NOT_SHOWN,
            "stored in plain text in the stack file, not as a Pulumi secret",
            "a Pulumi secret (encrypted in the stack file and in state)",
            f"pulumi config set --secret --path {path} {placeholder} (and rotate it: it was in "
            "plain text)",
        )
        for path, value, placeholder in given
        if value != SECRET_STAND_IN and not runtime_secret
    ]


def _sign_in_problems(access: InferenceAccessSpec) -> list[Problem]:
    found = []
    if access.oidc is not None:
        values = access.oidc.model_dump(by_alias=True)
        for name in OIDC_URLS:
            url, path = values[name], f"{ACCESS}.oidc.{name}"
            host = re.sub(r"^[a-zA-Z]+://", "", url).split("/", 1)[0]
            if url.startswith("https://") and host:
                continue
            found.append(
                problem(
                    path,
                    url,
                    "the load balancer talks to the identity provider over HTTPS only",
                    "an https:// URL, e.g. https://login.example.com/oauth2/token",
                    f"pulumi config set --path {path} "
                    + (f"https://{url.split('://', 1)[1]}" if host and "://" in url else "<URL>"),
                )
            )
        if not access.oidc.client_id.strip():
            found.append(
                problem(
                    f"{ACCESS}.oidc.clientId",
                    access.oidc.client_id,
                    "empty",
                    "the client id the identity provider gave this application",
                    f"pulumi config set --path {ACCESS}.oidc.clientId <client id>",
                )
            )
    if access.cognito is not None:
        cognito = access.cognito
        checks = (
            (
                "userPoolArn",
                cognito.user_pool_arn,
                USER_POOL_ARN,
                "a Cognito user pool ARN",
                "arn:aws:cognito-idp:<region>:<account>:userpool/<region>_<id>",
                "<user pool ARN>",
            ),
            (
                "userPoolClientId",
                cognito.user_pool_client_id,
                USER_POOL_CLIENT_ID,
                "a user pool app client id",
                "letters, digits, _ and + (1-128)",
                "<app client id>",
            ),
            (
                "userPoolDomain",
                cognito.user_pool_domain,
                USER_POOL_DOMAIN,
                "a user pool domain",
                "the domain prefix (lower-case letters, digits, hyphens) or the custom domain",
                "<domain prefix>",
            ),
        )
        for name, value, pattern, what, allowed, placeholder in checks:
            if not pattern.match(value):
                found.append(
                    problem(
                        f"{ACCESS}.cognito.{name}",
                        value,
                        f"not {what}",
                        allowed,
                        f"pulumi config set --path {ACCESS}.cognito.{name} {placeholder}",
                    )
                )
    return found


def service_access(access: InferenceAccessSpec | None) -> ServiceAccess:
    """The checked settings as the component takes them (secrets as received: the program
    wraps them with pulumi.Output.secret, infra/program.py serving_args)."""
    if access is None:
        return ServiceAccess()
    oidc, cognito = access.oidc, access.cognito
    return ServiceAccess(
        cidrs=tuple(access.cidrs),
        prefix_lists=tuple(access.prefix_lists),
        api_keys=tuple(access.api_keys),
        api_key_header=access.api_key_header,
        oidc=Oidc(
            issuer=oidc.issuer,
            authorization_endpoint=oidc.authorization_endpoint,
            token_endpoint=oidc.token_endpoint,
            user_info_endpoint=oidc.user_info_endpoint,
            client_id=oidc.client_id,
            client_secret=oidc.client_secret,
        )
        if oidc
        else None,
        cognito=Cognito(
            user_pool_arn=cognito.user_pool_arn,
            user_pool_client_id=cognito.user_pool_client_id,
            user_pool_domain=cognito.user_pool_domain,
        )
        if cognito
        else None,
        public=access.public,
    )


def public_warning(settings: InferenceSpec | None) -> str | None:
    """public: true is allowed, and said out loud on every plan and `pulumi up`."""
    if settings is None or settings.access is None or not settings.access.public:
        return None
    return (
        f"{ACCESS}.public is true: anyone on the internet may call the service (no network "
        "limit, no key, no sign-in; `gpuc audit` flags it). To limit it: pulumi config set "
        f"--path {ACCESS}.cidrs[0] <your network CIDR> && pulumi config rm --path {ACCESS}.public"
    )


def without_secret_values(problems: list[Problem]) -> list[Problem]:
    """Shape problems under a secret's path say a value was received and how to set it as a
    secret, never what it was (pydantic's fix would repeat the value)."""
    return [_hidden(p) if _bare(p.path).startswith(SECRET_PATHS) else p for p in problems]


def _bare(path: str) -> str:
    return path.removeprefix(f"{PROJECT}:")


def _hidden(p: Problem) -> Problem:
    path = _bare(p.path)
    if path == f"{ACCESS}.apiKeys":
        fix = f"pulumi config rm --path {path} && pulumi config set --secret --path {path}[0] <key>"
    else:
        value = "<client secret>" if path.endswith("clientSecret") else "<key>"
        fix = f"pulumi config set --secret --path {path} {value}"
    return replace(p, received=SECRET_NOT_SHOWN, fix=fix)
