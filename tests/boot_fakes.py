"""High-fidelity fakes of what an EC2 GPU node (Deep Learning AMI, Ubuntu 24.04) answers.

For tests that run the boot scripts as real bash: an IMDSv2 HTTP server, and generators for
executable stand-ins of `nvidia-smi`, `fi_info`, `lspci`, `apt-get` and `dpkg`. The scripts are
Python 3 programs; the stateful ones read (and `apt-get`/`dpkg` update) a JSON state file, so
a test can change the node between calls and inspect what was run afterwards.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, cast
from urllib.parse import urlsplit

__all__ = [
    "GPU_MODELS",
    "IMDS_ERROR_PAGE",
    "FakeImds",
    "apt_scripts",
    "efa_device_names",
    "fi_info_script",
    "gpu_bus_ids",
    "imds_error_page",
    "lspci_script",
    "nvidia_smi_script",
    "write_executable",
]

PYTHON = sys.executable


def write_executable(path: Path, text: str) -> None:
    """Write `text` to `path` (creating parent folders) and make it executable (0755)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _script(python: str, config: dict[str, Any], body: str) -> str:
    """A Python script: shebang, its configuration as JSON, then `body`.

    SIGPIPE is restored to its default so `fake | head -1` ends quietly, as a C tool would.
    """
    return (
        f"#!{python}\nimport json\nimport signal\n"
        "signal.signal(signal.SIGPIPE, signal.SIG_DFL)\n"
        f"CONFIG = json.loads({json.dumps(config)!r})\n" + body
    )


# --------------------------------------------------------------------------------------------
# IMDSv2
# --------------------------------------------------------------------------------------------

IMDS_ERROR_PAGE = (
    '<?xml version="1.0" encoding="iso-8859-1"?>\n'
    '<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 Transitional//EN"\n'
    '\t"http://www.w3.org/TR/xhtml1/DTD/xhtml1-transitional.dtd">\n'
    '<html xmlns="http://www.w3.org/1999/xhtml" xml:lang="en" lang="en">\n'
    " <head>\n"
    "  <title>{status} - {reason}</title>\n"
    " </head>\n"
    " <body>\n"
    "  <h1>{status} - {reason}</h1>\n"
    " </body>\n"
    "</html>\n"
)

_REASONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}

TOKEN_PATH = "/latest/api/token"
META_PREFIX = "/latest/meta-data/"


def imds_error_page(status: int) -> str:
    """The HTML body IMDS sends with an error `status` (e.g. 401 - Unauthorized)."""
    return IMDS_ERROR_PAGE.format(status=status, reason=_REASONS.get(status, "Error"))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # a hanging handler must not hold up stop()
    allow_reuse_address = True
    fake: FakeImds


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def version_string(self) -> str:
        return "EC2ws"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _dispatch(self) -> None:
        cast(_Server, self.server).fake._handle(self)

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = do_PATCH = _dispatch


