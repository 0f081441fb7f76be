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
#   GPU errors (nvidia-smi only: the PyTorch DLAMI's release notes list no DCGM, which its Base
#            AMI lists as dcgm_version; nvidia-smi reads the same NVML counters): corrected
#            ECC errors over the limit on one GPU, HW slowdown / thermal / power brake clock
#            events, a PCIe link narrower than its maximum while the GPU is in use (nvidia-smi:
#            the width "may be reduced when the GPU is not in use"), NVLink replay or recovery
#            errors since the last check (DCGM counts one as an error) = degraded. Each Xid of
#            this boot is logged once, classed by NVIDIA's Xid catalog (components/data/
#            xid_catalog.json): a non-fatal one degrades unless NVIDIA's action for it is the
#            application's restart or none.
#   NVSwitch counted on the PCI bus (10de:1af1 A100, 10de:22a3 H100, as ParallelCluster);
#            where present, or where the type has it, the fabric manager must be active.
#   EFA      as many EFA devices as the launch template attached (fi_info -p efa); its error
#            hw_counters rising since the last check = degraded (a file an older card lacks:
#            nothing; a counter that fell was reset: a new baseline, as at every boot).
#   Disk     under 2 GiB free on the root volume: degraded and an alert, not a replacement (the
#            SSM agent, logging and checkpoints there fail, but a new node would not fix what
#            filled this one's disk; someone must look at it).
#   Steps    a mount the stack needs (FSx for Lustre) failed; no GPU metrics or no secrets
#            for the job = degraded.
# The result goes to $ETC/health, the instance tag gpu-cluster:health and, in one PutMetricData
# call, gpu-cluster NodeHealthy and NodeDegraded {StackId, InstanceId} and GpuErrors {StackId,
# InstanceId, Class} for each non-zero class (components/node_errors.py); the watch publishes a
# change, and the metrics whenever a class is non-zero. A failed node in an Auto Scaling group is set Unhealthy, so the
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
# rendered from components/node_errors.py (NVIDIA's Xid catalog, the EKS agent's fatal set)
XID_FATAL="{{XID_FATAL}}"
XID_NVLINK="{{XID_NVLINK}}"
XID_MEMORY="{{XID_MEMORY}}"
# NVIDIA's action for these: restart the application, or none: counted, no degraded state
XID_COUNTED="{{XID_COUNTED}}"
EFA_ERROR_COUNTERS="{{EFA_ERROR_COUNTERS}}"
ECC_CORRECTED_LIMIT={{ECC_CORRECTED_LIMIT}}
GPU_ERROR_CLASSES="{{GPU_ERROR_CLASSES}}"
WATCH=false
[ "${1:-}" = "--watch" ] && WATCH=true
# The watch starts once this boot's own check has run (the boot steps may still be installing
# and mounting: a missing mount then is not a failure yet).
if [ "$WATCH" = true ] && [ ! -e "$RUN/health-checked" ]; then exit 0; fi
FAILED=()
DEGRADED=()
declare -A ERRORS=()  # GpuErrors class -> count
ERRORS_TOTAL=0
count() { ERRORS[$1]=$((${ERRORS[$1]:-0} + $2)); ERRORS_TOTAL=$((ERRORS_TOTAL + $2)); }
member() {  # member SET N: N is one of SET's words or in one of its ranges a-b
  local w
  for w in $1; do [ "$2" -ge "${w%-*}" ] && [ "$2" -le "${w#*-}" ] && return 0; done
  return 1
}

smi() {  # nvidia-smi, bounded: a GPU that fell off the bus can make it hang
  timeout 60 nvidia-smi "$@"
}

# smi_query FIELDS: one CSV row per GPU; 1 (logged) when the driver knows a field not (it then
# prints no row at all): a check this driver cannot make is skipped, the node not failed
smi_query() {
  local out
  out=$(smi --query-gpu="$1" --format=csv,noheader,nounits 2>&1)
  if grep -q 'is not a valid field' <<<"$out"; then log "nvidia-smi: ${out%%$'\n'*}"; return 1; fi
  printf '%s\n' "$out"
}

# rises NAME: the summed increase of the "key value" counters on stdin since the previous
# check ($STATE/counters-NAME). Counters only rise: one that fell was reset (a driver reload),
# one that is new has no past, and the boot's own check takes a new baseline (the previous
# values are another boot's)
rises() {
  local last="$STATE/counters-$1"
  cat > "$last.new"
  if [ "$WATCH" = true ] && [ -r "$last" ]; then
    awk 'FILENAME == ARGV[1] {was[$1] = $2; next}
      ($1 in was) && $2 + 0 > was[$1] + 0 {sum += $2 - was[$1]} END {print sum + 0}' \
      "$last" "$last.new"
  else
    echo 0
  fi
  mv -f "$last.new" "$last"
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
  GPUS_FOUND=$gpus
  ECC_GPUS=$(awk -F', ' '/^[0-9]+, / && $2 ~ /^[0-9]+$/ && $2 > 0' <<<"$out" | grep -c .)
}

