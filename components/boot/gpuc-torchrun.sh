#!/bin/bash
# gpu-cluster: run torchrun with this cluster's rendezvous; the same command on every node.
#   gpuc-torchrun train.py --epochs 10
# c10d rendezvous assigns ranks itself, so a replaced node simply re-joins the next run.
set -euo pipefail
set -a
. "${GPUC_ETC:-/etc/gpu-cluster}/torchrun.env"
# the cluster's secrets (gpu-cluster-secrets), when it has any and this user may read them
secrets="${GPUC_RUN:-/run/gpu-cluster}/secrets.env"
if [ -r "$secrets" ]; then
  # shellcheck source=/dev/null
  . "$secrets"
fi
set +a
# The Deep Learning AMI keeps PyTorch in a virtual environment.
if ! command -v torchrun >/dev/null && [ -f /opt/pytorch/bin/activate ]; then
  . /opt/pytorch/bin/activate
fi
exec torchrun --nnodes="$NNODES" --nproc_per_node="$NPROC_PER_NODE" \
  --rdzv_id="$RDZV_ID" --rdzv_backend=c10d --rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT" "$@"
