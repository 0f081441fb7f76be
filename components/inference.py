"""InferenceService: a model server on GPU nodes in two or more zones, behind an Application
Load Balancer with a TLS 1.3 HTTPS listener, scaling on requests or GPU utilization.

- The load balancer is the only thing open to the internet (443, and 80 for the redirect to
  HTTPS); nodes accept the load balancer only, on the serving port. It drops invalid headers,
  has deletion protection, and logs every request to a locked-down bucket of this stack.
- Nodes launch from a template with the training nodes' defaults (IMDSv2, encrypted root with
  the cluster key, SSM, no key pair, no public IP). A launch lifecycle hook holds each new node
  out of service - out of the load balancer and safe from scale-in - until the model server
  answers its readiness check (the boot step completes the hook), for up to the warm-up time.
- Target tracking keeps request count per target (default) or GPU utilization at the target,
  counting a new node only after the warm-up."""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.datastore import log_bucket
from gpu_cluster.components.inference_args import InferenceArgs
from gpu_cluster.components.naming import child_name
from gpu_cluster.components.policies import tls_only_bucket_policy
from gpu_cluster.components.serving_config import ServiceAccess
from gpu_cluster.components.serving_group import ServingGroupArgs, scaling_policy, serving_group
from gpu_cluster.components.waf import protect_load_balancer

LOG_PREFIX = "alb"
ELB_LOG_ACCOUNTS = Path(__file__).parent / "data" / "elb_log_accounts.json"


@cache
def _log_accounts() -> dict[str, Any]:
    return json.loads(ELB_LOG_ACCOUNTS.read_text())


def load_balancer_log_policy(
    bucket_arn: str, account_id: str, region: str, partition: str = "aws"
) -> dict[str, Any]:
    """Elastic Load Balancing may write this account's access logs (its regional account in
    regions older than August 2022, its log-delivery service principal in newer ones)."""
    facts = _log_accounts()
    elb_account = facts["accounts"].get(region)
    principal = (
        {"AWS": f"arn:{partition}:iam::{elb_account}:root"}
        if elb_account
        else {"Service": facts["service_principal"]}
    )
    policy = tls_only_bucket_policy(bucket_arn)
    policy["Statement"].insert(
        0,
        {
            "Sid": "LoadBalancerAccessLogs",
            "Effect": "Allow",
            "Principal": principal,
            "Action": "s3:PutObject",
            "Resource": f"{bucket_arn}/{LOG_PREFIX}/AWSLogs/{account_id}/*",
        },
    )
    return policy


GROUP_DESCRIPTION = (
    "gpu-cluster inference load balancer: HTTPS and its redirect, from the callers "
    "inference.access allows"
)
WORLD = "0.0.0.0/0"


def ingress_sources(access: ServiceAccess) -> dict[str, dict[str, str]]:
    """The load balancer's inbound sources by rule-name suffix: each CIDR and prefix list, or
    the whole internet when nothing limits the network (public, or only keys or sign-in check
    the callers: its rules keep the names they had before access existed); none when access
    allows no one."""
    if access.anywhere:
        return {"": {"cidr_ipv4": WORLD}}
    sources = {
        "-" + cidr.replace(".", "-").replace("/", "-"): {"cidr_ipv4": cidr} for cidr in access.cidrs
    }
    sources |= {f"-{pl}": {"prefix_list_id": pl} for pl in access.prefix_lists}
    return sources


def secret_access(access: ServiceAccess) -> ServiceAccess:
    """The API keys and the OIDC client secret as Pulumi secrets: encrypted in the state and
    shown as [secret] in a plan, whatever the caller passed."""
    oidc = access.oidc
    if oidc is not None:
        oidc = replace(oidc, client_secret=pulumi.Output.secret(oidc.client_secret))
    return replace(
        access, api_keys=tuple(pulumi.Output.secret(k) for k in access.api_keys), oidc=oidc
    )


def signs_users_in(access: ServiceAccess) -> bool:
    """OIDC or Cognito: the load balancer itself calls the identity provider's token and user
    info endpoints over HTTPS, so its security group must let it out on 443 (ELB user guide,
    "Authenticate users using an Application Load Balancer", troubleshooting HTTP 500 "the load
    balancer could not communicate with the IdP token endpoint": allow outbound connections
    in the load balancer's security group; the endpoints are public DNS names, so any
    address). Without sign-in, the group reaches the nodes only."""
    return access.oidc is not None or access.cognito is not None


