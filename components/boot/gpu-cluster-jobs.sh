#!/bin/bash
# gpu-cluster: the stack's training jobs on this node (`gpuc run` stores each job's spec in SSM
# Parameter Store under $CLUSTER and sends `gpu-cluster-jobs start NAME` to every node).
#   gpu-cluster-jobs boot        start every active job (a node that joins later, a reboot)
#   gpu-cluster-jobs start NAME  read the spec, start gpu-cluster-job@NAME (a unit of its own)
#   gpu-cluster-jobs stop NAME   stop it
#   gpu-cluster-jobs run NAME    the unit's command: gpuc-torchrun with the job's restarts
# Each node reports its state to .../jobs/NAME/nodes/<instance id> (running, done, failed).
set -uo pipefail
export STEP=jobs
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
JOBS="/gpu-cluster/$CLUSTER/jobs"
SPECS="$ETC/jobs"

spec_field() {  # spec_field FILE FIELD: one field of a job spec, shell-quoted lists joined
  python3 - "$1" "$2" <<'PY'
import json, shlex, sys
spec = json.load(open(sys.argv[1]))
value = spec.get(sys.argv[2])
if isinstance(value, list):
    print(" ".join(shlex.quote(str(v)) for v in value))
elif isinstance(value, dict):
    print("\n".join(f"{k}={shlex.quote(str(v))}" for k, v in sorted(value.items())))
else:
    print("" if value is None else value)
PY
}

report() {  # report NAME STATE [DETAIL]: this node's state of a job
  local id
  id=$(imds instance-id) || return 0
  aws ssm put-parameter --region "$REGION" --name "$JOBS/$1/nodes/$id" --type String --overwrite \
    --value "{\"state\": \"$2\", \"detail\": \"${3:-}\", \"updated\": \"$(date -u +%FT%TZ)\"}" \
    >/dev/null || echo "gpu-cluster-jobs: could not report $1 $2" >&2
}

fetch() {  # fetch NAME: the spec into $SPECS/NAME.json (root and the job user may read it)
  local value
  value=$(aws ssm get-parameter --region "$REGION" --name "$JOBS/$1" --with-decryption \
    --query Parameter.Value --output text) || return 1
  local group
  group="$(id -gn "$JOB_USER")" || { log "no job user $JOB_USER on this node"; return 1; }
  install -d -m 0750 -o root -g "$group" "$SPECS" || return 1
  (umask 077 && printf '%s\n' "$value" > "$SPECS/$1.json.tmp") || return 1
  chgrp "$group" "$SPECS/$1.json.tmp" && chmod 0640 "$SPECS/$1.json.tmp" \
    && mv "$SPECS/$1.json.tmp" "$SPECS/$1.json"
}

case "${1:-}" in
  start)
    name="${2:?job name}"
    fetch "$name" || { echo "gpu-cluster-jobs: cannot read job $name" >&2; exit 1; }
    if [ "$(spec_field "$SPECS/$name.json" state)" != "active" ]; then
      echo "gpu-cluster-jobs: job $name is not active; not started" >&2
      exit 0
    fi
    # the job's output, shipped by the CloudWatch agent (gpu-cluster-gpu-metrics)
    install -d -m 0755 -o "$JOB_USER" "$R$JOB_LOG_DIR" || exit 1
    systemctl start --no-block "gpu-cluster-job@$name.service"
    ;;
  stop)
    name="${2:?job name}"
    systemctl stop "gpu-cluster-job@$name.service"
    report "$name" cancelled
    ;;
  boot)
    # only a node that passed its health check takes work; and after discovery: torchrun
    # needs the node list (gpu-cluster-nodes writes it)
    health=$(cat "$ETC/health" 2>/dev/null || echo unknown)
    if [ ! -e "$RUN/health-checked" ] || [ "${health%%:*}" = failed ] \
      || [ "${health%%:*}" = rebooting ]; then
      echo "gpu-cluster-jobs: this boot's health check has not passed ($health); no job" \
        "started" >&2
      exit 0
    fi
    for _ in $(seq 1 180); do [ -r "$ETC/torchrun.env" ] && break; sleep 10; done
    names=$(aws ssm get-parameters-by-path --region "$REGION" --path "$JOBS" --with-decryption \
      --query 'Parameters[].Name' --output text) || exit 1
    for parameter in $names; do
      name="${parameter#"$JOBS/"}"
      case "$name" in */*) continue ;; esac  # a node's report, not a job
      "$0" start "$name"
    done
    ;;
  run)
    name="${2:?job name}"
    spec="$SPECS/$name.json"
    restarts=$(spec_field "$spec" maxRestarts)
    nodes=$(spec_field "$spec" nodes)
    command=$(spec_field "$spec" command)
    set -a
    eval "$(spec_field "$spec" env)"
    set +a
    # the checkpoint contract (README, "Running a job"): write to GPUC_CHECKPOINT_URI (FSx's
    # folder when mounted), checkpoint at once on SIGUSR1 or when $RUN/checkpoint-now appears
    export GPUC_JOB="$name" GPUC_CHECKPOINT_URI="s3://$DATA_BUCKET/checkpoints/$name/"
    if mountpoint -q "$LUSTRE_MOUNT" 2>/dev/null; then
      export GPUC_CHECKPOINT_URI="$LUSTRE_MOUNT/checkpoints/$name"
    fi
    report "$name" running
    # elastic: any number of nodes from 1 to the size it started at rejoins the rendezvous
    eval "set -- $command"
    # torchrun runs a Python script itself; anything else it starts as a program per worker
    case "${1:-}" in
      python | python3) shift ;;
      *.py) ;;
      *) set -- --no-python "$@" ;;
    esac
    # every line prefixed with the job's name: `gpuc logs --job NAME` finds its lines in the
    # node's stream
    GPUC_NNODES="1:${nodes:-1}" "$R/usr/local/bin/gpuc-torchrun" --max-restarts="${restarts:-3}" \
      "$@" 2>&1 | sed -u "s/^/[$name] /" >> "$R$JOB_LOG_DIR/$name.log"
    status=${PIPESTATUS[0]}
    if [ "$status" -eq 0 ]; then
      report "$name" "done"
    else
      report "$name" failed "exit $status"
    fi
    exit "$status"
    ;;
  *)
    echo "usage: gpu-cluster-jobs boot | start NAME | stop NAME | run NAME" >&2
    exit 2
    ;;
esac
