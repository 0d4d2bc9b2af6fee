"""Detecting WSL (Windows Subsystem for Linux) and naming the host for the panels.

Under WSL2 the GPU belongs to Windows: ``libnvidia-ml.so.1`` is Windows' driver mapped
into ``/usr/lib/wsl/lib``, and NVML works through the WDDM driver model, where per-process
GPU memory is never available (nvitop shows "WDDM:N/A"; NVML reports
``NVML_VALUE_NOT_AVAILABLE``). WSL2 kernels report a release like
``5.15.153.1-microsoft-standard-WSL2``; WSL1 (no GPU at all) ``4.4.0-19041-Microsoft``.
"""

from __future__ import annotations

import functools
import socket
from pathlib import Path

OSRELEASE = Path("/proc/sys/kernel/osrelease")
WSL_LIB_DIR = Path("/usr/lib/wsl/lib")


def wsl_kind(kernel_release: str, wsl_lib_present: bool) -> str | None:
    """``"WSL2"``, ``"WSL1"`` or ``None`` from the kernel release and ``/usr/lib/wsl/lib``."""
    release = kernel_release.lower()
    if "wsl2" in release or (wsl_lib_present and "microsoft" in release):
        return "WSL2"
    if wsl_lib_present:
        return "WSL2"  # a custom kernel, but Windows' GPU libraries are mapped in
    if "microsoft" in release or "wsl" in release:
        return "WSL1"
    return None


def detect_wsl(osrelease: Path = OSRELEASE, wsl_lib: Path = WSL_LIB_DIR) -> str | None:
    """This machine's ``wsl_kind`` (``None`` on plain Linux and elsewhere)."""
    try:
        release = osrelease.read_text(encoding="utf-8", errors="replace")[:256]
    except OSError:
        release = ""
    return wsl_kind(release, wsl_lib.is_dir())


@functools.cache
def this_wsl() -> str | None:
    """``detect_wsl()`` for this machine, read once."""
    return detect_wsl()


def host_label(hostname: str | None = None, wsl: str | None = None) -> str:
    """The host's name as the panels title it: ``"box (WSL2)"`` under WSL2."""
    name = hostname if hostname is not None else socket.gethostname()
    return f"{name} ({wsl})" if wsl else name