check_memory_errors() {  # row remapping where the GPU has it, else the ECC counters
  local out failed=0 pending=0
  if [ "$ROW_REMAP" = true ] && out=$(smi --query-remapped-rows=gpu_bus_id,remapped_rows.pending,remapped_rows.failure \
    --format=csv,noheader 2>&1) && grep -Eq ', (Yes|No|0|1)$' <<<"$out"; then
    failed=$(awk -F', ' '$3 ~ /^(Yes|1)$/' <<<"$out" | grep -c .)
    pending=$(awk -F', ' '$2 ~ /^(Yes|1)$/' <<<"$out" | grep -c .)
    [ "$failed" -eq 0 ] || FAILED+=("row-remap-failure:$failed-gpus")
    count RowRemapFailure "$failed"
    count RowRemapPending "$pending"
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

check_xids() {  # every Xid of this boot, counted by class; logged once (the watch reads again)
  local pci xid class seen=0 logged
  logged=$(cat "$RUN/xids-logged" 2>/dev/null || echo 0)
  while read -r pci xid; do
    seen=$((seen + 1))
    if member "$XID_FATAL" "$xid"; then class=XidFatal
    elif member "$XID_NVLINK" "$xid"; then class=XidNvlink
    elif member "$XID_MEMORY" "$xid"; then class=XidMemory
    else class=XidOther; fi
    count "$class" 1
    [ "$seen" -le "$logged" ] || log "Xid $xid ($class) on $pci"
    if [ "$class" = XidFatal ]; then FAILED+=("xid:$xid")
    elif ! member "$XID_COUNTED" "$xid"; then DEGRADED+=("xid:$xid"); fi
    [ "$xid" = 63 ] && XID63=1
  done < <(journalctl -k -b -o cat 2>/dev/null \
    | sed -nE 's/.*NVRM: Xid \(PCI:([^)]*)\): ([0-9]+),.*/\1 \2/p')
  echo "$seen" > "$RUN/xids-logged"
}

check_gpu_errors() {  # per GPU: ECC counts, PCIe link width, HW clock events
  local rows sbe dbe over pcie p slow thermal brake
  [ "$GPUS_FOUND" -gt 0 ] || return 0  # no driver, or hung: nothing more to ask
  if rows=$(smi_query pci.bus_id,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,utilization.gpu,pcie.link.width.current,pcie.link.width.max); then
    read -r sbe dbe over pcie < <(awk -F', ' -v limit="$ECC_CORRECTED_LIMIT" '
      /^[0-9A-Fa-f]+:/ {
        if ($2 ~ /^[0-9]+$/) { sbe += $2; over += ($2 + 0 > limit) }
        if ($3 ~ /^[0-9]+$/) dbe += $3
        if ($4 + 0 > 0 && $5 ~ /^[0-9]+$/ && $6 ~ /^[0-9]+$/ && $5 + 0 < $6 + 0) pcie++
      }
      END { print sbe + 0, dbe + 0, over + 0, pcie + 0 }' <<<"$rows")
    count EccSingleBitVolatile "$sbe"
    count EccDoubleBitVolatile "$dbe"
    count PcieLinkDegraded "$pcie"
    [ "$over" -eq 0 ] || DEGRADED+=("ecc-corrected:$over-gpus")
    [ "$pcie" -eq 0 ] || DEGRADED+=("pcie-link:$pcie-gpus")
  fi
  # R535 renamed clocks_throttle_reasons.* to clocks_event_reasons.* (keeping the old names as
  # aliases: nvidia_gpu_exporter issue 123); a driver before it knows only the old ones
  for p in clocks_event_reasons clocks_throttle_reasons ""; do
    [ -n "$p" ] || { log "clock event reasons not readable: not checked"; return 0; }
    rows=$(smi_query "$p.hw_slowdown,$p.hw_thermal_slowdown,$p.hw_power_brake_slowdown") && break
  done
  read -r slow thermal brake < <(awk -F', ' '{s += ($1 == "Active"); t += ($2 == "Active");
    b += ($3 == "Active")} END {print s + 0, t + 0, b + 0}' <<<"$rows")
  count ThrottleHwSlowdown "$slow"
  count ThrottleThermal "$thermal"
  count ThrottlePowerBrake "$brake"
  [ "$slow" -eq 0 ] || DEGRADED+=("throttle-hw-slowdown:$slow-gpus")
  [ "$thermal" -eq 0 ] || DEGRADED+=("throttle-thermal:$thermal-gpus")
  [ "$brake" -eq 0 ] || DEGRADED+=("throttle-power-brake:$brake-gpus")
}

check_nvlink() {  # replay and recovery errors since the last check; no NVLink lists no link
  local rose
  [ "$GPUS_FOUND" -gt 0 ] || return 0
  # DCGM counts one NVLink replay or recovery error as an error, CRC errors only at 100 a
  # second (dcgm DcgmGpuHardwareLimits.h): a CRC error is retried, a replay
  rose=$(smi nvlink -e 2>/dev/null | awk '/^GPU [0-9]+:/ {gpu = $2}
    match($0, /Link [0-9]+: (Replay|Recovery) Errors: [0-9]+/) {
      split(substr($0, RSTART, RLENGTH), f, /[: ]+/); print gpu f[2] ":" f[3], f[5] }' \
    | rises nvlink)
  count NvlinkErrors "$rose"
  [ "$rose" -eq 0 ] || DEGRADED+=("nvlink-errors")
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

check_efa_errors() {  # the EFA error counters since the last check
  local dir name rose
  rose=$(for dir in "$R"/sys/class/infiniband/*/ports/*/hw_counters; do
    for name in $EFA_ERROR_COUNTERS; do
      [ -r "$dir/$name" ] && echo "${dir#"$R/sys/class/infiniband/"}/$name $(cat "$dir/$name")"
    done
  done | rises efa)
  count EfaErrors "$rose"
  [ "$rose" -eq 0 ] || DEGRADED+=("efa-errors")
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

# metrics ID STATUS: one PutMetricData call (up to 1000 datums): NodeHealthy, NodeDegraded and
# each non-zero GpuErrors class, by the stack id (a cluster name is unique only per stack)
metrics() {
  local dims="{Name=StackId,Value=${STACK_ID:-$CLUSTER}},{Name=InstanceId,Value=$1}" class data
  data=("MetricName=NodeHealthy,Value=$([ "${2%%:*}" = failed ] && echo 0 || echo 1),Unit=None,Dimensions=[$dims]"
    "MetricName=NodeDegraded,Value=$([ "${2%%:*}" = degraded ] && echo 1 || echo 0),Unit=None,Dimensions=[$dims]")
  for class in $GPU_ERROR_CLASSES; do
    [ "${ERRORS[$class]:-0}" -eq 0 ] \
      || data+=("MetricName=GpuErrors,Value=${ERRORS[$class]},Unit=Count,Dimensions=[$dims,{Name=Class,Value=$class}]")
  done
  aws cloudwatch put-metric-data --region "$REGION" --namespace gpu-cluster \
    --metric-data "${data[@]}" || log "could not publish the health metrics"
}

publish() {  # publish STATUS: file, tag (JSON form: a value may hold commas), metrics, group
  local status=$1 self group
  echo "$status" > "$ETC/health"
  log "$status"
  self=$(imds instance-id) || { log "no instance id: status not published"; return 1; }
  # a tag value holds 256 characters at most (EC2 User Guide, "Tag restrictions")
  aws ec2 create-tags --region "$REGION" --resources "$self" \
    --tags "[{\"Key\":\"gpu-cluster:health\",\"Value\":\"${status::256}\"}]" \
    && echo "$status" > "$RUN/health-published" \
    || log "could not tag $self with its health"
  metrics "$self" "$status"
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

joined() { printf '%s\n' "$@" | awk '!seen[$0]++' | paste -sd, -; }  # each reason once

REBOOT=false
ECC_GPUS=0
GPUS_FOUND=0
XID63=""
check_gpus
check_xids
check_memory_errors
check_gpu_errors
check_nvlink
check_nvswitch
check_efa
check_efa_errors
check_disk
check_steps
if [ "${#FAILED[@]}" -gt 0 ]; then
  STATUS="failed:$(joined "${FAILED[@]}")"
elif [ "${#DEGRADED[@]}" -gt 0 ]; then
  STATUS="degraded:$(joined "${DEGRADED[@]}")"
else
  STATUS=ok
fi
if [ "$REBOOT" = true ]; then
  echo "rebooting:row-remap-pending" > "$ETC/health"
  systemctl --no-block reboot  # every unit is installed and enabled: the next boot runs them
  exit 0
fi
# --watch publishes a change (or what could not be published before) in full; the metrics every
# time, so a node that stays healthy keeps its line on the dashboard and an alarm has data
if [ "$WATCH" = false ] || [ "$STATUS" != "$(cat "$RUN/health-published" 2>/dev/null)" ]; then
  publish "$STATUS"
elif SELF=$(imds instance-id); then
  metrics "$SELF" "$STATUS"
fi
[ "$WATCH" = true ] || touch "$RUN/health-checked"
[ "${STATUS%%:*}" != failed ]
