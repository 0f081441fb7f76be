#!/bin/bash
# gpu-cluster: is this node what it should be? At boot, then every minute (--watch).
#   GPUs     nvidia-smi must succeed and list GPUS_PER_NODE GPU indices (an error line is not
#            a GPU); uncorrectable ECC errors from the aggregate counters (the volatile ones
#            reset at every driver load); on row-remapping GPUs (A100, H100, ...) a remapping
#            failure means replace, a pending remap means a reset: reboot once.
#   Xid      a fatal Xid in this boot's kernel log (the set the EKS node monitoring agent
#            replaces nodes for: NVIDIA's RESET_GPU, RESTART_BM and NVLink buckets).
#   NVSwitch counted on the PCI bus (10de:1af1 A100, 10de:22a3 H100, as ParallelCluster);
#            where present, or where the type has it, the fabric manager must be active.
#   EFA      as many EFA devices as the launch template attached (fi_info -p efa).
#   Steps    a mount the stack needs (FSx for Lustre) failed; no GPU metrics or no secrets
#            for the job = degraded.
# The result goes to $ETC/health, the instance tag gpu-cluster:health and the metric
# gpu-cluster/NodeHealthy; a failed node in an Auto Scaling group is set Unhealthy, so the
# group replaces it. Degraded (no GPU metrics) is reported, not replaced.
set -uo pipefail
export STEP=health
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
export PATH="$PATH:/opt/amazon/efa/bin"
FATAL_XIDS=" 46 48 54 62 63 64 74 79 95 109 110 119 120 136 140 142 143 151 155 156 158 "
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
  out=$(smi --query-gpu=index,ecc.errors.uncorrected.aggregate.total \
    --format=csv,noheader,nounits 2>&1)
  rc=$?
  gpus=$(grep -Ec '^[0-9]+, ' <<<"$out")
  [ "$rc" -eq 124 ] && FAILED+=("nvidia-smi:hung")
  [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || { FAILED+=("nvidia-smi:exit-$rc"); log "nvidia-smi: $out"; }
  [ "$gpus" -eq "$GPUS_PER_NODE" ] || FAILED+=("gpus:$gpus/$GPUS_PER_NODE")
  ECC_GPUS=$(awk -F', ' '/^[0-9]+, / && $2 ~ /^[0-9]+$/ && $2 > 0' <<<"$out" | grep -c .)
}

check_memory_errors() {  # row remapping where the GPU has it, else the ECC aggregate counters
  local out failed pending
  if [ "$ROW_REMAP" = true ] && out=$(smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure \
    --format=csv,noheader 2>&1) && grep -Eq ', (Yes|No|0|1)$' <<<"$out"; then
    :
  else
    [ "$ROW_REMAP" = true ] && log "row remapping not readable (${out:-no output}); using ECC counters"
    [ "$ECC_GPUS" -eq 0 ] || FAILED+=("ecc:$ECC_GPUS-gpus")
    return 0
  fi
  failed=$(awk -F', ' '$3 ~ /^(Yes|1)$/' <<<"$out" | grep -c .)
  pending=$(awk -F', ' '$2 ~ /^(Yes|1)$/' <<<"$out" | grep -c .)
  [ "$failed" -eq 0 ] || FAILED+=("row-remap-failure:$failed-gpus")
  [ "$pending" -gt 0 ] || { rm -f "$STATE/remap-reboot"; return 0; }
  if [ "$WATCH" = false ] && [ ! -e "$STATE/remap-reboot" ]; then
    date -u +%FT%TZ > "$STATE/remap-reboot"  # a pending remap applies at the next GPU reset
    log "row remapping pending on $pending GPU(s): rebooting once to apply it"
    REBOOT=true
  elif [ "$WATCH" = false ]; then
    FAILED+=("row-remap-pending:$pending-gpus")  # still pending after the reboot
  fi
}

check_xids() {
  local xid
  for xid in $(journalctl -k -b -o cat 2>/dev/null \
    | sed -nE 's/.*NVRM: Xid \(PCI:[^)]*\): ([0-9]+),.*/\1/p' | sort -un); do
    case "$FATAL_XIDS" in *" $xid "*) FAILED+=("xid:$xid") ;; esac
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
  [ "${status%%:*}" = failed ] || return 0
  if ! group=$(own_group "$self"); then
    log "could not look up the Auto Scaling group of $self; not marked Unhealthy"
    return 1
  elif [ -z "$group" ]; then
    log "not in an Auto Scaling group; replace this node by hand"
  elif ! aws autoscaling set-instance-health --region "$REGION" --instance-id "$self" \
    --health-status Unhealthy --no-should-respect-grace-period; then
    log "could not mark $self Unhealthy; replace it by hand"
  fi
}

REBOOT=false
ECC_GPUS=0
check_gpus
check_memory_errors
check_xids
check_nvswitch
check_efa
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
