"""Config-time errors, raised in vLLM's API-server process before any engine starts.

vLLM builds its config classes one after another in ``create_engine_config``
(``engine/arg_utils.py:2240-2642``): ``ModelConfig`` first, then ``CacheConfig``,
``ParallelConfig``, the offload config, ``SchedulerConfig``, and finally ``VllmConfig``
(which cross-checks the model against the parallel layout and loads the quantization
config). Each is a pydantic dataclass, so the first one that fails raises a
``pydantic_core.ValidationError`` naming that class, and nothing after it is checked. This
module reproduces that: it groups every problem by the config class that reports it
(:attr:`FlagSpec.config` for range errors) and keeps only the first group in vLLM's order.

Texts are vLLM's (reference 1.5, 2.3) and pydantic's (``Input should be ...``), rendered in
pydantic's layout as ``fail_b2``/``fail_b3``/``fail_c1`` of the CPU captures show it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tui.domain.flags.serve import ServeFlags, flag_spec
from tui.sim.argv import LoraOptions
from tui.sim.catalog import ModelEntry
from tui.sim.memory import (
    _COMPATIBLE,
    CHECKPOINT_QUANT_BYTES,
    ONLINE_QUANT_BYTES,
    SimHardware,
    batch_defaults,
)

PYDANTIC_DOCS = "https://errors.pydantic.dev/2.14/v/"
# The order vLLM constructs its configs in; the first failing one is what the user sees.
CONFIG_ORDER = (
    "ModelConfig",
    "CacheConfig",
    "ParallelConfig",
    "UVAOffloadConfig",
    "SchedulerConfig",
    "LoRAConfig",
    "VllmConfig",
    "FrontendArgs",
    "EngineArgs",
)
# Field order inside a config class where it decides the order of several errors.
_FIELD_ORDER = {"max_num_batched_tokens": 0, "max_num_seqs": 1}


@dataclass(frozen=True)
class ErrorItem:
    """One line group of a pydantic error: a field error or a model-level ``Value error``."""

    msg: str
    type: str = "value_error"
    field: str | None = None
    input_value: Any = None

    def render(self, config: str, args_repr: str) -> list[str]:
        """The lines pydantic prints for this error."""
        lines = [self.field] if self.field else []
        if self.field:
            value, type_name = repr(self.input_value), type(self.input_value).__name__
        else:
            value, type_name = args_repr, "ArgsKwargs"
        lines.append(
            f"  {self.msg} [type={self.type}, input_value={value}, input_type={type_name}]"
        )
        lines.append(f"    For further information visit {PYDANTIC_DOCS}{self.type}")
        return lines


@dataclass(frozen=True)
class ConfigError:
    """All errors one vLLM config class reports, as one ``ValidationError``.

    ``after_max_len_log``: vLLM logs ``Using max model len`` before raising it (a
    ``ModelConfig`` model validator runs after ``__post_init__``, which logs the length).
    """

    config: str
    items: tuple[ErrorItem, ...]
    after_max_len_log: bool = False

    def lines(self, model: str) -> list[str]:
        """``N validation error(s) for <Config>`` and the per-error lines."""
        n = len(self.items)
        head = f"{n} validation error{'s' if n != 1 else ''} for {self.config}"
        args_repr = f"ArgsKwargs((), {{'model': {model!r}, ...}})"
        out = [head]
        for item in self.items:
            out.extend(item.render(self.config, args_repr))
        return out


def _field_errors(exc: ValidationError) -> dict[str, list[ErrorItem]]:
    """ServeFlags' errors regrouped by the vLLM config class that owns each flag."""
    groups: dict[str, list[ErrorItem]] = {}
    for err in exc.errors():
        loc = err.get("loc", ())
        if loc == ("max_model_len",) and "positive integer" in str(err.get("msg", "")):
            continue  # vLLM reports it from ModelConfig's own validator (_semantic_errors)
        if loc:
            name = str(loc[0])
            try:
                config = flag_spec(name).config
            except KeyError:
                config = "EngineArgs"
            item = ErrorItem(err["msg"], err["type"], name, err.get("input"))
            groups.setdefault(config, []).append(item)
            continue
        # Model-level ValueError: ServeFlags joins its cross-field problems with a space.
        text = str(err.get("msg", "")).removeprefix("Value error, ")
        for sentence in _split_problems(text):
            config = (
                "ModelConfig" if sentence.startswith("Unknown quantization") else "SchedulerConfig"
            )
            groups.setdefault(config, []).append(ErrorItem(f"Value error, {sentence}"))
    return groups


