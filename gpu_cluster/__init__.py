"""gpu-cluster: GPU clusters on AWS as reviewable Pulumi code.

The import name of the library: `gpu_cluster.components` (the Pulumi components),
`gpu_cluster.infra` (stack config, the program, the offline plan, the AWS commands) and
`gpu_cluster.policy` (the security pack). In the repository they are the top-level folders
components/, infra/ and policy/ (pyproject.toml maps them); the wheel installs them under
gpu_cluster/, so nothing else is top-level in a user's environment."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what editors and type checkers see; at run time, __getattr__ below
    from gpu_cluster.infra.api import (
        ArgumentError,
        DataStore,
        DataStoreArgs,
        GpuCluster,
        GpuClusterArgs,
        GpuNodeGroup,
        GpuNodeGroupArgs,
        InferenceService,
        InferenceServiceArgs,
    )

try:
    __version__ = version("gpu-cluster")
except PackageNotFoundError:  # a checkout that was never installed
    __version__ = "0+unknown"

# The public components, for your own Pulumi program (gpu_cluster.infra.api). Imported when
# first used, so `import gpu_cluster` (and `gpuc --version`) stays light.
__all__ = [
    "ArgumentError",
    "DataStore",
    "DataStoreArgs",
    "GpuCluster",
    "GpuClusterArgs",
    "GpuNodeGroup",
    "GpuNodeGroupArgs",
    "InferenceService",
    "InferenceServiceArgs",
    "__version__",
]


def __getattr__(name: str) -> Any:
    if name in __all__ and name != "__version__":
        from gpu_cluster.infra import api

        return getattr(api, name)
    raise AttributeError(f"module 'gpu_cluster' has no attribute {name!r}")
