#!/bin/bash
# gpu-cluster: check this node against what it should be, at every boot.
#   - EFA: as many EFA devices as the launch template attached (fi_info -p efa)
#   - GPUs: the catalog's GPU count, no uncorrectable ECC error (nvidia-smi)
#   - NVSwitch types: the NVIDIA fabric manager is active
# The result goes to /etc/gpu-cluster/health, the instance tag gpu-cluster:health and the
# CloudWatch metric gpu-cluster/NodeHealthy; a failed node in an Auto Scaling group is marked
# Unhealthy, so the group replaces it.
set -uo pipefail
ETC="${GPUC_ETC:-/etc/gpu-cluster}"
. "$ETC/cluster.env"
export PATH="$PATH:/opt/amazon/efa/bin"
imds() {
  local token
  token=$(curl -sS -X PUT http://169.254.169.254/latest/api/token \
    -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')
  curl -sS -H "X-aws-ec2-metadata-token: $token" "http://169.254.169.254/latest/meta-data/$1"
}
FAILED=()

if [ "$EFA_INTERFACES" -gt 0 ]; then
  # one libfabric domain per EFA device (newer libfabric lists several fabrics per domain)
  found=$(fi_info -p efa -t FI_EP_RDM 2>/dev/null | awk '/domain:/ {print $2}' | sort -u \
    | grep -c .)
  [ "$found" -eq "$EFA_INTERFACES" ] || FAILED+=("efa:$found/$EFA_INTERFACES")
fi
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c .)
[ "$gpus" -eq "$GPUS_PER_NODE" ] || FAILED+=("gpus:$gpus/$GPUS_PER_NODE")
ecc=$(nvidia-smi --query-gpu=ecc.errors.uncorrected.volatile.total \
  --format=csv,noheader,nounits 2>/dev/null | grep -Ec '^[1-9][0-9]*$')
[ "$ecc" -eq 0 ] || FAILED+=("ecc:$ecc-gpus")
if [ "$NVSWITCH" = "true" ] && ! systemctl is-active --quiet nvidia-fabricmanager; then
  FAILED+=("fabricmanager:inactive")
fi

if [ "${#FAILED[@]}" -eq 0 ]; then STATUS=ok; else STATUS="failed:$(IFS=,; echo "${FAILED[*]}")"; fi
echo "$STATUS" > "$ETC/health"
echo "gpu-cluster health: $STATUS"
SELF=$(imds instance-id)
aws ec2 create-tags --region "$REGION" --resources "$SELF" \
  --tags "Key=gpu-cluster:health,Value=$STATUS" || true
aws cloudwatch put-metric-data --region "$REGION" --namespace gpu-cluster \
  --metric-name NodeHealthy --dimensions "Cluster=$CLUSTER,InstanceId=$SELF" \
  --value "$([ "$STATUS" = ok ] && echo 1 || echo 0)" || true
if [ "$STATUS" != ok ]; then
  aws autoscaling set-instance-health --region "$REGION" --instance-id "$SELF" \
    --health-status Unhealthy --no-should-respect-grace-period 2>/dev/null \
    || echo "gpu-cluster health: not in an Auto Scaling group; replace this node by hand"
  exit 1
fi
