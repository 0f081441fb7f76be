#!/bin/bash
# gpu-cluster: run torchrun with this cluster's rendezvous; the same command on every node.
#   gpuc-torchrun train.py --epochs 10
# c10d rendezvous assigns ranks itself, so a replaced node simply re-joins the next run.
set -euo pipefail
R="${GPUC_ROOT:-}"
env_file="$R/etc/gpu-cluster/torchrun.env"
if [ ! -r "$env_file" ]; then
  echo "gpuc-torchrun: $env_file is not there yet: the node list is still being built" \
    "(systemctl status gpu-cluster-nodes)" >&2
  exit 1
fi
set -a
# shellcheck source=/dev/null
. "$env_file"
# the cluster's secrets (gpu-cluster-secrets), when it has any
secrets="$R/run/gpu-cluster/secrets.env"
if [ -r "$secrets" ]; then
  # shellcheck source=/dev/null
  . "$secrets"
elif [ -e "$secrets" ]; then
  echo "gpuc-torchrun: warning: $secrets exists but $(id -un) cannot read it; the job runs" \
    "without the cluster's secrets (run it as the job user)" >&2
fi
set +a
# gpu-cluster-jobs runs a job elastically: from one node up to the size it started at
NNODES="${GPUC_NNODES:-$NNODES}"
# The Deep Learning AMI keeps PyTorch in a virtual environment.
if ! command -v torchrun >/dev/null && [ -f /opt/pytorch/bin/activate ]; then
  # shellcheck source=/dev/null
  . /opt/pytorch/bin/activate
fi
exec torchrun --nnodes="$NNODES" --nproc_per_node="$NPROC_PER_NODE" \
  --rdzv_id="$RDZV_ID" --rdzv_backend=c10d --rdzv_endpoint="$MASTER_ADDR:$MASTER_PORT" "$@"
