#!/bin/bash
# gpu-cluster: the jobs command (gpu-cluster-jobs ARGS...). Its program comes in the stack's
# boot bundle (components/boot_bundle.py), which `pulumi up` puts at s3://$DATA_BUCKET/$BUNDLE_KEY:
# fetched once, refused unless its SHA-256 is BUNDLE_SHA256 (cluster.env, from the launch
# template), installed, then run. Root installs it (the boot step, SSM Run Command); the job
# user's unit runs what is installed.
set -uo pipefail
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
lib="$R/usr/local/lib/gpu-cluster"
installed() { [ "$(cat "$lib/bundle.sha256" 2>/dev/null)" = "$BUNDLE_SHA256" ]; }
if ! installed; then
  if [ "$(id -u)" != 0 ]; then
    log "the boot bundle $BUNDLE_SHA256 is not installed (root installs it: gpu-cluster-jobs boot)"
    exit 1
  fi
  exec {lock}> "$lib/bundle.lock" && flock "$lock"
  if ! installed; then
    bundle=$(mktemp) || exit 1
    trap 'rm -f "$bundle"' EXIT
    aws s3 cp --region "$REGION" --only-show-errors "s3://$DATA_BUCKET/$BUNDLE_KEY" "$bundle" \
      || { log "cannot fetch the boot bundle s3://$DATA_BUCKET/$BUNDLE_KEY"; exit 1; }
    if ! echo "$BUNDLE_SHA256  $bundle" | sha256sum -c --status; then
      log "s3://$DATA_BUCKET/$BUNDLE_KEY is not the bundle this node was launched with" \
        "(SHA-256 $(sha256sum < "$bundle" | cut -c1-64), expected $BUNDLE_SHA256): refused"
      exit 1
    fi
    GPUC_ROOT="$R" bash "$bundle" || { log "the boot bundle did not install"; exit 1; }
    echo "$BUNDLE_SHA256" > "$lib/bundle.sha256"
    rm -f "$bundle" && trap - EXIT
  fi
  exec {lock}>&-
fi
exec "$lib/gpu-cluster-jobs" "$@"
