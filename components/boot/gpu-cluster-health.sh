#!/bin/bash
# gpu-cluster: is this node what it should be? At boot, then every minute (--watch).
#   GPUs     nvidia-smi must succeed and list GPUS_PER_NODE GPU indices (an error line is not
#            a GPU). Memory: on row-remapping GPUs (A100, H100, ...) a remapping failure means
#            replace, a pending remap means a reset: reboot once, and replace if it is still
#            pending after that. On the others (T4, V100) uncorrectable ECC errors since
#            the driver loaded (the volatile counters; per boot under persistence mode): the
#            aggregate counters count for the board's whole life (NVML nvmlEccCounterType_t),
#            and the pages of those past errors were retired (NVIDIA "Dynamic Page
#            Retirement"), so a used board is no broken board. A double-bit error this boot is
#            also Xid 48, below.
#   Xid      a fatal Xid in this boot's kernel log (the set the EKS node monitoring agent
#            replaces nodes for: NVIDIA's RESET_GPU, RESTART_BM and NVLink buckets). Xid 63 is
#            no failure: a row remap (before Ampere, a page retirement) was recorded and takes
#            effect at the next GPU reset (NVIDIA "GPU Memory Error Management", Row
#            Remapping; "Dynamic Page Retirement", XIDs 63 and 64): at boot it reboots once, as
#            a pending remap does. Xid 64, a remap or retirement that failed, stays fatal.
#   NVSwitch counted on the PCI bus (10de:1af1 A100, 10de:22a3 H100, as ParallelCluster);
#            where present, or where the type has it, the fabric manager must be active.
#   EFA      as many EFA devices as the launch template attached (fi_info -p efa).
#   Disk     under 2 GiB free on the root volume: degraded and an alert, not a replacement (the
#            SSM agent, logging and checkpoints there fail, but a new node would not fix what
#            filled this one's disk; someone must look at it).
#   Steps    a mount the stack needs (FSx for Lustre) failed; no GPU metrics or no secrets
#            for the job = degraded.
# The result goes to $ETC/health, the instance tag gpu-cluster:health and the metric
# gpu-cluster/NodeHealthy; a failed node in an Auto Scaling group is set Unhealthy, so the
# group replaces it. From the watch, the node's running jobs are told to checkpoint first
# (gpu-cluster-jobs checkpoint) and get GPUC_CHECKPOINT_GRACE seconds (120). But a failure
# every new node shares (no FSx client for the AMI's kernel, a bad driver) would replace nodes
# forever: each replacement is counted per failure in SSM (replacements/<failure> under the
# stack's $REPLACEMENTS_PATH, the last hour's times and instances), and once one
# failure has replaced 3 nodes within the hour the next node stays in the group, failed, and
# the stack's alert topic says why (ParallelCluster likewise stops launching into a queue after
# repeated bootstrap failures: User Guide, "Slurm cluster protected mode"). It is not scaled to
# 0: the group's healthy nodes may be running jobs. Degraded is reported, not replaced.
set -uo pipefail
export STEP=health
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
export PATH="$PATH:/opt/amazon/efa/bin"
FATAL_XIDS=" 46 48 54 62 64 74 79 95 109 110 119 120 136 140 142 143 151 155 156 158 "
WATCH=false
[ "${1:-}" = "--watch" ] && WATCH=true
# The watch starts once this boot's own check has run (the boot steps may still be installing
# and mounting: a missing mount then is not a failure yet).
if [ "$WATCH" = true ] && [ ! -e "$RUN/health-checked" ]; then exit 0; fi
FAILED=()
DEGRADED=()

smi() {  # nvidia-smi, bounded: a GPU that fell off the bus can make it hang
  timeout 60 nvidia-smi "$@"
}

