#!/bin/bash
# gpu-cluster: mount the cluster's FSx for Lustre file system at $LUSTRE_MOUNT (the bucket's
# datasets/, checkpoints/ and outputs/ under $LUSTRE_MOUNT/datasets, ...). The client comes
# from AWS's FSx apt repository as the FSx User Guide and ParallelCluster's lustre cookbook
# install it on Ubuntu: the modules for the running kernel, and the lustre-client-modules-aws
# meta-package that keeps them in step with kernel upgrades - only when it points at this
# kernel (it follows the newest kernel, and would otherwise bring another kernel's modules).
# Only the FSx source is refreshed. The repository builds modules some time after a kernel
# ships: if none exists for this AMI's kernel, that is the reported failure. Install and mount
# are retried (the file system may still be creating); the result reaches the health check,
# which fails the node without its file system. Runs at every boot.
set -uo pipefail
export STEP=lustre
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
[ -n "${LUSTRE_TARGET:-}" ] || exit 0
fail() { log "$1"; step_result "failed: $2"; exit 1; }
REPO=https://fsx-lustre-client-repo.s3.amazonaws.com/ubuntu
KEY_URL=https://fsx-lustre-client-repo-public-keys.s3.amazonaws.com/fsx-ubuntu-public-key.asc
if ! modinfo lustre >/dev/null 2>&1; then
  key="$R/usr/share/keyrings/fsx-ubuntu-public-key.gpg"
  mkdir -p "$(dirname "$key")" "$R/etc/apt/sources.list.d"
  download "$KEY_URL" - 60 | gpg --dearmor --yes -o "$key" \
    || fail "could not fetch the FSx repository key from $KEY_URL" client-key
  codename="$(. "$R/etc/os-release" && echo "$VERSION_CODENAME")"
  list="$R/etc/apt/sources.list.d/fsxlustreclientrepo.list"
  echo "deb [signed-by=${key#"$R"}] $REPO $codename main" > "$list"
  apt_run update -o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- \
    -o APT::Get::List-Cleanup=0 || fail "apt-get update failed for $REPO" client-index
  kernel="$(uname -r)"
  apt_run install "lustre-client-modules-$kernel" \
    || fail "no Lustre client for kernel $kernel in $REPO" "client-for-$kernel"
  if apt-cache depends lustre-client-modules-aws 2>/dev/null \
    | grep -q "lustre-client-modules-$kernel\$"; then
    apt_run install lustre-client-modules-aws || log "lustre-client-modules-aws not installed"
  else
    log "lustre-client-modules-aws follows another kernel than $kernel; not installed"
  fi
fi
mkdir -p "$R$LUSTRE_MOUNT"
if mountpoint -q "$R$LUSTRE_MOUNT"; then
  step_result ok
  exit 0
fi
for attempt in 1 2 3 4 5 6; do
  if mount -t lustre -o relatime,flock "$LUSTRE_TARGET" "$R$LUSTRE_MOUNT"; then
    log "$LUSTRE_TARGET at $LUSTRE_MOUNT"
    step_result ok
    exit 0
  fi
  log "mount of $LUSTRE_TARGET failed (try $attempt of 6)"
  [ "$attempt" -lt 6 ] && pause "$attempt"
done
fail "could not mount $LUSTRE_TARGET" mount
