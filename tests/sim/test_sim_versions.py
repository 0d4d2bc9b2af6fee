"""``--sim-vllm-version``: each version's metric families, start-up wordings and version."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from fakes.sim_process import sim_process
from prometheus_client.parser import text_string_to_metric_families

from tui.domain.vllm_release import release_of
from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION, SIM_VLLM_VERSIONS

MODEL = "meta-llama/Llama-3.2-1B-Instruct"
COMMON = ("--max-model-len", "2048", "--sim-speed", "50")


CAPTURES = Path(__file__).resolve().parent / "captures"
# registered by the server after the stat logger (log_metrics_info), so not in the captures
LATER = {"vllm:cache_config_info"}


def _families(base: str) -> set[str]:
    text = httpx.get(base + "/metrics", timeout=10).text
    # without the *_created series prometheus_client adds (the captures were read without
    # them; test_sim_metrics_families holds those to a real page)
    names = {f.name for f in text_string_to_metric_families(text)}
    return {n for n in names if n.startswith("vllm:") and not n.endswith("_created")}


def _real(version: str) -> dict[str, list[str]]:
    """What the real vLLM of ``version`` registers (read from its code; the realvllm suite
    checks these files against it: tests/integration/test_realvllm_metric_families.py)."""
    data: dict[str, list[str]] = json.loads(
        (CAPTURES / f"vllm_families_{version}.json").read_text()
    )
    return data


@pytest.mark.parametrize("version", SIM_VLLM_VERSIONS)
def test_each_version_speaks_its_own_metrics_and_log(version: str) -> None:
    real = _real(version)
    with sim_process(MODEL, *COMMON, "--sim-vllm-version", version) as sim:
        sim.wait_ready()
        assert _families(sim.base) - LATER == set(real["plain"])
        assert httpx.get(sim.base + "/version", timeout=5).json() == {"version": version}
        sim.wait_for("Application startup complete.")
        log = "\n".join(sim.lines)
    capacity = release_of(version).site("kv.capacity").source  # its own line, per version
    assert f"[{capacity}]" in log
    assert ("[kv_cache_utils.py:2327]" in log) is (version < "0.33")
    assert f"version {version}" in log


@pytest.mark.parametrize("version", SIM_VLLM_VERSIONS)
def test_kv_offloading_adds_the_versions_own_families(version: str) -> None:
    real = _real(version)
    with sim_process(
        MODEL, *COMMON, "--kv-offloading-size", "2", "--sim-vllm-version", version
    ) as sim:
        sim.wait_ready()
        assert _families(sim.base) - LATER == set(real["kv_offloading_size"])
        text = httpx.get(sim.base + "/metrics", timeout=10).text
        assert 'vllm:kv_offload_total_bytes_total{engine="0"' in text  # both directions at 0
        assert "vllm:kv_offload_config_info{" not in text  # a series from the first step
        r = httpx.post(
            sim.base + "/v1/completions",
            json={"model": MODEL, "prompt": "one two", "max_tokens": 2},
            timeout=30,
        )
        assert r.status_code == 200
        text = httpx.get(sim.base + "/metrics", timeout=10).text
    assert ("vllm:kv_offload_config_info{" in text) is (version >= "0.33")


def test_the_offload_families_are_the_only_difference_and_0_33_adds_one() -> None:
    old, new = _real("0.32.0"), _real("0.33.0")
    assert old["plain"] == new["plain"]  # loggers.py is the same file in both wheels
    added = set(new["kv_offloading_size"]) - set(old["kv_offloading_size"])
    assert added == {"vllm:kv_offload_config_info"}


def test_the_default_is_the_newest() -> None:
    newest = max(SIM_VLLM_VERSIONS, key=lambda v: tuple(int(p) for p in v.split(".")))
    assert newest == DEFAULT_SIM_VLLM_VERSION
