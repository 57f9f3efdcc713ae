"""NVIDIA GPUs with total and free memory, read through ``nvidia-smi`` or NVML.

Never through CUDA: creating a CUDA context takes hundreds of MB of GPU memory and
seconds, and would itself change what is being measured. No GPU is a fine answer.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

QUERY = "index,name,memory.total,memory.used,memory.free,driver_version"
MiB = 1 << 20


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    total: int
    used: int
    free: int
    driver: str

    def to_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class GpuInventory:
    gpus: list[Gpu] = field(default_factory=list)
    source: str | None = None  # "nvidia-smi" | "NVML" | None when neither exists
    error: str | None = None  # why the source could not be read

    def to_dict(self) -> dict[str, object]:
        return {"gpus": [g.to_dict() for g in self.gpus], "source": self.source,
                "error": self.error}


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Rows of ``nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits``."""
    gpus = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 6:
            continue
        try:
            index, total, used, free = int(parts[0]), *(int(float(p)) * MiB
                                                          for p in parts[2:5])
        except ValueError:
            continue  # "[N/A]" on some virtual GPUs
        gpus.append(Gpu(index, parts[1], total, used, free, parts[5]))
    return gpus


def _from_nvidia_smi(path: str) -> GpuInventory:
    try:
        out = subprocess.run([path, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as err:
        return GpuInventory([], "nvidia-smi", f"nvidia-smi did not answer: {err}")
    if out.returncode != 0:
        message = (out.stderr or out.stdout).strip().splitlines()
        return GpuInventory([], "nvidia-smi", message[0] if message else
                            f"nvidia-smi exited with {out.returncode}")
    return GpuInventory(parse_nvidia_smi(out.stdout), "nvidia-smi")


def _from_nvml() -> GpuInventory | None:
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as err:  # noqa: BLE001 - NVML without a driver: no GPU
        return GpuInventory([], "NVML", f"NVML: {err}")
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
            name = pynvml.nvmlDeviceGetName(handle)
            gpus.append(Gpu(index, name.decode() if isinstance(name, bytes) else str(name),
                            int(memory.total), int(memory.used), int(memory.free),
                            driver.decode() if isinstance(driver, bytes) else str(driver)))
        return GpuInventory(gpus, "NVML")
    finally:
        pynvml.nvmlShutdown()


def gpu_inventory() -> GpuInventory:
    """The NVIDIA GPUs here (nvidia-smi first, then NVML through pynvml if installed)."""
    path = shutil.which("nvidia-smi")
    if path is not None:
        return _from_nvidia_smi(path)
    try:
        found = _from_nvml()
    except Exception as err:  # noqa: BLE001 - a broken binding: no answer, not a crash
        return GpuInventory([], "NVML", f"NVML: {err}")
    return found if found is not None else GpuInventory()
