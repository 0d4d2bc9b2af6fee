"""Find and read a model's ``config.json`` for the pre-flight KV estimate (file I/O only).

Where vLLM would find the model, in order:

1. a local directory: ``MODEL/config.json``;
2. the Hugging Face cache, found by :mod:`tui.store.hf_cache` (``$HF_HUB_CACHE``,
   ``$HF_HOME/hub``, ``$XDG_CACHE_HOME/huggingface/hub``...), as
   ``models--ORG--NAME/snapshots/<rev>/config.json`` (the revision ``refs/main`` names,
   else the newest snapshot);
3. as a last resort, a ``fallback`` the caller passes: the demo mode passes the simulator's
   catalog (the published shapes of the models it knows, marked ``source="sim-catalog"`` so
   nobody mistakes them for the checkpoint on disk). This room never imports the simulator.

Nothing is downloaded. A model found nowhere gives ``shape=None`` and the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from tui.domain.budget import default_embedding_params
from tui.domain.kv import ModelShape
from tui.store.bounded_read import UntrustedFileError, parse_json, read_text
from tui.store.hf_cache import find_snapshot_file, hub_cache_dir
from tui.store.regular_file import is_directory, is_regular_file, local_path

ConfigSource = Literal["local", "hf-cache", "sim-catalog"]


@dataclass(frozen=True)
class ModelConfig:
    """What the estimate needs from a model's config, or why it could not be read.

    ``shape`` is ``None`` when no config was found or it could not be parsed (``reason``
    says which). ``embedding_params`` counts one matrix when embeddings are tied.
    """

    model: str
    shape: ModelShape | None
    source: ConfigSource | None = None
    path: Path | None = None
    reason: str = ""
    checkpoint_quantization: str | None = None
    tied_embeddings: bool = False

    @property
    def embedding_params(self) -> float | None:
        """Embedding + LM-head parameters (``None`` without a shape)."""
        if self.shape is None:
            return None
        return default_embedding_params(self.shape, self.tied_embeddings)


def hf_hub_cache(env: Mapping[str, str] | None = None) -> Path:
    """The hub cache directory (:func:`tui.store.hf_cache.hub_cache_dir`, the one resolver)."""
    return hub_cache_dir(env)


def _cache_config(model: str, hub: Path) -> Path | None:
    """``models--ORG--NAME/snapshots/<rev>/config.json`` for a repo id, if cached."""
    return find_snapshot_file(model, "config.json", hub=hub)


def parse_config(model: str, config: dict[str, Any]) -> tuple[ModelShape, bool, str | None]:
    """``(shape, tied_embeddings, checkpoint quant method)`` from a ``config.json`` dict."""
    shape = ModelShape.from_hf_config(model, config)
    inner = config.get("text_config", config)
    tied = bool(inner.get("tie_word_embeddings", config.get("tie_word_embeddings", False)))
    if tied:  # from_hf_config counts both embedding matrices
        shape = replace(shape, param_count=shape.param_count - shape.vocab_size * shape.hidden_size)
    quant_cfg = config.get("quantization_config") or inner.get("quantization_config") or {}
    quant = quant_cfg.get("quant_method") if isinstance(quant_cfg, dict) else None
    return shape, tied, str(quant) if quant else None


def _read(model: str, path: Path, source: ConfigSource) -> ModelConfig:
    try:
        config = parse_json(read_text(path, what="model config"))
        if not isinstance(config, dict):
            raise ValueError("not a JSON object")
        shape, tied, quant = parse_config(model, config)
    except UntrustedFileError as exc:  # a FIFO, too large, not UTF-8: its own one line
        return ModelConfig(model, None, source, path, exc.one_line())
    except (OSError, ValueError, KeyError, TypeError, AssertionError) as exc:
        detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
        return ModelConfig(model, None, source, path, f"cannot read {path}: {detail}")
    return ModelConfig(model, shape, source, path, "", quant, tied)


def find_model_config(
    model: str,
    *,
    env: Mapping[str, str] | None = None,
    fallback: Callable[[str], ModelConfig | None] | None = None,
) -> ModelConfig:
    """Find ``model``'s config (local dir, HF cache, then ``fallback``) and read it.

    Never raises for a missing or bad config: the result's ``shape`` is ``None`` and
    ``reason`` says why.
    """
    if not model or not model.strip():
        return ModelConfig(model, None, reason="no model named")
    local = local_path(model)
    # A model id of any length (or with a NUL) is not a folder, never a crash.
    if local is not None and is_directory(local):
        config = local / "config.json"
        if is_regular_file(config):
            return _read(model, config, "local")
        return ModelConfig(model, None, "local", local, f"{local} has no config.json")
    hub = hf_hub_cache(env)
    cached = _cache_config(model, hub)
    if cached is not None:
        return _read(model, cached, "hf-cache")
    found = fallback(model) if fallback is not None else None
    if found is not None:
        return found
    return ModelConfig(
        model,
        None,
        reason=f"no config.json for {model!r}: not a local directory and not in the Hugging "
        f"Face cache ({hub})",
    )