class FakeImds:
    """An IMDSv2 endpoint on 127.0.0.1 (a free port) with runtime-mutable faults.

    `metadata` maps a path under /latest/meta-data/ to its value; `dynamic` does the same under
    /latest/dynamic/, `user_data` is /latest/user-data (404 when None). A path that is a prefix
    of others answers a directory listing, as IMDS does. Faults (all mutable while running):
    `fail_token` (the next N token PUTs answer `fail_token_status`), `hang_token` (token PUTs
    get no answer for `hang_seconds`), `fail_paths` (path -> status to answer instead; a path
    is relative to /latest/meta-data/, or /latest/ for dynamic/ and user-data), `fail_count`
    (path -> answer the fault only that many more times), `hang_paths`, `expire_tokens` (every
    token is rejected with 401), `delay_seconds` (every answer that late). It serves the
    instance profile's credentials under iam/security-credentials/<role>. `requests` records
    (method, path, status) of each request; status 0 means no answer was sent.
    """

    def __init__(
        self,
        *,
        instance_id: str = "i-0abc1234def567890",
        mac: str = "0a:1b:2c:3d:4e:5f",
        vpc_id: str = "vpc-0a1b2c3d4e5f60718",
        subnet_id: str = "subnet-0123456789abcdef0",
        zone: str = "us-east-1a",
        instance_type: str = "p4d.24xlarge",
        lifecycle: str = "on-demand",
        local_ipv4: str = "10.0.1.23",
        metadata: dict[str, str] | None = None,
        user_data: str | None = None,
        hang_seconds: float = 30.0,
        role: str = "gpu-cluster-train-node-role",
    ) -> None:
        region = zone[:-1]
        iface = f"network/interfaces/macs/{mac}"
        hostname = f"ip-{local_ipv4.replace('.', '-')}.ec2.internal"
        self.metadata: dict[str, str] = {
            "ami-id": "ami-0123456789abcdef0",
            "ami-launch-index": "0",
            "hostname": hostname,
            "instance-id": instance_id,
            "instance-life-cycle": lifecycle,
            "instance-type": instance_type,
            "local-hostname": hostname,
            "local-ipv4": local_ipv4,
            "mac": mac,
            f"{iface}/device-number": "0",
            f"{iface}/interface-id": "eni-0123456789abcdef0",
            f"{iface}/local-ipv4s": local_ipv4,
            f"{iface}/subnet-id": subnet_id,
            f"{iface}/vpc-id": vpc_id,
            "placement/availability-zone": zone,
            "placement/availability-zone-id": "use1-az4",
            "placement/region": region,
            "reservation-id": "r-0123456789abcdef0",
            "security-groups": "gpu-cluster-nodes",
            # the instance profile's role credentials, as the SDKs and the AWS CLI read them
            # (EC2 User Guide, "Retrieve security credentials from instance metadata")
            "iam/info": json.dumps(
                {
                    "Code": "Success",
                    "LastUpdated": "2026-12-01T08:00:00Z",
                    "InstanceProfileArn": f"arn:aws:iam::123456789012:instance-profile/{role}",
                    "InstanceProfileId": "AIPAEXAMPLEPROFILEID1",
                }
            ),
            f"iam/security-credentials/{role}": json.dumps(
                {
                    "Code": "Success",
                    "LastUpdated": "2026-12-01T08:00:00Z",
                    "Type": "AWS-HMAC",
                    "AccessKeyId": "ASIAEXAMPLEINSTANCE1",
                    "SecretAccessKey": "instance-profile-secret",
                    "Token": "instance-profile-session-token",
                    "Expiration": "2099-12-01T14:00:00Z",
                }
            ),
        }
        self.metadata.update(metadata or {})
        identity = {
            "accountId": "123456789012",
            "architecture": "x86_64",
            "availabilityZone": zone,
            "imageId": self.metadata["ami-id"],
            "instanceId": instance_id,
            "instanceType": instance_type,
            "privateIp": local_ipv4,
            "region": region,
            "version": "2017-09-30",
        }
        self.dynamic: dict[str, str] = {
            "instance-identity/document": json.dumps(identity, indent=2),
        }
        self.user_data = user_data
        self.hang_seconds = hang_seconds
        self.delay_seconds = 0.0  # every answer this late (a busy IMDS: throttled, slow)
        self.fail_token = 0
        self.fail_token_status = 503
        self.hang_token = False
        self.fail_paths: dict[str, int] = {}
        self.fail_count: dict[str, int] = {}
        self.hang_paths: set[str] = set()
        self.expire_tokens = False
        self.requests: list[tuple[str, str, int]] = []
        self.tokens: dict[str, float] = {}  # token -> expiry (time.monotonic())
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # lifecycle --------------------------------------------------------------------------

    def start(self) -> FakeImds:
        """Serve in a daemon thread; returns self."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", 0), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (wakes any hanging request first)."""
        self._stopping.set()
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeImds:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The port it listens on (started only)."""
        if self._server is None:
            raise RuntimeError("FakeImds is not started")
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """Base URL, e.g. http://127.0.0.1:PORT (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def hits(self, path: str, method: str | None = None) -> int:
        """How many requests were for a path ending with `path` (and `method`, if given)."""
        with self._lock:
            return sum(
                1
                for m, p, _ in self.requests
                if p.endswith(path) and (method is None or m == method)
            )

    # request handling -------------------------------------------------------------------

    def _record(self, method: str, path: str, status: int) -> None:
        with self._lock:
            self.requests.append((method, path, status))

    def _send(
        self,
        handler: _Handler,
        status: int,
        body: str,
        content_type: str = "text/plain",
        headers: dict[str, str] | None = None,
    ) -> None:
        data = body.encode()
        handler.send_response(status, _REASONS.get(status))
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Connection", "close")
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        if handler.command != "HEAD":
            handler.wfile.write(data)
        handler.close_connection = True

    def _error(self, handler: _Handler, method: str, path: str, status: int) -> None:
        self._record(method, path, status)
        self._send(handler, status, imds_error_page(status), "text/html")

    def _hang(self, handler: _Handler, method: str, path: str) -> None:
        self._record(method, path, 0)
        self._stopping.wait(self.hang_seconds)
        handler.close_connection = True

    def _handle(self, handler: _Handler) -> None:
        if self.delay_seconds:
            self._stopping.wait(self.delay_seconds)
        method = handler.command
        path = urlsplit(handler.path).path
        length = int(handler.headers.get("Content-Length") or 0)
        if length:
            handler.rfile.read(length)
        if path == TOKEN_PATH:
            self._token(handler, method, path)
        elif path.startswith("/latest/"):
            self._get(handler, method, path)
        else:
            self._error(handler, method, path, 404)

    def _token(self, handler: _Handler, method: str, path: str) -> None:
        if method != "PUT":
            self._error(handler, method, path, 405)
            return
        if handler.headers.get("X-Forwarded-For"):
            self._error(handler, method, path, 403)
            return
        with self._lock:
            failing = self.fail_token > 0
            if failing:
                self.fail_token -= 1
        if failing:
            self._error(handler, method, path, self.fail_token_status)
            return
        if self.hang_token:
            self._hang(handler, method, path)
            return
        raw = handler.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
        try:
            ttl = int(raw.strip())
        except ValueError:
            ttl = 0
        if not 1 <= ttl <= 21600:
            self._error(handler, method, path, 400)
            return
        token = base64.b64encode(b"\x01\x00\x04" + secrets.token_bytes(39)).decode()
        with self._lock:
            self.tokens[token] = time.monotonic() + ttl
        self._record(method, path, 200)
        self._send(handler, 200, token, headers={"X-Aws-Ec2-Metadata-Token-Ttl-Seconds": str(ttl)})

    def _token_ok(self, token: str | None) -> bool:
        if self.expire_tokens or not token:
            return False
        with self._lock:
            expiry = self.tokens.get(token)
        return expiry is not None and time.monotonic() < expiry

    def _fault(self, rel: str, path: str) -> int | None:
        """The injected status for this request, if any (consumes a `fail_count`)."""
        with self._lock:
            for key in (rel, path):
                if key in self.fail_paths:
                    if key in self.fail_count:
                        if self.fail_count[key] <= 0:
                            return None
                        self.fail_count[key] -= 1
                    return self.fail_paths[key]
        return None

    def _get(self, handler: _Handler, method: str, path: str) -> None:
        if method not in ("GET", "HEAD"):
            self._error(handler, method, path, 405)
            return
        if not self._token_ok(handler.headers.get("X-aws-ec2-metadata-token")):
            self._error(handler, method, path, 401)
            return
        if path.startswith(META_PREFIX) or path == META_PREFIX[:-1]:
            rel, table = path[len(META_PREFIX) :], self.metadata
        elif path.startswith("/latest/dynamic"):
            rel, table = path[len("/latest/dynamic/") :], self.dynamic
        else:
            rel, table = path[len("/latest/") :], {}
        fault_key = rel if table is self.metadata else path[len("/latest/") :]
        if fault_key in self.hang_paths or path in self.hang_paths:
            self._hang(handler, method, path)
            return
        status = self._fault(fault_key, path)
        if status is not None and status != 200:
            self._error(handler, method, path, status)
            return
        user_data = path == "/latest/user-data"
        value = self.user_data if user_data else self._lookup(table, rel)
        if value is None:
            self._error(handler, method, path, 404)
            return
        self._record(method, path, 200)
        self._send(handler, 200, value)

    @staticmethod
    def _lookup(table: dict[str, str], rel: str) -> str | None:
        """A value, or a directory listing (subfolders end with '/'), or None."""
        key = rel.strip("/")
        if key in table and not rel.endswith("/"):
            return table[key]
        prefix = f"{key}/" if key else ""
        entries: list[str] = []
        for name in table:
            if name.startswith(prefix) and name != key:
                head, sep, _ = name[len(prefix) :].partition("/")
                entry = head + sep
                if entry not in entries:
                    entries.append(entry)
        return "\n".join(entries) if entries else None


# --------------------------------------------------------------------------------------------
# nvidia-smi
# --------------------------------------------------------------------------------------------

# nvlinks: NVLink links per GPU (A100 SXM4: 12, third generation; H100 SXM5: 18, fourth)
GPU_MODELS: dict[str, dict[str, Any]] = {
    "A100-SXM4-40GB": {"name": "NVIDIA A100-SXM4-40GB", "mib": 40960, "pci": "20b0",
                       "remap": True, "watts": 400, "switch": "1af1", "nvlinks": 12},
    "A100-SXM4-80GB": {"name": "NVIDIA A100-SXM4-80GB", "mib": 81920, "pci": "20b2",
                       "remap": True, "watts": 400, "switch": "1af1", "nvlinks": 12},
    "H100 80GB HBM3": {"name": "NVIDIA H100 80GB HBM3", "mib": 81559, "pci": "2330",
                       "remap": True, "watts": 700, "switch": "22a3", "nvlinks": 18},
    "A10G": {"name": "NVIDIA A10G", "mib": 23028, "pci": "2237", "remap": False, "watts": 300},
    "L4": {"name": "NVIDIA L4", "mib": 23034, "pci": "27b8", "remap": False, "watts": 72},
    "Tesla T4": {"name": "Tesla T4", "mib": 15360, "pci": "1eb8", "remap": False, "watts": 70},
}  # fmt: skip

