#!/bin/bash
# gpu-cluster: watch instance metadata for the spot interruption notice and the rebalance
# recommendation (AWS recommends polling every 5 seconds). The job's contract:
#   rebalance     advisory, may come long before any interruption (or never): written to
#                 $RUN/rebalance and logged; nothing is signalled.
#   interruption  the two-minute notice: written to $RUN/interruption, and "checkpoint now"
#                 to the training workers (gpu-cluster-jobs checkpoint: the file
#                 $RUN/checkpoint-now and SIGUSR1 to the workers that handle it).
# --once: one poll, for tests.
set -uo pipefail
export STEP=spot-watch
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
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
        [ "$kind" = interruption ] && "$R/usr/local/sbin/gpu-cluster-jobs" checkpoint "$notice"
        ;;
      4) ;;  # no notice
      *) log "instance metadata did not answer for $path" ;;
    esac
  done
  [ "${1:-}" = "--once" ] && break
  sleep 5
done
