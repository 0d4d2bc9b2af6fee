"""WSL2: detection, the "(WSL2)" host label, "N/A (WDDM)" process memory, NVML's refusals
explained in one line (fake pynvml reproducing WSL2's and blocked drivers' answers)."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest
from fakes.pynvml import FakeNvml, blocked_device, h100, wsl_device

from tui.domain.gpus import WDDM_NA, gpu_rows
from tui.domain.telemetry import SourceStatus
from tui.telemetry.host import HostSource
from tui.telemetry.nvml import NvmlGpuSource
from tui.telemetry.wsl import detect_wsl, host_label, wsl_kind


@pytest.mark.parametrize(
    ("release", "lib", "kind"),
    [
        ("5.15.153.1-microsoft-standard-WSL2", False, "WSL2"),
        ("6.6.36.3-microsoft-standard-WSL2+", True, "WSL2"),
        ("5.10.16.3-microsoft-custom", True, "WSL2"),
        ("4.4.0-19041-Microsoft", False, "WSL1"),
        ("6.8.0-45-generic", False, None),
        ("", False, None),
    ],
)
def test_wsl_kind(release: str, lib: bool, kind: str | None) -> None:
    assert wsl_kind(release, lib) == kind


def test_detect_from_files(tmp_path: Path) -> None:
    osrelease = tmp_path / "osrelease"
    osrelease.write_text("5.15.153.1-microsoft-standard-WSL2\n")
    assert detect_wsl(osrelease, tmp_path / "no-lib") == "WSL2"
    osrelease.write_text("6.8.0-generic\n")
    assert detect_wsl(osrelease, tmp_path / "no-lib") is None
    (tmp_path / "lib").mkdir()
    assert detect_wsl(tmp_path / "missing", tmp_path / "lib") == "WSL2"


def test_host_label() -> None:
    assert host_label("desk", "WSL2") == "desk (WSL2)"
    assert host_label("desk", None) == "desk"
    assert HostSource(None, wsl="WSL2").sample().label.endswith(" (WSL2)")


def test_wsl_process_memory_reads_wddm_na_not_zero() -> None:
    sample = NvmlGpuSource(FakeNvml([wsl_device()]), wsl=True).sample()
    assert sample.status is SourceStatus.OK and sample.wsl
    (device,) = sample.devices
    assert device.memory_used == 20 * 2**30  # the device's memory is still read
    assert device.processes == ((4242, None), (4243, None))
    (row,) = gpu_rows(sample, server_indices={0}, server_pids={4242, 4243})
    assert row.server_memory is None and row.server_memory_note == WDDM_NA


@pytest.mark.parametrize(
    ("error", "wsl", "words"),
    [
        (pynvml.NVMLError_OperatingSystem(), True, ("blocked by the operating system", "wsl")),
        (pynvml.NVMLError_OperatingSystem(), False, ("blocked by the operating system", "/dev")),
        (pynvml.NVMLError_LibraryNotFound(), True, ("/usr/lib/wsl/lib", "on Windows")),
        (pynvml.NVMLError_DriverNotLoaded(), True, ("Windows NVIDIA driver", "wsl --shutdown")),
        (pynvml.NVMLError_LibRmVersionMismatch(), False, ("versions differ",)),
        (pynvml.NVMLError_LibraryNotFound(), False, ("no NVIDIA driver",)),
    ],
)
def test_refusals_at_init_are_one_explained_line(
    error: BaseException, wsl: bool, words: tuple[str, ...]
) -> None:
    sample = NvmlGpuSource(FakeNvml([h100()], init_error=error), wsl=wsl).sample()
    assert sample.status is SourceStatus.UNAVAILABLE and sample.devices == ()
    assert "\n" not in sample.message and len(sample.message) <= 200
    for word in words:
        assert word in sample.message


def test_blocked_device_count_is_not_no_gpu() -> None:
    fake = FakeNvml([h100()], count_error=pynvml.NVMLError_OperatingSystem())
    sample = NvmlGpuSource(fake, wsl=True).sample()
    assert sample.status is SourceStatus.UNAVAILABLE
    assert "blocked by the operating system" in sample.message
    assert "no NVIDIA GPU" not in sample.message


def test_blocked_device_queries_read_as_na() -> None:
    sample = NvmlGpuSource(FakeNvml([blocked_device(), h100()]), wsl=False).sample()
    assert sample.status is SourceStatus.OK
    blocked, fine = sample.devices
    assert blocked.name == "NVIDIA GeForce RTX 3080"
    assert blocked.memory_used is None and blocked.utilization is None and blocked.uuid is None
    assert fine.uuid == h100()["uuid"] and fine.utilization == 93.0


def test_gpu_lost_mid_run_is_down_with_what_to_do() -> None:
    fake = FakeNvml([h100()])
    source = NvmlGpuSource(fake, wsl=False)
    assert source.sample().status is SourceStatus.OK
    fake.devices[0]["util"] = pynvml.NVMLError_Uninitialized()
    down = source.sample()
    assert down.status is SourceStatus.DOWN and "\n" not in down.message
