"""`systemctl` on a harness node: units run as systemd runs them (systemd.exec(5),
systemd.service(5), systemd.kill(5), systemd.timer(5)), scaled in time by HARNESS_TIME_SCALE.

What is modelled, because the boot scripts depend on it:
- a unit's process gets systemd's clean environment: PATH, LANG, INVOCATION_ID, and for `User=`
  HOME/USER/LOGNAME/SHELL; then Environment= and EnvironmentFile=. Nothing of the caller's
  (`systemctl start` from a shell with AWS keys passes none of them). The harness adds only the
  machine's plumbing, named in HARNESS_PASS (where the fakes live: IMDS's and AWS's addresses,
  the node's root); on a real node those are the defaults.
- `User=` (setpriv), `WorkingDirectory=` (`~` is the user's home; missing: exit 200/CHDIR, as
  systemd does), default working directory `/` (the node's root).
- `Type=oneshot` (start waits for the exit; `RemainAfterExit=`), simple services (start returns
  once forked), `Restart=no|on-failure|always` with `RestartSec=`; a stopped unit is not restarted.
- stop: `KillSignal=` to the main process only (`KillMode=mixed`) or to every process of the
  unit (`control-group`), then SIGKILL to what is left after `TimeoutStopSec=`; an exit code
  other than 0 (or death by SIGTERM/SIGINT/SIGHUP/SIGPIPE) leaves the unit `failed`.
- `After=` orders against units starting at the same time; `Wants=`/`Requires=` pull units in.
- timers (`OnBootSec=`, `OnUnitActiveSec=`) really fire; `enable` records what starts at boot.
- `reboot` is recorded; the harness (BootNode.reboot) stops everything and starts what is
  enabled, as the next boot does.
State lives in $HARNESS/systemd.json (a lock serialises the node's concurrent systemctl calls).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import re
import signal
import subprocess
import sys
import time
import uuid

HARNESS = os.environ["HARNESS"]
ROOT = os.environ["GPUC_ROOT"]
STATE = os.path.join(HARNESS, "systemd.json")
LOCK = os.path.join(HARNESS, "systemd.lock")
SCALE = float(os.environ.get("HARNESS_TIME_SCALE", "30"))
SYSTEMD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
CLEAN_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGPIPE}
TARGETS_ALWAYS_UP = ("network-online.target", "network.target", "local-fs.target",
                     "multi-user.target", "timers.target", "cloud-final.service")  # fmt: skip


@contextlib.contextmanager
def locked():
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = load()
        yield state
        save(state)


def load() -> dict:
    if os.path.exists(STATE):
        with open(STATE) as f:
            state = json.load(f)
    else:
        state = {}
    for key, empty in (("active", []), ("log", []), ("runs", []), ("units", {}),
                       ("enabled", []), ("sessions", [])):  # fmt: skip
        state.setdefault(key, empty)
    return state


def save(state: dict) -> None:
    state["active"] = sorted(u for u, s in state["units"].items() if s.get("state") == "active")
    state["active"] += [u for u in state.get("external", [])]
    tmp = STATE + ".tmp"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, STATE)


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def unit_name(name: str) -> str:
    return name if re.search(r"\.(service|timer|target|socket|mount)$", name) else name + ".service"


def seconds(value: str) -> float:
    """A systemd time span: 120, 2min, 5s, 1h30min."""
    total, units = 0.0, {"": 1, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600, "ms": 0.001}
    for number, unit in re.findall(r"([\d.]+)\s*([a-z]*)", value):
        total += float(number) * units.get(unit, 1)
    return total


def scaled(value: float) -> float:
    return value / SCALE


def parse(unit: str) -> dict[str, list[str]] | None:
    """The unit file's keys (every value of a key repeated), or None when there is none."""
    path = os.path.join(ROOT, "etc/systemd/system", unit)
    instance = ""
    if not os.path.exists(path) and "@" in unit:
        prefix, rest = unit.split("@", 1)
        instance, suffix = rest.rsplit(".", 1)
        path = os.path.join(ROOT, "etc/systemd/system", f"{prefix}@.{suffix}")
    if not os.path.exists(path):
        return None
    keys: dict[str, list[str]] = {}
    text = read(path).replace("%i", instance).replace("%I", instance)
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")) or "=" not in line:
            continue
        key, value = line.split("=", 1)
        keys.setdefault(key.strip(), []).append(value.strip())
    return keys


