#!/bin/bash
# gpu-cluster: watch instance metadata for the spot two-minute interruption notice and the
# rebalance recommendation (AWS recommends polling both every 5 seconds). On each first notice:
# record it in $STATE/<kind> (JSON from IMDS), log it, and send SIGUSR1 to the training
# processes (every process whose environment carries TORCHELASTIC_RUN_ID, i.e. torchrun's
# workers, not the agent) so they can checkpoint to S3. --once: one poll, for tests.
set -uo pipefail
STATE="${GPUC_STATE:-/run/gpu-cluster}"
IMDS=http://169.254.169.254/latest
mkdir -p "$STATE"
signal_training() {
  local environ pid
  for environ in /proc/[0-9]*/environ; do
    pid=${environ#/proc/}; pid=${pid%/environ}
    if tr '\0' '\n' < "$environ" 2>/dev/null | grep -q '^TORCHELASTIC_RUN_ID='; then
      kill -USR1 "$pid" 2>/dev/null && echo "gpu-cluster: sent SIGUSR1 to $pid"
    fi
  done
}
while true; do
  token=$(curl -sS -X PUT "$IMDS/api/token" -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
  for kind in rebalance interruption; do
    case $kind in
      rebalance) path=events/recommendations/rebalance ;;
      interruption) path=spot/instance-action ;;
    esac
    [ -e "$STATE/$kind" ] && continue
    if notice=$(curl -sf -H "X-aws-ec2-metadata-token: $token" "$IMDS/meta-data/$path"); then
      echo "$notice" > "$STATE/$kind"
      echo "gpu-cluster: spot $kind notice: $notice"
      logger -t gpu-cluster "spot $kind notice: $notice" 2>/dev/null || true
      signal_training
    fi
  done
  [ "${1:-}" = "--once" ] && break
  sleep 5
done
