"""Time of a node's boot on the test harness (tests/boot_harness.py), and the user data sizes.

    python bench/boot_time.py [--repeat 3] [--budget-seconds 10]

For each stage's user data (train, spot experiment, the largest variant), a whole boot on the
harness: every step's script, the fake IMDS server, nvidia-smi, fi_info, apt and systemctl. The
median of ``--repeat`` boots, with the user data's size (gzip, as EC2 counts it) and the
script's. Target: a boot within ``--budget-seconds`` on this project's 2-core machine, so the
boot scenarios stay cheap in `.ci/run` (the harness boots a node in about 20 tests). Exit 0
whatever the figures unless ``--check``: then 1 when over the budget.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from boot_fakes import FakeImds  # noqa: E402
from boot_harness import P4D, P5_48XL, BootNode  # noqa: E402

import gpu_cluster.components.user_data as user_data  # noqa: E402
from gpu_cluster.components.user_data import BootConfig, render_user_data, user_data_payload  # noqa: E402

user_data.JOB_USER = "root"  # no `ubuntu` user on the build machine (the secrets step's group)

TRAIN = BootConfig("train", "us-east-1", 8, 8, 4, "bucket-1", nvswitch=True, row_remapping=True)
CASES = {
    "train (p4d, 4 EFA)": (TRAIN, P4D),
    "experiment (spot)": (replace(TRAIN, spot=True), P4D),
    "largest (p5.48xlarge, spot, FSx, secrets)": (
        replace(
            TRAIN,
            efa_interfaces=32,
            spot=True,
            lustre_target="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com@tcp:/abcdefgh",
            secrets_path="/gpu-cluster/a-twenty-char-name-1/secrets",
            internet=False,
        ),
        P5_48XL,
    ),
}
ANSWERS = [
    ("Tags[?Key==", "train-nodes-group"),
    ("get-parameters-by-path", '{"Parameters": []}'),
    ("describe-auto-scaling-groups", "1"),
    ("describe-instances", "2026-12-01T08:00:00+00:00\ti-0abc1234def567890\t10.42.0.30"),
]


def boot_once(boot: BootConfig, hardware) -> tuple[float, str]:
    with tempfile.TemporaryDirectory() as folder, FakeImds() as imds:
        node = BootNode(Path(folder), render_user_data(boot), imds, hardware)
        node.activate("nvidia-fabricmanager.service")
        node.answer_aws(ANSWERS)
        start = time.perf_counter()
        node.boot()
        seconds = time.perf_counter() - start
        return seconds, node.read("/etc/gpu-cluster/health").strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--budget-seconds", type=float, default=10.0)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    print(f"{'case':<44}{'user data B':>12}{'script B':>10}{'boot s':>8}  health")
    over = False
    for name, (boot, hardware) in CASES.items():
        script = render_user_data(boot)
        size = len(base64.b64decode(user_data_payload(script)))
        assert gzip.decompress(base64.b64decode(user_data_payload(script))).decode() == script
        runs = [boot_once(boot, hardware) for _ in range(args.repeat)]
        seconds = statistics.median(r[0] for r in runs)
        over |= seconds > args.budget_seconds
        print(f"{name:<44}{size:>12,}{len(script.encode()):>10,}{seconds:>8.2f}  {runs[0][1]}")
    verdict = "FAIL" if over else "PASS"
    print(f"budget {args.budget_seconds:g} s per boot: {verdict}")
    return 1 if over and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
