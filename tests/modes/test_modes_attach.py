"""Attach: this machine's GPU is never shown or stored as a remote server's."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from fakes.runner import FakeRunner
from fakes.running_sim import start_sim
from fakes.servers import FakeExisting
from fakes.sources import FakeMetrics

from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunStatus
from tui.domain.telemetry import GpuSample, SourceStatus
from tui.domain.workload import LoadSpec
from tui.modes import ConsoleOptions, mode_for
from tui.modes.attach import AttachMode
from tui.modes.common import assemble
from tui.modes.sources import NvmlReader
from tui.session.slot import ServerSlot
from tui.store.history import RunStore
from tui.telemetry.locality import is_local_url


def test_local_urls_are_told_from_remote_ones() -> None:
    assert is_local_url("http://127.0.0.1:8000") and is_local_url("http://localhost:8000")
    assert is_local_url("http://[::1]:8000") and is_local_url(f"http://{socket.gethostname()}:1")
    assert not is_local_url("http://192.0.2.7:8000")  # TEST-NET-1: never this machine
    assert not is_local_url("http://gpu-box.invalid:8000")  # does not resolve
    assert is_local_url("http://127.0.2.3:80") and is_local_url("http://vtc.localhost:8000/")
    assert not is_local_url("http://10.255.255.1:8000")


def test_attach_to_a_local_url_reads_local_nvml(tmp_path: Path) -> None:
    options = ConsoleOptions(attach="http://127.0.0.1:8000", data_dir=tmp_path)
    assert isinstance(mode_for(options), AttachMode)
    info, services = AttachMode().parts(options)
    assert isinstance(services.gpu, NvmlReader) and services.gpu_policy.absent is None
    assert services.gpu_policy.page_first  # the simulator's own gauges win when it has them
    assert info.label == "attached: http://127.0.0.1:8000"
    services.store.close()


async def test_attach_to_another_host_never_shows_or_stores_this_machines_gpu(
    tmp_path: Path,
) -> None:
    url = "http://192.0.2.7:8000"
    info, services = AttachMode().parts(ConsoleOptions(attach=url, data_dir=tmp_path))
    assert services.gpu is None and services.host is None  # nothing of this machine
    absent = services.gpu_policy.absent
    assert absent is not None and absent.status is SourceStatus.UNAVAILABLE
    assert "192.0.2.7" in absent.message and "--gpu-metrics-url" in absent.message
    # The session over those services, with the remote server and its /metrics faked.
    remote = FakeExisting(
        flags=ServeFlags(model="m"), run_id=None, label="attached", pid=None, url=url
    )
    services.slot = ServerSlot(existing=remote)
    services.metrics = FakeMetrics()  # a vLLM page with no GPU gauges
    runner = FakeRunner()
    services.runner = runner  # type: ignore[assignment]
    session = assemble(info, services, poll_interval_s=0.01)
    seen: list[object] = []
    session.subscribe(seen.append)
    await session.start()
    runner.release.set()
    assert await session.run_load(LoadSpec(num_prompts=4)) is not None
    await session.close()
    gpus = [s for s in seen if isinstance(s, GpuSample)]
    assert gpus and all(s is absent for s in gpus)
    (stored,) = RunStore(tmp_path / "runs.sqlite").list()
    assert stored.bench is not None
    assert stored.status is RunStatus.LOST and "left running" in stored.ended_because
    assert stored.peaks.gpu_util is None and stored.peaks.gpu_mem_used_bytes is None


async def test_attached_to_a_local_simulator_its_own_gpu_gauges_are_the_gpu(tmp_path: Path) -> None:
    sim = await start_sim(
        "Qwen/Qwen2.5-0.5B-Instruct", "--sim-speed", "100", "--sim-gpu", "rtx3080-10gb"
    )
    try:
        options = ConsoleOptions(attach=sim.base, data_dir=tmp_path, poll_interval_s=0.1)
        info, services = AttachMode().parts(options)
        assert isinstance(services.gpu, NvmlReader)  # this machine's NVML, for a real vLLM
        session = assemble(info, services, poll_interval_s=0.1)
        pages: list[GpuSample] = []
        seen = asyncio.Event()

        def watch(event: object) -> None:
            if isinstance(event, GpuSample) and event.source.startswith("dcgm:"):
                pages.append(event)
                seen.set()

        session.subscribe(watch)
        await session.start()
        try:
            await asyncio.wait_for(seen.wait(), 30)
        finally:
            await session.close()
    finally:
        await sim.close()
    (device,) = pages[0].devices
    assert device.name == "NVIDIA GeForce RTX 3080" and device.memory_total
