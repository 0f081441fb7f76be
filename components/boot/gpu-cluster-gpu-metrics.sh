#!/bin/bash
# gpu-cluster: publish GPU utilization - the CloudWatch agent's NVIDIA GPU metrics
# (nvidia_smi_utilization_gpu) in the gpu-cluster namespace, rolled up per instance and per
# Auto Scaling group, every minute. Installs the agent from AWS's regional bucket (through
# the VPC's S3 gateway endpoint) unless the AMI has it, waiting for the dpkg lock. Runs at
# every boot; a failure fails the unit (systemd retries it) and the health status says
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
if [ ! -x "$CTL" ]; then
  arch="$(dpkg --print-architecture)"
  package="$(mktemp -d)/amazon-cloudwatch-agent.deb"
  url="https://amazoncloudwatch-agent-$REGION.s3.$REGION.amazonaws.com/ubuntu/$arch/latest/amazon-cloudwatch-agent.deb"
  download "$url" "$package" \
    || fail "could not download the CloudWatch agent from $url: no GPU metrics"
  apt_run install "$package" || fail "could not install the CloudWatch agent (see apt-get above)"
  rm -rf "$(dirname "$package")"
fi
config="$AGENT_DIR/etc/gpu-cluster.json"
mkdir -p "$(dirname "$config")"
cat > "$config" <<'JSON'
{
  "agent": {"metrics_collection_interval": 60, "run_as_user": "root"},
  "metrics": {
    "namespace": "gpu-cluster",
    "append_dimensions": {
      "InstanceId": "${aws:InstanceId}",
      "AutoScalingGroupName": "${aws:AutoScalingGroupName}"
    },
    "aggregation_dimensions": [["InstanceId"], ["AutoScalingGroupName"]],
    "metrics_collected": {
      "nvidia_gpu": {"measurement": ["utilization_gpu"], "metrics_collection_interval": 60}
    }
  }
}
JSON
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
  prometheus="$AGENT_DIR/etc/prometheus.yaml"
  cat > "$prometheus" <<YAML
global:
  scrape_interval: 1m
scrape_configs:
  - job_name: model-server
    static_configs:
      - targets: ["localhost:$MODEL_METRICS_PORT"]
        labels: {AutoScalingGroupName: "$group"}
YAML
  GPUC_CONFIG="$config" GPUC_PROMETHEUS="$prometheus" GPUC_LOG_GROUP="$MODEL_METRICS_LOG_GROUP" \
    python3 - <<'PY'
import json
import os

path = os.environ["GPUC_CONFIG"]
config = json.load(open(path))
config["logs"] = {
    "metrics_collected": {
        "prometheus": {
            "log_group_name": os.environ["GPUC_LOG_GROUP"],
            "prometheus_config_path": os.environ["GPUC_PROMETHEUS"],
            "emf_processor": {
                "metric_declaration_dedup": True,
                "metric_namespace": "gpu-cluster/ModelServer",
                "metric_declaration": [
                    {
                        "source_labels": ["job"],
                        "label_matcher": "^model-server$",
                        "dimensions": [["model"]],
                        "metric_selectors": [
                            "^nv_inference_request_success$",
                            "^nv_inference_request_failure$",
                            "^nv_inference_count$",
                            "^nv_inference_exec_count$",
                            "^nv_inference_queue_duration_us$",
                            "^nv_inference_compute_infer_duration_us$",
                        ],
                    },
                    {
                        "source_labels": ["job"],
                        "label_matcher": "^model-server$",
                        "dimensions": [["AutoScalingGroupName"]],
                        "metric_selectors": [
                            "^nv_inference_request_success$",
                            "^nv_inference_queue_duration_us$",
                        ],
                    },
                ],
            },
        }
    }
}
json.dump(config, open(path, "w"), indent=2)
PY
fi
# A training node also ships its jobs' output (gpu-cluster-jobs writes one file per job), a
# stream per node, for `gpuc logs`.
if [ -n "${JOBS_LOG_GROUP:-}" ]; then
  GPUC_CONFIG="$config" GPUC_LOG_GROUP="$JOBS_LOG_GROUP" GPUC_LOG_FILES="$JOB_LOG_DIR/*.log" \
    python3 - <<'PY'
import json
import os

path = os.environ["GPUC_CONFIG"]
config = json.load(open(path))
files = config.setdefault("logs", {}).setdefault("logs_collected", {}).setdefault("files", {})
files.setdefault("collect_list", []).append(
    {
        "file_path": os.environ["GPUC_LOG_FILES"],
        "log_group_name": os.environ["GPUC_LOG_GROUP"],
        "log_stream_name": "{instance_id}",
    }
)
json.dump(config, open(path, "w"), indent=2)
PY
fi
"$CTL" -a fetch-config -m ec2 -s -c "file:$config" || fail "the CloudWatch agent did not start"
step_result ok
log "publishing GPU utilization"
