#!/bin/bash
# gpu-cluster: the data bucket at $DATA_MOUNT, read-only, through Mountpoint for Amazon S3
# (AWS's S3 file client: parallel ranged GETs through the VPC's S3 gateway endpoint), with its
# read cache on the NVMe scratch volume so a second epoch reads at local-disk speed. Installed
# the way its maintainers document: their .deb from the mountpoint-s3-release bucket. Runs at
# every boot; never fatal (without it, `aws s3 cp` and boto3 still reach the bucket).
set -uo pipefail
. "${GPUC_ETC:-/etc/gpu-cluster}/cluster.env"
log() { echo "gpu-cluster data: $*"; }
case "$(uname -m)" in aarch64) ARCH=arm64 ;; *) ARCH=x86_64 ;; esac
RELEASE_URL="https://s3.amazonaws.com/mountpoint-s3-release/latest/$ARCH/mount-s3.deb"

if ! command -v mount-s3 >/dev/null; then
  deb=$(mktemp --suffix=.deb)
  if curl -fsSL --retry 3 -o "$deb" "$RELEASE_URL" && apt-get install -y "$deb"; then
    log "installed Mountpoint for Amazon S3"
  else
    log "could not install Mountpoint (no route to $RELEASE_URL?); use aws s3 cp instead"
    exit 0
  fi
fi
mkdir -p "$DATA_MOUNT" "$SCRATCH/s3-cache"
if mountpoint -q "$DATA_MOUNT"; then
  log "s3://$DATA_BUCKET already at $DATA_MOUNT"
  exit 0
fi
FUSE_CONF="${GPUC_FUSE_CONF:-/etc/fuse.conf}"
grep -qx user_allow_other "$FUSE_CONF" 2>/dev/null || echo user_allow_other >> "$FUSE_CONF"
if mount-s3 --read-only --allow-other --cache "$SCRATCH/s3-cache" --region "$REGION" \
  "$DATA_BUCKET" "$DATA_MOUNT"; then
  log "s3://$DATA_BUCKET at $DATA_MOUNT (cache $SCRATCH/s3-cache)"
else
  log "mount-s3 failed; the bucket stays reachable with aws s3 cp"
fi
exit 0
