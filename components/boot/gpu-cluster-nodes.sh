#!/bin/bash
# gpu-cluster: write the node list and the torchrun environment of this node's cluster.
#   $ETC/nodes         one line per node: index, private IP, instance id (launch order)
#   $ETC/torchrun.env  NNODES, NPROC_PER_NODE, MASTER_ADDR, MASTER_PORT, RDZV_ID, ...
# The index is launch order and changes when an older node leaves; it is not a rank.
# torchrun's c10d rendezvous assigns ranks itself (RANK and GROUP_RANK in each worker);
# NODE_RANK here is only this node's index in the list. The oldest node hosts the rendezvous.
# A lookup that fails (IMDS or the EC2 API down) keeps the last good files and exits 1: a
# transient error never rewrites a cluster of 4 into a cluster of 1.
# --wait: on the first boot (no torchrun.env yet), retry until every node of the group has
# launched (GANG_TIMEOUT seconds, 15 min when it is 0); later boots do not wait. The refresh
# timer's runs are ordered after it and take a lock, so two runs never write the files at once.
# All or nothing (GANG_TIMEOUT > 0): when the wait ends short of the group's size, the oldest
# node scales the group to 0 (a partial gang does not bill for hours) and tells the stack's
# alert topic why: the last failed launch (DescribeScalingActivities' StatusMessage, e.g. "We
# currently do not have sufficient p4d.24xlarge capacity in the Availability Zone you
# requested (us-east-1a)...") and the zone. `gpuc resume` starts it again.
set -uo pipefail
export STEP=nodes
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
give_up() { log "$1; keeping the last node list"; exit 1; }
SELF=$(imds instance-id) || give_up "no instance id from IMDS"
MAC=$(imds mac) || give_up "no MAC address from IMDS"
# The node's own VPC: another stack's cluster with the same name is never in it.
VPC=$(imds "network/interfaces/macs/$MAC/vpc-id") || give_up "no VPC id from IMDS"

# this cluster's nodes in this VPC, of this stack (its stack-id tag; "None": a node launched
# before the tag existed): another stack may share the cluster name and the VPC
list_nodes() {
  local rows
  rows=$(aws ec2 describe-instances --region "$REGION" \
    --filters "Name=tag:{{CLUSTER_TAG}},Values=$CLUSTER" "Name=vpc-id,Values=$VPC" \
              "Name=instance-state-name,Values=pending,running" \
    --query 'Reservations[].Instances[].[LaunchTime,InstanceId,PrivateIpAddress,Tags[?Key==`{{STACK_ID_TAG}}`]|[0].Value]' \
    --output text) || return 1
  sort <<<"$rows" | awk -v id="$STACK_ID" \
    'NF == 4 && ($4 == id || $4 == "None") {print n++ "\t" $3 "\t" $2}'
}

GROUP=$(own_group "$SELF") || give_up "could not read this node's group from EC2"
desired_nodes() {  # the groups desired capacity; 1 for a node in no group
  if [ -z "$GROUP" ]; then
    echo 1
    return 0
  fi
  aws autoscaling describe-auto-scaling-groups --region "$REGION" \
    --auto-scaling-group-names "$GROUP" \
    --query 'AutoScalingGroups[0].DesiredCapacity' --output text
}
size_now() {  # NODE_COUNT from the group (it may change while the first boot waits)
  local count
  count=$(desired_nodes) || return 1
  case $count in '' | *[!0-9]*) log "the group's size is '$count'"; return 1 ;; esac
  NODE_COUNT=$count
}

