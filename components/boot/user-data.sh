#!/bin/bash
# gpu-cluster node bootstrap: a template rendered by components/user_data.py (double-brace placeholders).
set -uo pipefail  # a failing step is reported, never stops the steps after it
mkdir -p /etc/gpu-cluster
cat > /etc/gpu-cluster/cluster.env <<'ENV'
CLUSTER={{CLUSTER}}
REGION={{REGION}}
GPUS_PER_NODE={{GPUS_PER_NODE}}
NVME_DISKS={{NVME_DISKS}}
EFA_INTERFACES={{EFA_INTERFACES}}
DATA_BUCKET={{DATA_BUCKET}}
SCRATCH={{SCRATCH}}
DATA_MOUNT={{DATA_MOUNT}}
LUSTRE_MOUNT={{LUSTRE_MOUNT}}
LUSTRE_TARGET={{LUSTRE_TARGET}}
SPOT={{SPOT}}
NVSWITCH={{NVSWITCH}}
EXPECTED_BUSBW_GBPS={{EXPECTED_BUSBW}}
SECRETS_PATH={{SECRETS_PATH}}
ENV
. /etc/gpu-cluster/cluster.env

{{BOOT_UNIT}}

# 1. NVMe scratch space, set up by a unit that runs on every boot (never fatal).
cat > /usr/local/sbin/gpu-cluster-scratch <<'SCRIPT'
{{SCRATCH_SCRIPT}}
SCRIPT
boot_unit gpu-cluster-scratch "NVMe scratch space" "local-fs.target dlami-nvme.service" \
  dlami-nvme.service

# 2. The data bucket at $DATA_MOUNT (Mountpoint for Amazon S3, cache on NVMe), every boot.
cat > /usr/local/sbin/gpu-cluster-data <<'SCRIPT'
{{DATA_SCRIPT}}
SCRIPT
boot_unit gpu-cluster-data "data bucket mount" \
  "gpu-cluster-scratch.service network-online.target" network-online.target

# 2b. FSx for Lustre at $LUSTRE_MOUNT when the cluster has one.
if [ -n "$LUSTRE_TARGET" ]; then
  cat > /usr/local/sbin/gpu-cluster-lustre <<'SCRIPT'
{{LUSTRE_SCRIPT}}
SCRIPT
  boot_unit gpu-cluster-lustre "FSx for Lustre mount" network-online.target \
    network-online.target
fi

# 2c. The cluster's secrets (SSM SecureString parameters) into /run/gpu-cluster/secrets.env,
# root-only and on tmpfs: read again at every boot, never written to a disk.
if [ -n "$SECRETS_PATH" ]; then
  cat > /usr/local/sbin/gpu-cluster-secrets <<'SCRIPT'
{{SECRETS_SCRIPT}}
SCRIPT
  boot_unit gpu-cluster-secrets "cluster secrets from SSM Parameter Store" \
    network-online.target network-online.target
fi

# 3. Health check at every boot: EFA devices, GPUs and ECC, NVSwitch fabric manager.
cat > /usr/local/sbin/gpu-cluster-health <<'SCRIPT'
{{HEALTH_SCRIPT}}
SCRIPT
mkdir -p /usr/local/lib/gpu-cluster
cat > /usr/local/lib/gpu-cluster/allreduce_bench.py <<'SCRIPT'
{{ALLREDUCE_BENCH}}
SCRIPT
boot_unit gpu-cluster-health "node health check" \
  "gpu-cluster-scratch.service nvidia-fabricmanager.service network-online.target"

# 3b. GPU utilization to CloudWatch every minute (the idle stop watches it).
cat > /usr/local/sbin/gpu-cluster-gpu-metrics <<'SCRIPT'
{{GPU_METRICS_SCRIPT}}
SCRIPT
boot_unit gpu-cluster-gpu-metrics "GPU utilization metrics" network-online.target \
  network-online.target

# 4. The node list and torchrun environment, rebuilt from EC2 as nodes come and go.
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

# 5. Spot nodes: watch for the interruption notice and the rebalance recommendation.
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
