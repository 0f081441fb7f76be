"""The GPU and EFA error classes a node's health check counts and publishes (GpuErrors)."""

from __future__ import annotations

# The `Class` dimension of the gpu-cluster/GpuErrors metric (boot/gpu-cluster-health.sh),
# published per node only when non-zero.
GPU_ERROR_CLASSES: tuple[str, ...] = (
    "EccSingleBitVolatile",
    "EccDoubleBitVolatile",
    "RowRemapPending",
    "RowRemapFailure",
    "XidFatal",
    "XidNvlink",
    "XidMemory",
    "XidOther",
    "ThrottleHwSlowdown",
    "ThrottleThermal",
    "ThrottlePowerBrake",
    "PcieLinkDegraded",
    "NvlinkErrors",
    "EfaErrors",
)
