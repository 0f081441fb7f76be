#!/bin/bash
# gpu-cluster: sourced by every boot step. Paths (all under $GPUC_ROOT, which only the tests
# set), logging, IMDSv2 with bounded retries, AWS CLI retries, apt with the dpkg lock.
# shellcheck disable=SC2034  # the paths are used by the steps that source this file
R="${GPUC_ROOT:-}"
ETC="$R/etc/gpu-cluster"       # cluster.env, nodes, torchrun.env, health (root disk)
RUN="$R/run/gpu-cluster"       # tmpfs: notices, secrets, this boots step results
STATE="$R/var/lib/gpu-cluster" # root disk: survives reboots and stop/start
NODE_LOG="$R/var/log/gpu-cluster/node.log" # log lines, for the CloudWatch agent
IMDS="${GPUC_IMDS:-http://169.254.169.254}"
# shellcheck source=/dev/null
[ -r "$ETC/cluster.env" ] && . "$ETC/cluster.env"
mkdir -p "$RUN" "$STATE" "${NODE_LOG%/*}" 2>/dev/null || true
# AWS CLI v2: standard retry mode (throttling, 5xx, connection errors), and every call bounded
# (the CLI's defaults are 60 s to connect and 60 s per read, for each of its attempts).
export AWS_RETRY_MODE=standard AWS_MAX_ATTEMPTS="${AWS_MAX_ATTEMPTS:-6}"
# The instance profile's credentials come from IMDS, which the CLI asks once with a 1 s timeout
# by default (botocore: metadata_service_timeout 1, metadata_service_num_attempts 1): a busy
# IMDS would leave every call without credentials.
export AWS_METADATA_SERVICE_TIMEOUT=5 AWS_METADATA_SERVICE_NUM_ATTEMPTS=3
aws() { command aws "$@" --cli-connect-timeout 5 --cli-read-timeout 30; }
# A line to the unit's stderr (journald) and to the node log (NODE_LOG), which the CloudWatch
# agent ships to the stack's node log group where metric filters count them
# (components/log_metrics.py); a process that may not write there logs to journald only.
log() {
  echo "gpu-cluster ${STEP:-boot}: $*" >&2
  echo "$(date -u +%FT%TZ) gpu-cluster ${STEP:-boot}: $*" 2>/dev/null >> "$NODE_LOG" || true
}
pause() { sleep "$(( ${GPUC_RETRY_DELAY:-5} * $1 ))"; }

# One IMDSv2 read. 0 and the value on 200; 4 when IMDS answers 404 (the item does not exist,
# e.g. no spot notice); 1 on anything else (no token, 401, 5xx, no answer). curl's default
# connect timeout is 300 s: every call here is bounded.
imds_get() {
  local token reply code
  token=$(curl -fsS --connect-timeout 2 --max-time 5 -X PUT "$IMDS/latest/api/token" \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 300' 2>/dev/null) || return 1
  [ -n "$token" ] || return 1
  # the body and, on its own last line, the status: no temporary file (a full disk is not
  # "no answer")
  reply=$(curl -sS --connect-timeout 2 --max-time 5 -w '\n%{http_code}' \
    -H "X-aws-ec2-metadata-token: $token" "$IMDS/latest/meta-data/$1" 2>/dev/null) \
    || reply=$'\n000'
  code=${reply##*$'\n'}
  case $code in
    200) printf '%s\n' "${reply%$'\n'*}"; return 0 ;;
    404) return 4 ;;
    *) return 1 ;;
  esac
}

# An IMDS value that must exist: retried with a fresh token (5 tries, ~1 min at most).
imds() {
  local attempt rc
  for attempt in 1 2 3 4 5; do
    imds_get "$1" && return 0
    rc=$?
    [ "$rc" -eq 4 ] && { log "instance metadata has no $1"; return 4; }
    [ "$attempt" -lt 5 ] && pause 1
  done
  log "instance metadata $1: no answer after 5 tries"
  return 1
}

# apt-get that waits for the dpkg lock (unattended-upgrades and apt-daily hold it on first
# boot; apt >= 1.9.11 waits with DPkg::Lock::Timeout) and retries what still fails.
apt_run() {
  local attempt
  for attempt in 1 2 3 4 5; do
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 -q -y "$@" && return 0
    log "apt-get $* failed (try $attempt of 5)"
    [ "$attempt" -lt 5 ] && pause "$attempt"
  done
  return 1
}

# download URL FILE [SECONDS]: a file from outside the node, bounded and retried ("-": stdout).
download() {
  curl -fsSL --connect-timeout 10 --max-time "${3:-300}" --retry 5 -o "$2" "$1"
}

# Record this step's result for the health check: ok, or failed and why.
step_result() { printf '%s\n' "$1" > "$RUN/step-${STEP:-boot}"; }
# step_state NAME: what step NAME recorded this boot ("pending" until it has run).
step_state() { cat "$RUN/step-$1" 2>/dev/null || echo pending; }

# own_group ID: the Auto Scaling group of instance ID ("" when it is in none); 1 when EC2
# cannot be asked (a failed lookup is not "not in a group").
own_group() {
  local group
  group=$(aws ec2 describe-instances --region "$REGION" --instance-ids "$1" \
    --query 'Reservations[0].Instances[0].Tags[?Key==`aws:autoscaling:groupName`]|[0].Value' \
    --output text) || return 1
  [ "$group" = None ] && group=""
  printf '%s\n' "$group"
}
