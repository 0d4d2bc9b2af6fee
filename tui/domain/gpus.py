"""Which GPUs are the server's, what each row shows, and the GPU readings for special cases.

- ``server_gpu_indices``: the server's GPUs, from the processes NVML lists on them when it
  lists any of the server's tree (exact), else from ``CUDA_VISIBLE_DEVICES`` and the
  tensor x pipeline parallel sizes (vLLM's workers take the first ``tp * pp`` visible
  devices on a node).
- ``gpu_rows``: one row per GPU for the panel, the server's marked, with the memory the
  server's tree holds on it where NVML tells ("N/A (WDDM)" under WSL2, where it never does).
- ``released_gpu``: the simulated GPU once its simulator has exited (it frees its memory);
  ``remote_gpu_not_visible``: what attach mode shows for a server on another host whose
  page has no GPU gauges; ``gpu_for_attached`` picks between the page's gauges, the local
  GPU and that notice.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from tui.domain.telemetry import GpuDevice, GpuSample, ServerMetrics, SourceStatus

WDDM_NA = "N/A (WDDM)"
NA = "N/A"
REMOTE_GPU_HINT = "pass --gpu-metrics-url URL of a dcgm-exporter on the server's host"
REMOTE_GPU_NOT_VISIBLE = f"remote GPU not visible: {REMOTE_GPU_HINT}"
RELEASED_SIMULATED_GPU = "simulator exited: freed"  # fits a GPU line at 80 columns


def _visible_entries(cuda_visible_devices: str | None) -> list[str] | None:
    """The entries of ``CUDA_VISIBLE_DEVICES`` (``None``: unset, every device visible).

    CUDA stops at the first invalid entry, so does this (a ``-1`` hides every device).
    """
    if cuda_visible_devices is None:
        return None
    entries: list[str] = []
    for raw in cuda_visible_devices.split(","):
        entry = raw.strip()
        if not entry or entry.startswith("-"):
            break
        entries.append(entry)
    return entries


def _device_for(entry: str, devices: Sequence[GpuDevice]) -> GpuDevice | None:
    if entry.isdigit():
        return next((d for d in devices if d.index == int(entry)), None)
    # A UUID, or a unique prefix of one ("GPU-8f3a"), as CUDA accepts.
    matches = [d for d in devices if d.uuid and d.uuid.lower().startswith(entry.lower())]
    return matches[0] if len(matches) == 1 else None


def server_gpu_indices(
    devices: Sequence[GpuDevice],
    *,
    cuda_visible_devices: str | None = None,
    tensor_parallel_size: int | None = None,
    pipeline_parallel_size: int | None = None,
    server_pids: Collection[int] = (),
) -> frozenset[int]:
    """The indices (NVML numbering) of the GPUs the server runs on.

    When NVML lists a process of the server's tree on some GPU, those GPUs are the answer.
    Otherwise the first ``tp * pp`` entries of ``CUDA_VISIBLE_DEVICES`` (every device when
    unset) are. Numeric entries are read in NVML's PCI bus order, which is CUDA's only with
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; on a box with mixed GPUs under CUDA's default
    (fastest first) order the process list is the reliable answer.
    """
    pids = set(server_pids)
    if pids:
        holding = frozenset(d.index for d in devices if any(pid in pids for pid, _ in d.processes))
        if holding:
            return holding
    world = (tensor_parallel_size or 1) * (pipeline_parallel_size or 1)
    entries = _visible_entries(cuda_visible_devices)
    if entries is None:
        ordered = sorted(devices, key=lambda d: d.index)
    else:
        ordered = [d for e in entries if (d := _device_for(e, devices)) is not None]
    return frozenset(d.index for d in ordered[:world])


def process_memory_text(used: int | None, *, wsl: bool) -> str | None:
    """How a process's GPU memory reads when NVML gives no number (``None`` if it does)."""
    if used is not None:
        return None
    return WDDM_NA if wsl else NA


