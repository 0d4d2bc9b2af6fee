"""NvmlGpuSource against a fake pynvml module that raises the real pynvml exception classes
(``fakes.pynvml``)."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest
from fakes.pynvml import GIB, FakeNvml, h100

from tui.domain.telemetry import SourceStatus
from tui.telemetry.nvml import NvmlGpuSource, nvml_query


def test_normal_device_reads_every_field() -> None:
    fake = FakeNvml([h100()])
    sample = NvmlGpuSource(fake, clock=lambda: 12.5).sample()
    assert sample.status is SourceStatus.OK
    assert sample.source == "nvml" and sample.t == 12.5
    (gpu,) = sample.devices
    assert gpu.index == 0
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert (gpu.memory_used, gpu.memory_total) == (70 * GIB, 80 * GIB)  # v2 preferred
    assert gpu.utilization == 93.0
    assert gpu.temperature_c == 61.0
    assert gpu.power_w == pytest.approx(612.345)  # milliwatts -> watts
    assert gpu.processes == ((4242, 69 * GIB),)


def test_memory_falls_back_to_v1_and_remembers() -> None:
    fake = FakeNvml([h100(memory_v2=pynvml.NVMLError_FunctionNotFound())])
    source = NvmlGpuSource(fake)
    first = source.sample().devices[0]
    assert (first.memory_used, first.memory_total) == (71 * GIB, 80 * GIB)
    fake.calls.clear()
    source.sample()
    assert "MemoryInfo_v2" not in fake.calls  # no failing v2 call on every sample
    assert "nvmlDeviceGetMemoryInfo" in fake.calls


def test_not_supported_fields_are_none() -> None:
    fake = FakeNvml(
        [
            h100(
                memory_v2=pynvml.NVMLError_NotSupported(),
                memory=pynvml.NVMLError_NotSupported(),
                util=pynvml.NVMLError_NoPermission(),
                temp=pynvml.NVMLError_Unknown(),
                power_mw=pynvml.NVMLError_NotSupported(),
                procs=pynvml.NVMLError_NotSupported(),
            )
        ]
    )
    sample = NvmlGpuSource(fake).sample()
    assert sample.status is SourceStatus.OK
    (gpu,) = sample.devices
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.memory_used is None and gpu.memory_total is None
    assert gpu.utilization is None
    assert gpu.temperature_c is None
    assert gpu.power_w is None
    assert gpu.processes == ()


def test_hidden_process_memory_is_none() -> None:
    # WSL2 / containers: pynvml turns NVML_VALUE_NOT_AVAILABLE into None; older pynvml
    # releases pass the raw 2**64-1 through. Both mean "hidden".
    fake = FakeNvml([h100(procs=[(100, None), (101, 2**64 - 1), (102, 5 * GIB)])])
    (gpu,) = NvmlGpuSource(fake).sample().devices
    assert gpu.processes == ((100, None), (101, None), (102, 5 * GIB))


def test_unversioned_process_call_missing_falls_back_to_v2() -> None:
    fake = FakeNvml([h100()])

    def mismatch(handle: int) -> list[Any]:
        raise pynvml.NVMLLibraryMismatchError("Unversioned function called ...")

    fake.nvmlDeviceGetComputeRunningProcesses = mismatch  # type: ignore[method-assign]
    fake.nvmlDeviceGetComputeRunningProcesses_v2 = lambda handle: [  # type: ignore[attr-defined]
        SimpleNamespace(pid=7, usedGpuMemory=GIB)
    ]
    (gpu,) = NvmlGpuSource(fake).sample().devices
    assert gpu.processes == ((7, GIB),)


@pytest.mark.parametrize(
    "error",
    [pynvml.NVMLError_LibraryNotFound(), pynvml.NVMLError_DriverNotLoaded()],
    ids=["library-not-found", "driver-not-loaded"],
)
def test_no_driver_is_unavailable_not_an_exception(error: BaseException) -> None:
    fake = FakeNvml([h100()], init_error=error)
    source = NvmlGpuSource(fake)
    for _ in range(2):
        sample = source.sample()
        assert sample.status is SourceStatus.UNAVAILABLE
        assert "no NVIDIA driver" in sample.message
        assert sample.devices == ()
    assert fake.calls.count("nvmlInit") == 1  # a missing driver is not retried every sample
    source.close()
    assert "nvmlShutdown" not in fake.calls  # never initialised, so nothing to shut down


def test_missing_pynvml_module_is_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    sample = NvmlGpuSource().sample()
    assert sample.status is SourceStatus.UNAVAILABLE
    assert "nvidia-ml-py" in sample.message


def test_real_pynvml_never_raises() -> None:
    # On a machine without a driver this is UNAVAILABLE with the reason; with one, OK.
    source = NvmlGpuSource()
    try:
        sample = source.sample()
    finally:
        source.close()
    if sample.status is SourceStatus.UNAVAILABLE:
        assert sample.message
    else:
        assert sample.status is SourceStatus.OK and sample.devices


def test_init_once_and_close_shuts_down() -> None:
    fake = FakeNvml([h100(), h100(name="NVIDIA H100 PCIe")])
    source = NvmlGpuSource(fake)
    samples = [source.sample() for _ in range(3)]
    assert [d.name for d in samples[-1].devices] == ["NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"]
    assert [d.index for d in samples[-1].devices] == [0, 1]
    assert fake.calls.count("nvmlInit") == 1
    assert fake.calls.count("nvmlDeviceGetName") == 2  # names read once, at init
    source.close()
    assert fake.initialized == 0


def test_fatal_error_mid_run_gives_down_then_reinitialises() -> None:
    fake = FakeNvml([h100()])
    source = NvmlGpuSource(fake)
    assert source.sample().status is SourceStatus.OK
    fake.devices[0]["util"] = pynvml.NVMLError_Uninitialized()
    down = source.sample()
    assert down.status is SourceStatus.DOWN
    assert "Uninitialized" in down.message
    fake.devices[0]["util"] = 50
    again = source.sample()
    assert again.status is SourceStatus.OK and again.devices[0].utilization == 50.0
    assert fake.calls.count("nvmlInit") == 2


def test_query_helper_maps_errors() -> None:
    fake = FakeNvml([h100(temp=pynvml.NVMLError_GpuIsLost())])
    assert nvml_query(fake, "nvmlDeviceGetTemperature", 0, 0) is None
    assert nvml_query(fake, "nvmlDeviceGetNoSuchThing", 0) is None  # binding too old
    with pytest.raises(pynvml.NVMLError_GpuIsLost):
        nvml_query(fake, "nvmlDeviceGetTemperature", 0, 0, strict=True)
    fake.devices[0]["temp"] = pynvml.NVMLError_DriverNotLoaded()
    with pytest.raises(pynvml.NVMLError_DriverNotLoaded):
        nvml_query(fake, "nvmlDeviceGetTemperature", 0, 0)
