"""Controls for what serves and what keeps state: load-balancer listeners, secrets in SSM
Parameter Store, stateful resources that outlive `pulumi destroy`."""

from __future__ import annotations

from gpu_cluster.policy import aws_types as t
from gpu_cluster.policy.control import control
from gpu_cluster.policy.resources import Res, Stack, as_list

# ELB.17's sslPolicies (Security Hub control parameters): the TLS 1.3 policies.
RECOMMENDED_TLS_POLICIES = (
    "ELBSecurityPolicy-TLS13-1-2-2021-06",
    "ELBSecurityPolicy-TLS13-1-2-FIPS-2023-04",
    "ELBSecurityPolicy-TLS13-1-3-2021-06",
    "ELBSecurityPolicy-TLS13-1-3-FIPS-2023-04",
    "ELBSecurityPolicy-TLS13-1-2-Res-2021-06",
    "ELBSecurityPolicy-TLS13-1-2-Res-FIPS-2023-04",
)


@control(
    "ELB.1",
    "elb-1-http-redirects-to-https",
    "Application Load Balancer should be configured to redirect all HTTP requests to HTTPS",
    "medium",
    "make the HTTP listener's default action a redirect with protocol HTTPS, status HTTP_301",
    t.LISTENER,
)
def http_redirect(r: Res, stack: Stack) -> list[str] | None:
    if r.props.get("protocol") != "HTTP":
        return None
    redirects = [
        a
        for a in as_list(r.props.get("defaultActions"))
        if a.get("type") == "redirect" and (a.get("redirect") or {}).get("protocol") == "HTTPS"
    ]
    return [] if redirects else ["an HTTP listener that does not redirect to HTTPS"]


@control(
    "ELB.17",
    "elb-17-tls13-listener-policy",
    "Application and Network Load Balancers with listeners should use recommended security "
    "policies (TLS 1.3)",
    "medium",
    "set sslPolicy to ELBSecurityPolicy-TLS13-1-2-Res-2021-06 (or ...-TLS13-1-3-2021-06)",
    t.LISTENER,
)
def listener_policy(r: Res, stack: Stack) -> list[str] | None:
    if r.props.get("protocol") not in ("HTTPS", "TLS"):
        return None
    policy = r.props.get("sslPolicy")
    return [] if policy in RECOMMENDED_TLS_POLICIES else [f"sslPolicy is {policy!r}"]


@control(
    "ELB.16",
    "elb-16-alb-has-web-acl",
    "Application Load Balancers should be associated with an AWS WAF web ACL (Checkov "
    "CKV2_AWS_28: public ALBs are protected by WAF)",
    "medium",
    "associate a web ACL with the load balancer (aws.wafv2.WebAclAssociation, resourceArn its "
    "arn); for an inference stack: pulumi config set --path inference.waf.enabled true",
    t.LOAD_BALANCER,
    uses_stack=True,
)
def alb_web_acl(r: Res, stack: Stack) -> list[str] | None:
    if r.props.get("loadBalancerType", "application") != "application":
        return None
    if stack.referring(r, t.WEB_ACL_ASSOCIATION, "resourceArn"):
        return []
    where = "an internal" if r.props.get("internal") is True else "an internet-facing"
    return [f"{where} Application Load Balancer with no AWS WAF web ACL"]


@control(
    "NIST.800-53.r5 SC-28",
    "secrets-are-secure-strings",
    "Secrets in SSM Parameter Store are SecureString parameters encrypted with the stack's key",
    "high",
    "declare the parameter with type SecureString and keyId set to the stack's key",
    t.SSM_PARAMETER,
)
def secure_parameters(r: Res, stack: Stack) -> list[str]:
    problems = []
    if r.props.get("type") != "SecureString":
        problems.append(f"type is {r.props.get('type')!r}, not SecureString")
    if not r.props.get("keyId"):
        problems.append("no keyId: encrypted with the AWS managed key, not the stack's")
    return problems


@control(
    "NIST.800-53.r5 CP-9",
    "stateful-resources-retained",
    "What holds data survives `pulumi destroy`: buckets and keys are retained or protected",
    "high",
    "set retain_on_delete (and protect for the data stack) on buckets and keys",
    (*t.BUCKETS, t.KMS_KEY),
    audit_only="CrossGuard does not pass retainOnDelete to policies",
)
def stateful_retained(r: Res, stack: Stack) -> list[str]:
    if r.protect or r.retain_on_delete:
        return []
    return ["neither retained on delete nor protected: `pulumi destroy` deletes it"]


CONTROLS = (http_redirect, listener_policy, alb_web_acl, secure_parameters, stateful_retained)
