#!/bin/bash
# gpu-cluster: write the node list and the torchrun environment of this node's cluster.
#   /etc/gpu-cluster/nodes         one line per node: rank, private IP, instance id
#   /etc/gpu-cluster/torchrun.env  NNODES, NODE_RANK, NPROC_PER_NODE, MASTER_ADDR, ...
# Ranks follow launch order (oldest first), so running nodes keep their rank when a replaced
# node joins; the oldest node hosts the c10d rendezvous. --wait: retry until every node of the
# group has launched (first boot).
set -euo pipefail
ETC="${GPUC_ETC:-/etc/gpu-cluster}"
. "$ETC/cluster.env"
imds() {
  local token
  token=$(curl -sS -X PUT http://169.254.169.254/latest/api/token \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
  curl -sS -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/$1"
}
SELF=$(imds instance-id)
# The node's own VPC: another stack's cluster with the same name is never in it.
VPC=$(imds "network/interfaces/macs/$(imds mac)/vpc-id")
GROUP_TAG='Tags[?Key==`aws:autoscaling:groupName`]|[0].Value'
list_nodes() {
  aws ec2 describe-instances --region "$REGION" \
    --filters "Name=tag:{{CLUSTER_TAG}},Values=$CLUSTER" "Name=vpc-id,Values=$VPC" \
              "Name=instance-state-name,Values=pending,running" \
    --query 'Reservations[].Instances[].[LaunchTime,InstanceId,PrivateIpAddress]' \
    --output text | sort | awk '{print NR-1 "\t" $3 "\t" $2}'
}
desired_nodes() {
  local group
  group=$(aws ec2 describe-instances --region "$REGION" --instance-ids "$SELF" \
    --query "Reservations[0].Instances[0].$GROUP_TAG" --output text)
  if [ -z "$group" ] || [ "$group" = "None" ]; then
    echo 1  # a single instance, not in an Auto Scaling group
  else
    aws autoscaling describe-auto-scaling-groups --region "$REGION" \
      --auto-scaling-group-names "$group" \
      --query 'AutoScalingGroups[0].DesiredCapacity' --output text
  fi
}
# Unknown size (no access to the Auto Scaling API): count whoever is running.
NODE_COUNT=$(desired_nodes 2>/dev/null || true)
case $NODE_COUNT in '' | *[!0-9]*) NODE_COUNT=0 ;; esac
ATTEMPTS=1
[ "${1:-}" = "--wait" ] && ATTEMPTS=180
for _ in $(seq 1 "$ATTEMPTS"); do
  list_nodes > "$ETC/nodes.tmp" || true
  [ "$(wc -l < "$ETC/nodes.tmp")" -ge "$NODE_COUNT" ] && break
  sleep 5
done
mv "$ETC/nodes.tmp" "$ETC/nodes"
NODE_RANK=$(awk -v self="$SELF" '$3 == self {print $1}' "$ETC/nodes")
MASTER_ADDR=$(awk '$1 == 0 {print $2}' "$ETC/nodes")
[ "$NODE_COUNT" -gt 0 ] || NODE_COUNT=$(wc -l < "$ETC/nodes")
{
  echo "NNODES=$NODE_COUNT"
  echo "NODE_RANK=${NODE_RANK:-0}"
  echo "NPROC_PER_NODE=$GPUS_PER_NODE"
  echo "MASTER_ADDR=$MASTER_ADDR"
  echo "MASTER_PORT={{RENDEZVOUS_PORT}}"
  echo "RDZV_ID=$CLUSTER"
  echo "DATA_BUCKET=$DATA_BUCKET"
  echo "SCRATCH=$SCRATCH"
  echo "GPUC_EXPECTED_BUSBW_GBPS=$EXPECTED_BUSBW_GBPS"
  # EFA: libfabric >= 1.18 and aws-ofi-nccl >= 1.7 (on every current Deep Learning AMI) turn
  # on RDMA read where the device has it; FI_EFA_USE_DEVICE_RDMA=1 on a device without it
  # (g4dn, g5, g6) aborts the job, so it is never set.
  if [ "$EFA_INTERFACES" -gt 0 ]; then
    echo "FI_PROVIDER=efa"
    echo "NCCL_SOCKET_IFNAME=^lo,docker"
  fi
} > "$ETC/torchrun.env.tmp"
mv "$ETC/torchrun.env.tmp" "$ETC/torchrun.env"