size_now || give_up "could not read the group's size from the Auto Scaling API"
ATTEMPTS=1
WAIT_SECONDS=$(( ${GANG_TIMEOUT:-0} > 0 ? GANG_TIMEOUT : 900 ))
[ "${1:-}" = "--wait" ] && [ ! -e "$ETC/torchrun.env" ] && ATTEMPTS=$(( WAIT_SECONDS / 5 + 1 ))
DEADLINE=$(( SECONDS + WAIT_SECONDS ))
exec 9>"$RUN/nodes.lock"
flock -w 300 9 || give_up "another run holds $RUN/nodes.lock"
listed() { awk -v self="$SELF" '$3 == self' <<<"$NODES" | grep -q .; }
NODES=""
for attempt in $(seq 1 "$ATTEMPTS"); do
  [ "$attempt" -gt 1 ] && { size_now || true; }
  last=$(( attempt == ATTEMPTS || SECONDS >= DEADLINE ))
  # while waiting, a failed listing is tried again; the last try must succeed
  if NODES=$(list_nodes); then
    listed && [ "$(grep -c . <<<"$NODES")" -ge "$NODE_COUNT" ] && break
  elif [ "$last" -eq 1 ]; then
    give_up "could not list the cluster's nodes from EC2"
  fi
  [ "$last" -eq 1 ] && break
  sleep "${GPUC_POLL_SECONDS:-5}"
done
listed || give_up "EC2 does not list this node ($SELF) yet"
publish() {  # publish SUBJECT MESSAGE: to the stacks alert topic, when it has one
  [ -n "$topic" ] || return 0
  aws sns publish --region "$REGION" --topic-arn "$topic" --message "$2" \
    --subject "gpu-cluster $CLUSTER: $1" >/dev/null
}
gang_stop() {  # gang_stop HAVE: tell the alert topic why, then scale the group to 0
  local zone failure message
  zone=$(imds placement/availability-zone) || zone=unknown
  # one page, newest first (with --max-items the text output adds a "None" for the token)
  failure=$(aws autoscaling describe-scaling-activities --region "$REGION" --no-paginate \
    --auto-scaling-group-name "$GROUP" --output text \
    --query 'Activities[?StatusCode==`Failed`]|[0].StatusMessage') || failure=""
  [ -n "$failure" ] && [ "$failure" != None ] || failure="none recorded"
  message="$1 of $NODE_COUNT nodes launched in $(( GANG_TIMEOUT / 60 )) min in $zone; scaling"
  message="$message the group $GROUP to 0. Last failed launch: $failure. Start it again when"
  message="$message there is capacity: gpuc resume --stack $STACK"
  log "$message"
  # the alert first: once the group is at 0 this node is being terminated
  topic=$(aws ssm get-parameter --region "$REGION" --with-decryption --output text \
    --name "$ALERTS_PARAMETER" --query Parameter.Value) || topic=""
  publish "not all nodes launched; scaling to 0" "$message"
  if ! aws autoscaling update-auto-scaling-group --region "$REGION" --auto-scaling-group-name \
    "$GROUP" --min-size 0 --desired-capacity 0; then
    log "could not scale $GROUP to 0"
    publish "could not scale a partial gang to 0" \
      "Scaling $GROUP to 0 failed (the node's log says why); it keeps billing. $message"
  fi
}
HAVE=$(grep -c . <<<"$NODES")
if [ "$HAVE" -lt "$NODE_COUNT" ] && [ "$ATTEMPTS" -gt 1 ] && [ "${GANG_TIMEOUT:-0}" -gt 0 ] \
  && [ -n "$GROUP" ] && size_now && [ "$HAVE" -lt "$NODE_COUNT" ] \
  && [ "$(awk '$1 == 0 {print $3}' <<<"$NODES")" = "$SELF" ]; then
  gang_stop "$HAVE"
  give_up "not all nodes launched: the group is scaled to 0"
