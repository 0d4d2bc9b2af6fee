"""The pre-flight estimator's adapters: the device's memory and the model's config, then
:func:`tui.domain.preflight.estimate`.

``KvEstimator(device)`` is the ``Callable[[ServeFlags], KvEstimate | None]`` a ``Session``
takes. ``device`` says what the server will run on:

- the simulator: the catalog GPU the demo simulates (``tui.modes.demo``);
- a real GPU: :func:`gpu_device_from_sample` on an NVML sample (N/A: no estimate);
- the CPU build of vLLM: :func:`cpu_node_memory`, vLLM's own reading of NUMA node 0
  (``vllm/utils/cpu_resource_utils.py:189-240``: MemFree + file pages + reclaimable,
  clamped by a cgroup limit).

Everything that reads the outside world is here; the arithmetic is the domain's.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from pathlib import Path

import psutil

from tui.domain.flags.serve import ServeFlags
from tui.domain.preflight import DeviceMemory, KvEstimate, estimate
from tui.domain.telemetry import GpuSample, SourceStatus
from tui.server.model_config import ModelConfig, find_model_config

GIB = 2**30
CPU_KVCACHE_SPACE_ENV = "VLLM_CPU_KVCACHE_SPACE"  # whole GiB; overrides the flag (cpu.py:323-327)


def gpu_device_from_sample(
    sample: GpuSample, index: int = 0, own_pids: Iterable[int] = ()
) -> DeviceMemory | None:
    """GPU ``index`` of an NVML/DCGM sample; ``None`` when the source or a number is N/A.

    Memory held by ``own_pids`` (the console's own server, which a restart stops first)
    counts as free: that server will be gone when the new one starts.
    """
    if sample.status is not SourceStatus.OK:
        return None
    device = next((d for d in sample.devices if d.index == index), None)
    if device is None or device.memory_total is None:
        return None
    free = None
    if device.memory_used is not None:
        pids = set(own_pids)
        ours = sum(used or 0 for pid, used in device.processes if pid in pids)
        free = min(device.memory_total, device.memory_total - device.memory_used + ours)
    return DeviceMemory(device.memory_total, free, "gpu", device.name)


def console_children() -> set[int]:
    """PIDs of every process this console started (its server tree included)."""
    try:
        return {p.pid for p in psutil.Process().children(recursive=True)}
    except psutil.Error:
        return set()


def _meminfo(path: Path) -> dict[str, int] | None:
    """``Node N Key: value kB`` lines of a node's meminfo, in bytes."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    info: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[3].isdigit():
            info[parts[2].rstrip(":")] = int(parts[3]) * 1024
    return info


def _cgroup_value(path: Path) -> int | None:
    try:
        text = path.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def cpu_node_memory(node: int = 0, sys_root: Path = Path("/sys")) -> DeviceMemory:
    """NUMA node ``node``'s memory as vLLM's CPU worker reads it (``cpu_resource_utils.py``)."""
    info = _meminfo(sys_root / "devices" / "system" / "node" / f"node{node}" / "meminfo")
    keys = ("MemTotal", "MemFree", "Active(file)", "Inactive(file)", "SReclaimable")
    if info is not None and all(k in info for k in keys):
        total = info["MemTotal"]
        available = sum(info[k] for k in keys[1:])
    else:  # no per-node meminfo: vLLM falls back to psutil's system-wide numbers
        vm = psutil.virtual_memory()
        total, available = int(vm.total), int(vm.available)
    limit = _cgroup_value(sys_root / "fs" / "cgroup" / "memory.max")
    if limit is not None and limit < total:
        usage = _cgroup_value(sys_root / "fs" / "cgroup" / "memory.current") or 0
        total = limit
        available = max(0, min(available, limit - usage))
    return DeviceMemory(total, available, "cpu", f"CPU node {node}")


def is_cpu_build(vllm_executable: str | Path) -> bool:
    """Whether the ``vllm`` executable belongs to the CPU build (``vllm-cpu``, or ``+cpu``).

    Looks at the distributions installed in the executable's environment, the way
    ``vtc setup-cpu-vllm`` installs it (``vllm_cpu-*.dist-info`` and the ``+cpu`` shim).
    """
    venv = Path(vllm_executable).resolve().parent.parent
    for site in venv.glob("lib/python3*/site-packages"):
        if any(site.glob("vllm_cpu-*.dist-info")) or any(site.glob("vllm-*+cpu.dist-info")):
            return True
    return False


class KvEstimator:
    """``flags -> KvEstimate | None``: the model's config and the device, then the estimate.

    ``device`` returns the device now (``None``: unknown, no estimate). ``env`` is the
    server's environment (``VLLM_CPU_KVCACHE_SPACE``, ``HF_HOME``...). Found configs are
    cached by model name; ``last_reason`` says why the last call returned ``None``.
    """

    def __init__(
        self,
        device: Callable[[], DeviceMemory | None],
        *,
        env: Mapping[str, str] | None = None,
        find_config: Callable[[str], ModelConfig] | None = None,
    ) -> None:
        self._device = device
        self._env = dict(os.environ if env is None else env)
        self._find = find_config or (lambda model: find_model_config(model, env=self._env))
        self._configs: dict[str, ModelConfig] = {}
        self.last_reason = ""

    def model_config(self, model: str) -> ModelConfig:
        """The model's config (cached once found)."""
        found = self._configs.get(model)
        if found is None:
            found = self._find(model)
            if found.shape is not None:
                self._configs[model] = found
        return found

    def __call__(self, flags: ServeFlags) -> KvEstimate | None:
        """The estimate for ``flags``, or ``None`` (with ``last_reason``) when it cannot tell."""
        try:
            device = self._device()
        except Exception as exc:  # a telemetry source must not break the form
            device, self.last_reason = None, f"device memory unreadable: {exc}"
        else:
            self.last_reason = "" if device is not None else "device memory not available"
        if device is None:
            return None
        config = self.model_config(flags.model)
        if config.shape is None:
            self.last_reason = config.reason
            return None
        space = self._env.get(CPU_KVCACHE_SPACE_ENV, "")
        notes: list[str] = []
        if device.kind == "cpu" and space.strip().isdigit():
            flags = flags.replace(kv_cache_memory_bytes=int(space) * GIB)
            notes.append(f"{CPU_KVCACHE_SPACE_ENV}={space} sets the KV size (vLLM's CPU backend)")
        result = estimate(
            config.shape,
            flags,
            device,
            checkpoint_quantization=config.checkpoint_quantization,
            embedding_params=config.embedding_params,
        )
        if config.source == "sim-catalog":
            notes.append(f"model shape from the simulator's catalog ({config.reason})")
        elif config.path is not None:
            notes.append(f"model shape from {config.path}")
        return replace(result, assumptions=[*result.assumptions, *notes])
