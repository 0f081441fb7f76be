"""Print a Plan: a resource tree with totals, or the `pulumi preview --json` document shape."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from gpu_cluster.infra.plan.destroy import destroy, stop_paying_command
from gpu_cluster.infra.plan.engine import SECRET, STACK_TYPE, UNKNOWN_TEXT, Plan, PlannedResource

KEY_INPUTS = (
    "instanceType",
    "cidrBlock",
    "availabilityZone",
    "strategy",
    "bucket",
    "serviceName",
    "enableKeyRotation",
    "trafficType",
    "name",
    "ipProtocol",
    "referencedSecurityGroupId",
    "cidrIpv4",
    "fromPort",
    "protocol",
    "port",
    "sslPolicy",
    "minSize",
    "maxSize",
    "policyType",
)


def masked_config(config: dict[str, str], secret_keys: tuple[str, ...] = ()) -> dict[str, str]:
    """The stack config, with Pulumi secrets masked: keys the CLI marks secret, and
    `{secure: ...}` ciphertext at any depth."""

    def mask(value: Any) -> Any:
        if isinstance(value, dict):
            return SECRET if set(value) == {"secure"} else {k: mask(v) for k, v in value.items()}
        if isinstance(value, list):
            return [mask(v) for v in value]
        return value

    def masked(value: str) -> str:
        try:
            decoded = json.loads(value)
        except (TypeError, ValueError):
            return value
        hidden = mask(decoded)
        return value if hidden == decoded else (hidden if hidden == SECRET else json.dumps(hidden))

    return {
        key: SECRET if key in secret_keys else masked(value)
        for key, value in sorted(config.items())
    }


def preview_json(plan: Plan) -> dict[str, Any]:
    """The document `pulumi preview --json` prints: steps[] with newState, and changeSummary."""
    steps = [
        {
            "op": r.op,
            "urn": r.urn,
            "provider": "",
            "newState": {
                "urn": r.urn,
                "custom": r.custom,
                "type": r.type,
                "inputs": r.inputs,
                "parent": r.parent,
                "dependencies": list(r.dependencies),
                "protect": r.protect,
                "retainOnDelete": r.retain_on_delete,
                # beyond `pulumi preview --json`: what `gpuc diff --from` needs
                "deleteBeforeReplace": r.delete_before_replace,
                "replaceOnChanges": list(r.replace_on_changes),
                "ignoreChanges": list(r.ignore_changes),
                "replacementTrigger": r.replacement_trigger,
                "propertyDependencies": {k: list(v) for k, v in r.property_dependencies.items()},
            },
        }
        for r in plan.resources
    ]
    return {
        "config": masked_config(plan.config, plan.secret_keys),
        "steps": steps,
        "outputs": plan.outputs,
        "changeSummary": dict(Counter(step["op"] for step in steps)),
    }


def _summary(resource: PlannedResource) -> str:
    parts = []
    for key in KEY_INPUTS:
        value = resource.inputs.get(key)
        if value not in (None, "", [], {}):
            parts.append(f"{key}={value}")
    if resource.type == "aws:ec2/launchTemplate:LaunchTemplate":
        nics = resource.inputs.get("networkInterfaces", [])
        efa = [n for n in nics if n.get("interfaceType") in ("efa", "efa-only")]
        cards = sorted({n.get("networkCardIndex", 0) for n in efa})
        meta = resource.inputs.get("metadataOptions", {})
        parts.append(f"efa={len(efa)} on cards {cards}" if efa else "efa=0")
        parts.append(f"imds={meta.get('httpTokens')}")
    if resource.protect:
        parts.append("protected")
    if resource.retain_on_delete:
        parts.append("retained")
    return ", ".join(parts)


def firewall_line(firewall: Any) -> list[str]:
    """The web ACL in front of a service (components/waf.py), from its serving.firewall."""
    if not isinstance(firewall, dict):
        return []
    if not firewall.get("enabled"):
        return ["Firewall: none (inference.waf.enabled false): `gpuc audit` fails ELB.16"]
    return [
        f"Firewall: AWS WAF - IP reputation, {firewall['rateLimitPerIp']:,} requests per IP per "
        f"{firewall['rateWindowSeconds']} s, core rules (bodies over 8 KB counted, not blocked), "
        "known bad inputs"
    ]


def teardown(plan: Plan) -> str:
    """How the stack is deleted: with protected resources in it a plain `pulumi destroy` fails
    in its preview and deletes nothing, GPU nodes included (infra/plan/destroy.py)."""
    command = stop_paying_command(plan)
    plain = destroy(plan)
    notes = []
    if plain.refused:
        names = ", ".join(r.name for r in plain.refused)
        notes.append(
            f"{names} are protected, so a plain `pulumi destroy` fails in its preview and "
            "deletes nothing (GPU nodes included); this deletes everything else and keeps them"
        )
    if plain.refused_by_aws:
        names = ", ".join(r.name for r in plain.refused_by_aws)
        notes.append(
            f"{names} has deletion protection on, which AWS refuses to delete: the destroy "
            "would stop there, with it still billing; it is turned off first"
        )
    if not notes:
        return f"`{command}` deletes it all (then `gpuc sweep --stack {plan.stack}`)"
    return f"`{command}`: " + "; ".join(notes)


def text_tree(plan: Plan) -> str:
    children: dict[str, list[PlannedResource]] = {}
    for resource in plan.resources:
        children.setdefault(resource.parent, []).append(resource)
    lines = [f"Plan for stack '{plan.stack}' (offline, mock engine):", ""]

    def walk(parent: str, depth: int) -> None:
        for resource in children.get(parent, []):
            detail = _summary(resource)
            marker = "+" if resource.op == "create" else ">"
            lines.append(
                f"{'  ' * depth}{marker} {resource.type}  {resource.name}"
                + (f"  [{detail}]" if detail else "")
            )
            walk(resource.urn, depth + 1)

    walk("", 0)
    custom = Counter(r.type for r in plan.resources if r.custom and r.op == "create")
    components = sum(1 for r in plan.resources if not r.custom and r.type != STACK_TYPE)
    ops = Counter(r.op for r in plan.resources)  # what `changeSummary` counts in --json
    reads = f", {ops['read']} to read" if ops.get("read") else ""
    lines += [
        "",
        f"Steps: {ops['create']} to create ({sum(custom.values())} resources of {len(custom)} "
        f"types, {components} components, the stack){reads}",
    ]
    outputs = plan.outputs
    if "nodeCount" in outputs:
        lines.append(
            f"Nodes: {outputs['nodeCount']} x {outputs['instanceType']}"
            f"   GPUs: {outputs['totalGpus']}"
            f"   EFA interfaces per node: {outputs['efaInterfacesPerNode']}"
        )
    if "instanceChoice" in outputs:
        lines.append(f"Type: {outputs['instanceChoice']}")
    if "nodeStorage" in outputs:
        lines.append(f"Per node: NVMe scratch {outputs['nodeStorage']}")
        lines.append(f"Data: {outputs['dataPath']}")
        if "lustre" in outputs:
            lustre = outputs["lustre"]
            if lustre == UNKNOWN_TEXT:  # the file system's DNS and mount names come from AWS
                lustre = "mounted at /fsx (its mount target is known after `pulumi up`)"
            lines.append(f"FSx for Lustre: {lustre}")
        lines.append(f"Health check at boot and every minute: {outputs['healthCheck']}")
    if "ncclTestCommand" in outputs:
        model = outputs.get("busBandwidthModel") or {}
        lines.append(
            "NCCL test: `pulumi stack output ncclTestCommand` or `gpuc nccl-test` (all-reduce "
            f"bus bandwidth: expect ~{outputs['expectedBusBandwidthGBps']:g} GB/s, "
            f"{model.get('kind', 'derived')}; it fails under "
            f"{model.get('passGbytesPerSecond', 0):g} GB/s)"
        )
    # the summary reads this project's own outputs; another program's are listed below
    if "url" in outputs and "serving" in outputs:
        serving = outputs["serving"]
        lines += [
            f"Endpoint: {outputs['url']} (HTTPS, {serving['tlsPolicy']}; HTTP redirects to HTTPS)",
            *firewall_line(serving.get("firewall")),
            f"Serving: {serving['nodes']} nodes across {', '.join(outputs['zones'])}, "
            f"{serving['server']} on port {serving['port']}",
            f"Batching: {serving['batching']}; scaling: {serving['scaling']}, "
            f"warm-up {serving['warmupSeconds']} s",
            f"Smoke test: {outputs['smokeTestCommand']}",
        ]
    if "purchaseOption" in outputs:
        lines.append(f"Purchase option: {outputs['purchaseOption']}")
    for control in outputs.get("costControls", []):
        lines.append(f"Stop paying: {control}")
    if "purchaseOption" in outputs:  # a compute stack: what deletes it
        lines.append(f"Stop paying: {teardown(plan)}")
    for quota, vcpus in outputs.get("vcpuQuotasNeeded", {}).items():
        lines.append(f"EC2 quota needed: {vcpus} vCPUs of '{quota}' (Service Quotas, per region)")
    if "estimatedUsdPerHour" in outputs and "gpuUsdPerHour" in outputs:
        hourly, gpu = outputs["estimatedUsdPerHour"], outputs["gpuUsdPerHour"]
        prepaid = outputs.get("costPrepaid") or []
        lines.append(
            f"Estimated cost: ${hourly:,.2f}/hour (GPU instances ${gpu:,.2f} + everything else "
            f"${hourly - gpu:,.2f}), ${outputs['estimatedUsdPerMonth']:,.0f}/month at "
            f"{outputs.get('costBasis', '').split(';')[0]}"
            + (f"; plus {', '.join(prepaid)}: prepaid" if prepaid else "")
        )
        lines += [f"  {note}" for note in outputs.get("costNotes", [])]
        lines.append("  `gpuc cost --stack <stack>` breaks it down and compares purchase options")
    lines += [f"warning: {warning}" for warning in outputs.get("configWarnings", [])]
    lines += ["", "Outputs:"]
    lines += [f"  {name}: {json.dumps(value)}" for name, value in outputs.items()]
    return "\n".join(lines)
