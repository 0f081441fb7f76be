"""The Docker CLI on a harness node (installed as `docker`): what the jobs and the model server
call, answered as Docker 27 on the Deep Learning AMI does, failing where it fails.

- The daemon's socket is root's and the docker group's: anyone else gets "permission denied"
  (the job user needs the group, which a unit gets only when it starts after `usermod -aG`).
- `pull`: the registry holds the images in state["registry"] (when the test set one; else any
  image exists); an ECR registry wants a `docker login` first ("no basic auth credentials");
  `pull-failures` makes the next pulls time out as a flaky registry does.
- `run`: Docker's options are parsed (an unknown one: exit 125), the image must be local or
  pullable, the name free, each --device present (under the node's root), -w a mounted path.
  The "container" is a process on this machine: the image's environment plus -e only (never the
  caller's), the command and -w translated through the -v mounts; signals are proxied
  (sig-proxy) and `rm -f` kills it. Each run is recorded in docker-runs.jsonl.
- `login`, `image inspect`, `commit`, `rm`: as the CLI answers them.
State: $HARNESS/docker.json (registry, local images, containers, logins).
"""

import contextlib
import fcntl
import grp
import hashlib
import json
import os
import signal
import subprocess
import sys

HARNESS = os.environ["HARNESS"]
ROOT = os.environ.get("GPUC_ROOT", "")
STATE = os.path.join(HARNESS, "docker.json")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
VALUED = {"--name", "--gpus", "--network", "--ipc", "--ulimit", "--user", "-u", "-e", "--env",
          "-v", "--volume", "-w", "--workdir", "--device", "--label", "--shm-size"}  # fmt: skip
FLAGS = {"--rm", "--init", "-d", "--detach", "-i", "-t"}


def load() -> dict:
    try:
        with open(STATE) as f:
            text = f.read()
    except FileNotFoundError:
        return {}
    return json.loads(text) if text.strip() else {}


def locked(change):
    """Change the state under its lock, in place (the harness folder is sticky: a user may not
    replace root's file, only write it; the harness made it writable by every user)."""
    with open(STATE, "a+") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        f.seek(0)
        text = f.read()
        state = json.loads(text) if text.strip() else {}
        result = change(state)
        f.seek(0)
        f.truncate()
        f.write(json.dumps(state))
        return result


def fail(message: str, code: int = 1) -> None:
    sys.stderr.write(message + "\n")
    sys.exit(code)


def record(args: list[str]) -> None:
    with open(os.path.join(HARNESS, "calls"), "a") as calls:
        calls.write("docker " + " ".join(args) + "\n")


def may_use_daemon() -> bool:
    if os.getuid() == 0:
        return True
    try:
        return grp.getgrnam("docker").gr_gid in os.getgroups()
    except KeyError:
        return False


def registry_of(image: str) -> str:
    first = image.split("/", 1)[0]
    return first if "/" in image and ("." in first or ":" in first) else "docker.io"


def pull(image: str, quiet: bool) -> None:
    left_path = os.path.join(HARNESS, "pull-failures")
    left = 0
    if os.path.exists(left_path):
        with open(left_path) as f:
            left = int(f.read().strip() or 0)
    if left > 0:
        with open(left_path, "w") as f:
            f.write(str(left - 1))
        fail("Error response from daemon: Get https://nvcr.io/v2/: net/http: TLS handshake "
             "timeout")  # fmt: skip

    def change(state: dict) -> str:
        registry = state.get("registry")
        host = registry_of(image)
        if ".dkr.ecr." in host and host not in state.get("logins", []):
            return (
                f'Error response from daemon: Head "https://{host}/v2/...": no basic auth '
                "credentials"
            )
        if registry is not None and image not in registry:
            return (f"Error response from daemon: pull access denied for {image.split(':')[0]}, "
                    "repository does not exist or may require 'docker login': denied: requested "
                    "access to the resource is denied")  # fmt: skip
        state.setdefault("local", {})[image] = (registry or {}).get(image, {})
        return ""

    error = locked(change)
    if error:
        fail(error)
    print(f"docker.io/{image}" if quiet else f"Status: Downloaded newer image for {image}")


def parse_run(args: list[str]) -> tuple[dict, str, list[str]]:
    options: dict = {"env": [], "volume": [], "device": [], "ulimit": []}
    rest = iter(enumerate(args))
    for index, arg in rest:
        name, _, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name in FLAGS:
            options[name.lstrip("-")] = True
        elif name in VALUED:
            value = inline or next(rest, (0, None))[1]
            if value is None:
                fail(f"flag needs an argument: {name}", 125)
            key = {"-e": "env", "-v": "volume", "-w": "workdir", "-u": "user"}.get(
                name, name.lstrip("-")
            )
            if key in ("env", "volume", "device", "ulimit"):
                options[key].append(value)
            else:
                options[key] = value
        elif arg.startswith("-"):
            fail(f"unknown flag: {arg}\nSee 'docker run --help'.", 125)
        else:
            return options, arg, args[index + 1 :]
    fail('"docker run" requires at least 1 argument.', 125)
    raise AssertionError


def translate(path: str, volumes: list[str]) -> str:
    """A container path as the host has it, through the -v mounts (longest target first)."""
    mounts = sorted(
        ((v.split(":")[1], v.split(":")[0]) for v in volumes if v.count(":") >= 1),
        key=lambda m: -len(m[0]),
    )
    for target, source in mounts:
        if path == target or path.startswith(target.rstrip("/") + "/"):
            return source + path[len(target) :]
    return path


