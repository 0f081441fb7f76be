#!/bin/bash
# Shared by the boot templates (rendered in place of {{BOOT_UNIT}}).
# A boot step: /usr/local/sbin/NAME run by a oneshot unit on every boot, started now and never
# fatal (a failure is reported and the steps after it still run).
#   boot_unit NAME DESCRIPTION AFTER [WANTS]
boot_unit() {
  chmod 755 "/usr/local/sbin/$1"
  cat > "/etc/systemd/system/$1.service" <<UNIT
[Unit]
Description=gpu-cluster: $2
After=$3
Wants=${4:-}
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/$1
[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable "$1.service"
  systemctl start "$1.service" || echo "gpu-cluster: $1 failed ($2)" >&2
}
