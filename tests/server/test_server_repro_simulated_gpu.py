"""A simulated GPU is recorded under one name, sample or not (issue 29: the demo's first run,
launched before any GPU sample, read "RTX 3080 (simulated)", every later one "NVIDIA GeForce
RTX 3080", so the board never compared them: "other machine")."""

from __future__ import annotations

from tui.domain.telemetry import GpuDevice, GpuSample, SourceStatus
from tui.server.repro import MachineReproducer

SIM_NAME = "NVIDIA GeForce RTX 3080 (simulated)"


def _sample() -> GpuSample:
    device = GpuDevice(index=0, name="NVIDIA GeForce RTX 3080", memory_used=1, memory_total=2)
    return GpuSample(t=1.0, source="simulated", status=SourceStatus.OK, devices=(device,))


def test_the_first_and_later_launches_of_the_demo_record_the_same_gpu() -> None:
    reproducer = MachineReproducer(
        launch_env={}, inherited_env={}, version=lambda: "0.32.0", gpu_name=SIM_NAME
    )
    first = reproducer.capture(["vllm", "serve", "m"], None)
    later = reproducer.capture(["vllm", "serve", "m"], _sample())
    assert first.gpu_name == later.gpu_name == SIM_NAME
    assert first.gpu_count == later.gpu_count == 1


def test_a_real_machine_records_what_its_sample_says() -> None:
    reproducer = MachineReproducer(launch_env={}, inherited_env={}, version=lambda: None)
    assert reproducer.capture(["vllm"], _sample()).gpu_name == "NVIDIA GeForce RTX 3080"
    assert reproducer.capture(["vllm"], None).gpu_name is None
