"""Helpers for the issue-25 tests on the boot harness (tests/boot_harness.py): a node factory and
readers of what a node called."""

from __future__ import annotations

from pathlib import Path

import boot_harness
import pytest
from boot_harness import P4D, BootNode, Hardware
from test_boot_harness import GROUP, ONE_NODE, SELF, TRAIN

from gpu_cluster.components.user_data import BootConfig

__all__ = [
    "GROUP", "ONE_NODE", "SELF", "TRAIN", "Nodes", "argument", "aws_calls", "health", "nodes",
]  # fmt: skip


def write_stub(node: BootNode, name: str, body: str) -> None:
    """A command of the node (first on its PATH) replaced by a bash ``body``."""
    path = node.bin / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def df_stub(node: BootNode, available_kib: int, size_kib: int = 300 * 2**20) -> None:
    """`df -P` of a root volume with ``available_kib`` free (-m: in MiB)."""
    used = size_kib - available_kib
    write_stub(
        node,
        "df",
        'unit=1024; case " $* " in *" -Pm "*|*" -m "*) unit=1048576 ;; esac\n'
        'echo "Filesystem 1024-blocks Used Available Capacity Mounted on"\n'
        f'echo "/dev/root $(({size_kib} * 1024 / unit)) $(({used} * 1024 / unit)) '
        f'$(({available_kib} * 1024 / unit)) {used * 100 // size_kib}% /"\n',
    )


def aws_calls(node: BootNode, *prefix: str) -> list[list[str]]:
    return [call for call in node.aws_calls() if call[: len(prefix)] == list(prefix)]


def argument(call: list[str], flag: str) -> str:
    return call[call.index(flag) + 1]


def health(node: BootNode) -> str:
    return node.read("/etc/gpu-cluster/health").strip()


def mark_booted(node: BootNode) -> None:
    """This boot's own health check has run and passed (the watch starts after it)."""
    node.file("/run/gpu-cluster").mkdir(parents=True, exist_ok=True)
    node.file("/run/gpu-cluster/health-checked").write_text("")
    node.file("/run/gpu-cluster/health-published").write_text("ok\n")
    node.file("/etc/gpu-cluster/health").write_text("ok\n")


class Nodes(boot_harness.Nodes):
    """Installed BootNodes of the training stack (the one-node answers by default)."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder, ONE_NODE, install=True)

    def make(
        self,
        boot: BootConfig = TRAIN,
        hardware: Hardware = P4D,
        aws: list[tuple[str, str]] | None = None,
        endpoint: str | None = None,
        instance_id: str = "i-0abc1234def567890",
        user_data: str | None = None,
    ) -> BootNode:
        return super().make(boot, hardware, aws, endpoint, instance_id, user_data)


@pytest.fixture
def nodes(tmp_path):
    made = Nodes(tmp_path)
    yield made
    made.stop()


def published_metrics(call: list[str]) -> list[dict]:
    """put-metric-data --metric-data items in the CLI's shorthand, parsed."""
    items = call[call.index("--metric-data") + 1 :]
    items = items[: next((i for i, a in enumerate(items) if a.startswith("--")), len(items))]
    parsed = []
    for item in items:
        head, _, dimensions = item.partition(",Dimensions=")
        fields = dict(part.split("=", 1) for part in head.split(","))
        pairs = dimensions.strip("[]{}").split("},{")
        names = [dict(kv.split("=", 1) for kv in pair.split(",")) for pair in pairs]
        parsed.append({**fields, "Dimensions": {d["Name"]: d["Value"] for d in names}})
    return parsed
