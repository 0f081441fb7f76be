#!/bin/bash
# gpu-cluster: the model server. Copies the model repository from the data bucket (through the
# S3 gateway endpoint) to NVMe scratch, turns Triton's dynamic batching on in every model's
# config.pbtxt with the stack's preferred batch sizes and queue delay, runs the server container
# (Docker and the NVIDIA container toolkit come with the Deep Learning AMI) under systemd, waits
# until its readiness endpoint answers, then lets the Auto Scaling group put the node in
# service (the launch lifecycle hook held it out of the load balancer and safe from scale-in).
# The hook's heartbeat timeout is the warm-up budget: from the start, a heartbeat a minute
# keeps it open through the copy, the image pull and the server's start; any failure
# abandons the launch at once instead of waiting for the timeout.
# The group launches nodes protected from scale-in (a node that is still loading its model is
# never the one a scale-in or the schedule's stop picks); once the node is in service it lifts
# its own protection, and the group's default instance warm-up keeps dynamic scaling from
# scaling in until the warm-up has passed (EC2 Auto Scaling User Guide, "Set the default
# instance warmup"). Protection that cannot be lifted fails the step: the node serves, but
# would never be scaled in.
set -uo pipefail
export STEP=model-server
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
instance="$(imds instance-id)" || { log "no instance id from IMDS"; exit 1; }
group="$(aws autoscaling describe-auto-scaling-instances --region "$REGION" --instance-ids "$instance" \
  --query 'AutoScalingInstances[0].AutoScalingGroupName' --output text)" \
  || { log "could not look up this node's group"; group=""; }
[ "$group" = None ] && group=""  # not launched by a group (or no longer in one)
hook() {  # hook ACTION [ARGS]: the launch lifecycle action of this node, when it has one
  [ -n "$group" ] || return 0
  aws autoscaling "$1" --region "$REGION" --auto-scaling-group-name "$group" \
    --lifecycle-hook-name "$LIFECYCLE_HOOK" --instance-id "$instance" "${@:2}" >/dev/null
}
give_up() {  # give_up WHY: abandon the launch now (the group replaces the node)
  log "$1"
  step_result "failed: $1"
  hook complete-lifecycle-action --lifecycle-action-result ABANDON || true
  exit 1
}
( while true; do hook record-lifecycle-action-heartbeat || true
    sleep "${GPUC_HEARTBEAT_SECONDS:-60}"; done ) &
keeper=$!
trap 'kill "$keeper" 2>/dev/null' EXIT
models="${MODELS_DIR:-$SCRATCH/models}"  # the path on the node (the container mounts it)
mkdir -p "$R$models"
aws s3 sync --only-show-errors --region "$REGION" "s3://$DATA_BUCKET/$MODEL_PREFIX" "$R$models" \
  || give_up "could not copy s3://$DATA_BUCKET/$MODEL_PREFIX"
if [ "$SERVER_KIND" = "triton" ]; then
  GPUC_BATCH_SIZES="$BATCH_SIZES" GPUC_QUEUE_DELAY_US="$QUEUE_DELAY_US" python3 - "$R$models" <<'PY'
import os
import pathlib
import re
import sys

sizes = ", ".join(os.environ["GPUC_BATCH_SIZES"].split(","))
block = (
    "dynamic_batching {\n"
    f"  preferred_batch_size: [ {sizes} ]\n"
    f"  max_queue_delay_microseconds: {os.environ['GPUC_QUEUE_DELAY_US']}\n"
    "}\n"
)


def without_dynamic_batching(text: str) -> str:
    match = re.search(r"\bdynamic_batching\s*\{", text)
    if match is None:
        return text
    depth, end = 0, match.end() - 1
    for end in range(match.end() - 1, len(text)):
        depth += {"{": 1, "}": -1}.get(text[end], 0)
        if depth == 0:
            break
    return without_dynamic_batching(text[: match.start()] + text[end + 1 :])


for config in pathlib.Path(sys.argv[1]).glob("*/config.pbtxt"):
    text = config.read_text()
    found = re.search(r"\bmax_batch_size\s*:\s*(\d+)", text)
    largest = int(found.group(1)) if found else 0
    if largest == 0 or re.search(r'\bplatform\s*:\s*"ensemble"', text):
        print(f"{config.parent.name}: no batching dimension or an ensemble; left as it is")
        continue
    wanted = [int(s) for s in os.environ["GPUC_BATCH_SIZES"].split(",")]
    fitting = [s for s in wanted if s <= largest] or [largest]
    model_block = block.replace(sizes, ", ".join(str(s) for s in fitting))
    text = without_dynamic_batching(text).rstrip("\n")
    config.write_text(f"{text}\n{model_block}")
    print(f"dynamic batching on for {config.parent.name}: {fitting}")
PY
  command=(tritonserver --model-repository=/models --http-port="$SERVER_PORT" --metrics-port=8002)
else
  command=(--model /models --port "$SERVER_PORT")
fi
read -r -a extra <<<"$SERVER_ARGS"
# Its own unit: this script runs inside the boot step's unit (gpu-cluster-model-server).
cat > "$R/etc/systemd/system/gpu-cluster-model-container.service" <<UNIT
[Unit]
Description=gpu-cluster: model server ($SERVER_IMAGE)
After=docker.service network-online.target
Wants=network-online.target
Requires=docker.service
[Service]
ExecStartPre=-/usr/bin/docker rm -f model-server
ExecStart=/usr/bin/docker run --rm --name model-server --gpus all --network host --shm-size 1g -v $models:/models $SERVER_IMAGE ${command[*]} ${extra[*]}
Restart=always
RestartSec=10
[Install]
WantedBy=multi-user.target
UNIT
systemctl daemon-reload
systemctl enable gpu-cluster-model-container.service
# The image (several GB for Triton or vLLM) is pulled before the warm-up clock starts.
pulled=""
for attempt in 1 2 3 4 5; do
  if timeout 1800 docker pull -q "$SERVER_IMAGE" >/dev/null; then
    pulled=yes
    break
  fi
  log "docker pull $SERVER_IMAGE failed (try $attempt of 5)"
  [ "$attempt" -lt 5 ] && pause "$attempt"
done
[ -n "$pulled" ] || give_up "could not pull $SERVER_IMAGE"
systemctl restart gpu-cluster-model-container.service
ready=""
for _ in $(seq 1 "$((WARMUP_SECONDS / 10))"); do
  if [ -n "$pulled" ] && curl -fsS --connect-timeout 2 --max-time 5 -o /dev/null \
    "http://127.0.0.1:$SERVER_PORT$READINESS_PATH"; then
    ready=yes
    break
  fi
  sleep 10
done
result=ABANDON
[ -n "$ready" ] && result=CONTINUE
log "readiness ${ready:-never answered}: $result"
hook complete-lifecycle-action --lifecycle-action-result "$result" \
  || log "could not complete the launch lifecycle action ($result)"
[ -n "$ready" ] || { step_result "failed: not ready in ${WARMUP_SECONDS}s"; exit 1; }
unprotected=""
for attempt in 1 2 3 4 5; do
  [ -n "$group" ] || { unprotected=yes; break; }
  if aws autoscaling set-instance-protection --region "$REGION" --auto-scaling-group-name "$group" \
    --instance-ids "$instance" --no-protected-from-scale-in >/dev/null; then
    unprotected=yes
    break
  fi
  log "could not lift this node's scale-in protection (try $attempt of 5)"
  [ "$attempt" -lt 5 ] && pause "$attempt"
done
[ -n "$unprotected" ] || { step_result "failed: scale-in protection not lifted"; exit 1; }
step_result ok
