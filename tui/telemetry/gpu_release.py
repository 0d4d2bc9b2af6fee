"""Waiting, bounded, until the GPU shows a stopped server's memory released.

A killed vLLM tree can hold GPU memory for a moment after its processes are gone (the
driver frees it asynchronously), and a new start that profiles memory while it is still
held sizes its KV cache too small or fails the free-memory check. So before the next
start the console waits until NVML no longer lists any of the old tree's processes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection

from tui.domain.telemetry import GpuSample, SourceStatus


async def wait_gpu_released(
    sample: Callable[[], GpuSample],
    pids: Collection[int],
    *,
    timeout_s: float = 30.0,
    interval_s: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
) -> str | None:
    """Poll ``sample`` (run in a thread) until no GPU lists a process in ``pids``.

    Returns ``None`` when released (or nothing to wait for), else a message saying why the
    wait ended without proof: NVML unavailable, or still held after ``timeout_s``.
    """
    wanted = set(pids)
    if not wanted:
        return None
    deadline = clock() + timeout_s
    while True:
        current = await asyncio.to_thread(sample)
        if current.status is not SourceStatus.OK:
            return f"GPU release not checked: {current.message or current.status.value}"
        holding = {pid for dev in current.devices for pid, _ in dev.processes if pid in wanted}
        if not holding:
            return None
        if clock() >= deadline:
            listed = ", ".join(str(p) for p in sorted(holding))
            return (
                f"GPU memory of the old server (pids {listed}) still held after "
                f"{timeout_s:.0f} s; starting anyway"
            )
        await asyncio.sleep(interval_s)