def https_actions(access: ServiceAccess, target_group_arn: pulumi.Input[str]) -> list[Any]:
    """The HTTPS listener's default actions: sign the user in (OIDC or Cognito, order 1) before
    forwarding (order 2), or only forward. ELB user guide, "Authenticate users using an
    Application Load Balancer": authenticate actions are for HTTPS listeners, first in order."""
    forward: dict[str, Any] = {"type": "forward", "target_group_arn": target_group_arn}
    if access.oidc is not None:
        o = access.oidc
        sign_in: dict[str, Any] = {
            "type": "authenticate-oidc",
            "authenticate_oidc": {
                "issuer": o.issuer,
                "authorization_endpoint": o.authorization_endpoint,
                "token_endpoint": o.token_endpoint,
                "user_info_endpoint": o.user_info_endpoint,
                "client_id": o.client_id,
                "client_secret": pulumi.Output.secret(o.client_secret),
            },
        }
    elif access.cognito is not None:
        c = access.cognito
        sign_in = {
            "type": "authenticate-cognito",
            "authenticate_cognito": {
                "user_pool_arn": c.user_pool_arn,
                "user_pool_client_id": c.user_pool_client_id,
                "user_pool_domain": c.user_pool_domain,
            },
        }
    else:
        return [forward]
    return [{**sign_in, "order": 1}, {**forward, "order": 2}]


