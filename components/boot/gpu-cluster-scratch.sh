#!/bin/bash
# gpu-cluster: the node's NVMe scratch space at $SCRATCH, on every boot (instance store is
# empty after a stop/start, and an md device may come back under another number after a
# reboot). Works with the Deep Learning AMI: its dlami-nvme service already stripes the
# instance-store disks into an LVM volume at /opt/dlami/nvme, and then that volume is used.
# Otherwise the disks are striped here: a RAID0 array named gpuc-scratch (/dev/md/gpuc-scratch
# whatever its number), an XFS file system labelled gpuc-scratch, mounted by UUID. Never fatal:
# without disks (or on any error) $SCRATCH is a folder on the root volume, and boot goes on.
set -uo pipefail
export STEP=scratch
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
DLAMI_NVME="$R/opt/dlami/nvme"
DISK_GLOB="${GPUC_DISK_GLOB:-/dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*}"
ARRAY="${GPUC_ARRAY:-/dev/md/gpuc-scratch}"
LABEL=gpuc-scratch
MOUNT="$R$SCRATCH"

instance_store_disks() {
  local disk
  for disk in $DISK_GLOB; do
    case $disk in *-part*) continue ;; esac
    [ -e "$disk" ] && readlink -f "$disk"
  done | sort -u
}

use_path() {  # $SCRATCH becomes a link to the given mounted folder, or says why not
  if [ "$1" != "$MOUNT" ] && ! mountpoint -q "$MOUNT"; then
    if [ -d "$MOUNT" ] && [ ! -L "$MOUNT" ] && ! rmdir "$MOUNT" 2>/dev/null; then
      # a folder with files (an earlier boot's fallback on the root disk): keep them aside
      mv "$MOUNT" "$MOUNT.root-disk.$(date -u +%Y%m%dT%H%M%S)" \
        && log "moved the old $SCRATCH folder aside (it was on the root disk)"
    fi
    [ -L "$MOUNT" ] && [ "$(readlink "$MOUNT")" != "$1" ] && rm -f "$MOUNT"
    [ -e "$MOUNT" ] || ln -s "$1" "$MOUNT"
  fi
  if [ "$(readlink -f "$MOUNT")" != "$(readlink -f "$1")" ]; then
    log "$SCRATCH is not $1; scratch stays on the root volume"
    step_result "failed: $SCRATCH is not the NVMe volume"
    return 1
  fi
  chmod 1777 "$1"
  log "ready at $SCRATCH ($1)"
  step_result ok
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
  mount -o noatime,nofail "UUID=$uuid" "$MOUNT" || return 1
  log "${#disks[@]} disk(s) as $volume (UUID $uuid)"
}

mkdir -p "$MOUNT" 2>/dev/null || true
if [ "$NVME_DISKS" -eq 0 ]; then
  log "this type has no instance store; $SCRATCH is on the root volume"
  step_result "ok: root volume"
elif mountpoint -q "$DLAMI_NVME"; then
  use_path "$DLAMI_NVME"  # the AMIs own striped volume
elif mountpoint -q "$MOUNT" || own_disks; then
  use_path "$MOUNT"
else
  mkdir -p "$MOUNT" && chmod 1777 "$MOUNT"
  step_result "failed: NVMe not set up; $SCRATCH is on the root volume"
fi
exit 0
