"""Node boot script: NVMe RAID0 scratch volume, cluster node list, torchrun environment.

The script is identical on every node and does not depend on the node count, so scaling a
cluster never changes the launch template: each node reads its rank and the cluster size from
its own tags (instance metadata tags are enabled) and a systemd timer keeps the node list
current as nodes come and go."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from components.naming import CLUSTER_TAG

SCRATCH_MOUNT = "/mnt/nvme"
NODE_LIST_PATH = "/etc/gpu-cluster/nodes"
TORCHRUN_ENV_PATH = "/etc/gpu-cluster/torchrun.env"
RENDEZVOUS_PORT = 29500
NODE_INDEX_TAG = "gpu-cluster:node-index"
NODE_COUNT_TAG = "gpu-cluster:node-count"
REFRESH_SCRIPT = "/usr/local/sbin/gpu-cluster-nodes"


@dataclass(frozen=True, slots=True)
class BootConfig:
    cluster: str
    region: str
    gpus_per_node: int
    nvme_disk_count: int
    efa_interfaces: int
    bucket: str


def render_user_data(boot: BootConfig) -> str:
    """A bash cloud-init script; every value is shell-quoted."""
    q = shlex.quote
    return f"""#!/bin/bash
# gpu-cluster node bootstrap (generated; do not edit by hand)
set -euo pipefail
mkdir -p /etc/gpu-cluster
cat > /etc/gpu-cluster/cluster.env <<'ENV'
CLUSTER={q(boot.cluster)}
REGION={q(boot.region)}
GPUS_PER_NODE={boot.gpus_per_node}
NVME_DISKS={boot.nvme_disk_count}
EFA_INTERFACES={boot.efa_interfaces}
DATA_BUCKET={q(boot.bucket)}
SCRATCH={q(SCRATCH_MOUNT)}
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
    mapfile -t DISKS < <(ls /dev/disk/by-id/nvme-Amazon_EC2_NVMe_Instance_Storage_* 2>/dev/null \\
      | grep -v -- '-part' | xargs -r -n1 readlink -f | sort -u)
    [ "${{#DISKS[@]}}" -ge "$NVME_DISKS" ] && break
    sleep 2
  done
  if [ "${{#DISKS[@]}}" -eq 0 ]; then
    echo "gpu-cluster: no NVMe instance-store disk found; $SCRATCH stays on the root volume" >&2
  elif [ "${{#DISKS[@]}}" -gt 1 ]; then
    mdadm --create /dev/md0 --level=0 --force --raid-devices="${{#DISKS[@]}}" "${{DISKS[@]}}" --run
    VOLUME=/dev/md0
    mdadm --detail --scan >> /etc/mdadm/mdadm.conf || true
  else
    VOLUME="${{DISKS[0]}}"
  fi
  if [ "${{#DISKS[@]}}" -gt 0 ]; then
    mkfs.xfs -f "$VOLUME"
    mount -o noatime "$VOLUME" "$SCRATCH"
    echo "$VOLUME $SCRATCH xfs noatime,nofail 0 2" >> /etc/fstab
  fi
  chmod 1777 "$SCRATCH"
  mkdir -p /opt/dlami
  rmdir /opt/dlami/nvme 2>/dev/null || true
  [ -e /opt/dlami/nvme ] || ln -s "$SCRATCH" /opt/dlami/nvme
fi

# 2. The node list and torchrun environment, rebuilt from EC2 and this node's tags.
cat > {REFRESH_SCRIPT} <<'SCRIPT'
#!/bin/bash
# Writes {NODE_LIST_PATH} (rank, private IP) and {TORCHRUN_ENV_PATH}.
# --wait: retry until every node of the cluster has launched (first boot).
set -euo pipefail
. /etc/gpu-cluster/cluster.env
imds() {{
  local token
  token=$(curl -sS -X PUT http://169.254.169.254/latest/api/token \\
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
  curl -sS -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/$1"
}}
NODE_RANK=$(imds tags/instance/{NODE_INDEX_TAG})
NODE_COUNT=$(imds tags/instance/{NODE_COUNT_TAG})
RANK_TAG='Tags[?Key==`{NODE_INDEX_TAG}`]|[0].Value'
ATTEMPTS=1
[ "${{1:-}}" = "--wait" ] && ATTEMPTS=180
for _ in $(seq 1 "$ATTEMPTS"); do
  aws ec2 describe-instances --region "$REGION" \\
    --filters "Name=tag:{CLUSTER_TAG},Values=$CLUSTER" \\
              "Name=instance-state-name,Values=pending,running" \\
    --query "Reservations[].Instances[].[$RANK_TAG,PrivateIpAddress]" \\
    --output text | sort -n > {NODE_LIST_PATH}.tmp || true
  [ "$(wc -l < {NODE_LIST_PATH}.tmp)" -ge "$NODE_COUNT" ] && break
  sleep 5
done
mv {NODE_LIST_PATH}.tmp {NODE_LIST_PATH}
MASTER_ADDR=$(awk '$1 == 0 {{print $2}}' {NODE_LIST_PATH})
{{
  echo "NNODES=$NODE_COUNT"
  echo "NODE_RANK=$NODE_RANK"
  echo "NPROC_PER_NODE=$GPUS_PER_NODE"
  echo "MASTER_ADDR=$MASTER_ADDR"
  echo "MASTER_PORT={RENDEZVOUS_PORT}"
  echo "DATA_BUCKET=$DATA_BUCKET"
  echo "SCRATCH=$SCRATCH"
  if [ "$EFA_INTERFACES" -gt 0 ]; then
    echo "FI_PROVIDER=efa"
    echo "FI_EFA_USE_DEVICE_RDMA=1"
    echo "NCCL_SOCKET_IFNAME=^lo,docker"
  fi
}} > {TORCHRUN_ENV_PATH}.tmp
mv {TORCHRUN_ENV_PATH}.tmp {TORCHRUN_ENV_PATH}
SCRIPT
chmod 755 {REFRESH_SCRIPT}

cat > /etc/systemd/system/gpu-cluster-nodes.service <<'UNIT'
[Unit]
Description=gpu-cluster: refresh the node list
[Service]
Type=oneshot
ExecStart={REFRESH_SCRIPT}
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
systemctl daemon-reload
{REFRESH_SCRIPT} --wait
systemctl enable --now gpu-cluster-nodes.timer
"""


def torchrun_command(
    cluster: str, node_count: int, gpus_per_node: int, node_rank: int, master_addr: str
) -> str:
    """The command line node ``node_rank`` runs for a multi-node torchrun job."""
    return (
        f"torchrun --nnodes={node_count} --nproc_per_node={gpus_per_node} "
        f"--node_rank={node_rank} --rdzv_id={cluster} --rdzv_backend=c10d "
        f"--rdzv_endpoint={master_addr}:{RENDEZVOUS_PORT} train.py"
    )