class InferenceService(pulumi.ComponentResource):
    def __init__(
        self, name: str, args: InferenceArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-cluster:serving:InferenceService", name, None, opts)
        self.args = args
        child = pulumi.ResourceOptions(parent=self)
        s = args.serving
        self.load_balancer_group = self._security_groups(name, child)
        logs = self._access_logs(name, child)
        certificate_arn = self._certificate(name, child)
        self.load_balancer = aws.lb.LoadBalancer(
            child_name(name, "alb"),
            name=args.load_balancer_name,
            load_balancer_type="application",
            internal=False,
            security_groups=[self.load_balancer_group.id],
            subnets=args.public_subnet_ids,
            drop_invalid_header_fields=True,
            enable_deletion_protection=s.deletion_protection,
            access_logs={"bucket": logs.id, "prefix": LOG_PREFIX, "enabled": True},
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.log_policy]),
        )
        # AWS WAF in front of it (components/waf.py); none with inference.waf.enabled false
        self.web_acl = protect_load_balancer(name, args, self.load_balancer.arn, self)
        self.target_group = aws.lb.TargetGroup(
            child_name(name, "targets"),
            name=args.target_group_name,
            port=s.port,
            protocol="HTTP",
            target_type="instance",
            vpc_id=args.vpc_id,
            deregistration_delay=60,
            health_check={
                "path": s.readiness_path,
                "port": "traffic-port",
                "protocol": "HTTP",
                "matcher": "200",
                "interval": 15,
                "timeout": 5,
                "healthy_threshold": 2,
                "unhealthy_threshold": 3,
            },
            tags=args.tags,
            opts=child,
        )
        self.https = aws.lb.Listener(
            child_name(name, "https"),
            load_balancer_arn=self.load_balancer.arn,
            port=443,
            protocol="HTTPS",
            ssl_policy=s.tls_policy,
            certificate_arn=certificate_arn,
            default_actions=https_actions(s.access, self.target_group.arn),
            tags=args.tags,
            opts=child,
        )
        self.http = aws.lb.Listener(
            child_name(name, "http-redirect"),
            load_balancer_arn=self.load_balancer.arn,
            port=80,
            protocol="HTTP",
            default_actions=[
                {
                    "type": "redirect",
                    "redirect": {"protocol": "HTTPS", "port": "443", "status_code": "HTTP_301"},
                }
            ],
            tags=args.tags,
            opts=child,
        )
        if s.domain and s.hosted_zone_id:
            aws.route53.Record(
                child_name(name, "alias"),
                zone_id=s.hosted_zone_id,
                name=s.domain,
                type="A",
                aliases=[
                    {
                        "name": self.load_balancer.dns_name,
                        "zone_id": self.load_balancer.zone_id,
                        "evaluate_target_health": True,
                    }
                ],
                opts=child,
            )
        self.group = serving_group(
            name,
            ServingGroupArgs(args, self.target_group.arn, [self.node_ingress]),
            pulumi.ResourceOptions(parent=self),
        )
        label = pulumi.Output.all(
            self.load_balancer.arn_suffix, self.target_group.arn_suffix
        ).apply(lambda parts: f"{parts[0]}/{parts[1]}")
        # ALBRequestCountPerTarget needs the target group behind a listener
        self.scaling = scaling_policy(
            name, s, self.group, label, pulumi.ResourceOptions(parent=self, depends_on=[self.https])
        )
        host = s.domain or None
        self.url = (
            pulumi.Output.from_input(f"https://{host}")
            if host
            else self.load_balancer.dns_name.apply(lambda dns: f"https://{dns}")
        )
        self.register_outputs({"url": self.url, "groupName": self.group.name})

    def _security_groups(self, name: str, child: pulumi.ResourceOptions) -> aws.ec2.SecurityGroup:
        a = self.args
        group = aws.ec2.SecurityGroup(
            child_name(name, "alb-sg"),
            vpc_id=a.vpc_id,
            description=GROUP_DESCRIPTION,
            tags={**a.tags, "Name": child_name(name, "alb")},
            # EC2 cannot change a group's description (the provider replaces the group): a
            # stack made when it read "from anywhere" keeps its group
            opts=pulumi.ResourceOptions.merge(
                child, pulumi.ResourceOptions(ignore_changes=["description"])
            ),
        )
        for rule, source in ingress_sources(a.serving.access).items():
            for port in (443, 80):
                aws.vpc.SecurityGroupIngressRule(
                    child_name(name, f"alb-in-{port}{rule}"),
                    security_group_id=group.id,
                    description="HTTPS" if port == 443 else "HTTP, redirected to HTTPS",
                    ip_protocol="tcp",
                    from_port=port,
                    to_port=port,
                    cidr_ipv4=source.get("cidr_ipv4"),
                    prefix_list_id=source.get("prefix_list_id"),
                    opts=child,
                )
        aws.vpc.SecurityGroupEgressRule(
            child_name(name, "alb-to-nodes"),
            security_group_id=group.id,
            description="the model server on the nodes",
            ip_protocol="tcp",
            from_port=a.serving.port,
            to_port=a.serving.port,
            referenced_security_group_id=a.node_security_group_id,
            opts=child,
        )
        if signs_users_in(a.serving.access):
            aws.vpc.SecurityGroupEgressRule(
                child_name(name, "alb-to-sign-in"),
                security_group_id=group.id,
                description="the identity provider token and user info endpoints (HTTPS)",
                ip_protocol="tcp",
                from_port=443,
                to_port=443,
                cidr_ipv4=WORLD,
                opts=child,
            )
        self.node_ingress = aws.vpc.SecurityGroupIngressRule(
            child_name(name, "nodes-from-alb"),
            security_group_id=a.node_security_group_id,
            description="the load balancer, to the model server only",
            ip_protocol="tcp",
            from_port=a.serving.port,
            to_port=a.serving.port,
            referenced_security_group_id=group.id,
            opts=child,
        )
        return group

    def _access_logs(self, name: str, child: pulumi.ResourceOptions) -> aws.s3.Bucket:
        """A private bucket for the load balancer's access logs: SSE-S3 (the only encryption
        ELB access logs support), TLS only, versioned, kept LOG_RETENTION_DAYS, retained."""
        a = self.args
        keep = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        bucket = log_bucket(
            name, "alb-logs", {"expire-access-logs": f"{LOG_PREFIX}/"}, a.tags, keep
        )
        self.log_policy = aws.s3.BucketPolicy(
            child_name(name, "alb-logs-policy"),
            bucket=bucket.id,
            policy=pulumi.Output.all(bucket.arn, a.account_id, a.partition).apply(
                lambda v: json.dumps(load_balancer_log_policy(v[0], v[1], a.region, v[2]))
            ),
            opts=keep,
        )
        return bucket

    def _certificate(self, name: str, child: pulumi.ResourceOptions) -> pulumi.Input[str]:
        s = self.args.serving
        if s.certificate_arn:
            return s.certificate_arn
        assert s.domain and s.hosted_zone_id
        certificate = aws.acm.Certificate(
            child_name(name, "certificate"),
            domain_name=s.domain,
            validation_method="DNS",
            tags=self.args.tags,
            opts=child,
        )
        option = certificate.domain_validation_options.apply(lambda options: options[0])
        record = aws.route53.Record(
            child_name(name, "certificate-validation"),
            zone_id=s.hosted_zone_id,
            name=option.apply(lambda o: o.resource_record_name),
            type=option.apply(lambda o: o.resource_record_type),
            # pulumi-aws types the computed option's value Optional; ACM always sets it
            records=[option.apply(lambda o: o.resource_record_value)],  # pyright: ignore[reportArgumentType]
            ttl=300,
            allow_overwrite=True,
            opts=child,
        )
        validation = aws.acm.CertificateValidation(
            child_name(name, "certificate-valid"),
            certificate_arn=certificate.arn,
            validation_record_fqdns=[record.fqdn],
            opts=child,
        )
        return validation.certificate_arn
