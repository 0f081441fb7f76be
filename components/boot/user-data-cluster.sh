#!/bin/bash
# A training node's files and units beside its boot steps (installed by user_data.py before any
# step starts): the torchrun wrapper, the login environment, the node-list refresh and health
# watch timers, the spot watcher.
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
# One unit per training job (gpu-cluster-jobs start NAME): the job user runs it in its home
# (WorkingDirectory=~: /home/ubuntu, where `gpuc run -- python train.py` finds train.py), so it
# outlives the SSM command that started it; torchrun restarts its workers itself. On stop,
# SIGTERM goes to gpu-cluster-jobs alone (KillMode=mixed), which stops torchrun and its workers
# in order and reports; whatever is left gets SIGKILL after TimeoutStopSec.
cat > "$R/etc/systemd/system/gpu-cluster-job@.service" <<UNIT
[Unit]
Description=gpu-cluster job %i
After=gpu-cluster-nodes.service network-online.target
Wants=network-online.target
[Service]
User=$JOB_USER
WorkingDirectory=~
ExecStart=/usr/local/sbin/gpu-cluster-jobs run %i
KillSignal=SIGTERM
KillMode=mixed
TimeoutStopSec=120
UNIT
timer() {  # timer NAME DESCRIPTION EVERY AFTER COMMAND: a bounded oneshot service and its timer
  cat > "$R/etc/systemd/system/$1.service" <<UNIT
[Unit]
Description=gpu-cluster: $2
After=$4
[Service]
Type=oneshot
TimeoutStartSec=5min
ExecStart=$5
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
  systemctl enable "$1.timer"
}
timer gpu-cluster-nodes-refresh "refresh the node list as nodes come and go" 2min \
  gpu-cluster-nodes.service /usr/local/sbin/gpu-cluster-nodes
timer gpu-cluster-health-watch "GPU health while the node runs (lost GPUs, fatal Xids)" 1min \
  gpu-cluster-health.service "/usr/local/sbin/gpu-cluster-health --watch"
timer gpu-cluster-activity "the idle stop's Activity metric" 1min gpu-cluster-gpu-metrics.service \
  "/usr/local/sbin/gpu-cluster-gpu-metrics --activity"
if [ "$SPOT" = "true" ]; then
  chmod 755 "$R/usr/local/sbin/gpu-cluster-spot-watch"
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
  systemctl enable gpu-cluster-spot-watch.service
fi