def _split_problems(text: str) -> list[str]:
    starts = ("Unknown quantization method:", "max_num_batched_tokens (")
    cuts = sorted({i for s in starts for i in _find_all(text, s)})
    if not cuts or cuts[0] != 0:
        cuts = [0, *cuts]
    return [
        text[a:b].strip()
        for a, b in zip(cuts, [*cuts[1:], len(text)], strict=True)
        if text[a:b].strip()
    ]


def _find_all(text: str, needle: str) -> list[int]:
    out, i = [], text.find(needle)
    while i >= 0:
        out.append(i)
        i = text.find(needle, i + 1)
    return out


def max_model_len_message(user: int, derived: int) -> str:
    """``config/model.py:2645-2665`` (``derived`` prints as a float, as the capture shows)."""
    return (
        f"User-specified max_model_len ({user}) is greater than the derived max_model_len "
        f"(max_position_embeddings={float(derived)} or model_max_length=None in model's "
        "config.json). To allow overriding this maximum, set the env var "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1. VLLM_ALLOW_LONG_MAX_MODEL_LEN must be used with "
        "extreme caution. If the model uses relative position encoding (RoPE), positions "
        "exceeding derived_max_model_len lead to nan. If the model uses absolute position "
        "encoding, positions exceeding derived_max_model_len will cause a CUDA array "
        "out-of-bounds error."
    )


def positive_max_model_len_message(value: int) -> str:
    """``config/model.py:1057-1062`` (``validate_model_config_after``)."""
    return (
        f"max_model_len must be a positive integer, got int: {value}. Example: max_model_len=2048"
    )


def lora_errors(lora: LoraOptions) -> list[ErrorItem]:
    """``LoRAConfig``'s checks (``config/lora.py:31-125``), when LoRA is enabled."""
    if not lora.enabled:
        return []
    if lora.max_loras < 1:
        return [
            ErrorItem(
                "Input should be greater than or equal to 1",
                "greater_than_equal",
                "max_loras",
                lora.max_loras,
            )
        ]
    cpu = lora.max_cpu_loras
    if cpu is not None and cpu < lora.max_loras:
        return [
            ErrorItem(
                f"Value error, max_cpu_loras ({cpu}) must be >= max_loras ({lora.max_loras})."
            )
        ]
    return []


def world_size_message(world_size: int, num_gpus: int) -> str:
    """``config/parallel.py:1052-1058``."""
    return (
        f"World size ({world_size}) is larger than the number of available GPUs ({num_gpus}) in "
        "this node. If this is intentional and you are using:\n"
        "- ray, set '--distributed-executor-backend ray'.\n"
        "- multiprocessing, set '--nnodes' appropriately."
    )


def _semantic_errors(
    values: Mapping[str, Any], entry: ModelEntry, hardware: SimHardware
) -> dict[str, list[ErrorItem]]:
    """vLLM's config checks past the field types, grouped by the config class that raises."""
    groups: dict[str, list[ErrorItem]] = {}
    checks = (
        ("ModelConfig", _model_config_errors(values, entry)),
        ("ParallelConfig", _parallel_config_errors(values, hardware)),
        ("VllmConfig", _vllm_config_errors(values, entry)),
        ("SchedulerConfig", _chunked_prefill_errors(values, entry)),
    )
    for config, messages in checks:
        for msg in messages:
            groups.setdefault(config, []).append(ErrorItem(f"Value error, {msg}"))
    if budget_items := _derived_budget_errors(values, entry, hardware):
        groups.setdefault("SchedulerConfig", []).extend(budget_items)
    return groups


def _model_config_errors(values: Mapping[str, Any], entry: ModelEntry) -> list[str]:
    """ModelConfig: a zero or too long max_model_len, a quantization the checkpoint refuses."""
    out: list[str] = []
    derived = entry.shape.max_position_embeddings
    mml = values.get("max_model_len")
    if mml == 0 and not isinstance(mml, bool):
        out.append(positive_max_model_len_message(0))
    if (
        isinstance(mml, int)
        and mml > derived
        and os.environ.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN") != "1"
    ):
        out.append(max_model_len_message(mml, derived))
    quant = values.get("quantization")
    ckpt = entry.checkpoint_quantization
    if isinstance(quant, str) and ckpt and quant not in _COMPATIBLE.get(ckpt, {ckpt}):
        out.append(
            f"Quantization method specified in the model config ({ckpt}) does not match the "
            f"quantization method specified in the `quantization` argument ({quant})."
        )
    return out


