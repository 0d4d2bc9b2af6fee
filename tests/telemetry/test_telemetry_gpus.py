"""Many GPUs: the server's marked; rows with the server's memory; remote and released GPUs."""

from __future__ import annotations

import pytest

from tui.domain.gpus import (
    REMOTE_GPU_NOT_VISIBLE,
    WDDM_NA,
    gpu_for_attached,
    gpu_rows,
    process_memory_text,
    released_gpu,
    server_gpu_indices,
)
from tui.domain.telemetry import GpuDevice, GpuSample, ServerMetrics, SourceStatus

GIB = 2**30


def box(n: int = 4, processes: dict[int, tuple[tuple[int, int | None], ...]] | None = None):
    procs = processes or {}
    return tuple(
        GpuDevice(
            i,
            "NVIDIA H100",
            memory_used=GIB * (i + 1),
            memory_total=80 * GIB,
            utilization=10.0 * i,
            processes=procs.get(i, ()),
            uuid=f"GPU-{i}aaa{i}-0000",
        )
        for i in range(n)
    )


def test_processes_of_the_server_decide_when_nvml_lists_them() -> None:
    devices = box(4, {1: ((501, GIB),), 3: ((502, GIB), (999, GIB))})
    marked = server_gpu_indices(
        devices, cuda_visible_devices="0,1", tensor_parallel_size=2, server_pids={501, 502}
    )
    assert marked == {1, 3}


@pytest.mark.parametrize(
    ("visible", "tp", "pp", "expected"),
    [
        (None, 1, 1, {0}),
        (None, 2, 1, {0, 1}),
        (None, 2, 2, {0, 1, 2, 3}),
        ("2,3", 2, 1, {2, 3}),
        ("3,1,0", 2, 1, {3, 1}),
        ("1, 2 ,0", 1, 1, {1}),
        ("GPU-2aaa2,GPU-0aaa0", 2, 1, {2, 0}),  # UUID prefixes, as CUDA accepts
        ("1,-1,2", 2, 1, {1}),  # CUDA stops at the first invalid entry
        ("", 1, 1, set()),  # nothing visible
        ("7", 1, 1, set()),  # no such device
    ],
)
def test_visible_devices_and_parallel_sizes(
    visible: str | None, tp: int, pp: int, expected: set[int]
) -> None:
    got = server_gpu_indices(
        box(4), cuda_visible_devices=visible, tensor_parallel_size=tp, pipeline_parallel_size=pp
    )
    assert got == expected


def test_rows_mark_the_server_and_sum_its_processes() -> None:
    devices = box(2, {0: ((501, 3 * GIB), (502, GIB), (77, 5 * GIB)), 1: ((503, None),)})
    sample = GpuSample(t=1.0, source="nvml", status=SourceStatus.OK, devices=devices)
    rows = gpu_rows(sample, server_indices={0}, server_pids={501, 502, 503})
    assert [r.index for r in rows] == [0, 1]
    assert rows[0].server and not rows[1].server
    assert rows[0].server_memory == 4 * GIB and rows[0].server_processes == 2
    assert rows[1].server_memory is None and rows[1].server_memory_note == "N/A"
    wsl = GpuSample(t=1.0, source="nvml", status=SourceStatus.OK, devices=devices, wsl=True)
    assert gpu_rows(wsl, server_pids={503})[1].server_memory_note == WDDM_NA
    assert gpu_rows(GpuSample(t=1.0, source="x", status=SourceStatus.DOWN)) == ()


def test_process_memory_text() -> None:
    assert process_memory_text(None, wsl=True) == "N/A (WDDM)"
    assert process_memory_text(None, wsl=False) == "N/A"
    assert process_memory_text(0, wsl=True) is None  # a real zero is a number


def test_released_simulated_gpu_is_current_not_the_last_reading() -> None:
    last = GpuSample(t=5.0, source="simulated", status=SourceStatus.OK, devices=box(1))
    now = released_gpu(last, 9.0)
    assert now.t == 9.0 and now.status is SourceStatus.OK
    (device,) = now.devices
    assert device.memory_used == 0 and device.memory_total == 80 * GIB
    assert device.utilization == 0.0 and device.processes == () and device.power_w is None


def test_attached_gpu_prefers_the_page_then_local_then_says_what_to_pass() -> None:
    page_gpu = GpuSample(t=1.0, source="dcgm:x", status=SourceStatus.OK, devices=box(1))
    with_gauges = ServerMetrics(t=1.0, status=SourceStatus.OK, gpu=page_gpu)
    assert gpu_for_attached(with_gauges, 2.0) is page_gpu
    plain = ServerMetrics(t=1.0, status=SourceStatus.OK)
    local = GpuSample(t=2.0, source="nvml", status=SourceStatus.OK, devices=box(1))
    assert gpu_for_attached(plain, 2.0, local=local) is local
    remote = gpu_for_attached(plain, 2.0)
    assert remote.status is SourceStatus.UNAVAILABLE and remote.message == REMOTE_GPU_NOT_VISIBLE
    assert "--gpu-metrics-url" in remote.message
    down = gpu_for_attached(ServerMetrics(t=1.0, status=SourceStatus.DOWN, message="refused"), 2.0)
    assert down.status is SourceStatus.DOWN and down.message == "refused"
