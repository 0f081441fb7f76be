"""The `secrets` config key: names of Pulumi secrets the nodes get (as SSM SecureString
parameters). Only names reach the spec; a value is never put in a Problem, a plan or an output.

Under the Pulumi CLI the program sees decrypted values, and the key is listed among the
stack's secret config keys when any value in it was set with --secret (pulumi/pulumi
sdk/go/common/resource/config/value.go: an object holding a secure value is secure). Offline,
the stack file holds `{secure: ...}` ciphertext, which gpuc cannot and need not decrypt."""

from __future__ import annotations

from typing import Any

from pulumi.runtime.config import is_config_secret

from gpu_cluster.components.naming import (
    SECRET_NAME_ALLOWED,
    secret_name_problem,
    suggest_secret_name,
)
from gpu_cluster.infra.problems import Problem
from gpu_cluster.infra.spec import PROJECT, SECRET_NOT_SHOWN, SECRET_STAND_IN

KEY = f"{PROJECT}:secrets"
HIDDEN = SECRET_NOT_SHOWN
OFFLINE_STAND_IN = SECRET_STAND_IN


def is_ciphertext(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"}


def secret_names(value: Any) -> tuple[list[str], list[Problem]]:
    """The names under `secrets`, and what is wrong with them (values never shown)."""
    if not isinstance(value, dict):
        return [], [
            Problem(
                path=KEY,
                received=HIDDEN,
                problem="expected a mapping of NAME: secret value",
                allowed="e.g. secrets: {WANDB_API_KEY: <secret>}",
                fix="pulumi config rm secrets; then pulumi config set --secret --path "
                "secrets.NAME <value>",
            )
        ]
    problems = []
    runtime_secret = is_config_secret(KEY)
    for name, secret in value.items():
        path = f"{KEY}.{name}"
        if why := secret_name_problem(str(name)):
            problems.append(
                Problem(
                    path=path,
                    received=str(name),
                    problem=f"not a usable secret name: {why}",
                    allowed=f"{SECRET_NAME_ALLOWED}; not a name the node sets",
                    fix=f"pulumi config rm --path secrets.{name}; then pulumi config set "
                    f"--secret --path secrets.{suggest_secret_name(str(name))} <value>",
                )
            )
        elif not (is_ciphertext(secret) or (isinstance(secret, str) and runtime_secret)):
            problems.append(
                Problem(
                    path=path,
                    received=HIDDEN if isinstance(secret, str) else type(secret).__name__,
                    problem="stored in plain text in the stack file, not as a Pulumi secret",
                    allowed="a Pulumi secret (encrypted in the stack file and in state)",
                    fix=f"pulumi config set --secret --path secrets.{name} <value> (and rotate "
                    "the value: it was in plain text)",
                )
            )
    return sorted(str(n) for n in value), problems


def secret_value(config_value: Any, name: str) -> Any:
    """One secret's value from the decoded `secrets` object: the value under the CLI, a
    stand-in for offline ciphertext."""
    value = config_value[name]
    return OFFLINE_STAND_IN if is_ciphertext(value) else value
