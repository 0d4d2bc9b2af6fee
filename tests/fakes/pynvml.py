"""A fake of the ``pynvml`` module (nvidia-ml-py) that answers as real drivers do.

It raises the real exception classes (``pynvml.NVMLError_*``, built by nvidia-ml-py from
its ``NVML_ERROR_*`` codes), so the code under test tells errors apart exactly as it would
against a driver. Devices are dicts; a field set to an exception instance raises it.

Answers reproduced (nvidia-ml-py 12.x/13.x ``pynvml.py``; nvitop ``api/libnvml.py``):

- no driver: ``nvmlInit`` raises ``NVMLError_LibraryNotFound`` (libnvidia-ml.so.1 absent)
  or ``NVMLError_DriverNotLoaded``;
- WSL2 (Windows' WDDM driver model): every process's ``usedGpuMemory`` is
  ``NVML_VALUE_NOT_AVAILABLE``, which pynvml returns as ``None``; ``wsl_device()``;
- access blocked: ``NVMLError_OperatingSystem`` (``NVML_ERROR_OPERATING_SYSTEM``, 17:
  "The operating system has blocked the request.", nvidia-smi's "GPU access blocked by
  the operating system"), at init or on every device query (``blocked_device()``);
- driver/library skew: ``NVMLError_LibRmVersionMismatch``.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml

GIB = 1024**3


def mem(used: int, total: int) -> SimpleNamespace:
    """An ``nvmlMemory_t``-like answer."""
    return SimpleNamespace(used=used, total=total, free=total - used)


def h100(**overrides: Any) -> dict[str, Any]:
    """An H100 running one 69 GiB process, every field readable."""
    device: dict[str, Any] = {
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-0b1c2d3e-0000-1111-2222-333344445555",
        "memory_v2": mem(70 * GIB, 80 * GIB),
        "memory": mem(71 * GIB, 80 * GIB),
        "util": 93,
        "temp": 61,
        "power_mw": 612_345,
        "procs": [(4242, 69 * GIB)],
    }
    device.update(overrides)
    return device


def wsl_device(**overrides: Any) -> dict[str, Any]:
    """An RTX 4090 as WSL2's NVML shows it: memory and util fine, process memory hidden."""
    device = h100(
        name="NVIDIA GeForce RTX 4090",
        uuid="GPU-4090aaaa-0000-1111-2222-333344445555",
        memory_v2=mem(20 * GIB, 24 * GIB),
        memory=mem(20 * GIB, 24 * GIB),
        procs=[(4242, None), (4243, None)],
    )
    device.update(overrides)
    return device


def blocked_device(**overrides: Any) -> dict[str, Any]:
    """A device on which every query is refused by the operating system."""
    blocked = pynvml.NVMLError_OperatingSystem()
    device = dict.fromkeys(
        ("memory_v2", "memory", "util", "temp", "power_mw", "procs", "uuid"), blocked
    )
    device["name"] = "NVIDIA GeForce RTX 3080"
    device.update(overrides)
    return device


class FakeNvml:
    """Just enough of pynvml. ``init_error`` is raised by ``nvmlInit``; ``count_error`` by
    ``nvmlDeviceGetCount``."""

    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
    nvmlMemory_v2 = pynvml.nvmlMemory_v2

    def __init__(
        self,
        devices: list[dict[str, Any]],
        init_error: BaseException | None = None,
        count_error: BaseException | None = None,
    ) -> None:
        self.devices = devices
        self.init_error = init_error
        self.count_error = count_error
        self.calls: list[str] = []
        self.initialized = 0
        # The real exception classes, as the source finds them on the module.
        for name in dir(pynvml):
            if name.startswith("NVMLError") or name == "NVMLLibraryMismatchError":
                setattr(self, name, getattr(pynvml, name))

    def _field(self, handle: int, key: str) -> Any:
        value = self.devices[handle][key]
        if isinstance(value, BaseException):
            raise value
        return value

    def nvmlInit(self) -> None:
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise self.init_error
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")
        self.initialized -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        """A real driver's answer (nvidia-ml-py 12+ returns str)."""
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        """CUDA 12.4, as the driver encodes it."""
        return 12040

    def nvmlDeviceGetCount(self) -> int:
        self.calls.append("nvmlDeviceGetCount")
        if self.count_error is not None:
            raise self.count_error
        return len(self.devices)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self.calls.append("nvmlDeviceGetHandleByIndex")
        return index

    def nvmlDeviceGetName(self, handle: int) -> str:
        self.calls.append("nvmlDeviceGetName")
        return str(self._field(handle, "name"))

    def nvmlDeviceGetUUID(self, handle: int) -> str:
        self.calls.append("nvmlDeviceGetUUID")
        return str(self._field(handle, "uuid"))

    def nvmlDeviceGetMemoryInfo(self, handle: int, version: int | None = None) -> Any:
        self.calls.append("nvmlDeviceGetMemoryInfo" if version is None else "MemoryInfo_v2")
        return self._field(handle, "memory" if version is None else "memory_v2")

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        self.calls.append("nvmlDeviceGetUtilizationRates")
        return SimpleNamespace(gpu=self._field(handle, "util"), memory=0)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        self.calls.append("nvmlDeviceGetTemperature")
        return int(self._field(handle, "temp"))

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        self.calls.append("nvmlDeviceGetPowerUsage")
        return int(self._field(handle, "power_mw"))

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:
        self.calls.append("nvmlDeviceGetComputeRunningProcesses")
        return [
            SimpleNamespace(pid=pid, usedGpuMemory=used)
            for pid, used in self._field(handle, "procs")
        ]
