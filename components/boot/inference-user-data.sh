#!/bin/bash
# gpu-cluster inference node bootstrap: a template rendered by components/user_data.py.
set -uo pipefail  # a failing step is reported, never stops the steps after it
mkdir -p /etc/gpu-cluster
cat > /etc/gpu-cluster/cluster.env <<'ENV'
CLUSTER={{CLUSTER}}
REGION={{REGION}}
GPUS_PER_NODE={{GPUS_PER_NODE}}
NVME_DISKS={{NVME_DISKS}}
EFA_INTERFACES=0
DATA_BUCKET={{DATA_BUCKET}}
SCRATCH={{SCRATCH}}
NVSWITCH=false
EXPECTED_BUSBW_GBPS=0
SECRETS_PATH={{SECRETS_PATH}}
MODEL_PREFIX={{MODEL_PREFIX}}
SERVER_KIND={{SERVER_KIND}}
SERVER_IMAGE={{SERVER_IMAGE}}
SERVER_PORT={{SERVER_PORT}}
SERVER_ARGS={{SERVER_ARGS}}
READINESS_PATH={{READINESS_PATH}}
BATCH_SIZES={{BATCH_SIZES}}
QUEUE_DELAY_US={{QUEUE_DELAY_US}}
WARMUP_SECONDS={{WARMUP_SECONDS}}
LIFECYCLE_HOOK={{LIFECYCLE_HOOK}}
MODEL_METRICS_PORT={{MODEL_METRICS_PORT}}
MODEL_METRICS_LOG_GROUP={{MODEL_METRICS_LOG_GROUP}}
ENV
. /etc/gpu-cluster/cluster.env

{{BOOT_UNIT}}

# 1. NVMe scratch: the model repository's local copy.
cat > /usr/local/sbin/gpu-cluster-scratch <<'SCRIPT'
{{SCRATCH_SCRIPT}}
SCRIPT
boot_unit gpu-cluster-scratch "NVMe scratch space" "local-fs.target dlami-nvme.service" \
  dlami-nvme.service

# 2. GPU utilization to CloudWatch (scaling on GPU utilization watches it).
cat > /usr/local/sbin/gpu-cluster-gpu-metrics <<'SCRIPT'
{{GPU_METRICS_SCRIPT}}
SCRIPT
boot_unit gpu-cluster-gpu-metrics "GPU utilization metrics" network-online.target \
  network-online.target

# 3. The model server, in service once its readiness endpoint answers.
cat > /usr/local/sbin/gpu-cluster-model-server <<'SCRIPT'
{{MODEL_SERVER_SCRIPT}}
SCRIPT
boot_unit gpu-cluster-model-server "model server" \
  "gpu-cluster-scratch.service docker.service network-online.target" network-online.target
