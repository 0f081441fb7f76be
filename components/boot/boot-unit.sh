#!/bin/bash
# Shared by the boot templates (rendered in place of {{BOOT_UNIT}}).
# A boot step: /usr/local/sbin/NAME run by a oneshot unit on every boot. The user data first
# installs and enables every unit (boot_unit), then starts the steps in order (start_step), so
# a reboot a step asks for, or a failure, never leaves a node half set up: at the next boot
# systemd runs every enabled step itself. No step's failure stops the ones after it.
#   boot_unit NAME DESCRIPTION AFTER [WANTS] [OPTIONS] [ARGUMENTS]
#   start_step NAME [OPTIONS]
# After=network-online.target orders a unit only if something pulls the target in, so it is
# always also wanted (systemd.special(7)). OPTIONS: "retry" restarts a failed step every two
# minutes; "background" starts it without waiting (cloud-final is not held up).
boot_unit() {
  local wants="${4:-}" retry=""
  case " $3 " in *" network-online.target "*) wants="$wants network-online.target" ;; esac
  case " ${5:-} " in *" retry "*) retry=$'Restart=on-failure\nRestartSec=120' ;; esac
  chmod 755 "$R/usr/local/sbin/$1"
  cat > "$R/etc/systemd/system/$1.service" <<UNIT
[Unit]
Description=gpu-cluster: $2
After=$3
Wants=${wants# }
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/local/sbin/$1${6:+ $6}
$retry
[Install]
WantedBy=multi-user.target
UNIT
  systemctl enable "$1.service"
}
start_step() {
  case " ${2:-} " in
    *" background "*) systemctl start --no-block "$1.service" ;;
    *) systemctl start "$1.service" || echo "gpu-cluster: $1 failed" >&2 ;;
  esac
}
