"""Node boot script: NVMe RAID0 scratch volume, cluster node list, torchrun environment."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

SCRATCH_MOUNT = "/mnt/nvme"
NODE_LIST_PATH = "/etc/gpu-cluster/nodes"
TORCHRUN_ENV_PATH = "/etc/gpu-cluster/torchrun.env"
RENDEZVOUS_PORT = 29500


@dataclass(frozen=True, slots=True)
class BootConfig:
    cluster: str
    region: str
    node_count: int
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
CLUSTER={q(boot.cluster)}
REGION={q(boot.region)}
NODE_COUNT={boot.node_count}
GPUS_PER_NODE={boot.gpus_per_node}
NVME_DISKS={boot.nvme_disk_count}
EFA_INTERFACES={boot.efa_interfaces}
DATA_BUCKET={q(boot.bucket)}
SCRATCH={q(SCRATCH_MOUNT)}
mkdir -p /etc/gpu-cluster "$SCRATCH"

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

# 2. Node rank from this instance's tags (instance metadata tags are enabled).
TOKEN=$(curl -sS -X PUT http://169.254.169.254/latest/api/token \\
  -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
NODE_RANK=$(curl -sS -H "X-aws-ec2-metadata-token: $TOKEN" \\
  http://169.254.169.254/latest/meta-data/tags/instance/gpu-cluster:node-index)

# 3. The cluster's node list (rank, private IP), once every node has launched.
RANK_TAG='Tags[?Key==`gpu-cluster:node-index`]|[0].Value'
for _ in $(seq 1 180); do
  aws ec2 describe-instances --region "$REGION" \\
    --filters "Name=tag:gpu-cluster:name,Values=$CLUSTER" \\
              "Name=instance-state-name,Values=pending,running" \\
    --query "Reservations[].Instances[].[$RANK_TAG,PrivateIpAddress]" \\
    --output text | sort -n > /etc/gpu-cluster/nodes.tmp || true
  [ "$(wc -l < /etc/gpu-cluster/nodes.tmp)" -ge "$NODE_COUNT" ] && break
  sleep 5
done
mv /etc/gpu-cluster/nodes.tmp {NODE_LIST_PATH}
MASTER_ADDR=$(awk '$1 == 0 {{print $2}}' {NODE_LIST_PATH})

# 4. What torchrun and NCCL need on this node.
cat > {TORCHRUN_ENV_PATH} <<ENV
NNODES=$NODE_COUNT
NODE_RANK=$NODE_RANK
NPROC_PER_NODE=$GPUS_PER_NODE
MASTER_ADDR=$MASTER_ADDR
MASTER_PORT={RENDEZVOUS_PORT}
DATA_BUCKET=$DATA_BUCKET
SCRATCH=$SCRATCH
ENV
if [ "$EFA_INTERFACES" -gt 0 ]; then
  printf 'FI_PROVIDER=efa\\nFI_EFA_USE_DEVICE_RDMA=1\\nNCCL_SOCKET_IFNAME=^lo,docker\\n' \\
    >> {TORCHRUN_ENV_PATH}
fi
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