def first(keys: dict[str, list[str]], key: str, default: str = "") -> str:
    values = keys.get(key) or [default]
    return values[-1]


def words(keys: dict[str, list[str]], key: str) -> list[str]:
    return [w for value in keys.get(key, []) for w in value.split()]


# --- running a unit ------------------------------------------------------------------------


def environment(keys: dict[str, list[str]], user: pwd.struct_passwd | None) -> dict[str, str]:
    env = {"PATH": SYSTEMD_PATH, "LANG": "C.UTF-8", "INVOCATION_ID": uuid.uuid4().hex}
    if user is not None:
        env.update(HOME=user.pw_dir, USER=user.pw_name, LOGNAME=user.pw_name,
                   SHELL=user.pw_shell)  # fmt: skip
    # the machine's plumbing, also for the units a unit starts (systemd's own, on a real node)
    for name in [
        "HARNESS_PASS",
        "HARNESS_PATH_PREFIX",
        *os.environ.get("HARNESS_PASS", "").split(),
    ]:
        if name in os.environ:
            env[name] = os.environ[name]
    env["PATH"] = os.environ.get("HARNESS_PATH_PREFIX", "") + env["PATH"]
    for value in keys.get("Environment", []):
        for pair in re.findall(r'"[^"]*"|\S+', value):
            name, _, val = pair.strip('"').partition("=")
            env[name] = val
    for value in keys.get("EnvironmentFile", []):
        optional, path = value.startswith("-"), value.lstrip("-")
        try:
            for line in read(ROOT + path).splitlines():
                if "=" in line and not line.lstrip().startswith("#"):
                    name, _, val = line.partition("=")
                    env[name.strip()] = val.strip().strip("'\"")
        except OSError:
            if not optional:
                raise
    return env


def command_line(keys: dict[str, list[str]]) -> list[str]:
    argv = first(keys, "ExecStart").split()
    program = ROOT + argv[0]
    if not os.path.exists(program):
        program = os.path.basename(argv[0])
    return [program, *argv[1:]]


def spawn(unit: str, keys: dict[str, list[str]]) -> subprocess.Popen | int:
    """The unit's main process (or the exit code systemd gives when it cannot start one)."""
    user = None
    if first(keys, "User"):
        try:
            user = pwd.getpwnam(first(keys, "User"))
        except KeyError:
            log_line(f"{unit}: Failed to determine user credentials: No such process")
            return 217  # EXIT_USER
    env = environment(keys, user)
    cwd = first(keys, "WorkingDirectory", "/")
    cwd = (user.pw_dir if user else "/root") if cwd == "~" else cwd
    cwd = ROOT + cwd if cwd != "/" else ROOT
    if not os.path.isdir(cwd):
        log_line(f"{unit}: Changing to the requested working directory failed: No such file or "
                 "directory")  # fmt: skip
        return 200  # EXIT_CHDIR
    argv = command_line(keys)
    if user is not None and user.pw_uid != os.getuid():
        argv = ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--init-groups",
                *argv]  # fmt: skip
    with open(os.path.join(HARNESS, "journal"), "a") as out:
        return subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=out, process_group=0)


def log_line(text: str) -> None:
    with open(os.path.join(HARNESS, "journal"), "a") as journal:
        journal.write(text + "\n")


