"""Finding a model's config.json: local directories, the Hugging Face cache, the sim catalog."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tui.modes.adapters import sim_catalog_config
from tui.server.model_config import find_model_config, hf_hub_cache

TINY: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 32,
    "max_position_embeddings": 4096,
    "vocab_size": 600,
    "dtype": "bfloat16",
    "tie_word_embeddings": False,
}


def _write(path: Path, config: dict[str, Any]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return path / "config.json"


def _snapshot(hub: Path, repo: str, revision: str, config: dict[str, Any]) -> Path:
    return _write(hub / ("models--" + repo.replace("/", "--")) / "snapshots" / revision, config)


def test_local_directory(tmp_path: Path) -> None:
    path = _write(tmp_path / "tiny-llama", TINY)
    found = find_model_config(str(tmp_path / "tiny-llama"), env={})
    assert found.source == "local" and found.path == path and found.reason == ""
    assert found.shape is not None
    s = found.shape
    assert (s.num_layers, s.num_kv_heads, s.head_dim, s.max_position_embeddings) == (2, 2, 32, 4096)
    assert s.dtype == "bfloat16"
    assert found.embedding_params == 2 * 600 * 128


def test_local_directory_without_config_says_so(tmp_path: Path) -> None:
    found = find_model_config(str(tmp_path), env={})
    assert found.shape is None and found.source == "local"
    assert "has no config.json" in found.reason


def test_hf_cache_under_hf_home_prefers_the_revision_refs_main_names(tmp_path: Path) -> None:
    hub = tmp_path / "hf" / "hub"
    wanted = _snapshot(hub, "org/tiny", "aaa111", {**TINY, "max_position_embeddings": 2048})
    newer = _snapshot(hub, "org/tiny", "bbb222", TINY)
    os.utime(wanted, (1_000_000, 1_000_000))  # refs/main wins even over a newer snapshot
    assert newer.stat().st_mtime > wanted.stat().st_mtime
    refs = hub / "models--org--tiny" / "refs"
    refs.mkdir()
    (refs / "main").write_text("aaa111\n", encoding="utf-8")
    found = find_model_config("org/tiny", env={"HF_HOME": str(tmp_path / "hf")})
    assert found.source == "hf-cache" and found.path == wanted
    assert found.shape is not None and found.shape.max_position_embeddings == 2048


def test_hf_cache_without_refs_takes_the_newest_snapshot(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    old = _snapshot(hub, "org/tiny", "old", {**TINY, "max_position_embeddings": 1024})
    _snapshot(hub, "org/tiny", "new", TINY)
    os.utime(old, (1_000_000, 1_000_000))
    found = find_model_config("org/tiny", env={"HF_HUB_CACHE": str(hub)})
    assert found.shape is not None and found.shape.max_position_embeddings == 4096


def test_hub_cache_location_precedence(tmp_path: Path) -> None:
    assert hf_hub_cache({"HF_HUB_CACHE": "/a", "HF_HOME": "/b"}) == Path("/a")
    assert hf_hub_cache({"HF_HOME": "/b"}) == Path("/b/hub")
    assert hf_hub_cache({"XDG_CACHE_HOME": "/c"}) == Path("/c/huggingface/hub")
    assert hf_hub_cache({}) == Path.home() / ".cache" / "huggingface" / "hub"


def test_tied_embeddings_and_checkpoint_quantization_are_read(tmp_path: Path) -> None:
    config = {
        **TINY,
        "tie_word_embeddings": True,
        "quantization_config": {"quant_method": "awq", "bits": 4},
    }
    _write(tmp_path / "awq", config)
    untied = find_model_config(str(_write(tmp_path / "plain", TINY).parent), env={})
    found = find_model_config(str(tmp_path / "awq"), env={})
    assert found.tied_embeddings and found.checkpoint_quantization == "awq"
    assert found.embedding_params == 600 * 128
    assert found.shape is not None and untied.shape is not None
    # The tied LM head is not counted twice in the weights.
    assert untied.shape.param_count - found.shape.param_count == 600 * 128


def test_broken_config_gives_the_reason_not_an_exception(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "config.json").write_text("{not json", encoding="utf-8")
    _write(tmp_path / "partial", {"hidden_size": 128})
    bad = find_model_config(str(tmp_path / "bad"), env={})
    partial = find_model_config(str(tmp_path / "partial"), env={})
    assert bad.shape is None and "cannot read" in bad.reason and "config.json" in bad.reason
    assert partial.shape is None and "num_attention_heads" in partial.reason


def test_the_demo_passes_the_sim_catalog_as_the_marked_last_resort(tmp_path: Path) -> None:
    env = {"HF_HUB_CACHE": str(tmp_path / "empty")}
    model = "meta-llama/Llama-3.1-8B-Instruct"
    found = find_model_config(model, env=env, fallback=sim_catalog_config)
    assert found.source == "sim-catalog" and found.path is None
    assert "simulator catalog" in found.reason
    assert found.shape is not None and found.shape.num_layers == 32
    assert find_model_config(model, env=env).shape is None  # the server room alone: no sim


def test_hf_cache_beats_the_catalog(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    _snapshot(hub, "meta-llama/Llama-3.1-8B-Instruct", "r1", {**TINY, "num_hidden_layers": 3})
    env = {"HF_HUB_CACHE": str(hub)}
    model = "meta-llama/Llama-3.1-8B-Instruct"
    found = find_model_config(model, env=env, fallback=sim_catalog_config)
    assert found.source == "hf-cache"
    assert found.shape is not None and found.shape.num_layers == 3


def test_unknown_model_names_where_it_looked(tmp_path: Path) -> None:
    hub = tmp_path / "hub"
    found = find_model_config("nobody/nothing", env={"HF_HUB_CACHE": str(hub)})
    assert found.shape is None and found.source is None
    assert "nobody/nothing" in found.reason and str(hub) in found.reason
    assert find_model_config("  ", env={}).reason == "no model named"
