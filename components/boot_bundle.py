"""The boot bundle: the node programs too large for the user data (EC2's 16 KB), kept as one
object in the stack's bucket and installed by the node on first use.

`pulumi up` puts the bundle at a key that holds its SHA-256 (components/cluster.py); the user
data carries that key and digest (cluster.env: BUNDLE_KEY, BUNDLE_SHA256) and a small
`gpu-cluster-jobs` command (boot/gpu-cluster-bundle.sh) that fetches the object once, refuses it
unless its digest matches, runs it to install the files, then hands over to the installed
program. A change to a bundled script changes the digest, hence the key and the user data: a
node never runs a bundle other than the one its launch template names.

The bundle is a bash script of quoted here-documents, one per file, each written beside its
place and moved over it (a node running the old file never reads half of the new one)."""

from __future__ import annotations

import hashlib
from functools import cache

from gpu_cluster.components.boot_files import CONSTANTS, boot_script, fill

LIB = "/usr/local/lib/gpu-cluster"
# (bundled file, where the node installs it): the jobs supervisor and the job code helpers
BUNDLED = (
    ("gpu-cluster-jobs.sh", f"{LIB}/gpu-cluster-jobs"),
    ("gpu-cluster-job-code.sh", f"{LIB}/job-code.sh"),
)
BUNDLE_PREFIX = "gpu-cluster/boot"


def bundled_file(script: str, path: str) -> str:
    """A here-document that installs ``script`` at ``$R<path>`` (mode 755) atomically."""
    text = fill(boot_script(script), CONSTANTS).rstrip("\n")
    return "\n".join(
        [
            f"cat > \"$R{path}.new\" <<'GPUC_BUNDLED_FILE'",
            text,
            "GPUC_BUNDLED_FILE",
            f'chmod 755 "$R{path}.new" && mv -f "$R{path}.new" "$R{path}"',
        ]
    )


@cache
def boot_bundle() -> str:
    """The bundle's text: the same bytes for every stack (nothing of the stack is in it)."""
    return "\n".join(
        [
            "#!/bin/bash",
            "# gpu-cluster boot bundle (components/boot_bundle.py): installs the node programs",
            "set -euo pipefail",
            'R="${GPUC_ROOT:-}"',
            f'mkdir -p "$R{LIB}"',
            *(bundled_file(script, path) for script, path in BUNDLED),
            "",
        ]
    )


def bundle_sha256() -> str:
    return hashlib.sha256(boot_bundle().encode()).hexdigest()


def bundle_key(folder: str) -> str:
    """The bundle's key in the stack's bucket: one per stack (``folder``: names.bundle_folder;
    two stacks sharing a bucket each own their object, and a destroy removes only its own),
    named by its digest."""
    return f"{BUNDLE_PREFIX}/{folder}/{bundle_sha256()}.sh"
