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
# The Deep Learning AMI keeps PyTorch in a virtual environment; a job with a setup has its own
# (gpu-cluster-jobs), which sees the AMI's PyTorch: torchrun then runs on its python.
launcher=(torchrun)
venv="${GPUC_JOB_VENV:-}"
if [ -x "$venv/bin/torchrun" ]; then  # the job installed its own PyTorch
  launcher=("$venv/bin/torchrun")
elif [ -n "$venv" ]; then
  launcher=("$venv/bin/python" -m torch.distributed.run)
elif ! command -v torchrun >/dev/null && [ -f /opt/pytorch/bin/activate ]; then
  # shellcheck source=/dev/null
  . /opt/pytorch/bin/activate
fi
# A job (gpu-cluster-jobs) brings its own rendezvous: its id, its port, the host it picked and
# whether this node is that host (is_host: never guessed from the address, which misses the
# secondary interfaces of an EFA node; torch's c10d backend otherwise matches hostnames), and
# this node's --local_addr: its primary private IP, or on a type with EC2 topology its name from
# /etc/gpu-cluster/topology (c10d ranks nodes in sorted order of it: gpu-cluster-jobs rank_addr;
# torch otherwise takes the host name).
# A node joining a running job (scale-up) waits forever for a MASTER_ADDR the others never
# write when the rendezvous TCP store is shared with the workers (torch 2.x dynamic_rendezvous
# next_rendezvous: only a first rendezvous or a new rank 0 rebuilds it; seen with torch 2.13 in
# tests/test_job_survival.py): its documented opt-out.
export TORCH_DISABLE_SHARE_RDZV_TCP_STORE="${TORCH_DISABLE_SHARE_RDZV_TCP_STORE:-1}"
conf="is_host=${GPUC_RDZV_HOST:-$([ "${NODE_RANK:-0}" = 0 ] && echo 1 || echo 0)}"
exec "${launcher[@]}" --nnodes="$NNODES" --nproc_per_node="$NPROC_PER_NODE" \
  --rdzv_id="${GPUC_RDZV_ID:-$RDZV_ID}" --rdzv_backend=c10d \
  --rdzv_endpoint="${GPUC_RDZV_ENDPOINT:-$MASTER_ADDR:$MASTER_PORT}" \
  --rdzv_conf="$conf${GPUC_RDZV_CONF:+,$GPUC_RDZV_CONF}" \
  ${GPUC_LOCAL_ADDR:+--local_addr="$GPUC_LOCAL_ADDR"} "$@"
