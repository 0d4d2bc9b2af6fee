"""The bounded wait for a stopped server's GPU memory, with scripted NVML samples."""

from __future__ import annotations

from tui.domain.telemetry import GpuDevice, GpuSample, SourceStatus
from tui.telemetry.gpu_release import wait_gpu_released


def _sample(*pids: int, status: SourceStatus = SourceStatus.OK) -> GpuSample:
    dev = GpuDevice(index=0, name="H100", processes=tuple((p, 2**30) for p in pids))
    return GpuSample(t=0.0, source="nvml", status=status, devices=(dev,), message="no driver")


class Script:
    """Returns the given samples in order, then repeats the last one."""

    def __init__(self, *samples: GpuSample) -> None:
        self.samples = list(samples)
        self.calls = 0

    def __call__(self) -> GpuSample:
        self.calls += 1
        return self.samples[min(self.calls, len(self.samples)) - 1]


async def test_waits_until_no_old_pid_is_listed() -> None:
    script = Script(_sample(101, 7), _sample(102, 7), _sample(7))
    assert await wait_gpu_released(script, {101, 102}, interval_s=0) is None
    assert script.calls == 3  # released on the third sample; pid 7 is someone else's


async def test_gives_up_after_the_timeout_and_says_which_pids() -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 1.0
        return now[0]

    script = Script(_sample(101))
    message = await wait_gpu_released(script, {101}, timeout_s=3, interval_s=0, clock=clock)
    assert message is not None and "pids 101" in message and "starting anyway" in message
    assert script.calls >= 2


async def test_unavailable_nvml_is_reported_not_waited_on() -> None:
    script = Script(_sample(status=SourceStatus.UNAVAILABLE))
    message = await wait_gpu_released(script, {101}, interval_s=0)
    assert message == "GPU release not checked: no driver"
    assert script.calls == 1


async def test_nothing_to_wait_for() -> None:
    script = Script(_sample(101))
    assert await wait_gpu_released(script, set()) is None
    assert script.calls == 0
