#!/bin/bash
# gpu-cluster: the stack's training jobs on this node (`gpuc run` stores each job's spec in SSM
# Parameter Store under $CLUSTER and sends `gpu-cluster-jobs start NAME` to every node).
#   gpu-cluster-jobs boot        start every active job (a node that joins later, a reboot)
#   gpu-cluster-jobs start NAME  read the spec, start gpu-cluster-job@NAME (a unit of its own)
#   gpu-cluster-jobs stop NAME   stop it
#   gpu-cluster-jobs run NAME    the unit's command: gpuc-torchrun with the job's restarts,
#                again on the nodes left when the rendezvous host is lost
#   gpu-cluster-jobs checkpoint NOTICE  "checkpoint now": NOTICE (JSON: action, time) written to
#                $RUN/checkpoint-now (GPUC_CHECKPOINT_FILE), and SIGUSR1 to each training
#                worker that handles it: a process torchrun started (TORCHELASTIC_RUN_ID in its
#                environment, its parent - not init - without it) with a SIGUSR1 handler (SigCgt
#                in /proc/PID/status; SIGUSR1's default action terminates, so a job that only
#                polls the file is not killed). Processes the workers start themselves
#                (DataLoader workers) and the agent get nothing. Sent by the spot watcher on the
#                two-minute notice and by the stack's schedule before a planned stop.
# Each node reports its state to .../jobs/NAME/nodes/<instance id> (running, done, failed).
# The rendezvous (torch's c10d store) lives in the agent of one node, the host; PyTorch has no
# failover for it (torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py: only the
# host serves). So each run of a job picks its host afresh: the oldest node EC2 lists as running
# and not failed, the same answer on every node. When torchrun exits because the store went
# away (RendezvousConnectionError: the host was lost), the survivors pick the next host and
# start torchrun again: the job resumes from its last checkpoint on the nodes it has. A job's
# rendezvous id is NAME-RUN and its port is its own (`gpuc run` assigns one per active job), so
# two jobs never join each other's rendezvous. A run that ends (done, failed) is recorded on the
# node ($STATE/jobs, the root disk) and in its report: no reboot, resume or replacement runs it
# again.
set -uo pipefail
export STEP=jobs
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
# shellcheck source=gpu-cluster-job-code.sh
. "$R/usr/local/lib/gpu-cluster/job-code.sh"
JOBS=$JOBS_PATH
SPECS="$ETC/jobs"

spec_field() {  # spec_field FILE FIELD: one field of a job spec, shell-quoted lists joined
  python3 - "$1" "$2" "$ETC/cluster.env" <<'PY'
import json, re, shlex, sys
spec = json.load(open(sys.argv[1]))
value = spec.get(sys.argv[2])
if isinstance(value, list):
    print(" ".join(shlex.quote(str(v)) for v in value))
elif isinstance(value, dict):  # environment to eval: never the nodes own (infra/aws/jobs.py)
    own = {line.split("=", 1)[0] for line in open(sys.argv[3]) if "=" in line}
    own |= {"R", "ETC", "RUN", "STATE", "IMDS", "JOBS", "SPECS", "PROC", "STEP", "PATH", "HOME",
            "USER", "LOGNAME", "SHELL", "IFS"}
    def allowed(k):
        return bool(re.fullmatch("[A-Z_][A-Z0-9_]*", k)) and k not in own and (
            k in ("GPUC_ALLOW_SLOW_NETWORK", "GPUC_RDZV_CONF") or not k.startswith(("AWS_", "GPUC_", "TORCHELASTIC_")))
    names = [k for k in sorted(value) if allowed(k)]
    print("\n".join(f"{k}={shlex.quote(str(value[k]))}" for k in names))
else:
    print("" if value is None else value)
PY
}

