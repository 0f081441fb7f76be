#!/bin/bash
# gpu-cluster: the cluster's secrets - SSM SecureString parameters under $SECRETS_PATH, stored
# by `pulumi up` from Pulumi secrets in stack config - as NAME='value' lines in
# $RUN/secrets.env (/run: tmpfs, gone at shutdown), mode 0640 root:<job user's group>, so
# root and the job user ($JOB_USER, who runs gpuc-torchrun) read it and nobody else.
# `systemctl restart gpu-cluster-secrets` re-reads them after a
# `pulumi config set --secret --path secrets.NAME ...` and `pulumi up`.
set -euo pipefail
export STEP=secrets
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
trap 'step_result "failed: see journalctl -u gpu-cluster-secrets"' ERR
group="$(id -gn "$JOB_USER")"
umask 077
# The AWS CLI pages through every parameter of the hierarchy; SSM decrypts with the node
# role's kms:Decrypt on the cluster key. A failure keeps the last file (and fails the unit).
parameters="$(aws ssm get-parameters-by-path --region "$REGION" --path "$SECRETS_PATH" \
  --with-decryption --output json)"
tmp="$(mktemp "$RUN/secrets.env.XXXXXX")"
GPUC_PARAMETERS="$parameters" python3 - >"$tmp" <<'PY'
import json
import os
import shlex

for parameter in json.loads(os.environ["GPUC_PARAMETERS"]).get("Parameters", []):
    name = parameter["Name"].rsplit("/", 1)[-1]
    print(f"{name}={shlex.quote(parameter['Value'])}")
PY
chgrp "$group" "$tmp"
chmod 0640 "$tmp"
mv "$tmp" "$RUN/secrets.env"
log "$(grep -c . "$RUN/secrets.env") secret(s) from $SECRETS_PATH, readable by root and $JOB_USER"
step_result ok
