#!/bin/bash
# gpu-cluster: publish GPU utilization for the idle stop - the CloudWatch agent's NVIDIA GPU
# metrics (nvidia_smi_utilization_gpu) in the gpu-cluster namespace, rolled up per instance and
# per Auto Scaling group, every minute. Installs the agent from AWS's regional bucket (through
# the VPC's S3 gateway endpoint) unless the AMI has it. Runs at every boot; never fatal.
set -uo pipefail
. "${GPUC_ETC:-/etc/gpu-cluster}/cluster.env"
AGENT_DIR="${GPUC_CWAGENT_DIR:-/opt/aws/amazon-cloudwatch-agent}"
CTL="$AGENT_DIR/bin/amazon-cloudwatch-agent-ctl"
log() { echo "gpu-cluster gpu-metrics: $*"; }
if [ ! -x "$CTL" ]; then
  arch="$(dpkg --print-architecture)"
  package="$(mktemp --suffix=.deb)"
  url="https://amazoncloudwatch-agent-$REGION.s3.$REGION.amazonaws.com/ubuntu/$arch/latest/amazon-cloudwatch-agent.deb"
  if ! curl -fsSL --retry 3 -o "$package" "$url" || ! dpkg -i -E "$package"; then
    log "could not install the CloudWatch agent from $url; no GPU metrics, so no idle stop"
    exit 1
  fi
  rm -f "$package"
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
# failures, queue and compute time per model) to CloudWatch as embedded metric format logs.
if [ -n "${MODEL_METRICS_PORT:-}" ]; then
  prometheus="$AGENT_DIR/etc/prometheus.yaml"
  cat > "$prometheus" <<YAML
global:
  scrape_interval: 1m
scrape_configs:
  - job_name: model-server
    static_configs:
      - targets: ["localhost:$MODEL_METRICS_PORT"]
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
                    }
                ],
            },
        }
    }
}
json.dump(config, open(path, "w"), indent=2)
PY
fi
"$CTL" -a fetch-config -m ec2 -s -c "file:$config" && log "publishing GPU utilization"
