"""GPU readings through NVML (the ``pynvml`` module of the nvidia-ml-py distribution).

Every NVML call goes through ``nvml_query``, which turns "this value is not available here"
(NotSupported, NoPermission, FunctionNotFound, Unknown, ...) into ``None``, shown as N/A.
A machine without an NVIDIA driver gives a source whose samples are UNAVAILABLE with the
reason ("no NVIDIA driver ..."), never an exception.

NVML ignores ``CUDA_VISIBLE_DEVICES``: it reports every GPU the driver exposes, indexed in
NVML (PCI bus) order.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tui.domain.telemetry import GpuDevice, GpuSample, SourceStatus
from tui.telemetry.nvml_errors import describe_nvml_error, explain_nvml_error
from tui.telemetry.wsl import this_wsl

SOURCE = "nvml"

# Errors that concern the whole library, not one field: re-raised by nvml_query.
_FATAL_ERRORS = (
    "NVMLError_Uninitialized",
    "NVMLError_LibraryNotFound",
    "NVMLError_DriverNotLoaded",
    "NVMLError_LibRmVersionMismatch",
)
# NVML_VALUE_NOT_AVAILABLE for unsigned long long fields (pynvml maps it to None for
# process memory in recent releases; older releases pass the raw value through).
_NOT_AVAILABLE_ULL = 2**64 - 1


def _error_classes(nvml: Any, names: tuple[str, ...]) -> tuple[type[BaseException], ...]:
    return tuple(cls for n in names if isinstance(cls := getattr(nvml, n, None), type))


def _is_field_error(nvml: Any, exc: BaseException) -> bool:
    """True if ``exc`` means "this value is not available", not "NVML is unusable"."""
    # pynvml raises NVMLLibraryMismatchError (not an NVMLError) when an unversioned function
    # such as nvmlDeviceGetComputeRunningProcesses (v3) is missing from an older driver.
    if isinstance(exc, _error_classes(nvml, ("NVMLLibraryMismatchError",))):
        return True
    base = _error_classes(nvml, ("NVMLError",))
    if not base or not isinstance(exc, base):
        return False
    return not isinstance(exc, _error_classes(nvml, _FATAL_ERRORS))


def nvml_query(nvml: Any, name: str, *args: Any, strict: bool = False, **kwargs: Any) -> Any:
    """Call ``nvml.<name>(*args, **kwargs)``; ``None`` when the value is not available.

    Not available: the binding lacks the function, or NVML answers with a per-field error
    (NotSupported, NoPermission, FunctionNotFound, Unknown, GpuIsLost, ...). Errors that make
    the whole library unusable (Uninitialized, LibraryNotFound, DriverNotLoaded,
    LibRmVersionMismatch) and non-NVML exceptions are raised. ``strict=True`` raises every
    error: for ``nvmlInit``/``nvmlShutdown``, whose success also returns ``None``.
    """
    fn = getattr(nvml, name, None)
    if fn is None:
        if strict:
            raise AttributeError(f"the NVML binding has no {name}")
        return None
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        if strict or not _is_field_error(nvml, exc):
            raise
        return None


def describe_init_failure(nvml: Any, exc: BaseException, *, wsl: bool = False) -> str:
    """The operator-facing reason NVML could not start: one line, with what to do."""
    explained = explain_nvml_error(nvml, exc, wsl=wsl)
    if explained is not None:
        return explained
    return f"NVML init failed: {describe_nvml_error(nvml, exc, wsl=wsl).removeprefix('NVML: ')}"


def _bytes(value: Any) -> int | None:
    if value is None:
        return None
    value = int(value)
    return None if value >= _NOT_AVAILABLE_ULL or value < 0 else value


def _text(value: Any) -> str | None:
    if isinstance(value, bytes):  # pynvml before 11.5 returned bytes
        return value.decode(errors="replace")
    return None if value is None else str(value)


@dataclass(frozen=True)
class _Device:
    index: int
    handle: Any  # None when NVML would not give a handle (the device reads as all N/A)
    name: str
    uuid: str | None = None


class NvmlGpuSource:
    """GPU source over NVML. ``sample()`` is synchronous (run it in a thread); ``close()``.

    ``nvml`` is the pynvml module, injectable for tests; by default ``import pynvml`` on
    first use. NVML is initialised once, lazily, and device handles and names are read then;
    a fatal error later (driver unloaded, NVML shut down) gives one DOWN sample and a fresh
    init on the next. An init failure is permanent: every sample is UNAVAILABLE with the
    reason, and NVML is not retried.

    ``wsl``: whether NVML here is WSL2's (per-process memory reads "N/A (WDDM)" and errors
    are explained for Windows' driver); ``None`` detects it (``tui.telemetry.wsl``).
    """

    def __init__(
        self,
        nvml: Any | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wsl: bool | None = None,
    ):
        self.wsl = this_wsl() == "WSL2" if wsl is None else wsl
        self._nvml_arg = nvml
        self._clock = clock
        self._lock = threading.Lock()  # sample() runs in worker threads; close() may not
        self._nvml: Any = None
        self._initialized = False
        self._unavailable: str | None = None
        self._devices: tuple[_Device, ...] = ()
        self._memory_v2: bool | None = None  # learnt on first success: is _v2 usable here?
        self._process_fn: str | None = None

    def sample(self) -> GpuSample:
        """Read every GPU. Never raises."""
        with self._lock:
            t = self._clock()
            try:
                if not self._initialized and self._unavailable is None:
                    self._init()
                if self._unavailable is not None:
                    return GpuSample(
                        t=t,
                        source=SOURCE,
                        status=SourceStatus.UNAVAILABLE,
                        message=self._unavailable,
                        wsl=self.wsl,
                    )
                devices = tuple(self._read(d) for d in self._devices)
            except Exception as exc:  # any NVML failure mid-run: DOWN with the reason, re-init
                nvml = self._nvml
                self._shutdown_quietly()
                return GpuSample(
                    t=t,
                    source=SOURCE,
                    status=SourceStatus.DOWN,
                    message=describe_nvml_error(nvml, exc, wsl=self.wsl),
                    wsl=self.wsl,
                )
            return GpuSample(
                t=t, source=SOURCE, status=SourceStatus.OK, devices=devices, wsl=self.wsl
            )

    def versions(self) -> tuple[str | None, str | None]:
        """The driver version and the CUDA version it supports (``None`` where NVML can't tell).

        Synchronous, like :meth:`sample`; initialises NVML if no sample has yet.
        """
        with self._lock:
            if not self._initialized and self._unavailable is None:
                self._init()
            if not self._initialized:
                return None, None
            driver = _text(nvml_query(self._nvml, "nvmlSystemGetDriverVersion"))
            cuda = nvml_query(self._nvml, "nvmlSystemGetCudaDriverVersion_v2")
            if cuda is None:
                cuda = nvml_query(self._nvml, "nvmlSystemGetCudaDriverVersion")
        ok = isinstance(cuda, int) and cuda > 0
        return driver, f"{cuda // 1000}.{cuda % 1000 // 10}" if ok else None

    def close(self) -> None:
        """Shut NVML down if this source initialised it. A later ``sample()`` starts afresh."""
        with self._lock:
            self._shutdown_quietly()
            self._unavailable = None

    def _init(self) -> None:
        nvml = self._nvml_arg
        if nvml is None:
            try:
                import pynvml
            except ImportError:
                self._unavailable = "NVML Python bindings missing (install nvidia-ml-py)"
                return
            nvml = pynvml
        try:
            nvml_query(nvml, "nvmlInit", strict=True)
        except Exception as exc:  # every init failure is a reason shown to the operator
            self._unavailable = describe_init_failure(nvml, exc, wsl=self.wsl)
            return
        self._nvml = nvml
        self._initialized = True
        try:
            # Strict: "blocked by the operating system" here must not read as "no GPU".
            count = nvml_query(nvml, "nvmlDeviceGetCount", strict=True)
        except Exception as exc:  # likewise a permanent, explained absence
            self._unavailable = describe_init_failure(nvml, exc, wsl=self.wsl)
            return
        if not count:
            self._unavailable = "NVML sees no NVIDIA GPU"
            return
        devices = []
        for i in range(int(count)):
            handle = nvml_query(nvml, "nvmlDeviceGetHandleByIndex", i)
            name = uuid = None
            if handle is not None:
                name = _text(nvml_query(nvml, "nvmlDeviceGetName", handle))
                uuid = _text(nvml_query(nvml, "nvmlDeviceGetUUID", handle))
            devices.append(_Device(index=i, handle=handle, name=name or f"GPU {i}", uuid=uuid))
        self._devices = tuple(devices)

    def _shutdown_quietly(self) -> None:
        if self._initialized:
            # Nothing useful to do about a failed shutdown.
            with contextlib.suppress(Exception):
                nvml_query(self._nvml, "nvmlShutdown", strict=True)
        self._initialized = False
        self._nvml = None
        self._devices = ()
        self._memory_v2 = None
        self._process_fn = None

    def _read(self, device: _Device) -> GpuDevice:
        nvml, handle = self._nvml, device.handle
        if handle is None:
            return GpuDevice(index=device.index, name=device.name, uuid=device.uuid)
        used, total = self._memory(handle)
        rates = nvml_query(nvml, "nvmlDeviceGetUtilizationRates", handle)
        temperature = nvml_query(
            nvml, "nvmlDeviceGetTemperature", handle, getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        )
        power_mw = nvml_query(nvml, "nvmlDeviceGetPowerUsage", handle)
        return GpuDevice(
            index=device.index,
            name=device.name,
            memory_used=used,
            memory_total=total,
            utilization=None if rates is None else float(rates.gpu),
            temperature_c=None if temperature is None else float(temperature),
            power_w=None if power_mw is None else power_mw / 1000.0,
            processes=self._processes(handle),
            uuid=device.uuid,
        )

    def _memory(self, handle: Any) -> tuple[int | None, int | None]:
        """(used, total) bytes: nvmlDeviceGetMemoryInfo_v2 where the driver has it, else v1.

        v2 reports ``used`` without the driver's reserved memory (what nvidia-smi shows);
        v1 folds the reserved memory into ``used``.
        """
        nvml = self._nvml
        info = None
        version = getattr(nvml, "nvmlMemory_v2", None)
        if version is not None and self._memory_v2 is not False:
            info = nvml_query(nvml, "nvmlDeviceGetMemoryInfo", handle, version=version)
            if info is not None:
                self._memory_v2 = True
        if info is None:
            info = nvml_query(nvml, "nvmlDeviceGetMemoryInfo", handle)
            if info is not None and self._memory_v2 is None:
                self._memory_v2 = False
        if info is None:
            return None, None
        return _bytes(getattr(info, "used", None)), _bytes(getattr(info, "total", None))

    def _processes(self, handle: Any) -> tuple[tuple[int, int | None], ...]:
        """(pid, used GPU bytes or None) for each compute process NVML reports.

        Used memory is None where NVML hides it (WSL2, Windows WDDM, some containers). PIDs
        are in the host's PID namespace, so inside a container they may match no local
        process. A device whose process list is not available reads as no processes.
        """
        nvml = self._nvml
        names = (
            (self._process_fn,)
            if self._process_fn
            else ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetComputeRunningProcesses_v2")
        )
        for name in names:
            procs = nvml_query(nvml, name, handle)
            if procs is not None:
                self._process_fn = name
                return tuple((int(p.pid), _bytes(getattr(p, "usedGpuMemory", None))) for p in procs)
        return ()
