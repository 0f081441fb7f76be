#!/bin/bash
# gpu-cluster: the cluster's secrets - SSM SecureString parameters under $SECRETS_PATH, stored
# by `pulumi up` from Pulumi secrets in stack config - as NAME='value' lines in
# $GPUC_RUN/secrets.env (default /run/gpu-cluster: tmpfs, gone at shutdown), readable by root
# only. gpuc-torchrun exports them to the job. `systemctl restart gpu-cluster-secrets` re-reads
# them after a `pulumi config set --secret --path secrets.NAME ...` and `pulumi up`.
set -euo pipefail
. "${GPUC_ETC:-/etc/gpu-cluster}/cluster.env"
out="${GPUC_RUN:-/run/gpu-cluster}"
mkdir -p "$out"
umask 077
# The AWS CLI pages through every parameter of the hierarchy; SSM decrypts with the node
# role's kms:Decrypt on the cluster key.
parameters="$(aws ssm get-parameters-by-path --region "$REGION" --path "$SECRETS_PATH" \
  --with-decryption --output json)"
tmp="$(mktemp "$out/secrets.env.XXXXXX")"
GPUC_PARAMETERS="$parameters" python3 - >"$tmp" <<'PY'
import json
import os
import shlex

for parameter in json.loads(os.environ["GPUC_PARAMETERS"]).get("Parameters", []):
    name = parameter["Name"].rsplit("/", 1)[-1]
    print(f"{name}={shlex.quote(parameter['Value'])}")
PY
mv "$tmp" "$out/secrets.env"
echo "gpu-cluster: $(wc -l <"$out/secrets.env") secret(s) from $SECRETS_PATH"