# Bus ids of the 8-GPU systems (p4d/p4de: A100; p5: H100), as nvidia-smi prints them.
_EIGHT_GPU_BUSES = {
    "A100": ["10:1C.0", "10:1D.0", "20:1C.0", "20:1D.0", "90:1C.0", "90:1D.0", "A0:1C.0",
             "A0:1D.0"],
    "H100": ["53:00.0", "64:00.0", "75:00.0", "86:00.0", "97:00.0", "A8:00.0", "B9:00.0",
             "CA:00.0"],
}  # fmt: skip

_BUS_IDS_SOURCE = '''
def gpu_bus_ids(model, count, tables):
    """nvidia-smi's pci.bus_id of each GPU: p4d/p5 layouts for 8 A100/H100, else sequential."""
    family = next((f for f in tables if f in model), None)
    if family and count == len(tables[family]):
        return ["00000000:" + b for b in tables[family]]
    if count <= 8:
        return ["00000000:00:%02X.0" % (0x1F - count + i) for i in range(count)]
    return ["00000000:%02X:00.0" % (0x10 + i) for i in range(count)]
'''
_namespace: dict[str, Any] = {}
exec(_BUS_IDS_SOURCE, _namespace)


def gpu_bus_ids(model: str, count: int) -> list[str]:
    """PCI bus ids as nvidia-smi prints them ("00000000:10:1C.0"), the same the fakes use."""
    return list(_namespace["gpu_bus_ids"](model, count, _EIGHT_GPU_BUSES))


def _model_key(model: str) -> str:
    for key, info in GPU_MODELS.items():
        if model in (key, info["name"]) or model.removeprefix("NVIDIA ") == key:
            return key
    if model == "T4":
        return "Tesla T4"
    raise ValueError(f"unknown GPU model {model!r}; known: {', '.join(GPU_MODELS)}")


