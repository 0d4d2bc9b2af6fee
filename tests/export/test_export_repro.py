"""Reproduction facts captured at launch: exact argv, the environment that matters, names
of secrets only, the GPU and its driver, vLLM, the host."""

from __future__ import annotations

import pynvml
from fakes.pynvml import FakeNvml, h100

from tui.domain.telemetry import GpuDevice, GpuSample, SourceStatus
from tui.server.repro import capture_reproduction, gpu_facts, local_host
from tui.telemetry.nvml import NvmlGpuSource


def test_argv_is_kept_exactly_but_a_secret_option_becomes_a_name() -> None:
    argv = [
        "/opt/venv/bin/vllm",
        "serve",
        "m",
        "--max-num-seqs",
        "256",
        "--api-key",
        "k-123456",
        "k-789012",
        "--hf_token=hf_abcdef",
        "--port",
        "8001",
    ]
    repro = capture_reproduction(argv)
    assert repro.argv == [
        "/opt/venv/bin/vllm",
        "serve",
        "m",
        "--max-num-seqs",
        "256",
        "--port",
        "8001",
    ]
    assert repro.secret_env == ["VLLM_API_KEY", "HF_TOKEN"]
    assert "k-123456" not in repro.model_dump_json() and "hf_abcdef" not in repro.model_dump_json()


def test_environment_that_matters_and_secret_names_only() -> None:
    repro = capture_reproduction(
        ["vllm", "serve", "m"],
        launch_env={"VLLM_API_KEY": "sk-secret-value", "MY_FLAG": "1", "PYTHONUNBUFFERED": "1"},
        inherited_env={
            "HOME": "/root",
            "PATH": "/bin",
            "VLLM_USE_V1": "1",
            "CUDA_VISIBLE_DEVICES": "0",
            "HF_TOKEN": "hf_zzzzzz",
            "AWS_SECRET_ACCESS_KEY": "aws-zzzz",
        },
    )
    assert repro.env == {"CUDA_VISIBLE_DEVICES": "0", "MY_FLAG": "1", "VLLM_USE_V1": "1"}
    assert sorted(repro.secret_env) == ["HF_TOKEN", "VLLM_API_KEY"]  # AWS_*: not vLLM's
    dumped = repro.model_dump_json()
    assert "sk-secret-value" not in dumped and "hf_zzzzzz" not in dumped


def test_gpu_facts_from_a_sample_and_nvml_versions() -> None:
    sample = GpuSample(
        t=0.0,
        source="nvml",
        status=SourceStatus.OK,
        devices=(GpuDevice(0, "NVIDIA H100 80GB HBM3"), GpuDevice(1, "NVIDIA H100 80GB HBM3")),
    )
    facts = gpu_facts(sample, driver_version="550.54.15", cuda_version="12.4")
    assert (facts.name, facts.count) == ("NVIDIA H100 80GB HBM3", 2)
    assert gpu_facts(None).name is None and gpu_facts(None).count is None

    assert NvmlGpuSource(FakeNvml([h100()])).versions() == ("550.54.15", "12.4")
    no_driver = FakeNvml([], init_error=pynvml.NVMLError_DriverNotLoaded())
    assert NvmlGpuSource(no_driver).versions() == (None, None)


def test_the_record_carries_version_gpu_and_host() -> None:
    facts = gpu_facts(None, driver_version="550", cuda_version="12.4")
    repro = capture_reproduction(["vllm"], vllm_version="0.32.0", gpu=facts, host=local_host())
    assert repro.vllm_version == "0.32.0" and repro.cuda_version == "12.4"
    assert repro.host
