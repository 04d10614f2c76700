"""What nvidia-smi tells about a GPU and the processes on it: plain values, shared by the parser and the fleet.

They live here, beside the parser that makes them (`console.gpu.nvsmi`), so the GPU layer needs nothing from
the fleet layer above it; `console.fleet.events` carries them in GpuSample and ProcessSample.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuReading:
    """One GPU's row from `nvidia-smi --query-gpu`; None where the tool printed [N/A]."""

    index: int
    uuid: str = ""
    name: str = ""
    pci_bus_id: str = ""
    memory_used_mib: int | None = None
    memory_total_mib: int | None = None
    utilization_pct: int | None = None
    memory_util_pct: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    clocks_sm_mhz: int | None = None


@dataclass(frozen=True)
class ComputeApp:
    """One row of `nvidia-smi --query-compute-apps`: a process holding memory on a GPU (by its UUID)."""

    pid: int
    gpu_uuid: str
    process_name: str
    used_mib: int | None
