#!/bin/bash
# gpu-cluster node bootstrap: a template rendered by components/user_data.py (double-brace
# placeholders), gzip-compressed into the launch template (cloud-init inflates it). Only the
# steps this stack uses are on it. Paths are under $GPUC_ROOT, which only the tests set.
set -uo pipefail  # a failing step is reported, never stops the steps after it
R="${GPUC_ROOT:-}"
mkdir -p "$R/etc/gpu-cluster" "$R/usr/local/lib/gpu-cluster" "$R/usr/local/sbin" \
  "$R/usr/local/bin" "$R/etc/systemd/system" "$R/etc/profile.d"
cat > "$R/etc/gpu-cluster/cluster.env" <<'ENV'
{{CLUSTER_ENV}}
ENV
# shellcheck source=/dev/null
. "$R/etc/gpu-cluster/cluster.env"
cat > "$R/usr/local/lib/gpu-cluster/lib.sh" <<'SCRIPT'
{{LIB_SCRIPT}}
SCRIPT

{{BOOT_UNIT}}

{{STEPS}}
