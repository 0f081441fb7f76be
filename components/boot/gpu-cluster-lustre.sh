#!/bin/bash
# gpu-cluster: mount the cluster's FSx for Lustre file system at $LUSTRE_MOUNT (the bucket's
# datasets/, checkpoints/ and outputs/ under $LUSTRE_MOUNT/datasets, ...). Installs the Lustre client from AWS's FSx apt repository, as the
# FSx documentation describes for Ubuntu, unless the kernel module is already there. Runs at
# every boot; never fatal.
set -uo pipefail
. "${GPUC_ETC:-/etc/gpu-cluster}/cluster.env"
log() { echo "gpu-cluster lustre: $*"; }
[ -n "${LUSTRE_TARGET:-}" ] || exit 0
if ! modinfo lustre >/dev/null 2>&1; then
  KEY=/usr/share/keyrings/fsx-ubuntu-public-key.gpg
  curl -fsSL https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc \
    | gpg --dearmor > "$KEY" \
    && echo "deb [signed-by=$KEY] https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu $(. /etc/os-release && echo "$VERSION_CODENAME") main" \
      > /etc/apt/sources.list.d/fsxlustreclientrepo.list \
    && apt-get update -q && apt-get install -y "lustre-client-modules-$(uname -r)" \
    || { log "could not install the Lustre client"; exit 0; }
fi
mkdir -p "$LUSTRE_MOUNT"
if mountpoint -q "$LUSTRE_MOUNT"; then
  exit 0
fi
if mount -t lustre -o relatime,flock "$LUSTRE_TARGET" "$LUSTRE_MOUNT"; then
  log "$LUSTRE_TARGET at $LUSTRE_MOUNT"
else
  log "mount failed; is the file system available yet?"
fi
exit 0
