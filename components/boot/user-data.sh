#!/bin/bash
# gpu-cluster node bootstrap: a template rendered by components/user_data.py (double-brace placeholders).
set -euo pipefail
mkdir -p /etc/gpu-cluster
cat > /etc/gpu-cluster/cluster.env <<'ENV'
CLUSTER={{CLUSTER}}
REGION={{REGION}}
GPUS_PER_NODE={{GPUS_PER_NODE}}
NVME_DISKS={{NVME_DISKS}}
EFA_INTERFACES={{EFA_INTERFACES}}
DATA_BUCKET={{DATA_BUCKET}}
SCRATCH={{SCRATCH}}
SPOT={{SPOT}}
ENV
. /etc/gpu-cluster/cluster.env
mkdir -p "$SCRATCH"

# 1. All NVMe instance-store disks -> one RAID0 volume at $SCRATCH.
if [ "$NVME_DISKS" -gt 0 ] && ! mountpoint -q "$SCRATCH"; then
  # The Deep Learning AMI may already have claimed the disks: release them first.
  systemctl disable --now dlami-nvme.service 2>/dev/null || true
  mountpoint -q /opt/dlami/nvme && umount /opt/dlami/nvme || true
  vgchange -an 2>/dev/null || true
  mdadm --stop --scan 2>/dev/null || true
  DISKS=()
  for _ in $(seq 1 60); do
    mapfile -t DISKS < <(
      for disk in /dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_*; do
        case $disk in *-part*) continue ;; esac
        [ -e "$disk" ] && readlink -f "$disk"
      done | sort -u
    )
    [ "${#DISKS[@]}" -ge "$NVME_DISKS" ] && break
    sleep 2
  done
  if [ "${#DISKS[@]}" -eq 0 ]; then
    echo "gpu-cluster: no NVMe instance-store disk found; $SCRATCH stays on the root volume" >&2
  elif [ "${#DISKS[@]}" -gt 1 ]; then
    mdadm --create /dev/md0 --level=0 --force --raid-devices="${#DISKS[@]}" "${DISKS[@]}" --run
    VOLUME=/dev/md0
    mdadm --detail --scan >> /etc/mdadm/mdadm.conf || true
  else
    VOLUME="${DISKS[0]}"
  fi
  if [ "${#DISKS[@]}" -gt 0 ]; then
    mkfs.xfs -f "$VOLUME"
    mount -o noatime "$VOLUME" "$SCRATCH"
    echo "$VOLUME $SCRATCH xfs noatime,nofail 0 2" >> /etc/fstab
  fi
  chmod 1777 "$SCRATCH"
  mkdir -p /opt/dlami
  rmdir /opt/dlami/nvme 2>/dev/null || true
  [ -e /opt/dlami/nvme ] || ln -s "$SCRATCH" /opt/dlami/nvme
fi

# 2. The node list and torchrun environment, rebuilt from EC2 as nodes come and go.
cat > /usr/local/sbin/gpu-cluster-nodes <<'SCRIPT'
{{NODES_SCRIPT}}
SCRIPT
cat > /usr/local/bin/gpuc-torchrun <<'SCRIPT'
{{TORCHRUN_SCRIPT}}
SCRIPT
chmod 755 /usr/local/sbin/gpu-cluster-nodes /usr/local/bin/gpuc-torchrun
# Every login shell (SSM sessions included) sees the cluster's torchrun environment.
cat > /etc/profile.d/gpu-cluster.sh <<'PROFILE'
if [ -r /etc/gpu-cluster/torchrun.env ]; then
  set -a
  . /etc/gpu-cluster/torchrun.env
  set +a
fi
PROFILE
cat > /etc/systemd/system/gpu-cluster-nodes.service <<'UNIT'
[Unit]
Description=gpu-cluster: refresh the node list
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/gpu-cluster-nodes
UNIT
cat > /etc/systemd/system/gpu-cluster-nodes.timer <<'UNIT'
[Unit]
Description=gpu-cluster: refresh the node list as nodes come and go
[Timer]
OnBootSec=2min
OnUnitActiveSec=2min
[Install]
WantedBy=timers.target
UNIT

# 3. Spot nodes: watch for the interruption notice and the rebalance recommendation.
if [ "$SPOT" = "true" ]; then
  cat > /usr/local/sbin/gpu-cluster-spot-watch <<'SCRIPT'
{{SPOT_WATCH_SCRIPT}}
SCRIPT
  chmod 755 /usr/local/sbin/gpu-cluster-spot-watch
  cat > /etc/systemd/system/gpu-cluster-spot-watch.service <<'UNIT'
[Unit]
Description=gpu-cluster: spot interruption and rebalance watcher
After=network-online.target
[Service]
ExecStart=/usr/local/sbin/gpu-cluster-spot-watch
Restart=always
RestartSec=5
[Install]
WantedBy=multi-user.target
UNIT
fi

systemctl daemon-reload
if [ "$SPOT" = "true" ]; then
  systemctl enable --now gpu-cluster-spot-watch.service
fi
/usr/local/sbin/gpu-cluster-nodes --wait
systemctl enable --now gpu-cluster-nodes.timer
