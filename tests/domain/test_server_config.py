"""An attached server's configuration, read from what real vLLM 0.32 says about itself
(the CPU captures: ``/v1/models``, ``vllm:cache_config_info``, a startup log)."""

from __future__ import annotations

import json
from pathlib import Path

from tui.domain.server_config import (
    FROM_LOG,
    FROM_METRICS,
    FROM_MODELS,
    cache_config_values,
    models_values,
    read_config,
)
from tui.server.diagnose.reading import LogView
from tui.telemetry.scrape import parse_families

CAPTURES = Path(__file__).resolve().parent.parent / "captures"


def _models_entry() -> dict[str, object]:
    text = (CAPTURES / "endpoints.txt").read_text(encoding="utf-8")
    body = text.split("== GET /v1/models", 1)[1].split("\n\n", 1)[1].split("\n", 1)[0]
    return dict(json.loads(body)["data"][0])


def _cache_labels() -> dict[str, str]:
    page = (CAPTURES / "metrics_fresh_idle.txt").read_text(encoding="utf-8")
    for family in parse_families(page):
        for sample in family.samples:
            if sample.name == "vllm:cache_config_info":
                return dict(sample.labels)
    raise AssertionError("the capture has no cache_config_info")


def test_the_live_endpoints_give_model_length_and_the_cache_config() -> None:
    config = read_config(
        "fallback",
        metrics=cache_config_values(_cache_labels()),
        models=models_values(_models_entry()),
    )
    flags = config.flags
    assert flags.model == "/models/tiny-llama" and flags.max_model_len == 4096
    assert (flags.block_size, flags.gpu_memory_utilization) == (128, 0.92)
    assert flags.enable_prefix_caching is True and flags.kv_cache_memory_bytes == 1 << 30
    assert config.source("max_model_len") == FROM_MODELS
    assert config.source("block_size") == FROM_METRICS
    assert config.source("quantization") is None and config.unread() == "not known"
    assert "max-model-len from /v1/models" in config.summary()


def test_the_startup_log_adds_what_the_endpoints_do_not_tell() -> None:
    view = LogView((CAPTURES / "startup_eager_kv64M.log").read_text(encoding="utf-8"), None, None)
    config = read_config(
        "fallback",
        log=view.non_default_args,
        engine=view.engine_config,
        models=models_values(_models_entry()),
    )
    flags = config.flags
    assert flags.enforce_eager is True and flags.dtype == "bfloat16"
    assert flags.kv_cache_memory_bytes == 64 << 20
    assert config.source("enforce_eager") == FROM_LOG and config.log_read
    assert config.unread() == "vLLM default"
    assert flags.served_model_name is None  # the engine line names the model itself


def test_unset_labels_and_refused_values_are_left_out_with_a_note() -> None:
    labels = {"block_size": "None", "gpu_memory_utilization": "1.5", "cache_dtype": "fp8"}
    config = read_config("m", metrics=cache_config_values(labels))
    assert config.flags.block_size is None and config.flags.kv_cache_dtype == "fp8"
    assert config.flags.gpu_memory_utilization is None
    assert any("gpu_memory_utilization" in note for note in config.notes)
    assert config.source("gpu_memory_utilization") is None


def test_a_served_name_other_than_the_model_is_its_served_model_name() -> None:
    values = models_values({"id": "chat", "root": "/models/x", "max_model_len": 2048})
    assert values == {"model": "/models/x", "served_model_name": "chat", "max_model_len": 2048}
    assert models_values({"id": "m", "max_model_len": True}) == {"model": "m"}
