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
"$CTL" -a fetch-config -m ec2 -s -c "file:$config" && log "publishing GPU utilization"