_NVIDIA_SMI_BODY = (
    _BUS_IDS_SOURCE
    + r"""
import hashlib
import sys

DRIVER_MSG = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
              "Make sure that the latest NVIDIA driver is installed and running.\n")
INVALID = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n"
MODELS = CONFIG["models"]
UNITS = {"memory.total": "MiB", "memory.used": "MiB", "memory.free": "MiB",
         "utilization.gpu": "%", "utilization.memory": "%", "power.draw": "W",
         "power.limit": "W", "clocks.sm": "MHz", "clocks.mem": "MHz"}


def out(text):
    sys.stdout.write(text)


def finish(code, text=""):
    out(text)
    sys.stdout.flush()
    sys.exit(code)


def load():
    try:
        with open(CONFIG["state"]) as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def per_gpu(state, key, i, default=0):
    table = state.get(key) or {}
    return table.get(str(i), table.get(i, default)) if isinstance(table, dict) else default


def in_list(state, key, i):
    return i in [int(x) for x in state.get(key) or []]


def model_info(name):
    for key, info in MODELS.items():
        if name in (key, info["name"]) or name.replace("NVIDIA ", "", 1) == key:
            return info
    if name == "T4":
        return MODELS["Tesla T4"]
    return {"name": "NVIDIA " + name, "mib": 16384, "pci": "0000", "remap": False, "watts": 300}


class Node:
    def __init__(self, state):
        self.state = state
        self.info = model_info(state.get("model", "A100-SXM4-40GB"))
        self.count = int(state.get("count", 8))
        self.buses = state.get("bus_ids") or gpu_bus_ids(
            state.get("model", "A100-SXM4-40GB"), self.count, CONFIG["tables"])
        self.uuids = state.get("uuids") or [self.uuid(b) for b in self.buses]

    def uuid(self, bus):
        h = hashlib.md5((self.info["name"] + bus).encode()).hexdigest()
        return "GPU-%s-%s-%s-%s-%s" % (h[:8], h[8:12], h[12:16], h[16:20], h[20:32])

    def lost(self, i):
        return in_list(self.state, "lost", i)

    def lost_line(self, i):
        return "Unable to determine the device handle for GPU%s: Unknown Error\n" % (
            self.buses[i][4:])

    def ecc_on(self, i):
        return not in_list(self.state, "ecc_disabled", i)

    def value(self, i, field):
        s, info = self.state, self.info
        mib, used = info["mib"], int(per_gpu(s, "memory_used", i, 0))
        ecc = self.ecc_on(i)

        def counter(key):
            return str(int(per_gpu(s, key, i, 0))) if ecc else "[N/A]"

        values = {
            "index": str(i), "name": info["name"], "gpu_name": info["name"],
            "pci.bus_id": self.buses[i], "gpu_bus_id": self.buses[i],
            "uuid": self.uuids[i], "gpu_uuid": self.uuids[i],
            "serial": "13210%08d" % (int(hashlib.md5(self.buses[i].encode()).hexdigest(), 16)
                                     % 10 ** 8),
            "count": str(self.count),
            "driver_version": s.get("driver_version", "550.127.05"),
            "persistence_mode": "Enabled", "pstate": "P0",
            "temperature.gpu": str(int(per_gpu(s, "temperature", i, 33))),
            "memory.total": "%d MiB" % mib, "memory.used": "%d MiB" % used,
            "memory.free": "%d MiB" % (mib - used),
            "utilization.gpu": "%d %%" % int(per_gpu(s, "utilization", i, 0)),
            "utilization.memory": "0 %",
            "power.draw": "%.2f W" % (info["watts"] * 0.15),
            "power.limit": "%.2f W" % info["watts"],
            "ecc.mode.current": "Enabled" if ecc else "Disabled",
            "ecc.mode.pending": "Enabled" if ecc else "Disabled",
            "ecc.errors.uncorrected.aggregate.total": counter("ecc_aggregate_uncorrected"),
            "ecc.errors.uncorrected.volatile.total": counter("ecc_volatile_uncorrected"),
            "ecc.errors.corrected.aggregate.total": counter("ecc_aggregate_corrected"),
            "ecc.errors.corrected.volatile.total": counter("ecc_volatile_corrected"),
            "pcie.link.width.max": "16",
            "pcie.link.width.current": str(int(per_gpu(s, "pcie_width", i, 16))),
        }
        return values.get(field, self.clock_event(i, field))

    def knows(self, field):
        # a field this driver knows: R535 renamed clocks_throttle_reasons.* to
        # clocks_event_reasons.* (keeping the old names); "unknown_fields": what a test says a
        # driver lacks
        if field in (self.state.get("unknown_fields") or []):
            return False
        major = int(self.state.get("driver_version", "550.127.05").split(".")[0])
        return not (field.startswith("clocks_event_reasons.") and major < 535)

    def clock_event(self, i, field):
        # clocks_event_reasons.<reason> (or its old clocks_throttle_reasons. name): Active when
        # GPU i is listed under the reason in the state's "clock_events"
        prefix, _, reason = field.partition(".")
        if prefix not in ("clocks_event_reasons", "clocks_throttle_reasons") or reason not in (
                "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown",
                "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown",
                "sync_boost"):
            return None
        active = i in [int(x) for x in (self.state.get("clock_events") or {}).get(reason, [])]
        return "Active" if active else "Not Active"

    def remap_value(self, i, field):
        if field == "gpu_bus_id":
            return self.buses[i]
        if field == "gpu_uuid":
            return self.uuids[i]
        if not field.startswith("remapped_rows.") or field not in (
                "remapped_rows.correctable", "remapped_rows.uncorrectable",
                "remapped_rows.pending", "remapped_rows.failure"):
            return None
        if not self.info["remap"]:
            return "[N/A]"
        s = self.state
        return {
            "remapped_rows.correctable": str(int(per_gpu(s, "remapped_correctable", i, 0))),
            "remapped_rows.uncorrectable": str(int(per_gpu(s, "remapped_uncorrectable", i, 0))),
            "remapped_rows.pending": "Yes" if in_list(s, "remap_pending", i) else "No",
            "remapped_rows.failure": "Yes" if in_list(s, "remap_failure", i) else "No",
        }[field]


def parse(argv):
    opts = {"query": None, "remap": None, "format": None, "ids": None, "list": False,
            "help": False}
    keys = {"--query-gpu": "query", "--query-remapped-rows": "remap", "--format": "format",
            "--id": "ids", "-i": "ids"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, val = arg.partition("=")
        if name in keys:
            if not eq:
                i += 1
                if i >= len(argv):
                    finish(2, INVALID)
                val = argv[i]
            opts[keys[name]] = val
        elif arg.startswith("-i") and len(arg) > 2 and not arg.startswith("--"):
            opts["ids"] = arg[2:]
        elif arg in ("-L", "--list-gpus"):
            opts["list"] = True
        elif arg in ("-h", "--help"):
            opts["help"] = True
        else:
            finish(2, INVALID)
        i += 1
    return opts


def select(node, ids):
    if ids is None:
        return list(range(node.count))
    chosen = []
    for want in ids.split(","):
        want = want.strip()
        for i in range(node.count):
            if want in (str(i), node.uuids[i], node.buses[i], node.buses[i][4:]):
                chosen.append(i)
                break
        else:
            finish(6, "No devices were found\n")
    return chosen


def csv(node, gpus, fields, fmt, getter):
    parts = [p.strip() for p in fmt.split(",")]
    if not parts or parts[0] != "csv" or any(p not in ("noheader", "nounits")
                                             for p in parts[1:]):
        finish(2, INVALID)
    nounits = "nounits" in parts
    fields = [f.strip() for f in fields.split(",") if f.strip()]
    for f in fields:
        if getter(node, 0, f) is None or not node.knows(f):
            finish(2, 'Field "%s" is not a valid field to query.\n' % f)
    if "noheader" not in parts:
        out(", ".join(f + (" [%s]" % UNITS[f] if f in UNITS else "") for f in fields) + "\n")
    code = 0
    for i in gpus:
        if node.lost(i):
            out(node.lost_line(i))
            code = 15
            continue
        row = []
        for f in fields:
            v = getter(node, i, f)
            if nounits and f in UNITS and v.endswith(" " + UNITS[f]):
                v = v[: -len(UNITS[f]) - 1]
            row.append(v)
        out(", ".join(row) + "\n")
    return code


def gpu_field(node, i, f):
    return node.value(i, f)


def remap_field(node, i, f):
    return node.remap_value(i, f)


def table(node, gpus):
    s = node.state
    drv = s.get("driver_version", "550.127.05")
    cuda = s.get("cuda_version", "12.4")
    bar = "+-----------------------------------------+------------------------+" \
          "----------------------+\n"
    out("+" + "-" * 89 + "+\n")
    out("| NVIDIA-SMI %-22s Driver Version: %-14s CUDA Version: %-9s|\n" % (drv, drv, cuda))
    out("|-----------------------------------------+------------------------+"
        "----------------------+\n")
    out("| GPU  Name                 Persistence-M | Bus-Id          Disp.A |"
        " Volatile Uncorr. ECC |\n")
    out("| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage |"
        " GPU-Util  Compute M. |\n")
    out("|                                         |                        |"
        "               MIG M. |\n")
    out("|=========================================+========================+"
        "======================|\n")
    code = 0
    for i in gpus:
        if node.lost(i):
            code = 15
            continue
        v = lambda f: node.value(i, f)  # noqa: E731
        out("| %3d  %-29s  On  |   %s Off | %20s |\n" % (
            i, v("name")[:29], v("pci.bus_id"), v("ecc.errors.uncorrected.volatile.total")))
        watts = "%dW / %4dW" % (node.info["watts"] * 0.15, node.info["watts"])
        mem = "%dMiB / %6dMiB" % (int(v("memory.used").split()[0]), node.info["mib"])
        out("| N/A   %sC    P0  %23s | %22s | %6s%%      Default |\n" % (
            v("temperature.gpu"), watts, mem, v("utilization.gpu").split()[0]))
        out("|                                         |                        |"
            "             Disabled |\n")
        out(bar)
    if code:
        out("\n")
        for i in gpus:
            if node.lost(i):
                out(node.lost_line(i))
    return code


def nvlink(node, argv):
    # `nvidia-smi nvlink -e [-i ID]`: each GPU's links and their error counters ("nvlink_errors":
    # {gpu: {link: {"Replay": n, "Recovery": n, "CRC": n}}}); a GPU without NVLink lists none
    ids, errors = None, False
    rest = iter(argv)
    for arg in rest:
        if arg in ("-e", "--errorcounters"):
            errors = True
        elif arg in ("-i", "--id"):
            ids = next(rest, None) or finish(2, INVALID)
        else:
            finish(2, INVALID)
    if not errors:
        finish(2, INVALID)
    table = node.state.get("nvlink_errors") or {}
    code = 0
    for i in select(node, ids):
        if node.lost(i):
            out(node.lost_line(i))
            code = 15
            continue
        out("GPU %d: %s (UUID: %s)\n" % (i, node.info["name"], node.uuids[i]))
        for link in range(node.info.get("nvlinks", 0)):
            counts = (table.get(str(i)) or {}).get(str(link)) or {}
            for kind in ("Replay", "Recovery", "CRC"):
                out("\t Link %d: %s Errors: %d\n" % (link, kind, int(counts.get(kind, 0))))
    finish(code)


def main(argv):
    if argv[:1] == ["nvlink"]:
        state = load()
        if not state.get("driver_loaded", True):
            finish(9, DRIVER_MSG)
        nvlink(Node(state), argv[1:])
    opts = parse(argv)
    if opts["help"]:
        finish(0, "NVIDIA System Management Interface -- v%s\n\n" % CONFIG.get("version"))
    state = load()
    if state.get("unknown_error"):
        finish(255, "Unknown Error\n")
    if not state.get("driver_loaded", True):
        finish(9, DRIVER_MSG)
    node = Node(state)
    if sum(bool(x) for x in (opts["query"], opts["remap"], opts["list"])) > 1:
        finish(2, INVALID)
    if (opts["query"] or opts["remap"]) and not opts["format"]:
        finish(2, INVALID)
    if opts["format"] and not (opts["query"] or opts["remap"]):
        finish(2, INVALID)
    if node.count == 0:
        finish(6, "No devices were found\n")
    gpus = select(node, opts["ids"])
    if opts["list"]:
        code = 0
        for i in gpus:
            if node.lost(i):
                out(node.lost_line(i))
                code = 15
            else:
                out("GPU %d: %s (UUID: %s)\n" % (i, node.info["name"], node.uuids[i]))
        finish(code)
    if opts["query"]:
        finish(csv(node, gpus, opts["query"], opts["format"], gpu_field))
    if opts["remap"]:
        finish(csv(node, gpus, opts["remap"], opts["format"], remap_field))
    finish(table(node, gpus))


main(sys.argv[1:])
"""
)


