"""The declaration of every tunable ``vllm serve`` flag: one pydantic field each.

Each field carries its CLI spelling, aliases, type, vLLM's own default (from the default
release's record, :mod:`tui.domain.flags.vllm_defaults`), its range and help text. The rules
that check a whole set of flags, and the renderings (argv, TOML), are
:class:`tui.domain.flags.serve.ServeFlags`, which inherits these fields: a new flag is a new
field here, and every view (form, argv, presets, ``vllm serve`` parse) reads it from there.
"""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from tui.domain.flags import vllm_defaults as D
from tui.domain.flags.run_env import EnvPairs
from tui.domain.flags.spec import FlagGroup, flag

# vLLM 0.32.0 config/cache.py:39-59
KvCacheDtype = Literal[
    "auto",
    "bfloat16",
    "float16",
    "fp8",
    "fp8_ds_mla",
    "fp8_e4m3",
    "fp8_e5m2",
    "fp8_inc",
    "fp8_per_token_head",
    "int4_per_token_head",
    "int8_per_token_head",
    "nvfp4",
    "nvfp4_4over6",
    "nvfp4_ds_mla",
    "turboquant_3bit_nc",
    "turboquant_4bit_nc",
    "turboquant_k3v4_nc",
    "turboquant_k8v4",
    "ultraquant_4bit",
]
# vLLM 0.32.0 config/model.py:99
ModelDtype = Literal["auto", "bfloat16", "float", "float16", "float32", "half"]
# the same values as tuples, read from the Literals (declared once)
KV_CACHE_DTYPES: tuple[str, ...] = get_args(KvCacheDtype)
DTYPES: tuple[str, ...] = get_args(ModelDtype)

LAUNCH_HOST = "127.0.0.1"
"""The host vtc launches a server on when no ``--host`` is given: loopback, so a tuning
server is not exposed to the network by accident (vLLM's own default binds every interface)."""


