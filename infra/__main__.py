"""Pulumi entry point (Pulumi.yaml: main: infra/). Pulumi's Python host puts this folder on
sys.path; the project root goes first so `gpu_cluster` (its folders) imports from this checkout
even where the project was not installed with pip."""

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parent.parent)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from gpu_cluster.infra.versions import require_supported_pulumi  # noqa: E402

require_supported_pulumi()  # an SDK or CLI too old for the program: a message, nothing made

from gpu_cluster.infra.program import main  # noqa: E402

main()