def nvidia_smi_script(state_path: Path, python: str = PYTHON) -> str:
    """An executable `nvidia-smi` (driver 550/570 output) driven by the JSON at `state_path`.

    State keys (all optional): model (a `GPU_MODELS` key, default "A100-SXM4-40GB"), count (8),
    driver_loaded (true; false: exit 9), unknown_error (every call exits 255), lost (indices:
    "Unable to determine the device handle ...", exit 15), ecc_aggregate_uncorrected,
    ecc_volatile_uncorrected, ecc_*_corrected, remapped_correctable, remapped_uncorrectable,
    utilization, memory_used, temperature ({index: n}), remap_pending, remap_failure,
    ecc_disabled (indices), driver_version, bus_ids, uuids; pcie_width ({index: current lanes},
    of 16), clock_events ({reason: [indices]} Active, e.g. "hw_thermal_slowdown"),
    unknown_fields (fields this driver refuses, as an older one does), nvlink_errors (`nvlink
    -e`: {index: {link: {"Replay"|"Recovery"|"CRC": n}}}). Read at every call.
    """
    config = {
        "state": str(state_path),
        "models": GPU_MODELS,
        "tables": _EIGHT_GPU_BUSES,
        "version": "550.127.05",
    }
    return _script(python, config, _NVIDIA_SMI_BODY)


# --------------------------------------------------------------------------------------------
# fi_info
# --------------------------------------------------------------------------------------------

# EFA device names as on p4d/p5 (rdmap<bus>s<slot>, the bus in decimal).
_EFA_DEVICES = ["rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27"]

_FI_INFO_BODY = r"""
import sys

EP_TYPES = ("FI_EP_UNSPEC", "FI_EP_MSG", "FI_EP_DGRAM", "FI_EP_RDM", "FI_EP_SOCK_STREAM",
            "FI_EP_SOCK_DGRAM")


def usage():
    sys.stdout.write("Usage: %s\n" % sys.argv[0])
    sys.stdout.write("  -h, --help\t\tdisplay this help and exit\n")
    sys.exit(1)


def main(argv):
    hints = {}
    short = {"-p": "prov", "-t": "type", "-f": "fabric", "-d": "domain", "-n": "node",
             "-s": "node", "-P": "port", "-c": "caps", "-m": "mode", "-a": "addr"}
    long_ = {"--provider": "prov", "--ep_type": "type", "--fabric": "fabric",
             "--domain": "domain", "--node": "node", "--src_addr": "node", "--port": "port",
             "--caps": "caps", "--mode": "mode", "--addr_format": "addr"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, val = arg.partition("=")
        if arg == "--version":
            sys.stdout.write("%s: %s\nlibfabric: %s\nlibfabric api: %s\n" % (
                sys.argv[0], CONFIG["libfabric"], CONFIG["libfabric"],
                ".".join(CONFIG["libfabric"].split(".")[:2])))
            return 0
        if name in long_ and eq:
            hints[long_[name]] = val
        elif arg in short or name in long_:
            i += 1
            if i >= len(argv):
                usage()
            hints[(short.get(arg) or long_[name])] = argv[i]
        elif arg[:2] in short and len(arg) > 2:
            hints[short[arg[:2]]] = arg[2:]
        else:
            usage()
        i += 1
    ep = hints.get("type")
    if ep is not None and ep.upper() not in EP_TYPES:
        sys.stderr.write("error: Unrecognized endpoint type: %s\n" % ep)
        return 22
    infos = []
    major, minor = (int(x) for x in CONFIG["libfabric"].split(".")[:2])
    fabrics = ["efa-direct", "efa"] if major >= 2 else ["efa"]
    for fabric in fabrics:  # libfabric 2.x lists every efa-direct info first
        for dev in CONFIG["devices"]:
            infos.append((fabric, dev + "-rdm", "FI_EP_RDM"))
    for dev in CONFIG["devices"]:
        infos.append(("efa", dev + "-dgrm", "FI_EP_DGRAM"))
    prov = hints.get("prov")
    if prov is not None and prov.lower() not in ("efa", "efa;ofi_rxm"):
        infos = []
    if ep and ep.upper() != "FI_EP_UNSPEC":
        infos = [x for x in infos if x[2] == ep.upper()]
    if "fabric" in hints:
        infos = [x for x in infos if x[0] == hints["fabric"]]
    if "domain" in hints:
        infos = [x for x in infos if x[1] == hints["domain"]]
    if not infos:
        sys.stderr.write("fi_getinfo: -61 (No data available)\n")
        return 61
    version = "%d.%d" % (major * 100 + minor, 0)
    for fabric, domain, type_ in infos:
        sys.stdout.write("provider: efa\n    fabric: %s\n    domain: %s\n    version: %s\n"
                         "    type: %s\n    protocol: FI_PROTO_EFA\n"
                         % (fabric, domain, version, type_))
    return 0


sys.exit(main(sys.argv[1:]))
"""