fi
# EC2 topology (types in components/data/ec2_topology.json): $ETC/topology lists each running
# node's name for torchrun's --local_addr, its node set top-down then its id (components/
# ec2_topology.py rank_name), sorted: c10d ranks nodes by that address, so neighbours under a
# network node get neighbouring ranks (gpu-cluster-jobs). /etc/hosts maps the names to the
# addresses. A node set never changes while a node runs: only a new node is looked up. A
# failure keeps the last files and today's order (addresses).
topology() {
  local rows ids
  ids=$(awk '{print $3}' <<<"$NODES" | sort)
  [ "$ids" = "$(awk '{print $3}' "$ETC/topology" 2>/dev/null | sort)" ] && return 0
  rows=$(xargs -n 100 aws ec2 describe-instance-topology --region "$REGION" --output text \
    --query "Instances[?NetworkNodes].[InstanceId,join('.',NetworkNodes)]" --instance-ids \
    <<<"$ids") || return 1
  awk 'NR == FNR {ip[$3] = $2; next} $1 in ip {print "gpuc-" tolower($2 "." $1), ip[$1], $1}' \
    <(printf '%s\n' "$NODES") <(printf '%s\n' "$rows") | LC_ALL=C sort > "$ETC/topology.new" \
    && mv "$ETC/topology.new" "$ETC/topology" || return 1
  { grep -v ' # gpu-cluster$' "$R/etc/hosts" 2>/dev/null; awk '{print $2, $1, "# gpu-cluster"}' \
    "$ETC/topology"; } > "$RUN/hosts" && cat "$RUN/hosts" > "$R/etc/hosts"
}
if [ "${TOPOLOGY:-false}" = true ] && [ "$(grep -c . <<<"$NODES")" -gt 1 ]; then
  topology || log "no EC2 topology (DescribeInstanceTopology): ranks follow the addresses"
fi
NODE_RANK=$(awk -v self="$SELF" '$3 == self {print $1}' <<<"$NODES")
MASTER_ADDR=$(awk '$1 == 0 {print $2}' <<<"$NODES")
[ -n "$MASTER_ADDR" ] || give_up "no address for the first node"
NNODES=$NODE_COUNT  # the groups desired size; a node in no group counts whoever is listed
[ "$NNODES" -gt 0 ] || NNODES=$(grep -c . <<<"$NODES")
nodes_tmp=$(mktemp "$ETC/nodes.XXXXXX") && env_tmp=$(mktemp "$ETC/torchrun.env.XXXXXX") \
  || give_up "cannot write in $ETC"
printf '%s\n' "$NODES" > "$nodes_tmp" && chmod 644 "$nodes_tmp" && mv "$nodes_tmp" "$ETC/nodes"
{
  echo "NNODES=$NNODES"
  echo "NODE_RANK=${NODE_RANK:-0}"
  echo "NPROC_PER_NODE=$GPUS_PER_NODE"
  echo "MASTER_ADDR=$MASTER_ADDR"
  echo "MASTER_PORT={{RENDEZVOUS_PORT}}"
  echo "RDZV_ID=$CLUSTER"
  echo "DATA_BUCKET=$DATA_BUCKET"
  echo "SCRATCH=$SCRATCH"
  echo "GPUC_EXPECTED_BUSBW_TABLE=${EXPECTED_BUSBW_TABLE:-0:0}"
  echo "GPUC_BUSBW_PASS_TABLE=${BUSBW_PASS_TABLE:-0:0}"
  echo "GPUC_BENCH_MAX_BYTES=${BENCH_MAX_BYTES:-1073741824}"
  echo "GPUC_CHECKPOINT_FILE=${RUN#"$R"}/checkpoint-now"
  # EFA: nothing the aws-ofi-nccl plugin sets itself per instance type (components/data/
  # aws_ofi_nccl_env.json: FI_PROVIDER, FI_EFA_USE_DEVICE_RDMA, NCCL_PROTO, buffer sizes...).
  # NCCL_SOCKET_IFNAME is NCCL's own (bootstrap sockets), not the plugin's.
  if [ "$EFA_INTERFACES" -gt 0 ]; then
    echo "NCCL_SOCKET_IFNAME=^lo,docker"
  fi
} > "$env_tmp" && chmod 644 "$env_tmp" && mv "$env_tmp" "$ETC/torchrun.env"
log "$(grep -c . <<<"$NODES") node(s), rendezvous at $MASTER_ADDR"