def unit_processes(session: int, main: int) -> list[int]:
    """Every process of the unit: its runner's session (a cgroup stands in for it)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (os.getpid(),):
            continue
        try:
            fields = read(f"/proc/{entry}/stat").rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session and fields[0] != "Z":
            found.append(int(entry))
    return found


def exit_result(returncode: int) -> str:
    if returncode == 0:
        return "success"
    if returncode < 0 and -returncode in CLEAN_SIGNALS:
        return "success"
    return "failed"


def run_unit(unit: str) -> None:
    """The runner: a unit's life from start to its last exit (one process per started unit)."""
    keys = parse(unit) or {}
    for after in words(keys, "After"):  # a start job in progress, not a unit between restarts
        deadline = time.monotonic() + 600
        while starting(after) and time.monotonic() < deadline:
            time.sleep(0.05)
    oneshot = first(keys, "Type", "simple") == "oneshot"
    restart = first(keys, "Restart", "no")
    restart_sec = scaled(seconds(first(keys, "RestartSec", "0.1")))
    while True:
        process = spawn(unit, keys)
        if isinstance(process, int):
            returncode = process
        else:
            set_unit(unit, state="activating" if oneshot else "active", pid=process.pid, sub="")
            returncode = process.wait()
        with locked() as state:
            record = state["units"].setdefault(unit, {})
            stopping = record.get("stopping", False)
            result = "success" if stopping and returncode < 0 else exit_result(returncode)
            state["runs"].append({"unit": unit, "rc": returncode})
            again = not stopping and (restart == "always" or (
                restart == "on-failure" and result == "failed"))  # fmt: skip
            if again:
                record.update(state="activating", sub="auto-restart",
                              restarts=record.get("restarts", 0) + 1)  # fmt: skip
            elif result == "failed":
                record.update(state="failed", pid=None)
            elif oneshot and first(keys, "RemainAfterExit") in ("yes", "true") and not stopping:
                record.update(state="active", pid=None)
            else:
                record.update(state="inactive", pid=None)
            record["stopping"] = False
        if not again:
            return
        time.sleep(restart_sec)
        if state_of(unit) != "activating":  # stopped while waiting to restart
            return


def run_timer(timer: str) -> None:
    keys = parse(timer) or {}
    service = first(keys, "Unit", timer.removesuffix(".timer") + ".service")
    time.sleep(scaled(seconds(first(keys, "OnBootSec", "0"))))
    every = scaled(seconds(first(keys, "OnUnitActiveSec", "60")))
    while state_of(timer) == "active":
        if state_of(service) != "activating":
            start(service, block=False)
        time.sleep(every)


def state_of(unit: str) -> str:
    unit = unit_name(unit)
    if unit in TARGETS_ALWAYS_UP:
        return "active"
    state = load()
    if unit in state.get("external", []):
        return "active"
    return state["units"].get(unit, {}).get("state", "inactive")


def starting(unit: str) -> bool:
    record = load()["units"].get(unit_name(unit), {})
    return record.get("state") == "activating" and record.get("sub") != "auto-restart"


def set_unit(unit: str, **fields) -> None:
    with locked() as state:
        state["units"].setdefault(unit, {}).update(fields)


def detach(*arguments: str) -> int:
    """A runner in a session of its own (the unit's cgroup); its pid."""
    runner = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), *arguments],
        env=os.environ, start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    with locked() as state:
        state["sessions"].append(runner.pid)
    return runner.pid


# --- systemctl verbs ------------------------------------------------------------------------


def start(unit: str, block: bool) -> int:
    unit = unit_name(unit)
    if unit in TARGETS_ALWAYS_UP:
        return 0
    keys = parse(unit)
    if keys is None:
        sys.stderr.write(f"Failed to start {unit}: Unit {unit} not found.\n")
        return 5
    for wanted in words(keys, "Wants") + words(keys, "Requires"):
        if parse(unit_name(wanted)) is not None and state_of(wanted) in ("inactive", "failed"):
            start(wanted, block=False)
    with locked() as state:
        record = state["units"].setdefault(unit, {})
        if record.get("state") in ("active", "activating"):
            return 0
        record.update(state="activating", stopping=False, sub="")
    if unit.endswith(".timer"):
        set_unit(unit, state="active")
        detach("__timer", unit)
        return 0
    runs_before = sum(1 for run in load()["runs"] if run["unit"] == unit)
    session = detach("__run", unit)
    set_unit(unit, session=session)
    if not block:
        return 0
    oneshot = first(keys, "Type", "simple") == "oneshot"
    while True:  # the start job ends with the first run (a oneshot) or once forked
        state = load()
        runs = [run for run in state["runs"] if run["unit"] == unit][runs_before:]
        current = state["units"].get(unit, {}).get("state")
        if runs and (oneshot or current != "active"):
            if exit_result(runs[0]["rc"]) == "failed":
                sys.stderr.write(f"Job for {unit} failed because the control process exited "
                                 "with error code.\n")  # fmt: skip
                return 1
            return 0
        if not oneshot and current == "active":
            return 0
        time.sleep(0.02)