def efa_device_names(devices: int) -> list[str]:
    """EFA device names (rdmap16s27, rdmap32s27, ...); beyond four, p5-style rdmap<N>s0."""
    if devices <= len(_EFA_DEVICES):
        return _EFA_DEVICES[:devices]
    return [f"rdmap{79 + i}s0" for i in range(devices)]


def fi_info_script(devices: int, python: str = PYTHON, *, libfabric: str = "2.1.0") -> str:
    """An executable `fi_info` (libfabric `libfabric`) on a node with `devices` EFA devices.

    `-p efa -t FI_EP_RDM` prints, per device, an "efa-direct" (libfabric >= 2) and an "efa"
    entry (all efa-direct first, as the provider orders them), domain "<device>-rdm", version
    e.g. 201.0 for 2.1; no match prints "fi_getinfo: -61 (No data available)" to stderr, exit 61.
    """
    config = {"devices": efa_device_names(devices), "libfabric": libfabric}
    return _script(python, config, _FI_INFO_BODY)


# --------------------------------------------------------------------------------------------
# lspci
# --------------------------------------------------------------------------------------------

_LSPCI_BODY = r"""
import sys

CLASSES = {"0600": "Host bridge", "0601": "ISA bridge", "0300": "VGA compatible controller",
           "0108": "Non-Volatile memory controller", "0200": "Ethernet controller",
           "0302": "3D controller", "0680": "Bridge"}
VENDORS = {"8086": "Intel Corporation", "1d0f": "Amazon.com, Inc.", "10de": "NVIDIA Corporation"}


def die(msg):
    sys.stderr.write("lspci: %s\n" % msg)
    sys.exit(2)


def parse_filter(spec):
    parts = spec.split(":")
    if len(parts) > 4:
        die("-d: Invalid filter")
    parts += [""] * (4 - len(parts))
    out = []
    for p, width in zip(parts[:3], (4, 4, 4)):
        p = p.lower()
        if p in ("", "*"):
            out.append(None)
            continue
        if len(p) > width or any(c not in "0123456789abcdef" for c in p):
            die("-d: Invalid vendor ID" if not out else
                ("-d: Invalid device ID" if len(out) == 1 else "-d: Invalid class code"))
        out.append(p.zfill(width))
    return out


def main(argv):
    numeric = 0
    domains = False
    filt = [None, None, None]
    i = 0
    while i < len(argv):
        arg = argv[i]
        if not arg.startswith("-") or arg == "-":
            die("Unexpected argument: %s" % arg)
        j = 1
        while j < len(arg):
            c = arg[j]
            if c == "n":
                numeric += 1
            elif c == "D":
                domains = True
            elif c in "vkqQ":
                pass
            elif c == "d":
                rest = arg[j + 1:]
                if not rest:
                    i += 1
                    if i >= len(argv):
                        die("option requires an argument -- 'd'")
                    rest = argv[i]
                filt = parse_filter(rest)
                break
            else:
                sys.stderr.write("lspci: invalid option -- '%s'\n" % c)
                sys.stderr.write("Usage: lspci [<switches>]\n")
                sys.exit(2)
            j += 1
        i += 1
    for slot, vendor, device, cls, rev, name in sorted(CONFIG["devices"]):
        if any(want is not None and want != have
               for want, have in zip(filt, (vendor, device, cls))):
            continue
        addr = ("0000:" + slot) if domains else slot
        revs = " (rev %s)" % rev if rev else ""
        if numeric == 1:
            line = "%s %s: %s:%s%s" % (addr, cls, vendor, device, revs)
        else:
            vname = VENDORS.get(vendor, "Device %s" % vendor)
            dname = name or "Device"
            if numeric >= 2:
                dname = "%s [%s:%s]" % (dname, vendor, device)
                cname = "%s [%s]" % (CLASSES.get(cls, "Class " + cls), cls)
            else:
                dname = name or "Device %s" % device
                cname = CLASSES.get(cls, "Class " + cls)
            line = "%s %s: %s %s%s" % (addr, cname, vname, dname, revs)
        sys.stdout.write(line + "\n")
    return 0


sys.exit(main(sys.argv[1:]))
"""


def lspci_script(
    nvswitches: int, gpus: int, python: str = PYTHON, *, model: str = "A100-SXM4-40GB"
) -> str:
    """An executable `lspci` listing `gpus` GPUs of `model` and `nvswitches` NVSwitch bridges.

    Supports -n / -nn / -D and the -d [vendor]:[device][:class] filter (empty or * = any), e.g.
    `lspci -n -d 10de:` -> "10:1c.0 0302: 10de:20b0 (rev a1)", `lspci -d 10de::0680` ->
    "07:00.0 Bridge: NVIDIA Corporation Device 1af1 (rev a1)" (H100 systems: 10de:22a3). NVIDIA
    devices are shown unnamed ("Device 1af1"); a few EC2 platform devices are listed too.
    """
    info = GPU_MODELS[_model_key(model)]
    devices: list[list[str]] = [
        ["00:00.0", "8086", "1237", "0600", "", "440FX - 82441FX PMC [Natoma]"],
        ["00:01.0", "8086", "7000", "0601", "", "82371SB PIIX3 ISA [Natoma/Triton II]"],
        ["00:03.0", "1d0f", "1111", "0300", "", ""],
        ["00:04.0", "1d0f", "8061", "0108", "", "NVMe EBS Controller"],
        ["00:05.0", "1d0f", "ec20", "0200", "", "Elastic Network Adapter (ENA)"],
    ]
    for bus in gpu_bus_ids(_model_key(model), gpus):
        devices.append([bus[9:].lower(), "10de", info["pci"], "0302", "a1", ""])
    switch = info.get("switch", "1af1")
    for n in range(nvswitches):
        devices.append([f"{7 + n:02x}:00.0", "10de", switch, "0680", "a1", ""])
    return _script(python, {"devices": devices}, _LSPCI_BODY)


# --------------------------------------------------------------------------------------------
# apt-get and dpkg
# --------------------------------------------------------------------------------------------

_APT_COMMON = r'''
import contextlib
import fcntl
import os
import sys

PID_NAME = "1234 (unattended-upgr)"


@contextlib.contextmanager
def state_file():
    """The state, locked against concurrent fakes, written back on exit."""
    path = CONFIG["state"]
    with open(path + ".lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            with open(path) as f:
                state = json.load(f)
        except FileNotFoundError:
            state = {}
        state.setdefault("calls", []).append([os.path.basename(sys.argv[0])] + sys.argv[1:])
        try:
            yield state
        finally:
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(state, f, indent=1)
            os.replace(tmp, path)


def err(text):
    sys.stderr.write(text)


def package_name(arg):
    """mount-s3_1.9.0_amd64.deb -> mount-s3; pkg=1.2 / pkg:amd64 -> pkg."""
    base = os.path.basename(arg)
    if base.endswith(".deb"):
        return base[:-4].split("_")[0]
    return base.split("=")[0].split(":")[0]


def install(state, name, also=()):
    installed = state.setdefault("installed", [])
    for item in (name, *also):
        if item not in installed:
            installed.append(item)


def take_fault(state, key):
    faults = state.get("fail_install") or {}
    if int(faults.get(key, 0)) > 0:
        faults[key] = int(faults[key]) - 1
        return True
    return False
'''