def _parallel_sizes(values: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(tp, pp)`` when both are usable integers, else ``None`` (the field check says why)."""
    tp = values.get("tensor_parallel_size") or 1
    pp = values.get("pipeline_parallel_size") or 1
    if isinstance(tp, int) and isinstance(pp, int) and tp >= 1 and pp >= 1:
        return tp, pp
    return None


def _parallel_config_errors(values: Mapping[str, Any], hardware: SimHardware) -> list[str]:
    """ParallelConfig: a world size above the GPUs of this node."""
    sizes = _parallel_sizes(values)
    if sizes is not None and sizes[0] * sizes[1] > hardware.num_gpus:
        return [world_size_message(sizes[0] * sizes[1], hardware.num_gpus)]
    return []


def _vllm_config_errors(values: Mapping[str, Any], entry: ModelEntry) -> list[str]:
    """VllmConfig: heads not divisible by tp; a checkpoint quantization with no config file."""
    out: list[str] = []
    sizes = _parallel_sizes(values)
    heads = entry.shape.num_attention_heads
    if sizes is not None and heads % sizes[0]:
        out.append(
            f"Total number of attention heads ({heads}) must be "
            f"divisible by tensor parallel size ({sizes[0]})."
        )
    quant = values.get("quantization")
    if (
        isinstance(quant, str)
        and entry.checkpoint_quantization is None
        and quant not in ONLINE_QUANT_BYTES
        and quant in CHECKPOINT_QUANT_BYTES
    ):
        out.append(f"Cannot find the config file for {quant}")
    return out


def _chunked_prefill_errors(values: Mapping[str, Any], entry: ModelEntry) -> list[str]:
    """SchedulerConfig: without chunked prefill, a token budget below the derived length."""
    derived = entry.shape.max_position_embeddings
    mnbt = values.get("max_num_batched_tokens")
    if (
        values.get("enable_chunked_prefill") is False
        and isinstance(mnbt, int)
        and values.get("max_model_len") is None
        and mnbt < derived
    ):
        return [
            f"max_num_batched_tokens ({mnbt}) is smaller than max_model_len ({derived}). This "
            "effectively limits the maximum sequence length to max_num_batched_tokens and makes "
            "vLLM reject longer sequences. Please increase max_num_batched_tokens or decrease "
            "max_model_len."
        ]
    return []


def _derived_budget_errors(
    values: Mapping[str, Any], entry: ModelEntry, hardware: SimHardware
) -> list[ErrorItem]:
    """SchedulerConfig's field errors for a derived token budget below 1.

    vLLM derives the unset values (engine/arg_utils.py:3129-3186): a zero max_num_seqs or
    max_model_len drags the derived budget to zero, and SchedulerConfig reports the derived
    value too (fail_b3 shows both errors).
    """
    if values.get("max_num_batched_tokens") is not None:
        return []
    derived = entry.shape.max_position_embeddings
    mml = values.get("max_model_len")
    defaults = batch_defaults(hardware.gpu)
    mns = values.get("max_num_seqs")
    length = mml if isinstance(mml, int) and mml >= 0 else derived
    seqs = mns if isinstance(mns, int) else defaults.max_num_seqs
    budget = defaults.max_num_batched_tokens
    if values.get("enable_chunked_prefill") is False:
        budget = max(length, budget)
    budget = min(seqs * length, budget)
    if budget >= 1:
        return []
    ge1 = "Input should be greater than or equal to 1"
    items = [ErrorItem(ge1, "greater_than_equal", "max_num_batched_tokens", budget)]
    if mns is None:
        items.append(ErrorItem(ge1, "greater_than_equal", "max_num_seqs", min(seqs, budget)))
    return items


def first_config_error(
    model: str,
    values: Mapping[str, Any],
    extra: tuple[str, ...],
    entry: ModelEntry,
    hardware: SimHardware,
    lora: LoraOptions | None = None,
) -> tuple[ConfigError | None, ServeFlags | None]:
    """The error vLLM would raise first for this command line, or the validated flags."""
    groups: dict[str, list[ErrorItem]] = {}
    flags: ServeFlags | None = None
    try:
        flags = ServeFlags.model_validate({**values, "model": model, "extra_args": extra})
    except ValidationError as exc:
        groups = _field_errors(exc)
    for config, items in _semantic_errors(values, entry, hardware).items():
        groups.setdefault(config, []).extend(items)
    if lora is not None and (items := lora_errors(lora)):
        groups["LoRAConfig"] = items
    for config in CONFIG_ORDER:
        items = groups.get(config, [])
        if items:
            ordered = tuple(sorted(items, key=lambda i: _FIELD_ORDER.get(i.field or "", 99)))
            # Only the model validator's error comes after the length is logged.
            late = config == "ModelConfig" and all("positive integer" in i.msg for i in ordered)
            return ConfigError(config, ordered, after_max_len_log=late), None
    return None, flags