report() {  # report NAME STATE [DETAIL [RESTARTS]]: this nodes state of this run of a job
  local id value
  id=$(imds instance-id) || return 0
  value=$(python3 - "$2" "${3:-}" "${4:-0}" "$(spec_field "$SPECS/$1.json" run 2>/dev/null)" \
    "$(date -u +%FT%TZ)" <<'PY'
import json, sys
state, detail, restarts, run, updated = sys.argv[1:]
# lines cut in the middle of a character (cut -c counts bytes) read as U+FFFD, and SSM's
# standard tier takes 4 KB a value: the detail is cut to fit, in bytes
detail = detail.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
while True:
    value = json.dumps({"state": state, "detail": detail, "restarts": int(restarts or 0),
                        "run": run, "updated": updated}, ensure_ascii=False)
    if len(value.encode()) <= 3500:
        break
    detail = detail[: len(detail) * 3 // 4] + "..."
print(value)
PY
) || return 0
  aws ssm put-parameter --region "$REGION" --name "$JOBS/$1/nodes/$id" --type String --overwrite \
    --value "$value" >/dev/null || echo "gpu-cluster-jobs: could not report $1 $2" >&2
}

final_of() {  # final_of NAME: done or failed when this node finished this run of NAME
  local run
  run=$(spec_field "$SPECS/$1.json" run 2>/dev/null) || return 0
  awk -v run="$run" '$1 == run {print $2}' "$STATE/jobs/$1.final" 2>/dev/null
}

finished_elsewhere() {  # a nodes report says this run is done: the job is over
  aws ssm get-parameters-by-path --region "$REGION" --path "$JOBS/$1/nodes" --output text \
    --query 'Parameters[].Value' | grep -q "\"state\": \"done\", .*\"run\": \"$2\""
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

# rendezvous_host: "INSTANCE-ID IP" of the oldest node of this cluster (and VPC) that EC2 lists
# as pending or running and whose health tag does not say failed: the same on every node. A
# node of another stack with this cluster name (its stack-id tag) is not one of ours; a node
# launched before the tag existed ("None") is.
rendezvous_host() {
  local mac vpc
  mac=$(imds mac) && vpc=$(imds "network/interfaces/macs/$mac/vpc-id") || return 1
  aws ec2 describe-instances --region "$REGION" --output text \
    --filters "Name=tag:{{CLUSTER_TAG}},Values=$CLUSTER" "Name=vpc-id,Values=$vpc" \
      "Name=instance-state-name,Values=pending,running" \
    --query 'Reservations[].Instances[].[LaunchTime,InstanceId,PrivateIpAddress,Tags[?Key==`{{STACK_ID_TAG}}`]|[0].Value,Tags[?Key==`gpu-cluster:health`]|[0].Value]' \
    | sort | awk -v id="$STACK_ID" '($4 == id || $4 == "None") && $5 !~ /^failed/ {print $2, $3; exit}'
}

# rank_addr ID ADDRESS: what torchrun's --local_addr is: c10d ranks nodes in sorted order of it
# (torch/distributed/elastic/rendezvous/dynamic_rendezvous.py: enumerate(sorted(participants)),
# a participant ordered by its address first), so this node's name from $ETC/topology (its EC2
# node set; gpu-cluster-nodes) puts it beside the nodes under its network node. Rank 0 publishes
# its address as the workers' MASTER_ADDR: the first node of the list keeps its IP, which sorts
# before every name and resolves everywhere. No topology: the IP, as before.
rank_addr() {
  local name
  name=$(awk -v id="$1" '$3 == id {print $1}' "$ETC/topology" 2>/dev/null)
  if [ -z "$name" ]; then
    log "no EC2 topology for $1: ranks follow the addresses"
    echo "$2"
  elif [ "$(awk 'NR == 1 {print $3}' "$ETC/topology")" = "$1" ]; then echo "$2"
  else echo "$name"; fi
}

# The job's output, each line prefixed with its name (`gpuc logs --job NAME` finds its lines in
# the node's stream), and NCCL's choice of network checked as it is printed (NCCL_DEBUG=INFO):
# "Using network Socket" (NVIDIA/nccl src/init.cc), a libfabric provider other than efa, or
# fewer NICs than the node's EFA interfaces ("NET/OFI Selected provider is efa, fabric is ...
# (found N nics)", aws-ofi-nccl src/nccl_ofi_net.cpp: one per EFA device, and the launch template
# attaches EFA_INTERFACES of them, one per EFA card: p5 32, p5en 16, p6-b200 8) stop the job unless
# GPUC_ALLOW_SLOW_NETWORK=1: the reason goes to the file VERDICT, and `run` stops torchrun
# (SIGTERM: it stops its workers).
# torchrun's own lines tell two more things: the store went away (RendezvousConnectionError,
# from torch's c10d backend, with no worker failure: the host is lost) into the file LOST, and
# each restart of the workers ("Worker group FAILED. 3/3 attempts left; will restart", torch
# elastic agent, LOGLEVEL=INFO) counted into RESTARTS.
watch_output() {  # watch_output NAME VERDICT LOST RESTARTS
  local awk=(awk)  # mawk (Ubuntus awk) reads a pipe in blocks unless interactive
  command -v mawk >/dev/null && awk=(mawk -W interactive)
  "${awk[@]}" -v job="$1" -v verdict="$2" -v lost="$3" -v seen="$4" \
    -v rails="${EFA_INTERFACES:-0}" -v allow="${GPUC_ALLOW_SLOW_NETWORK:-0}" '
    function slow(why) {
      if (told++) return
      if (allow == "1") {
        print "[" job "] gpu-cluster: warning: slow network: " why; fflush(); return
      }
      print "[" job "] gpu-cluster: stopped: slow network: " why " (gpuc jobs says why;" \
        " GPUC_ALLOW_SLOW_NETWORK=1 runs anyway)"
      fflush()
      print why > verdict
      close(verdict)
    }
    { print "[" job "] " $0; fflush() }
    /attempts left; will restart worker group/ { n++; print n > seen; close(seen) }
    /RendezvousConnectionError|RendezvousTimeoutError/ && !child { print > lost; close(lost) }
    /ChildFailedError/ { child = 1; printf "" > lost; close(lost) }
    rails > 0 && /NCCL INFO Using network Socket/ { slow("NCCL uses TCP sockets, not EFA") }
    rails > 0 && /NET\/OFI Selected [Pp]rovider is / {
      provider = $0; sub(/.*Selected [Pp]rovider is /, "", provider); sub(/[, ].*/, "", provider)
      found = $0; sub(/.*\(found /, "", found); sub(/ nics\).*/, "", found)
      if (provider !~ /^efa/) slow("libfabric provider " provider ", not efa")
      else if (found + 0 < rails + 0) slow("NCCL found " found " of " rails " EFA NICs")
    }'
}

case "${1:-}" in
  checkpoint)
    printf '%s\n' "${2:?notice}" > "$RUN/checkpoint-now"
    log "checkpoint now: $2"
    for pid in $(training_workers); do
      kill -USR1 "$pid" 2>/dev/null && log "sent SIGUSR1 to training worker $pid"
    done
    ;;
  start)
    name="${2:?job name}"
    health=$(cat "$ETC/health" 2>/dev/null || echo unknown)
    if [ "${health%%:*}" = failed ]; then
      echo "gpu-cluster-jobs: this node failed its health check ($health); $name not started" >&2
      exit 1
    fi
    fetch "$name" || { echo "gpu-cluster-jobs: cannot read job $name" >&2; exit 1; }
    if [ "$(spec_field "$SPECS/$name.json" state)" != "active" ]; then
      echo "gpu-cluster-jobs: job $name is not active; not started" >&2
      exit 0
    fi
    run=$(spec_field "$SPECS/$name.json" run)
    done_here=$(final_of "$name")
    if [ -n "$done_here" ] || finished_elsewhere "$name" "$run"; then
      echo "gpu-cluster-jobs: job $name (run $run) has finished (${done_here:-done}); not" \
        "started again (gpuc run starts a new run)" >&2
      exit 0
    fi
    # a job in a container: the job user talks to the Docker daemon (docker's group; systemd
    # gives a unit its User='s groups as they are when it starts)
    if [ -n "$(spec_get "$SPECS/$name.json" image)" ] \
      && ! id -nG "$JOB_USER" | tr ' ' '\n' | grep -qx docker; then
      usermod -aG docker "$JOB_USER" || log "cannot add $JOB_USER to the docker group"
    fi
    # the job's output, shipped by the CloudWatch agent (gpu-cluster-gpu-metrics), and the
    # record of the runs that ended here
    install -d -m 0755 -o "$JOB_USER" "$R$JOB_LOG_DIR" "$STATE/jobs" || exit 1
    rm -f "$RUN/checkpoint-now"  # an earlier notice is not this run's
    systemctl start --no-block "gpu-cluster-job@$name.service"
    ;;
  stop)
    name="${2:?job name}"
    systemctl stop "gpu-cluster-job@$name.service"
    systemctl reset-failed "gpu-cluster-job@$name.service" 2>/dev/null
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
    # as long as the first boot's wait for the gang, and 15 minutes more
    for _ in $(seq 1 $(( (${GANG_TIMEOUT:-0} > 900 ? GANG_TIMEOUT : 900) / 10 + 90 ))); do
      [ -r "$ETC/torchrun.env" ] && break
      sleep "${GPUC_POLL_SECONDS:-10}"
    done
    [ -r "$ETC/torchrun.env" ] || { log "no node list after the wait; no job started"; exit 1; }
    names=$(aws ssm get-parameters-by-path --region "$REGION" --path "$JOBS" --with-decryption \
      --query 'Parameters[].Name' --output text) || exit 1
    for parameter in $names; do
      name="${parameter#"$JOBS/"}"
      case "$name" in */*) continue ;; esac  # a nodes report, not a job
      "$0" start "$name"
    done
    ;;
  run)
    name="${2:?job name}"
    spec="$SPECS/$name.json"
    restarts=$(spec_field "$spec" maxRestarts)
    nodes=$(spec_field "$spec" nodes)
    command=$(spec_field "$spec" command)
    run=$(spec_field "$spec" run)
    port=$(spec_field "$spec" port)
    set -a
    eval "$(spec_field "$spec" env)"
    set +a
    # the checkpoint contract (README, "Running a job"): write to GPUC_CHECKPOINT_URI (FSx's
    # folder when mounted), checkpoint at once on SIGUSR1 or when $RUN/checkpoint-now appears
    # and the node's region for the job's own AWS calls (boto3, the CLI)
    export GPUC_JOB="$name" GPUC_CHECKPOINT_URI="s3://$DATA_BUCKET/checkpoints/$name/" \
      AWS_DEFAULT_REGION="$REGION"
    if mountpoint -q "$LUSTRE_MOUNT" 2>/dev/null; then
      export GPUC_CHECKPOINT_URI="$LUSTRE_MOUNT/checkpoints/$name"
    fi
    eval "set -- $command"
    log_file="$R$JOB_LOG_DIR/$name.log"
    # its code, dependencies and image, before this node joins the rendezvous (job-code.sh)
    failed_here() {
      echo "[$name] gpu-cluster: $1" >> "$log_file"
      echo "$run failed" >> "$STATE/jobs/$name.final"
      report "$name" failed "$1"
      exit 1
    }
    job_code "$name" "$spec" || failed_here "$JOB_ERROR"
    [ -z "$JOB_DIR" ] || cd "$JOB_DIR" || failed_here "cannot enter $JOB_DIR"
    LAUNCH=("$R/usr/local/bin/gpuc-torchrun")
    if [ -n "$(spec_get "$spec" image)" ]; then
      job_image "$name" "$spec" "$log_file" || failed_here "$JOB_ERROR"
      container_setup "$name" "$spec" "${JOB_DIR:-$PWD}" "$log_file" || failed_here "$JOB_ERROR"
      # what the container gets of this script's environment: the rendezvous, the checkpoint
      # contract, the job's own variables, NCCL's and torchrun's logging
      mapfile -t passed < <(spec_field "$spec" env | sed 's/=.*//')
      container_launcher "$name" "${JOB_DIR:-$PWD}" GPUC_NNODES GPUC_RDZV_ID GPUC_RDZV_ENDPOINT \
        GPUC_RDZV_HOST GPUC_LOCAL_ADDR GPUC_JOB GPUC_CHECKPOINT_URI NCCL_DEBUG LOGLEVEL \
        AWS_DEFAULT_REGION \
        ${passed[@]+"${passed[@]}"}
    else
      job_venv "$name" "$spec" "${JOB_DIR:-$PWD}" "$log_file" || failed_here "$JOB_ERROR"
    fi
    # torchrun runs a Python script itself, with `python -u` (torch.distributed.run); `-m
    # MODULE` is its own option; other interpreter options need the command as given
    case "${1:-}" in
      python | python3)
        shift
        [ "${1:-}" = -u ] && shift
        # (in a container: the image's python3, not this node's)
        case "${1:-}" in
          -m) ;;
          -*) set -- --no-python "$([ "${LAUNCH[0]}" = docker ] && echo python3 \
            || command -v python3)" "$@" ;;
        esac ;;
      *.py) ;;
      *) set -- --no-python "$@" ;;
    esac
    export NCCL_DEBUG="${NCCL_DEBUG:-INFO}"  # what the network check reads
    [ "$NCCL_DEBUG" = INFO ] || [ "$NCCL_DEBUG" = TRACE ] \
      || log "NCCL_DEBUG=$NCCL_DEBUG: NCCL does not say which network it uses; not checked"
    # torchrun's agent says when it restarts the workers ("N/M attempts left") at INFO
    export LOGLEVEL="${LOGLEVEL:-INFO}"
    verdict="$R$JOB_LOG_DIR/.$name.slow-network" seen="$R$JOB_LOG_DIR/.$name.restarts"
    rm -f "$verdict" "$seen"
    self=$(imds instance-id) && address=$(imds local-ipv4) \
      || { report "$name" failed "no instance id or address from IMDS"; exit 1; }
    stopping="" torchrun="" reforms=0
    # systemctl stop (KillMode=mixed: SIGTERM to this script only): report first (the unit's
    # stop timeout kills what is left), then torchrun stops its workers
    # shellcheck disable=SC2329  # the TERM trap calls it
    on_stop() {
      stopping=1
      report "$name" stopped "the node or the job's unit was stopped" \
        "$(cat "$seen" 2>/dev/null || echo 0)"
      [ -z "$torchrun" ] || kill -TERM "$torchrun" 2>/dev/null
    }
    trap on_stop TERM
    while :; do
      host=$(rendezvous_host) || host=""
      if [ -z "$host" ]; then
        log "no rendezvous host from EC2; trying again"
        sleep 30
        continue
      fi
      lost="$R$JOB_LOG_DIR/.$name.lost"
      rm -f "$lost"
      report "$name" running "rendezvous ${host#* }" "$(cat "$seen" 2>/dev/null || echo 0)"
      # the filter is this script's child (a process substitution on the command itself
      # would be torchrun's), so its last lines are waited for; it ignores SIGTERM
      exec {out}> >(trap '' TERM; watch_output "$name" "$verdict" "$lost" "$seen" \
        >> "$log_file")
      watcher=$!
      # a container of an earlier run still there (its unit killed): gone before this one starts
      [ "${LAUNCH[0]}" != docker ] || docker rm -f "gpuc-job-$name" >/dev/null 2>&1
      GPUC_NNODES="1:${nodes:-1}" GPUC_RDZV_ID="$name-$run" \
        GPUC_RDZV_ENDPOINT="${host#* }:${port:-{{RENDEZVOUS_PORT}}}" \
        GPUC_RDZV_HOST=$([ "${host%% *}" = "$self" ] && echo 1 || echo 0) \
        GPUC_LOCAL_ADDR="$(rank_addr "$self" "$address")" \
        "${LAUNCH[@]}" --max-restarts="${restarts:-3}" "$@" >&"$out" 2>&1 &
      torchrun=$!
      exec {out}>&-
      while kill -0 "$torchrun" 2>/dev/null; do
        [ -s "$verdict" ] && { kill -TERM "$torchrun"; break; }
        sleep 1
      done
      wait "$torchrun"
      status=$?
      # a stop's trap interrupts wait: torchrun is still stopping its workers (they may be
      # checkpointing on SIGTERM), so wait for it before anything is cleaned up
      while [ -n "$stopping" ] && kill -0 "$torchrun" 2>/dev/null; do wait "$torchrun"; done
      torchrun=""
      # workers torchrun left behind (its agent died with the store) would train on: every
      # process of this unit's run of the job goes (systemd's INVOCATION_ID marks the unit)
      for signal in TERM KILL; do
        pids=$(grep -lzx "INVOCATION_ID=${INVOCATION_ID:-none}" "$PROC"/[0-9]*/environ \
          2>/dev/null | xargs -r grep -lzx "GPUC_JOB=$name" 2>/dev/null \
          | sed 's#.*/\([0-9]*\)/environ#\1#')
        [ -z "$pids" ] && break
        # shellcheck disable=SC2086  # a list of pids
        kill -"$signal" $pids 2>/dev/null
        sleep 2
      done
      # a container outlives its docker client when the client is killed
      [ "${LAUNCH[0]}" != docker ] || docker rm -f "gpuc-job-$name" >/dev/null 2>&1
      # a process the job left behind may hold the output open: the filter gets 10 s
      for _ in $(seq 1 10); do kill -0 "$watcher" 2>/dev/null || break; sleep 1; done
      kill "$watcher" 2>/dev/null
      [ -n "$stopping" ] && exit 0
      if [ "$status" -ne 0 ] && [ -s "$lost" ] && [ ! -s "$verdict" ] \
        && [ "$reforms" -lt "${GPUC_MAX_REFORMS:-20}" ]; then
        reforms=$((reforms + 1))
        log "$name: the rendezvous at ${host#* } went away ($(head -1 "$lost")); re-forming" \
          "on the nodes left ($reforms)"
        sleep 5
        continue
      fi
      break
    done
    count=$(cat "$seen" 2>/dev/null || echo 0)
    if [ -s "$verdict" ]; then
      outcome=failed detail="slow network: $(cat "$verdict")"
    elif [ "$status" -eq 0 ]; then
      outcome="done" detail=""
    else
      outcome=failed detail="exit $status"
    fi
    echo "$run $outcome" >> "$STATE/jobs/$name.final"
    report "$name" "$outcome" "$detail" "$count"
    exit "$status"
    ;;
  *)
    echo "usage: gpu-cluster-jobs boot | start NAME | stop NAME | run NAME | checkpoint NOTICE" >&2
    exit 2
    ;;
esac