_APT_GET_BODY = (
    _APT_COMMON
    + r'''
LOCKING = {"update", "install", "reinstall", "remove", "purge", "upgrade", "dist-upgrade",
           "full-upgrade", "autoremove", "autopurge", "clean", "autoclean", "check",
           "build-dep", "satisfy"}
OTHER = {"source", "download", "changelog", "indextargets", "moo"}
LONG = {"--yes", "--assume-yes", "--assume-no", "--quiet", "--no-install-recommends",
        "--install-recommends", "--allow-downgrades", "--allow-remove-essential",
        "--allow-change-held-packages", "--allow-unauthenticated", "--fix-broken",
        "--fix-missing", "--reinstall", "--simulate", "--dry-run", "--download-only",
        "--no-download", "--purge", "--only-upgrade", "--force-yes", "--show-progress",
        "--print-uris", "--ignore-missing", "--no-upgrade", "--auto-remove"}
MIRROR = "http://us-east-1.ec2.archive.ubuntu.com/ubuntu"


def parse(argv):
    options, words = {}, []
    i = 0
    while i < len(argv):
        arg = argv[i]
        kv = None
        if arg in ("-o", "--option"):
            i += 1
            if i >= len(argv):
                err("E: Option -o requires an argument.\n")
                sys.exit(100)
            kv = argv[i]
        elif arg.startswith("--option="):
            kv = arg[len("--option="):]
        elif arg.startswith("-o") and not arg.startswith("--"):
            kv = arg[2:]
        elif arg.startswith("--"):
            if arg.split("=")[0] not in LONG:
                err("E: Command line option %s is not understood in combination with the "
                    "other options\n" % arg)
                sys.exit(100)
        elif arg.startswith("-") and len(arg) > 1:
            for c in arg[1:]:
                if c not in "yqfsmdbuVhe":
                    err("E: Command line option '%s' [from %s] is not understood in "
                        "combination with the other options.\n" % (c, arg))
                    sys.exit(100)
        else:
            words.append(arg)
        if kv is not None:
            key, eq, value = kv.partition("=")
            if not eq:
                err("E: Option %s: Configuration item specification must have an =<val>.\n"
                    % kv)
                sys.exit(100)
            options[key.lower()] = value
        i += 1
    return options, words


def lock_timeout(options):
    try:
        return int(options.get("dpkg::lock::timeout", "0"))
    except ValueError:
        return 0


def locked_out(state, command, options):
    """True (having printed apt's error) if the lock is held and apt does not wait for it."""
    held = int(state.get("lock_held_for", 0))
    if held <= 0:
        return False
    if lock_timeout(options) > 0:
        lock = "/var/lib/apt/lists/lock" if command == "update" else \
            "/var/lib/dpkg/lock-frontend"
        err("Waiting for cache lock: Could not get lock %s. It is held by process %s... 1s\n"
            % (lock, PID_NAME))
        state["lock_held_for"] = 0
        state["waited"] = int(state.get("waited", 0)) + 1
        return False
    state["lock_held_for"] = held - 1
    note = "N: Be aware that removing the lock file is not a solution and may break your system.\n"
    if command == "update":
        sys.stdout.write("Reading package lists...\n")
        err("E: Could not get lock /var/lib/apt/lists/lock. It is held by process %s\n"
            % PID_NAME + note + "E: Unable to lock directory /var/lib/apt/lists/\n")
    else:
        err("E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process %s\n"
            % PID_NAME + note + "E: Unable to acquire the dpkg frontend lock "
            "(/var/lib/dpkg/lock-frontend), is another process using it?\n")
    return True


def update(state):
    if take_fault(state, "update"):
        sys.stdout.write("Err:1 %s noble InRelease\n  Could not connect to "
                         "us-east-1.ec2.archive.ubuntu.com:80, connection timed out\n" % MIRROR)
        sys.stdout.write("Reading package lists...\n")
        err("W: Failed to fetch %s/dists/noble/InRelease  Could not connect to "
            "us-east-1.ec2.archive.ubuntu.com:80, connection timed out\n"
            "W: Some index files failed to download. They have been ignored, or old ones "
            "used instead.\n" % MIRROR)
        return 100
    for n, suite in enumerate(("noble", "noble-updates", "noble-backports"), 1):
        sys.stdout.write("Hit:%d %s %s InRelease\n" % (n, MIRROR, suite))
    sys.stdout.write("Reading package lists...\n")
    state["updated"] = True
    return 0


def known(state, name):
    """Whether apt can find `name` in its (possibly stale) index."""
    if name in (state.get("requires_update") or []) and not state.get("updated"):
        return False
    available = state.get("available")
    return available is None or name in available or name in (state.get("installed") or [])


def install_cmd(state, args):
    sys.stdout.write("Reading package lists...\nBuilding dependency tree...\n"
                     "Reading state information...\n")
    depends = state.get("depends", {"mount-s3": ["libfuse2t64"]})
    plan = []  # (name, recorded extra, is_file)
    for arg in args:
        if arg.endswith(".deb") and "/" in arg:
            if not os.path.isfile(arg):
                err("E: Unsupported file %s given on commandline\n" % arg)
                return 100
            name = package_name(arg)
            sys.stdout.write("Note, selecting '%s' instead of '%s'\n" % (name, arg))
            plan.append((name, os.path.basename(arg), True))
        else:
            name = arg.split("=")[0].split(":")[0]
            if name.endswith(".deb") or not known(state, name):
                err("E: Unable to locate package %s\n" % name)
                return 100
            plan.append((name, None, False))
    broken = [(name, dep) for name, _, _ in plan for dep in depends.get(name, [])
              if not known(state, dep)]
    if broken:
        sys.stdout.write(
            "Some packages could not be installed. This may mean that you have\n"
            "requested an impossible situation or if you are using the unstable\n"
            "distribution that some required packages have not yet been created\n"
            "or been moved out of Incoming.\n"
            "The following information may help to resolve the situation:\n\n"
            "The following packages have unmet dependencies:\n")
        for name, dep in broken:
            sys.stdout.write(" %s : Depends: %s but it is not installable\n" % (name, dep))
        err("E: Unable to correct problems, you have held broken packages.\n")
        return 100
    installed = state.get("installed") or []
    new = [n for n, _, _ in plan if n not in installed]
    new += [d for n, _, _ in plan for d in depends.get(n, []) if d not in installed]
    for name, _, _ in plan:
        if name in installed and name not in new:
            sys.stdout.write("%s is already the newest version.\n" % name)
    for name, extra, _ in plan:
        if take_fault(state, name) or (extra and take_fault(state, extra)):
            err("E: Failed to fetch %s/pool/main/%s/%s/%s_1.0_amd64.deb  503  Service "
                "Unavailable [IP: 10.0.0.2 80]\nE: Unable to fetch some archives, maybe run "
                "apt-get update or try with --fix-missing?\n" % (MIRROR, name[0], name, name))
            return 100
    if new:
        sys.stdout.write("The following NEW packages will be installed:\n  %s\n" % " ".join(new))
    sys.stdout.write("0 upgraded, %d newly installed, 0 to remove and 0 not upgraded.\n"
                     % len(new))
    for name, extra, _ in plan:
        for dep in depends.get(name, []):
            install(state, dep)
        install(state, name, (extra,) if extra else ())
    for name in reversed(new):
        sys.stdout.write("Setting up %s ...\n" % name)
    return 0


def main(argv):
    options, words = parse(argv)
    with state_file() as state:
        if not words:
            sys.stdout.write("apt 2.7.14 (amd64)\nUsage: apt-get [options] command\n")
            return 1
        command, args = words[0], words[1:]
        if command not in LOCKING and command not in OTHER:
            err("E: Invalid operation %s\n" % command)
            return 100
        if command in LOCKING and locked_out(state, command, options):
            return 100
        if command == "update":
            return update(state)
        if command in ("install", "reinstall"):
            return install_cmd(state, args)
        if command in ("remove", "purge"):
            for name in args:
                if name in (state.get("installed") or []):
                    state["installed"].remove(name)
            return 0
        return 0


sys.exit(main(sys.argv[1:]))
'''
)