def stop(unit: str) -> int:
    unit = unit_name(unit)
    keys = parse(unit) or {}
    with locked() as state:
        record = state["units"].setdefault(unit, {})
        if record.get("state") not in ("active", "activating"):
            return 0
        record["stopping"] = True
        pid, session = record.get("pid"), record.get("session")
    if unit.endswith(".timer") or pid is None:
        set_unit(unit, state="inactive", stopping=False)
        return 0
    sig = getattr(signal, first(keys, "KillSignal", "SIGTERM"))
    mode = first(keys, "KillMode", "control-group")
    targets = [pid] if mode in ("mixed", "process") else unit_processes(session, pid)
    for target in targets:
        with contextlib.suppress(ProcessLookupError):
            os.kill(target, sig)
    timeout = seconds(first(keys, "TimeoutStopSec", "90"))
    deadline = time.monotonic() + max(scaled(timeout), min(timeout, 10))
    while time.monotonic() < deadline and state_of(unit) in ("active", "activating"):
        time.sleep(0.02)
    if mode != "none":
        for target in unit_processes(session, pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(target, signal.SIGKILL)
    while state_of(unit) in ("active", "activating") and (
            time.monotonic() < deadline + 5):  # fmt: skip
        time.sleep(0.02)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["__run"]:
        run_unit(argv[1])
        return 0
    if argv[:1] == ["__timer"]:
        run_timer(argv[1])
        return 0
    with locked() as state:
        state["log"].append(argv)
    verbs = [a for a in argv if not a.startswith("-")]
    quiet = "--quiet" in argv or "-q" in argv
    if not verbs:
        return 0
    verb, units = verbs[0], verbs[1:]
    if os.environ.get("HARNESS_INSTALL_ONLY") and verb in ("start", "restart", "reboot"):
        return 0  # BootNode.install_only: files and units written, nothing started
    if verb in ("start", "restart", "reload-or-restart"):
        rc = 0
        for unit in units:
            if verb != "start":
                stop(unit)
            code = start(unit, block="--no-block" not in argv)
            rc = rc or code
        return rc
    if verb == "stop":
        for unit in units:
            stop(unit)
        return 0
    if verb in ("enable", "disable"):
        with locked() as state:
            for unit in map(unit_name, units):
                if verb == "enable" and unit not in state["enabled"]:
                    state["enabled"].append(unit)
                if verb == "disable" and unit in state["enabled"]:
                    state["enabled"].remove(unit)
        if verb == "enable" and "--now" in argv:
            return max((start(u, block="--no-block" not in argv) for u in units), default=0)
        return 0
    if verb in ("is-active", "is-failed"):
        now = state_of(units[0])
        shown = {"activating": "activating"}.get(now, now)
        if not quiet:
            print(shown)
        wanted = "active" if verb == "is-active" else "failed"
        return 0 if now == wanted else 3
    if verb == "is-enabled":
        enabled = unit_name(units[0]) in load()["enabled"]
        if not quiet:
            print("enabled" if enabled else "disabled")
        return 0 if enabled else 1
    if verb == "list-units":
        pattern = re.compile("^" + re.escape(units[0] if units else "*").replace(r"\*", ".*") + "$")
        wanted = next((a.split("=", 1)[1] for a in argv if a.startswith("--state=")), "")
        state = load()
        units_now = {
            **state["units"],
            **{u: {"state": "active"} for u in state.get("external", [])},
        }
        for unit, record in sorted(units_now.items()):
            if pattern.match(unit) and (not wanted or record.get("state") == wanted):
                print(f"{unit} loaded {record.get('state')} running gpu-cluster")
        return 0
    if verb == "reset-failed":
        with locked() as state:
            for unit, record in state["units"].items():
                if record.get("state") == "failed" and (not units or unit in map(unit_name, units)):
                    record["state"] = "inactive"
        return 0
    return 0  # daemon-reload, reboot (recorded: BootNode.reboot carries it out), ...


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
