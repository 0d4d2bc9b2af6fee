"""``--sim-vllm-version``: each version's metric families, start-up wordings and version."""

from __future__ import annotations

import httpx
import pytest
from fakes.sim_process import sim_process
from prometheus_client.parser import text_string_to_metric_families

from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION, SIM_VLLM_VERSIONS

MODEL = "meta-llama/Llama-3.2-1B-Instruct"


def _families(base: str) -> set[str]:
    text = httpx.get(base + "/metrics", timeout=10).text
    return {f.name for f in text_string_to_metric_families(text)}


@pytest.mark.parametrize("version", SIM_VLLM_VERSIONS)
def test_each_version_speaks_its_own_metrics_and_log(version: str) -> None:
    flags = ("--max-model-len", "2048", "--sim-speed", "50", "--kv-offloading-size", "2")
    with sim_process(MODEL, *flags, "--sim-vllm-version", version) as sim:
        sim.wait_ready()
        families = _families(sim.base)
        assert httpx.get(sim.base + "/version", timeout=5).json() == {"version": version}
        sim.wait_for("Application startup complete.")
        log = "\n".join(sim.lines)
    offload = {"vllm:kv_offload_config_info", "vllm:kv_offload_load_bytes"}
    assert "vllm:num_requests_running" in families
    if version >= "0.33":
        assert offload <= families
        assert "[kv_cache_planning.py:" in log or "[kv_cache_utils.py:1148]" in log
    else:
        assert not offload & families
        assert "[kv_cache_utils.py:2327]" in log
    assert f"version {version}" in log


def test_the_default_is_the_newest() -> None:
    newest = max(SIM_VLLM_VERSIONS, key=lambda v: tuple(int(p) for p in v.split(".")))
    assert newest == DEFAULT_SIM_VLLM_VERSION
