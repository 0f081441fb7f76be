#!/bin/bash
# The tail of a training node's user data (rendered after its boot steps by user_data.py):
# the torchrun wrapper, the node list, the health watch, the spot watcher.
cat > "$R/usr/local/bin/gpuc-torchrun" <<'SCRIPT'
{{TORCHRUN_SCRIPT}}
SCRIPT
chmod 755 "$R/usr/local/bin/gpuc-torchrun"
# Login shells see the cluster's torchrun environment: `sudo -iu ubuntu` (what the stack's
# SSM session commands start; a plain Session Manager session is a non-login sh) or `bash -l`.
cat > "$R/etc/profile.d/gpu-cluster.sh" <<'PROFILE'
if [ -r /etc/gpu-cluster/torchrun.env ]; then
  set -a
  . /etc/gpu-cluster/torchrun.env
  set +a
fi
PROFILE
timer() {  # timer NAME DESCRIPTION EVERY COMMAND: a oneshot service and its timer
  cat > "$R/etc/systemd/system/$1.service" <<UNIT
[Unit]
Description=gpu-cluster: $2
[Service]
Type=oneshot
ExecStart=$4
UNIT
  cat > "$R/etc/systemd/system/$1.timer" <<UNIT
[Unit]
Description=gpu-cluster: $2
[Timer]
OnBootSec=$3
OnUnitActiveSec=$3
[Install]
WantedBy=timers.target
UNIT
}
timer gpu-cluster-nodes-refresh "refresh the node list as nodes come and go" 2min \
  /usr/local/sbin/gpu-cluster-nodes
timer gpu-cluster-health-watch "GPU health while the node runs (lost GPUs, fatal Xids)" 1min \
  "/usr/local/sbin/gpu-cluster-health --watch"
systemctl daemon-reload
systemctl enable --now gpu-cluster-nodes-refresh.timer gpu-cluster-health-watch.timer
if [ "$SPOT" = "true" ]; then
  cat > "$R/etc/systemd/system/gpu-cluster-spot-watch.service" <<'UNIT'
[Unit]
Description=gpu-cluster: spot interruption and rebalance watcher
After=network-online.target
Wants=network-online.target
[Service]
ExecStart=/usr/local/sbin/gpu-cluster-spot-watch
Restart=always
RestartSec=5
[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable --now gpu-cluster-spot-watch.service
fi