@dataclass(frozen=True)
class GpuRow:
    """One GPU as the panel shows it.

    ``server``: the server runs on it. ``server_memory``: bytes the server's processes hold
    on it (``None`` when NVML does not say; ``server_memory_note`` then says why, e.g.
    "N/A (WDDM)"). Every other value is the device's, ``None`` for N/A.
    """

    index: int
    name: str
    server: bool
    memory_used: int | None
    memory_total: int | None
    utilization: float | None
    temperature_c: float | None
    power_w: float | None
    server_memory: int | None = None
    server_memory_note: str | None = None
    server_processes: int = 0


def _server_memory(
    device: GpuDevice, pids: Collection[int], wsl: bool
) -> tuple[int | None, str | None, int]:
    mine = [used for pid, used in device.processes if pid in pids]
    if not mine:
        return None, None, 0
    if any(used is None for used in mine):
        return None, WDDM_NA if wsl else NA, len(mine)
    return sum(used or 0 for used in mine), None, len(mine)


def gpu_rows(
    sample: GpuSample,
    *,
    server_indices: Collection[int] = (),
    server_pids: Collection[int] = (),
) -> tuple[GpuRow, ...]:
    """One ``GpuRow`` per device of ``sample``, in index order (none unless it is OK)."""
    if sample.status is not SourceStatus.OK:
        return ()
    pids = set(server_pids)
    rows = []
    for device in sorted(sample.devices, key=lambda d: d.index):
        memory, note, count = _server_memory(device, pids, sample.wsl)
        rows.append(
            GpuRow(
                index=device.index,
                name=device.name,
                server=device.index in server_indices,
                memory_used=device.memory_used,
                memory_total=device.memory_total,
                utilization=device.utilization,
                temperature_c=device.temperature_c,
                power_w=device.power_w,
                server_memory=memory,
                server_memory_note=note,
                server_processes=count,
            )
        )
    return tuple(rows)


def released_gpu(last: GpuSample, now: float) -> GpuSample:
    """The simulated GPU of ``last`` after its simulator exited: nothing used, idle.

    Only for the simulator's own GPU (it exists while the simulator runs and frees all its
    memory when it exits); a real GPU is read again, never assumed.
    """
    devices = tuple(
        replace(
            d,
            memory_used=0 if d.memory_total is not None else None,
            utilization=0.0,
            power_w=None,
            temperature_c=None,
            processes=(),
        )
        for d in last.devices
    )
    return GpuSample(
        t=now,
        source=last.source,
        status=SourceStatus.OK if devices else SourceStatus.UNAVAILABLE,
        devices=devices,
        message=RELEASED_SIMULATED_GPU,
    )


def remote_gpu_not_visible(
    now: float, source: str = "remote", host: str | None = None
) -> GpuSample:
    """The GPU reading of a server on another host (``host``, when named) that exposes no
    GPU gauges: the reason, and the flag to pass."""
    message = (
        f"remote GPU on {host} not visible: {REMOTE_GPU_HINT}" if host else REMOTE_GPU_NOT_VISIBLE
    )
    return GpuSample(t=now, source=source, status=SourceStatus.UNAVAILABLE, message=message)


def gpu_for_attached(
    metrics: ServerMetrics, now: float, *, local: GpuSample | None = None
) -> GpuSample:
    """The GPU reading attach mode shows, from the attached server's latest /metrics sample.

    The page's own DCGM gauges win (the simulator, a server behind a DCGM-aware proxy);
    else ``local`` (this machine's NVML, passed only when the server is on this machine);
    else, when the page could not be read, a DOWN reading with its reason; else "remote GPU
    not visible" with the flag to pass.
    """
    if metrics.gpu is not None:
        return metrics.gpu
    if local is not None:
        return local
    if metrics.status is not SourceStatus.OK:
        return GpuSample(t=now, source="remote", status=SourceStatus.DOWN, message=metrics.message)
    return remote_gpu_not_visible(now)
