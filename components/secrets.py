"""Cluster secrets (an experiment tracker's API key, a model hub token): Pulumi secrets in stack
config, stored as SSM SecureString parameters under the cluster key and read by the nodes at
boot (boot/gpu-cluster-secrets.sh). Never in user data: only the parameter path is there."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from gpu_cluster.components.naming import (
    SECRET_NAME_ALLOWED,
    child_name,
    secret_name_problem,
    suggest_secret_name,
)


class SecretNameError(ValueError):
    """A secret name a job could not get as an environment variable, said as a problem is:
    the property path, the value, what is allowed and the fix."""

    def __init__(self, cluster: str, name: str, why: str) -> None:
        self.path, self.received = f"secrets.{name}", name
        self.allowed = f"{SECRET_NAME_ALLOWED}; not a name the node sets"
        self.fix = f"name it {suggest_secret_name(name)}"
        super().__init__(
            f"GpuCluster {cluster!r}: {self.path}: not a usable secret name: {why}\n"
            f"  received: {name!r}\n  allowed:  {self.allowed}\n  fix:      {self.fix}"
        )


def secrets_path_arn(partition: str, region: str, account_id: str, path: str) -> str:
    return f"arn:{partition}:ssm:{region}:{account_id}:parameter{path}"


def store_secrets(
    cluster: str,
    path: str,
    values: dict[str, pulumi.Input[str]],
    kms_key_arn: pulumi.Input[str],
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
) -> list[aws.ssm.Parameter]:
    """One SecureString parameter per secret under ``path`` (names.secrets_path), encrypted
    with the cluster key. The value stays
    a Pulumi secret: encrypted in state and masked in every preview. A name a job could not
    get as an environment variable is refused (SecretNameError) before anything is created:
    the stack config checks the same (infra/secrets_config.py), a program giving GpuCluster
    its secrets directly does not pass there."""
    for name in sorted(values):
        if why := secret_name_problem(name):
            raise SecretNameError(cluster, name, why)
    return [
        aws.ssm.Parameter(
            child_name(cluster, f"secret-{secret.lower().replace('_', '-')}"),
            name=f"{path}/{secret}",
            type="SecureString",
            key_id=kms_key_arn,
            value=pulumi.Output.secret(value),
            description=f"gpu-cluster {cluster}: secret {secret} (read by the nodes at boot)",
            tags=tags,
            opts=pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(additional_secret_outputs=["value"])
            ),
        )
        for secret, value in sorted(values.items())
    ]