def run(args: list[str]) -> int:
    options, image, command = parse_run(args)
    state = load()
    if image not in state.get("local", {}):
        sys.stderr.write(f"Unable to find image '{image}' locally\n")
        pull(image, quiet=True)
        state = load()
    name = options.get("name")
    if name and name in state.get("containers", {}):
        fail(f'docker: Error response from daemon: Conflict. The container name "/{name}" is '
             "already in use by container. You have to remove (or rename) that container to be "
             "able to reuse that name.", 125)  # fmt: skip
    for device in options["device"]:
        if not os.path.exists(ROOT + device.split(":")[0]):
            fail("docker: Error response from daemon: error gathering device information while "
                 f'adding custom device "{device}": no such file or directory.', 125)  # fmt: skip
    workdir = options.get("workdir", "/")
    cwd = translate(workdir, options["volume"])
    if (
        workdir != "/"
        and cwd == workdir
        and not any(workdir.startswith(v.split(":")[1]) for v in options["volume"])
    ):
        cwd = "/"  # created inside the image: nothing of the host's
    image_env = state["local"][image].get("env", {})
    env = {"PATH": DEFAULT_PATH, "HOSTNAME": "container", **image_env}
    for item in options["env"]:
        key, sep, value = item.partition("=")
        if sep:
            env[key] = value
        elif key in os.environ:
            env[key] = os.environ[key]
    # the harness's plumbing (where the fakes are), as fake_systemd passes it on
    for key in ["HARNESS_PASS", "HARNESS_PATH_PREFIX", *os.environ.get("HARNESS_PASS", "").split()]:
        if key in os.environ:
            env[key] = os.environ[key]
    env["PATH"] = os.environ.get("HARNESS_PATH_PREFIX", "") + env["PATH"]
    argv = command or state["local"][image].get("cmd", ["bash"])
    argv = [translate(argv[0], options["volume"]), *argv[1:]]
    with open(os.path.join(HARNESS, "docker-runs.jsonl"), "a") as runs:
        runs.write(json.dumps({"image": image, "options": options, "command": command}) + "\n")
    child = subprocess.Popen(argv, env=env, cwd=cwd, process_group=0)
    if name:
        locked(lambda s: s.setdefault("containers", {}).__setitem__(name, child.pid))
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda number, _: child.send_signal(number))
    code = child.wait()
    if name and options.get("rm"):
        locked(lambda s: s.get("containers", {}).pop(name, None))
    elif name:  # kept (for a commit): stopped, with its image
        locked(lambda s: s.setdefault("stopped", {}).__setitem__(name, image))
    return code if code >= 0 else 128 - code


def remove(args: list[str]) -> int:
    force = "-f" in args or "--force" in args
    names = [a for a in args if not a.startswith("-")]
    code = 0
    for name in names:

        def change(state: dict, name=name):
            pid = state.get("containers", {}).pop(name, None)
            stopped = state.get("stopped", {}).pop(name, None)
            return pid, stopped

        pid, stopped = locked(change)
        if pid is None and stopped is None:
            sys.stderr.write(f"Error response from daemon: No such container: {name}\n")
            code = 1
            continue
        if pid is not None and force:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        print(name)
    return code


def commit(args: list[str]) -> int:
    name, tag = [a for a in args if not a.startswith("-")][:2]

    def change(state: dict) -> bool:
        image = state.get("stopped", {}).get(name)
        if image is None:
            return False
        state.setdefault("local", {})[tag] = dict(state["local"].get(image, {}))
        return True

    if not locked(change):
        fail(f"Error response from daemon: No such container: {name}")
    print("sha256:" + "0" * 64)
    return 0


def main(args: list[str]) -> int:
    record(args)
    if not may_use_daemon():
        fail("permission denied while trying to connect to the Docker daemon socket at "
             "unix:///var/run/docker.sock: Get \"http://%2Fvar%2Frun%2Fdocker.sock/v1.47/info\": "
             "dial unix /var/run/docker.sock: connect: permission denied")  # fmt: skip
    verb, rest = (args[0], args[1:]) if args else ("", [])
    if verb == "pull":
        pull(next(a for a in rest if not a.startswith("-")), "--quiet" in rest or "-q" in rest)
        return 0
    if verb == "login":
        secret = sys.stdin.read() if "--password-stdin" in rest else ""
        if not secret.strip():
            fail("Error: Cannot perform an interactive login from a non TTY device")
        host = [a for a in rest if not a.startswith("-") and a != "AWS"][-1]
        locked(lambda s: s.setdefault("logins", []).append(host))
        print("Login Succeeded")
        return 0
    if verb == "image" and rest[:1] == ["inspect"]:
        local = load().get("local", {})
        if rest[-1] not in local:
            fail(f"Error response from daemon: No such image: {rest[-1]}")
        if "--format" in rest:  # '{{.Id}}': what was pulled (a registry entry's "id", if any)
            digest = hashlib.sha256(rest[-1].encode()).hexdigest()
            print(local[rest[-1]].get("id", f"sha256:{digest}"))
        else:
            print("[{}]")
        return 0
    if verb == "run":
        return run(rest)
    if verb == "rm":
        return remove(rest)
    if verb == "commit":
        return commit(rest)
    return 0  # what the model server also calls (docker info, ...): answered, recorded


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