_DPKG_BODY = (
    _APT_COMMON
    + r"""
def dpkg_locked(state):
    held = int(state.get("lock_held_for", 0))
    if held <= 0:
        return False
    state["lock_held_for"] = held - 1
    err("dpkg: error: dpkg frontend lock was locked by another process with pid 1234\n"
        "Note: removing the lock file is always wrong, can damage the locked area\n"
        "and the entire system. See <https://wiki.debian.org/Teams/Dpkg/FAQ#db-lock>.\n")
    return True


def status(state, names):
    code = 0
    installed = state.get("installed") or []
    for n, name in enumerate(names):
        if name in installed:
            if n:
                sys.stdout.write("\n")
            sys.stdout.write("Package: %s\nStatus: install ok installed\nPriority: optional\n"
                             "Section: misc\nArchitecture: amd64\nVersion: %s\n"
                             "Description: %s\n" % (name, (state.get("versions") or {})
                                                    .get(name, "1.0"), name))
        else:
            err("dpkg-query: package '%s' is not installed and no information is available\n"
                % name)
            code = 1
    if code:
        err("Use dpkg --info (= dpkg-deb --info) to examine archive files.\n")
    return code


def listing(state, names):
    installed = state.get("installed") or []
    shown = [n for n in installed if not names or n in names]
    if not shown:
        for name in names:
            err("dpkg-query: no packages found matching %s\n" % name)
        return 1
    sys.stdout.write(
        "Desired=Unknown/Install/Remove/Purge/Hold\n"
        "| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend\n"
        "|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)\n"
        "||/ Name           Version      Architecture Description\n"
        "+++-==============-============-============-=================================\n")
    for name in shown:
        sys.stdout.write("ii  %-14s %-12s amd64        %s\n" % (name, "1.0", name))
    return 0


def install_debs(state, files):
    if not files:
        err("dpkg: error: --install needs at least one package archive file argument\n\n"
            "Type dpkg --help for help about installing and deinstalling packages [*];\n")
        return 2
    code = 0
    for path in files:
        if not os.path.isfile(path):
            err("dpkg: error: cannot access archive '%s': No such file or directory\n" % path)
            return 2
        name, base = package_name(path), os.path.basename(path)
        if take_fault(state, name) or take_fault(state, base):
            err("dpkg: error processing archive %s (--install):\n installed %s package "
                "post-installation script subprocess returned error exit status 1\n"
                "Errors were encountered while processing:\n %s\n" % (path, name, path))
            code = 1
            continue
        sys.stdout.write("Selecting previously unselected package %s.\n"
                         "Unpacking %s ...\nSetting up %s ...\n" % (name, name, name))
        install(state, base, (name,))
    return code


def main(argv):
    with state_file() as state:
        action, args = None, []
        for arg in argv:
            if arg in ("-i", "--install", "-s", "--status", "-l", "--list", "-r", "--remove",
                       "-P", "--purge", "--configure", "--print-architecture", "-L",
                       "--listfiles"):
                action = arg
            elif arg in ("-E", "--skip-same-version", "-a", "--pending", "-G",
                         "--refuse-downgrade") or arg.startswith("--force-"):
                pass
            elif arg.startswith("-"):
                err("dpkg: error: unknown option %s\n\nType dpkg --help for help about "
                    "installing and deinstalling packages [*];\n" % arg)
                return 2
            else:
                args.append(arg)
        if action == "--print-architecture":
            sys.stdout.write(state.get("arch", "amd64") + "\n")
            return 0
        if action in ("-s", "--status"):
            return status(state, args)
        if action in ("-l", "--list"):
            return listing(state, args)
        if action in ("-i", "--install", "-r", "--remove", "-P", "--purge", "--configure"):
            if dpkg_locked(state):
                return 2
            if action in ("-i", "--install"):
                return install_debs(state, args)
            if action != "--configure":
                for name in args:
                    if name in (state.get("installed") or []):
                        state["installed"].remove(name)
            return 0
        err("dpkg: error: need an action option\n\nType dpkg --help for help about "
            "installing and deinstalling packages [*];\n")
        return 2


sys.exit(main(sys.argv[1:]))
"""
)


def apt_scripts(state_path: Path, python: str = PYTHON) -> dict[str, str]:
    """Executable `apt-get` and `dpkg` ({name: text}) driven by the JSON at `state_path`.

    State keys (all optional): lock_held_for (the next N locking calls fail: apt-get exits 100,
    dpkg 2; apt-get with -o DPkg::Lock::Timeout=N>0 waits instead: lock_held_for becomes 0 and
    waited += 1), installed, available (absent: everything is), requires_update (found only
    after `apt-get update`), depends ({package: [deps]}, default {"mount-s3": ["libfuse2t64"]}),
    fail_install ({package, .deb file name or "update": times}), versions, arch. The fakes add
    calls (each argv, program name first), updated, waited, and installed entries (a .deb adds
    its file name and its package name).
    """
    config = {"state": str(state_path)}
    return {
        "apt-get": _script(python, config, _APT_GET_BODY),
        "dpkg": _script(python, config, _DPKG_BODY),
    }


if __name__ == "__main__":  # pragma: no cover
    print(os.path.basename(__file__), "defines fakes; import it from a test.")
