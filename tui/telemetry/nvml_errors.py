"""NVML's errors as one line each for the operator: what happened and what to do.

Error classes are nvidia-ml-py's (``pynvml.NVMLError_*``, one per ``NVML_ERROR_*`` code);
they are looked up on the module in use, so a fake module with the real classes is told
apart the same way. Under WSL2 the remedy is on the Windows side (the driver lives there),
so the texts say so.
"""

from __future__ import annotations

from typing import Any

# class name -> (plain Linux, WSL2)
_EXPLAINED: dict[str, tuple[str, str]] = {
    "NVMLError_LibraryNotFound": (
        "no NVIDIA driver (NVML library libnvidia-ml.so.1 not found)",
        "WSL2: no NVIDIA driver visible (libnvidia-ml.so.1 not in /usr/lib/wsl/lib): install "
        "the NVIDIA driver on Windows, not inside WSL, then `wsl --update`",
    ),
    "NVMLError_DriverNotLoaded": (
        "no NVIDIA driver (NVML: driver not loaded)",
        "WSL2: the Windows NVIDIA driver is not reachable: update it on Windows, then "
        "`wsl --shutdown` and reopen WSL",
    ),
    "NVMLError_OperatingSystem": (
        "GPU access blocked by the operating system (NVML): check the device permissions "
        "(/dev/nvidia*, a container's --gpus) or run on the host",
        "WSL2: GPU access blocked by the operating system: update the Windows NVIDIA driver "
        "and WSL (`wsl --update`), then `wsl --shutdown`",
    ),
    "NVMLError_LibRmVersionMismatch": (
        "NVIDIA driver and NVML library versions differ (reload the driver or reboot)",
        "WSL2: NVIDIA driver and NVML library versions differ: `wsl --shutdown` and reopen "
        "WSL after a Windows driver update",
    ),
    "NVMLError_NoPermission": (
        "no permission to use the NVIDIA driver (NVML: insufficient permissions)",
        "WSL2: no permission to use the NVIDIA driver (NVML: insufficient permissions)",
    ),
    "NVMLError_GpuIsLost": (
        "the GPU fell off the bus (NVML: GPU is lost): a reset or reboot is needed",
        "WSL2: the GPU is lost (NVML): restart Windows' driver or reboot",
    ),
}


def explain_nvml_error(nvml: Any, exc: BaseException, *, wsl: bool = False) -> str | None:
    """The one-line explanation of ``exc`` when it is a known NVML condition, else ``None``."""
    for name, (linux, windows) in _EXPLAINED.items():
        cls = getattr(nvml, name, None)
        if isinstance(cls, type) and isinstance(exc, cls):
            return windows if wsl else linux
    return None


def describe_nvml_error(nvml: Any, exc: BaseException, *, wsl: bool = False) -> str:
    """``explain_nvml_error`` or, for anything else, ``"NVML: <class>: <text>"`` (one line)."""
    explained = explain_nvml_error(nvml, exc, wsl=wsl)
    if explained is not None:
        return explained
    text = " ".join(str(exc).split())[:120]
    return f"NVML: {type(exc).__name__}: {text}" if text else f"NVML: {type(exc).__name__}"