check_gpus() {
  local out rc gpus
  out=$(smi --query-gpu=index,ecc.errors.uncorrected.volatile.total \
    --format=csv,noheader,nounits 2>&1)
  rc=$?
  gpus=$(grep -Ec '^[0-9]+, ' <<<"$out")
  [ "$rc" -eq 124 ] && FAILED+=("nvidia-smi:hung")
  [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || { FAILED+=("nvidia-smi:exit-$rc"); log "nvidia-smi: $out"; }
  [ "$gpus" -eq "$GPUS_PER_NODE" ] || FAILED+=("gpus:$gpus/$GPUS_PER_NODE")
  ECC_GPUS=$(awk -F', ' '/^[0-9]+, / && $2 ~ /^[0-9]+$/ && $2 > 0' <<<"$out" | grep -c .)
}

check_memory_errors() {  # row remapping where the GPU has it, else the ECC counters
  local out failed pending=0
  if [ "$ROW_REMAP" = true ] && out=$(smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure \
    --format=csv,noheader 2>&1) && grep -Eq ', (Yes|No|0|1)$' <<<"$out"; then
    failed=$(awk -F', ' '$3 ~ /^(Yes|1)$/' <<<"$out" | grep -c .)
    pending=$(awk -F', ' '$2 ~ /^(Yes|1)$/' <<<"$out" | grep -c .)
    [ "$failed" -eq 0 ] || FAILED+=("row-remap-failure:$failed-gpus")
  else
    [ "$ROW_REMAP" = true ] && log "row remapping not readable (${out:-no output}); using ECC counters"
    [ "$ECC_GPUS" -eq 0 ] || FAILED+=("ecc:$ECC_GPUS-gpus")
  fi
  [ "$WATCH" = false ] || return 0  # a pending remap harms no work; it waits for a reset
  if [ ! -e "$STATE/remap-reboot" ] && { [ "$pending" -gt 0 ] || [ -n "$XID63" ]; }; then
    date -u +%FT%TZ > "$STATE/remap-reboot"  # a pending remap applies at the next GPU reset
    log "row remap pending ($pending GPU(s)${XID63:+, Xid 63}): rebooting once to apply it"
    REBOOT=true
  elif [ "$pending" -gt 0 ]; then
    FAILED+=("row-remap-pending:$pending-gpus")  # still pending after the reboot
  else
    rm -f "$STATE/remap-reboot"
  fi
}

check_xids() {
  local xid
  for xid in $(journalctl -k -b -o cat 2>/dev/null \
    | sed -nE 's/.*NVRM: Xid \(PCI:[^)]*\): ([0-9]+),.*/\1/p' | sort -un); do
    case "$FATAL_XIDS" in *" $xid "*) FAILED+=("xid:$xid") ;; esac
    [ "$xid" = 63 ] && XID63=1
  done
}

check_nvswitch() {
  local switches
  # the type's own NVSwitch id; on an unexpected board, any NVSwitch ParallelCluster knows
  switches=$(lspci -d "${NVSWITCH_PCI_ID:-10de:1af1}" 2>/dev/null | grep -c .)
  [ -n "${NVSWITCH_PCI_ID:-}" ] || switches=$((switches + $(lspci -d 10de:22a3 2>/dev/null | grep -c .)))
  if [ -n "${NVSWITCH_PCI_ID:-}" ] && [ "$switches" -eq 0 ]; then FAILED+=("nvswitch:0-found"); fi
  if [ "$NVSWITCH" = true ] || [ "$switches" -gt 0 ]; then
    systemctl is-active --quiet nvidia-fabricmanager || FAILED+=("fabricmanager:inactive")
  fi
}

check_efa() {
  local found
  [ "$EFA_INTERFACES" -gt 0 ] || return 0
  # one libfabric domain per EFA device (libfabric 2.x lists efa and efa-direct per device)
  found=$(fi_info -p efa -t FI_EP_RDM 2>/dev/null | awk '/domain:/ {print $2}' | sort -u \
    | grep -c .)
  [ "$found" -eq "$EFA_INTERFACES" ] || FAILED+=("efa:$found/$EFA_INTERFACES")
}

check_disk() {
  df -Pk "$R/" | awk 'NR == 2 {exit $4 < 2097152}' || DEGRADED+=("disk-full")
}

check_steps() {
  local result
  if [ -n "${LUSTRE_TARGET:-}" ]; then
    result=$(step_state lustre)
    case $result in ok) ;; pending) [ "$WATCH" = true ] && FAILED+=("lustre:not-mounted") ;;
      *) FAILED+=("lustre:${result#failed: }") ;; esac
  fi
  result=$(step_state gpu-metrics)
  case $result in ok | pending) ;; *) DEGRADED+=("gpu-metrics:missing") ;; esac
  if [ -n "${SECRETS_PATH:-}" ]; then
    result=$(step_state secrets)
    case $result in ok | pending) ;; *) DEGRADED+=("secrets:unread") ;; esac
  fi
}

# alert SUBJECT MESSAGE: to the stack's alert topic, found as gpu-cluster-nodes finds it
alert() {
  local topic
  topic=$(aws ssm get-parameter --region "$REGION" --with-decryption --output text \
    --name "$ALERTS_PARAMETER" --query Parameter.Value) \
    && aws sns publish --region "$REGION" --topic-arn "$topic" --message "$2" \
      --subject "gpu-cluster $CLUSTER: $1" >/dev/null || log "no alert: $1"
}

