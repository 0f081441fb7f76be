"""CrossGuard pack: `pulumi preview --policy-pack policy` enforces policy/rules.py."""

from pulumi_policy import EnforcementLevel, PolicyPack, ResourceValidationPolicy
from rules import RULES, suppressed


def _policy(name: str, description: str, rule) -> ResourceValidationPolicy:
    def validate(args, report_violation) -> None:
        if suppressed(name, args.name):
            return
        for message in rule(args.resource_type, args.props):
            report_violation(message)

    return ResourceValidationPolicy(name=name, description=description, validate=validate)


PolicyPack(
    name="gpu-cluster-security",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=[_policy(name, description, rule) for name, (description, rule) in RULES.items()],
)
