#!/bin/bash
# gpu-cluster: watch instance metadata for the spot interruption notice and the rebalance
# recommendation (AWS recommends polling every 5 seconds). The job's contract:
#   rebalance     advisory, may come long before any interruption (or never): written to
#                 $RUN/rebalance and logged; nothing is signalled.
#   interruption  the two-minute notice: written to $RUN/interruption and to the checkpoint
#                 file $RUN/checkpoint-now (GPUC_CHECKPOINT_FILE in torchrun.env, which a job
#                 may poll), and SIGUSR1 to each training worker that handles it: a process
#                 torchrun started (TORCHELASTIC_RUN_ID in its environment, its parent - not
#                 init - without it) with a SIGUSR1 handler (SigCgt in /proc/PID/status; the
#                 default action of SIGUSR1 is to terminate, so a job that only polls the file
#                 is not killed). Processes the workers start themselves (DataLoader workers)
#                 and the agent get nothing.
# --once: one poll, for tests.
set -uo pipefail
export STEP=spot-watch
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
PROC="${GPUC_PROC:-/proc}"

run_id() { tr '\0' '\n' < "$PROC/$1/environ" 2>/dev/null | sed -n 's/^TORCHELASTIC_RUN_ID=//p'; }
parent() { sed 's/.*) //' "$PROC/$1/stat" 2>/dev/null | awk '{print $2}'; }  # comm may hold spaces
catches_usr1() {  # bit 10 (SIGUSR1) of the caught-signals mask
  local mask
  mask=$(awk '/^SigCgt:/ {print $2}' "$PROC/$1/status" 2>/dev/null)
  [ -n "$mask" ] && (( (16#$mask >> 9) & 1 ))
}

training_workers() {
  local dir pid ppid
  for dir in "$PROC"/[0-9]*; do
    pid=${dir##*/}
    [ -n "$(run_id "$pid")" ] || continue
    ppid=$(parent "$pid")
    [ -n "$ppid" ] && [ "$ppid" != 1 ] && [ -z "$(run_id "$ppid")" ] || continue
    if catches_usr1 "$pid"; then echo "$pid"; else log "worker $pid has no SIGUSR1 handler"; fi
  done
}

on_interruption() {
  local pid
  cp "$RUN/interruption" "$RUN/checkpoint-now"
  for pid in $(training_workers); do
    kill -USR1 "$pid" 2>/dev/null && log "sent SIGUSR1 to training worker $pid"
  done
}

while true; do
  for kind in rebalance interruption; do
    case $kind in
      rebalance) path=events/recommendations/rebalance ;;
      interruption) path=spot/instance-action ;;
    esac
    [ -e "$RUN/$kind" ] && continue
    notice=$(imds_get "$path")
    case $? in
      0)
        printf '%s\n' "$notice" > "$RUN/$kind"
        log "spot $kind notice: $notice"
        logger -t gpu-cluster "spot $kind notice: $notice" 2>/dev/null || true
        [ "$kind" = interruption ] && on_interruption
        ;;
      4) ;;  # no notice
      *) log "instance metadata did not answer for $path" ;;
    esac
  done
  [ "${1:-}" = "--once" ] && break
  sleep 5
done