# replacing ID WHY: count this replacement under WHY's first failure (epoch@instance words of
# the last hour); 1 and an alert when that failure has replaced 3 nodes already
replacing() {
  local name=${2%%,*} kept
  name=$REPLACEMENTS_PATH/${name//[^A-Za-z0-9_.-]/_}
  kept=$(aws ssm get-parameter --region "$REGION" --name "${name::250}" --output text \
    --query Parameter.Value 2>/dev/null | tr ' ' '\n' | awk -F@ -v ORS=' ' -v now="$(date +%s)" \
    -v self="$1" 'NF == 2 && now - $1 < 3600 && $2 != self')
  if [ "$(wc -w <<<"$kept")" -ge 3 ]; then
    alert "a failure keeps replacing nodes" "$1: $2, as 3 nodes replaced this hour: kept. Fix, then set-instance-health Unhealthy"
    return 1
  fi
  aws ssm put-parameter --region "$REGION" --name "${name::250}" --type String --overwrite \
    --value "$kept$(date +%s)@$1" >/dev/null
}

# checkpoint_first WHY: the running jobs checkpoint before the group replaces the node
checkpoint_first() {
  local grace=${GPUC_CHECKPOINT_GRACE:-120}
  systemctl list-units 'gpu-cluster-job@*' --state=active --no-legend | grep -q . || return 0
  "$R/usr/local/sbin/gpu-cluster-jobs" checkpoint "$(printf '{"action": "replace", "reason": "%s", "time": "%s"}' "$1" "$(date -u -d "+$grace sec" +%FT%TZ)")"
  sleep "$grace"
}

publish() {  # publish STATUS: file, tag (JSON form: a value may hold commas), metric, group
  local status=$1 self group
  echo "$status" > "$ETC/health"
  log "$status"
  self=$(imds instance-id) || { log "no instance id: status not published"; return 1; }
  aws ec2 create-tags --region "$REGION" --resources "$self" \
    --tags "[{\"Key\":\"gpu-cluster:health\",\"Value\":\"$status\"}]" \
    && echo "$status" > "$RUN/health-published" \
    || log "could not tag $self with its health"
  aws cloudwatch put-metric-data --region "$REGION" --namespace gpu-cluster \
    --metric-name NodeHealthy --dimensions "Cluster=$CLUSTER,InstanceId=$self" \
    --value "$([ "${status%%:*}" = failed ] && echo 0 || echo 1)" \
    || log "could not publish NodeHealthy"
  case $status in *disk-full*) alert "root disk full" "$self: under 2 GiB free on /" ;; esac
  [ "${status%%:*}" = failed ] || return 0
  if ! group=$(own_group "$self"); then
    log "could not look up the Auto Scaling group of $self; not marked Unhealthy"
    return 1
  elif [ -z "$group" ]; then
    log "not in an Auto Scaling group; replace this node by hand"
  elif replacing "$self" "${status#failed:}"; then
    [ "$WATCH" = false ] || checkpoint_first "${status#failed:}"
    aws autoscaling set-instance-health --region "$REGION" --instance-id "$self" \
      --health-status Unhealthy --no-should-respect-grace-period \
      || log "could not mark $self Unhealthy; replace it by hand"
  fi
}

REBOOT=false
ECC_GPUS=0
XID63=""
check_gpus
check_xids
check_memory_errors
check_nvswitch
check_efa
check_disk
check_steps
if [ "${#FAILED[@]}" -gt 0 ]; then
  STATUS="failed:$(IFS=,; echo "${FAILED[*]}")"
elif [ "${#DEGRADED[@]}" -gt 0 ]; then
  STATUS="degraded:$(IFS=,; echo "${DEGRADED[*]}")"
else
  STATUS=ok
fi
if [ "$REBOOT" = true ]; then
  echo "rebooting:row-remap-pending" > "$ETC/health"
  systemctl --no-block reboot  # every unit is installed and enabled: the next boot runs them
  exit 0
fi
# --watch publishes a change, or what could not be published before
if [ "$WATCH" = false ] || [ "$STATUS" != "$(cat "$RUN/health-published" 2>/dev/null)" ]; then
  publish "$STATUS"
fi
[ "$WATCH" = true ] || touch "$RUN/health-checked"
[ "${STATUS%%:*}" != failed ]
