#!/bin/bash
# gpu-cluster: the data bucket at $DATA_MOUNT, read-only, through Mountpoint for Amazon S3
# (AWS's S3 file client: parallel ranged GETs through the VPC's S3 gateway endpoint), with its
# read cache on the NVMe scratch volume so a second epoch reads at local-disk speed. Where
# scratch is the root volume (no NVMe, or it failed) there is no cache: Mountpoint lets its
# cache fill the disk to 95% (awslabs/mountpoint-s3 doc/CONFIGURATION.md, "Caching
# configuration"), a full root disk stops the node's agents and checkpoints, and the gp3 root
# volume reads at 125 MiB/s unless configured faster (EBS User Guide, "Amazon EBS volume
# types": gp3 baseline) - slower than Mountpoint reads S3 (up to the instance's bandwidth).
# Installed as its maintainers document for Ubuntu (awslabs/mountpoint-s3 doc/INSTALL.md): the
# .deb from the mountpoint-s3-release bucket, then `apt-get update` (Ubuntu 24.04 names the
# FUSE 2 library libfuse2t64, found only with a fresh index) and `apt-get install ./...deb`.
# The release bucket and the Ubuntu archive are outside the VPC: with no NAT gateway
# (INTERNET=false) Mountpoint is used only if the AMI has it. Runs at every boot; never fatal
# (without it, `aws s3 cp` and boto3 still reach the bucket through the gateway endpoint).
set -uo pipefail
export STEP=data
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
case "$(uname -m)" in aarch64) ARCH=arm64 ;; *) ARCH=x86_64 ;; esac
RELEASE_URL="https://s3.amazonaws.com/mountpoint-s3-release/latest/$ARCH/mount-s3.deb"
done_with() { log "$1"; step_result "$2"; exit 0; }

if ! command -v mount-s3 >/dev/null; then
  [ "$INTERNET" = true ] \
    || done_with "no NAT gateway: Mountpoint cannot be installed; use aws s3 cp" "skipped"
  deb="$(mktemp -d)/mount-s3.deb"
  download "$RELEASE_URL" "$deb" \
    || done_with "could not download $RELEASE_URL; use aws s3 cp instead" "failed: download"
  apt_run update || log "apt-get update failed; trying the install anyway"
  apt_run install "$deb" || done_with "could not install Mountpoint; use aws s3 cp" "failed: install"
  log "installed Mountpoint for Amazon S3"
fi
mkdir -p "$R$DATA_MOUNT" "$R$SCRATCH/s3-cache"
if mountpoint -q "$R$DATA_MOUNT"; then
  done_with "s3://$DATA_BUCKET already at $DATA_MOUNT" ok
fi
FUSE_CONF="$R/etc/fuse.conf"
grep -qx user_allow_other "$FUSE_CONF" 2>/dev/null || echo user_allow_other >> "$FUSE_CONF"
cache=(--cache "$SCRATCH/s3-cache")
[ "$(step_state scratch)" = ok ] || cache=()  # the root volume, not NVMe
if mount-s3 --read-only --allow-other "${cache[@]}" --region "$REGION" \
  "$DATA_BUCKET" "$R$DATA_MOUNT"; then
  done_with "s3://$DATA_BUCKET at $DATA_MOUNT (${cache[*]:-no cache})" ok
fi
done_with "mount-s3 failed; the bucket stays reachable with aws s3 cp" "failed: mount"
