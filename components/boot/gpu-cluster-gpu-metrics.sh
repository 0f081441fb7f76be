#!/bin/bash
# gpu-cluster: the CloudWatch agent's GPU (and EFA) metrics in the gpu-cluster namespace
# (nvidia_smi_<measurement>, efa_<measurement>), rolled up per node, stack and Auto Scaling
# group every minute, and the node's logs shipped. Installs the agent from AWS's regional
# bucket (through the VPC's S3 gateway endpoint) unless the AMI has it, waiting for the dpkg
# lock. Runs at every boot; a failure fails the unit (systemd retries it) and the health status says
# "degraded:gpu-metrics".
#   --activity  (a timer, every minute) the idle stop's own metric, gpu-cluster/Activity: the
#               busiest GPU's utilization, or 100 while a job unit runs (a job staging data at
#               0% GPU is not idle), per instance (the dev box's alarm: EC2's stop action wants
#               an InstanceId dimension) and per cluster and stack (a group's alarm); put with
#               the AWS CLI, so it does not depend on the agent. No readable GPU counts as idle
#               (such a node fails its health check anyway).
set -uo pipefail
export STEP=gpu-metrics
# shellcheck source=/dev/null
. "${GPUC_ROOT:-}/usr/local/lib/gpu-cluster/lib.sh"
if [ "${1:-}" = --activity ]; then
  value=$(timeout 30 nvidia-smi --query-gpu=utilization.gpu --format=csv,noheader,nounits \
    | awk '$1 ~ /^[0-9]+$/ && $1 > max {max = $1} END {print max + 0}')
  systemctl list-units 'gpu-cluster-job@*' --state=active --no-legend | grep -q . && value=100
  self=$(imds instance-id) || exit 1
  data="MetricName=Activity,Unit=Percent,Value=$value,Dimensions=[{Name="
  aws cloudwatch put-metric-data --region "$REGION" --namespace gpu-cluster --metric-data \
    "${data}InstanceId,Value=$self}]" "${data}Cluster,Value=$CLUSTER},{Name=Stack,Value=$STACK}]"
  exit
fi
AGENT_DIR="$R/opt/aws/amazon-cloudwatch-agent"
CTL="$AGENT_DIR/bin/amazon-cloudwatch-agent-ctl"
fail() { log "$1"; step_result "failed: $1"; exit 1; }  # the unit retries; health says degraded
install_agent() {  # the regional latest package, through the S3 gateway endpoint
  local arch package url
  arch="$(dpkg --print-architecture)"
  package="$(mktemp -d)/amazon-cloudwatch-agent.deb"
  url="https://amazoncloudwatch-agent-$REGION.s3.$REGION.amazonaws.com/ubuntu/$arch/latest/amazon-cloudwatch-agent.deb"
  download "$url" "$package" || { log "could not download the CloudWatch agent from $url"; return 1; }
  apt_run install "$package" || { log "could not install the CloudWatch agent (see apt-get above)"; return 1; }
  rm -rf "$(dirname "$package")"
}
# an agent older than the first that collects EFA on EC2 takes the efa section and collects
# nothing (components/data/cloudwatch_agent_measurements.json): an EFA node upgrades it; the
# GPU metrics go on with the old one when the upgrade cannot be had
older_than() { [ "$(printf '%s\n' "$1" "$2" | sort -V | head -n1)" != "$2" ]; }
if [ ! -x "$CTL" ]; then
  install_agent || fail "the CloudWatch agent could not be installed: no GPU metrics"
elif grep -q '"efa"' "$R/usr/local/lib/gpu-cluster/cloudwatch-agent.json" 2>/dev/null; then
  have=$(cat "$AGENT_DIR/bin/CWAGENT_VERSION" 2>/dev/null || echo 0)
  if older_than "$have" "{{EFA_AGENT_VERSION}}"; then
    log "the AMI's CloudWatch agent $have collects no EFA metrics (from {{EFA_AGENT_VERSION}}): upgrading"
    install_agent || log "CloudWatch agent $have kept: GPU metrics only, no EFA metrics"
  fi
fi
# This stack's profile (components/cloudwatch_agent.py renders it into the user data): the
# documented GPU measurements (and EFA's on an EFA node) rolled up per node, stack and group
# with the per-GPU series dropped, and the units' log lines (and a training node's job output)
# shipped to the stack's log groups.
config="$AGENT_DIR/etc/gpu-cluster.json"
mkdir -p "$(dirname "$config")" "$R/var/log/gpu-cluster"
cp "$R/usr/local/lib/gpu-cluster/cloudwatch-agent.json" "$config" \
  || fail "no CloudWatch agent profile in the user data"
# An inference node also sends the model server's Prometheus metrics (Triton's requests,
# failures, queue and compute time per model) to CloudWatch as embedded metric format logs,
# and its queue and success counters per Auto Scaling group too: the queueTime scaling policy
# divides one by the other (components/serving_group.py). The agent sends a counter as its
# delta since the last scrape. The group's name is a label of the scrape: without it the
# step fails (and is retried), as the node's queue would count for no group.
if [ -n "${MODEL_METRICS_PORT:-}" ]; then
  self=$(imds instance-id) || fail "no instance id from IMDS"
  group=$(aws autoscaling describe-auto-scaling-instances --region "$REGION" --instance-ids "$self" \
    --query 'AutoScalingInstances[0].AutoScalingGroupName' --output text) || group=""
  [ -n "$group" ] && [ "$group" != None ] || fail "could not look up this node's group"
  cat > "$AGENT_DIR/etc/prometheus.yaml" <<YAML
global:
  scrape_interval: 1m
scrape_configs:
  - job_name: model-server
    static_configs:
      - targets: ["localhost:$MODEL_METRICS_PORT"]
        labels: {AutoScalingGroupName: "$group"}
YAML
fi
"$CTL" -a fetch-config -m ec2 -s -c "file:$config" || fail "the CloudWatch agent did not start"
step_result ok
log "publishing GPU metrics and shipping the node's logs"
