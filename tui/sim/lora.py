"""LoRA on the simulated GPU: the adapter slots' memory and the punica kernels' time.

What it imitates (vLLM 0.32, ``lora/``, ``config/lora.py``):

- ``--enable-lora`` allocates, at model load, buffers for ``--max-loras`` adapters at
  ``--max-lora-rank`` for every LoRA-capable linear layer (``qkv_proj``, ``o_proj``,
  ``gate_up_proj``, ``down_proj``): ``A`` is ``rank x in``, ``B`` is ``out x rank``, in the
  model dtype. Those bytes come out of the KV cache (:func:`lora_weight_bytes`).
- Every step with LoRA enabled runs the punica shrink/expand kernels over each layer: the
  batch's tokens times ``max_lora_rank`` times the layer's ``in + out`` dimensions, twice,
  at a small fraction of the tensor-core peak (thin GEMMs), plus reading the active
  adapters' weights, plus a launch cost per layer. So latency grows with the rank and with
  the number of distinct adapters in the batch, and even base-model requests pay the
  launch cost once LoRA is on, as on hardware (:func:`lora_step_seconds`).
- At most ``--max-loras`` distinct adapters run in one batch; a waiting request for another
  adapter is skipped until a slot frees (``v1/core/sched/scheduler.py``), counted as
  ``deferred`` in ``vllm:num_requests_waiting_by_reason`` (see the scheduler).

Simulated adapters need no files: ``--lora-modules name=path`` serves ``name`` whether or
not ``path`` exists; when ``path/adapter_config.json`` is there its ``r`` is checked
against ``--max-lora-rank`` with vLLM's message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from tui.domain.kv import ModelShape
from tui.sim.argv import LoraModule, LoraOptions
from tui.sim.model_files import as_path

LORA_MFU = 0.04  # punica's thin shrink/expand GEMMs reach a few percent of peak
LORA_LAUNCH_PER_LAYER_S = 0.000012  # shrink + expand launches for the layer's LoRA modules


def lora_dims_per_layer(shape: ModelShape, tp: int = 1) -> int:
    """Sum of ``in + out`` over a layer's LoRA-capable linears, per tensor-parallel rank."""
    hidden, head_dim = shape.hidden_size, shape.head_dim
    qkv_out = (shape.num_attention_heads + 2 * shape.num_kv_heads) * head_dim
    o_in = shape.num_attention_heads * head_dim
    inter = shape.intermediate_size or 4 * hidden
    dims = (hidden + qkv_out) + (o_in + hidden) + (hidden + 2 * inter) + (inter + hidden)
    return max(1, dims // max(1, tp))


def lora_weight_bytes(shape: ModelShape, lora: LoraOptions, dtype_bytes: float, tp: int = 1) -> int:
    """GPU bytes of the adapter slots vLLM allocates at load (0 without ``--enable-lora``)."""
    if not lora.enabled:
        return 0
    per_slot = lora.max_lora_rank * lora_dims_per_layer(shape, tp) * shape.num_layers
    return int(max(1, lora.max_loras) * per_slot * dtype_bytes)


@dataclass(frozen=True)
class LoraCost:
    """What one step's LoRA work costs on a simulated GPU."""

    rank: int
    dims: int  # in + out per layer, per rank
    num_layers: int
    dtype_bytes: float
    bandwidth: float
    peak_flops: float

    def step_seconds(self, lora_tokens: int, active_adapters: int, enabled_tokens: int) -> float:
        """Extra seconds for a step with ``lora_tokens`` tokens under ``active_adapters``.

        ``enabled_tokens`` (all tokens of the step) pay the launch cost: punica runs for
        the whole batch once LoRA is enabled.
        """
        if enabled_tokens <= 0:
            return 0.0
        launch = LORA_LAUNCH_PER_LAYER_S * self.num_layers
        if lora_tokens <= 0:
            return launch
        flops = 2.0 * 2.0 * lora_tokens * self.rank * self.dims * self.num_layers
        weights = active_adapters * self.rank * self.dims * self.num_layers * self.dtype_bytes
        return launch + flops / (self.peak_flops * LORA_MFU) + weights / self.bandwidth


def adapter_rank_error(module: LoraModule, max_rank: int) -> str | None:
    """vLLM's ``PEFTHelper.validate_legal`` message when the adapter's rank is too large."""
    config = as_path(module.path) / "adapter_config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8")) if config.is_file() else {}
    except (OSError, ValueError):  # also a NUL byte in the path, or bad UTF-8/JSON
        return None  # unreadable: the simulator does not load weights; nothing to check
    rank = data.get("r") if isinstance(data, dict) else None
    if isinstance(rank, int) and not isinstance(rank, bool) and rank > max_rank:
        return f"LoRA rank {rank} is greater than max_lora_rank {max_rank}."
    return None
