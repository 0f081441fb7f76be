"""CrossGuard entry point: `pulumi preview --policy-pack policy` runs this file with the pack
directory first on sys.path (pulumi's python language host, RunPlugin -> `python -m
pulumi.policy`), so the project root is added to import the `policy` package by name."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack

from gpu_cluster.policy.crossguard import policies

PolicyPack(
    name="gpu-cluster-security",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=policies(),
)