class ServeFields(BaseModel):
    """The declared fields of :class:`~tui.domain.flags.serve.ServeFlags`.

    ``None`` means "not passed": vLLM then applies its own default. Only declarations live
    here; a ``ServeFields`` on its own is never validated as a configuration.
    """

    # hide_input_in_errors: a refused value may be a secret; pydantic's error text must not
    # repeat the input.
    model_config = ConfigDict(
        extra="forbid", frozen=True, protected_namespaces=(), hide_input_in_errors=True
    )

    model: str = Field(min_length=1, description="Model name or path (the positional MODEL).")

    # -- memory & KV cache ---------------------------------------------------------------
    gpu_memory_utilization: float | None = flag(
        cli="--gpu-memory-utilization",
        aliases=("--device-memory-utilization",),
        group=FlagGroup.MEMORY,
        vllm_default=D.GPU_MEMORY_UTILIZATION,
        config="CacheConfig",
        gt=0,
        le=1,
        finite=True,
        help="Fraction of TOTAL device memory this instance may use (weights, activations, "
        "KV cache). On the CPU backend: fraction of the NUMA node's RAM.",
    )
    max_model_len: int | None = flag(
        cli="--max-model-len",
        group=FlagGroup.MEMORY,
        config="ModelConfig",
        ge=-1,
        human=True,
        auto=True,
        help="Longest sequence (prompt + output) served. Default: the model's context length. "
        "-1/auto fits it to the KV cache.",
    )
    block_size: int | None = flag(
        cli="--block-size",
        group=FlagGroup.MEMORY,
        config="CacheConfig",
        gt=0,
        help="Tokens per KV-cache block. Default 16 on GPU, 128 on CPU (multiple of 32 there).",
    )
    kv_cache_dtype: KvCacheDtype | None = flag(
        cli="--kv-cache-dtype",
        group=FlagGroup.MEMORY,
        vllm_default=D.KV_CACHE_DTYPE,
        config="CacheConfig",
        help="KV-cache element type; fp8 halves KV memory per token.",
    )
    kv_cache_memory_bytes: int | None = flag(
        cli="--kv-cache-memory-bytes",
        group=FlagGroup.MEMORY,
        config="CacheConfig",
        ge=0,
        human=True,
        optional=True,
        help="Exact KV-cache size (e.g. 20G, 64M); overrides gpu_memory_utilization sizing.",
    )
    num_gpu_blocks_override: int | None = flag(
        cli="--num-gpu-blocks-override",
        group=FlagGroup.MEMORY,
        config="CacheConfig",
        ge=1,
        optional=True,
        help="Replace the profiled number of KV blocks (testing and what-if runs).",
    )
    cpu_offload_gb: float | None = flag(
        cli="--cpu-offload-gb",
        group=FlagGroup.MEMORY,
        vllm_default=D.CPU_OFFLOAD_GB,
        config="UVAOffloadConfig",
        ge=0,
        finite=True,
        help="GiB of weights kept in CPU RAM and streamed in each step: fits bigger models, "
        "costs throughput.",
    )
    enable_prefix_caching: bool | None = flag(
        cli="--enable-prefix-caching",
        group=FlagGroup.MEMORY,
        config="CacheConfig",
        help="Reuse KV blocks of shared prompt prefixes. Default: the model's default (on).",
    )

    # -- batching & scheduling ------------------------------------------------------------
    max_num_seqs: int | None = flag(
        cli="--max-num-seqs",
        group=FlagGroup.BATCHING,
        config="SchedulerConfig",
        ge=1,
        help="Most sequences in one batch. Default 256 (1024 on >=70 GiB GPUs, 128 on CPU).",
    )
    max_num_batched_tokens: int | None = flag(
        cli="--max-num-batched-tokens",
        group=FlagGroup.BATCHING,
        config="SchedulerConfig",
        ge=1,
        human=True,
        help="Token budget of one scheduler step. Default 2048 (8192 on >=70 GiB GPUs).",
    )
    enable_chunked_prefill: bool | None = flag(
        cli="--enable-chunked-prefill",
        group=FlagGroup.BATCHING,
        config="SchedulerConfig",
        help="Split long prompts across steps. Default: the model's default (on).",
    )
    max_logprobs: int | None = flag(
        cli="--max-logprobs",
        group=FlagGroup.BATCHING,
        vllm_default=D.MAX_LOGPROBS,
        config="ModelConfig",
        ge=-1,
        help="Most logprobs a request may ask for (-1: no cap).",
    )

    # -- model & precision ----------------------------------------------------------------
    dtype: ModelDtype | None = flag(
        cli="--dtype",
        group=FlagGroup.MODEL,
        vllm_default=D.DTYPE,
        config="ModelConfig",
        help="Weights/activations type; auto takes the checkpoint's.",
    )
    quantization: str | None = flag(
        cli="--quantization",
        aliases=("-q",),
        group=FlagGroup.MODEL,
        config="ModelConfig",
        optional=True,
        help="Quantization method (awq, gptq, fp8, ...). Default: read from the checkpoint.",
    )
    enforce_eager: bool | None = flag(
        cli="--enforce-eager",
        group=FlagGroup.MODEL,
        vllm_default=D.ENFORCE_EAGER,
        config="ModelConfig",
        help="Skip torch.compile and CUDA graphs: faster start, less memory, slower decode.",
    )

    # -- parallelism ----------------------------------------------------------------------
    tensor_parallel_size: int | None = flag(
        cli="--tensor-parallel-size",
        aliases=("-tp",),
        group=FlagGroup.PARALLEL,
        vllm_default=D.TENSOR_PARALLEL_SIZE,
        config="ParallelConfig",
        ge=1,
        help="GPUs one layer is split across; attention heads must divide by it.",
    )
    pipeline_parallel_size: int | None = flag(
        cli="--pipeline-parallel-size",
        aliases=("-pp",),
        group=FlagGroup.PARALLEL,
        vllm_default=D.PIPELINE_PARALLEL_SIZE,
        config="ParallelConfig",
        ge=1,
        help="Pipeline stages (GPUs in series).",
    )

    # -- server ---------------------------------------------------------------------------
    port: int | None = flag(
        cli="--port",
        group=FlagGroup.SERVER,
        vllm_default=D.PORT,
        config="FrontendArgs",
        ge=1,
        le=65535,
        help="HTTP port of the OpenAI-compatible server.",
    )
    host: str | None = flag(
        cli="--host",
        group=FlagGroup.SERVER,
        config="FrontendArgs",
        optional=True,
        help=f"Interface to bind. vtc launches on {LAUNCH_HOST} (this machine only) unless "
        "set; vLLM's own default is every interface.",
    )
    served_model_name: str | None = flag(
        cli="--served-model-name",
        group=FlagGroup.SERVER,
        config="ModelConfig",
        optional=True,
        help="Name clients use in requests; the first is the metrics' model_name label.",
    )

    extra_args: tuple[str, ...] = Field(
        default=(), description="Any other vllm serve arguments, passed through verbatim."
    )
    env: EnvPairs = Field(
        default=(),
        description="The server's environment variables (NAME=value) over the inherited ones: "
        "part of the configuration (tui.domain.flags.run_env), never in the argv.",
    )
