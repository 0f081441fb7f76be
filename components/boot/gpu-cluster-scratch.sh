#!/bin/bash
# gpu-cluster: the node's NVMe scratch space at $SCRATCH, on every boot (instance store is
# empty after a stop/start, and an md device may come back under another number after a
# reboot). Works with the Deep Learning AMI: its dlami-nvme service already stripes the
# instance-store disks into an LVM volume at /opt/dlami/nvme, and then that volume is used.
# Otherwise the disks are striped here: a RAID0 array named gpuc-scratch (/dev/md/gpuc-scratch
# whatever its number), an XFS file system labelled gpuc-scratch, mounted by UUID. Never fatal:
# without disks (or on any error) $SCRATCH is a folder on the root volume, and boot goes on.
set -uo pipefail
. "${GPUC_ETC:-/etc/gpu-cluster}/cluster.env"
DLAMI_NVME="${GPUC_DLAMI_NVME:-/opt/dlami/nvme}"
DISK_GLOB="${GPUC_DISK_GLOB:-/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*}"
ARRAY="${GPUC_ARRAY:-/dev/md/gpuc-scratch}"
LABEL=gpuc-scratch
log() { echo "gpu-cluster scratch: $*"; }

instance_store_disks() {
  local disk
  for disk in $DISK_GLOB; do
    case $disk in *-part*) continue ;; esac
    [ -e "$disk" ] && readlink -f "$disk"
  done | sort -u
}

use_path() {  # $SCRATCH becomes (a link to) the given mounted folder
  if [ "$1" != "$SCRATCH" ]; then
    mountpoint -q "$SCRATCH" || { rmdir "$SCRATCH" 2>/dev/null || rm -f "$SCRATCH"; }
    [ -e "$SCRATCH" ] || ln -s "$1" "$SCRATCH"
  fi
  chmod 1777 "$1"
  log "ready at $SCRATCH ($1)"
}

own_disks() {
  local disks volume uuid
  mapfile -t disks < <(instance_store_disks)
  if [ "${#disks[@]}" -eq 0 ]; then
    log "no NVMe instance-store disk; $SCRATCH stays on the root volume"
    return 1
  fi
  if [ "${#disks[@]}" -gt 1 ]; then
    # after a reboot the array still exists (under any md number); after a stop, create it
    if ! [ -e "$ARRAY" ] && ! mdadm --assemble "$ARRAY" "${disks[@]}" 2>/dev/null; then
      mdadm --create "$ARRAY" --name="$LABEL" --level=0 --raid-devices="${#disks[@]}" \
        --force --run "${disks[@]}" || return 1
    fi
    volume="$ARRAY"
  else
    volume="${disks[0]}"
  fi
  if ! blkid -s TYPE -o value "$volume" | grep -qx xfs; then
    mkfs.xfs -f -L "$LABEL" "$volume" || return 1
  fi
  uuid=$(blkid -s UUID -o value "$volume") || return 1
  mount -o noatime,nofail "UUID=$uuid" "$SCRATCH" || return 1
  log "${#disks[@]} disk(s) as $volume (UUID $uuid)"
}

mkdir -p "$SCRATCH" 2>/dev/null || true
if [ "$NVME_DISKS" -eq 0 ]; then
  log "this type has no instance store; $SCRATCH is on the root volume"
elif mountpoint -q "$DLAMI_NVME"; then
  use_path "$DLAMI_NVME"  # the AMI's own striped volume
elif mountpoint -q "$SCRATCH" || own_disks; then
  use_path "$SCRATCH"
else
  mkdir -p "$SCRATCH" && chmod 1777 "$SCRATCH"
fi
exit 0
