"""How long one engine step takes on the simulated GPU: a roofline with a few overheads.

A step runs one forward pass over every scheduled token (prefill chunks and one token per
decoding sequence). Its time is

    max(bytes_read / (bandwidth * BW_EFF), flops / (peak_flops * MFU))
        + offloaded_weight_bytes / host_link      (CPU offload crosses PCIe every step)
        + fixed overhead                          (launch/scheduling; more in eager mode)

where ``bytes_read`` is the resident weights (read once per step for the whole batch, which
is why batching raises throughput) plus the KV cache every scheduled token attends over, and
``flops`` is ``2 * params`` per token plus attention's ``4 * layers * heads * head_dim`` per
(query, key) pair. FP8 weights halve the weight bytes; FP8 compute is used only on GPUs that
have it (otherwise Marlin weight-only FP8 runs at FP16 speed). Decode is therefore
bandwidth-bound and prefill compute-bound, as on real hardware. Times are simulated seconds;
the engine divides them by ``--sim-speed`` before sleeping.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.sim.lora import LoraCost, lora_dims_per_layer
from tui.sim.memory import FP8_QUANT, MemoryPlan

BW_EFF = 0.85  # achievable fraction of peak memory bandwidth
MFU = 0.55  # achievable fraction of peak tensor throughput
STEP_OVERHEAD_S = 0.0006  # per step with CUDA graphs: launch + scheduler + sampling
EAGER_PER_LAYER_S = 0.00008  # extra kernel-launch cost per layer per step without graphs
PER_SEQ_OVERHEAD_S = 0.000004  # scheduler/detokenizer bookkeeping per scheduled sequence
ALLREDUCE_PER_LAYER_S = 0.00002  # two all-reduces per layer per step under tensor parallel


@dataclass(frozen=True)
class StepWork:
    """What one step computes."""

    prefill_tokens: int = 0  # prompt tokens computed this step (chunks included)
    decode_seqs: int = 0  # sequences generating one token this step
    context_tokens: int = 0  # KV entries read by attention, summed over scheduled sequences
    attention_pairs: int = 0  # (query, key) pairs, summed: drives attention FLOPs
    decode_context_tokens: int = 0  # KV entries the decode sequences read (of the above)
    num_seqs: int = 0  # sequences scheduled (prefill chunks and decodes)
    sampled_seqs: int = 0  # sequences that sample a token this step (an output streamed)
    lora_tokens: int = 0  # tokens of sequences that run under a LoRA adapter
    lora_adapters: int = 0  # distinct adapters in the batch

    @property
    def tokens(self) -> int:
        """All tokens in the forward pass."""
        return self.prefill_tokens + self.decode_seqs


@dataclass(frozen=True)
class CostModel:
    """Roofline step time for one served model on one simulated GPU (one rank)."""

    weight_bytes: float  # resident on the GPU, read every step
    offloaded_bytes: float  # in CPU memory, streamed over the host link every step
    kv_bytes_per_token: float
    active_params: float  # parameters per rank that multiply each token
    attn_flops_per_pair: float  # FLOPs per (query, key) pair on this rank
    bandwidth: float  # bytes/s
    peak_flops: float  # FLOP/s
    host_link: float  # bytes/s
    num_layers: int
    enforce_eager: bool
    tensor_parallel: int = 1
    lora: LoraCost | None = None  # set with --enable-lora

    @classmethod
    def from_plan(cls, plan: MemoryPlan, max_lora_rank: int | None = None) -> CostModel:
        """The cost model of a started engine (weights, KV dtype, GPU from its plan).

        ``max_lora_rank`` (``--enable-lora``'s) adds the punica kernels' time to every step.
        """
        cfg = plan.cfg
        gpu = cfg.hardware.gpu
        shape = cfg.rank_shape
        fp8_compute = cfg.quantization in FP8_QUANT and gpu.supports_fp8
        tflops = gpu.fp8_tflops if fp8_compute else gpu.fp16_tflops
        if cfg.dtype in ("float32", "float"):
            tflops /= 8  # fp32 runs on CUDA cores (TF32 at best)
        ws = cfg.world_size
        heads_per_rank = max(1, shape.num_attention_heads // cfg.tensor_parallel_size)
        lora = None
        if max_lora_rank:
            lora = LoraCost(
                rank=max_lora_rank,
                dims=lora_dims_per_layer(shape, cfg.tensor_parallel_size),
                num_layers=shape.num_layers,
                dtype_bytes=cfg.dtype_bytes,
                bandwidth=gpu.bandwidth_gbs * 1e9 * BW_EFF,
                peak_flops=gpu.fp16_tflops * 1e12,
            )
        return cls(
            weight_bytes=float(plan.weights),
            offloaded_bytes=float(plan.offloaded),
            kv_bytes_per_token=cfg.kv_bytes_per_token,
            active_params=shape.param_count / ws,
            attn_flops_per_pair=4.0 * shape.num_layers * heads_per_rank * shape.head_dim,
            bandwidth=gpu.bandwidth_gbs * 1e9,
            peak_flops=tflops * 1e12,
            host_link=gpu.host_link_gbs * 1e9,
            num_layers=shape.num_layers,
            enforce_eager=cfg.enforce_eager,
            tensor_parallel=cfg.tensor_parallel_size,
            lora=lora,
        )

    def flops(self, work: StepWork) -> float:
        """FLOPs of one step: ``2·params`` per token plus attention's per (query, key) pair."""
        return (
            2.0 * self.active_params * work.tokens + self.attn_flops_per_pair * work.attention_pairs
        )

    def read_bytes(self, work: StepWork) -> float:
        """Bytes one step reads: the resident weights once, the KV every token attends over."""
        return self.weight_bytes + work.context_tokens * self.kv_bytes_per_token

    def write_bytes(self, work: StepWork) -> float:
        """Bytes one step writes: the new tokens' KV entries."""
        return work.tokens * self.kv_bytes_per_token

    def step_time(self, work: StepWork) -> float:
        """Simulated seconds for one step (0 for an empty step)."""
        if work.tokens <= 0:
            return 0.0
        memory_s = self.read_bytes(work) / (self.bandwidth * BW_EFF)
        compute_s = self.flops(work) / (self.peak_flops * MFU)
        offload_s = self.offloaded_bytes / self.host_link if self.offloaded_bytes else 0.0
        overhead = STEP_OVERHEAD_S + PER_SEQ_OVERHEAD_S * (work.decode_seqs + 1)
        if self.enforce_eager:
            overhead += EAGER_PER_LAYER_S * self.num_layers
        if self.tensor_parallel > 1:
            overhead += ALLREDUCE_PER_LAYER_S * self.num_layers
        if self.lora is not None:
            overhead += self.lora.step_seconds(work.lora_tokens, work.lora_adapters, work.tokens)
        return max(memory_s, compute_s) + offload_s + overhead

    def decode_throughput(self, batch: int, context: int) -> float:
        """Tokens/s of a steady decode batch of ``batch`` sequences at ``context`` tokens each."""
        work = StepWork(
            decode_seqs=batch, context_tokens=batch * context, attention_pairs=batch * context
        )
        return batch / self.step_time(work)
