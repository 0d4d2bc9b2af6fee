"""A simulated ``vllm serve`` start-up: the config checks, then the engine's stages in its log.

:func:`check_command` is the pure part (what the API server decides before any engine
starts: the model, the first config error in vLLM's order, the resolved configuration and
the memory plan); it never raises for any argv the parser accepted (a property test feeds
it generated command lines). :class:`EngineStartup` replays EngineCore's start-up
(reference 2.1-2.3, ``startup_eager_kv64M.log``): weight loading, torch.compile, memory
profiling, ``Available KV cache memory``, the KV checks, ``GPU KV cache size``, CUDA-graph
capture and ``init engine ... took``, each stage sleeping a realistic share of a few seconds
divided by ``--sim-speed``. Failures print vLLM's texts in vLLM's shapes.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from tui.domain import kv
from tui.domain.flags.serve import ServeFlags
from tui.sim.argv import SimCommand
from tui.sim.catalog import GIB, ModelEntry, UnknownModelError, resolve_model
from tui.sim.logs import VllmLog, engine_core_failure
from tui.sim.lora import lora_weight_bytes
from tui.sim.memory import (
    FP8_QUANT,
    MemoryPlan,
    ResolvedConfig,
    SimHardware,
    kv_cache_memory_hint,
    plan_memory,
    resolve,
)
from tui.sim.model_files import model_folder
from tui.sim.twin import twin_plan
from tui.sim.validation import ConfigError, ErrorItem, first_config_error

API, ENGINE = "APIServer", "EngineCore"
SIM_SRC = "vtc_sim.py:1"  # the simulator's own lines (vLLM has no such file)

# Simulated seconds each start-up stage takes at --sim-speed 1 (a few seconds in all).
T_API_INIT = 0.3
T_ENGINE_SPAWN = 0.5
T_LOAD_BASE = 0.1
T_LOAD_PER_GIB = 0.12
T_COMPILE = 1.0
T_PROFILE = 0.2
T_CAPTURE = 0.5
T_FAIL_EXIT = 0.1


@dataclass(frozen=True)
class Checked:
    """What the API server knows before the engine starts.

    ``error`` is the config error vLLM raises first (then ``cfg``/``plan`` are ``None``);
    ``max_len_shown`` is the ``Using max model len`` value logged before the engine starts,
    ``None`` when vLLM fails before logging it. ``plan.failure`` is an engine-side failure.
    """

    model: str
    folder: Path | None
    entry: ModelEntry | None = None
    error: ConfigError | None = None
    max_len_shown: int | None = None
    flags: ServeFlags | None = None
    cfg: ResolvedConfig | None = None
    plan: MemoryPlan | None = None


def check_command(command: SimCommand) -> Checked:
    """Model, config validation, resolved defaults and the memory plan for ``command``."""
    parsed, front = command.parsed, command.frontend
    model = parsed.model or ""
    hardware = SimHardware(command.sim.gpu, command.sim.num_gpus, command.sim.gpu_used_bytes)
    folder = model_folder(model)
    try:
        entry = resolve_model(model, folder)
    except UnknownModelError as exc:
        item = ErrorItem(f"Value error, {exc}")
        return Checked(model, folder, error=ConfigError("ModelConfig", (item,)))
    lora = front.lora
    error, flags = first_config_error(model, parsed.values, (), entry, hardware, lora)
    mml = parsed.values.get("max_model_len")
    shown = entry.shape.max_position_embeddings if mml in (None, -1) else int(mml)
    if error is not None:
        early = error.config == "ModelConfig" and not error.after_max_len_log
        return Checked(model, folder, entry, error, None if early else shown)
    assert flags is not None
    cfg = resolve(flags, entry, hardware, front.performance_mode, command.sim.vllm_version)
    lora_bytes = lora_weight_bytes(entry.shape, lora, cfg.dtype_bytes, cfg.tensor_parallel_size)
    plan = plan_memory(cfg, extra_weight_bytes=lora_bytes)
    if command.sim.profile is not None:
        cfg, plan = twin_plan(command.sim.profile, flags, cfg, plan)
    return Checked(model, folder, entry, None, shown, flags, cfg, plan)


def config_notes(log: VllmLog, command: SimCommand, cfg: ResolvedConfig) -> None:
    """The API server's INFO/WARNING lines about the resolved config (``vllm.py``)."""
    if (
        cfg.entry.checkpoint_quantization
        and cfg.quantization
        and cfg.quantization.endswith("_marlin")
    ):
        log.info(
            API,
            log.src("awq_marlin.convertible")
            if "awq" in cfg.quantization
            else log.src("gptq_marlin.convertible"),
            f"The model is convertible to {cfg.quantization} during runtime. Using "
            f"{cfg.quantization} kernel.",
        )
    if cfg.enforce_eager:
        log.warning(
            API,
            log.src("config.enforce_eager"),
            "Enforce eager set, disabling torch.compile, CUDAGraphs, "
            "and JIT kernel warmup. This is equivalent to setting -cc.mode=none "
            "-cc.cudagraph_mode=none and --kernel_config.enable_jit_warmup=False",
        )
    if command.frontend.values.get("async_scheduling", True) is not False:
        log.info(API, log.src("config.async_scheduling"), "Asynchronous scheduling is enabled.")
    if cfg.enable_chunked_prefill:
        log.info(
            API,
            log.src("scheduler.chunked_prefill"),
            f"Chunked prefill is enabled with max_num_batched_tokens={cfg.max_num_batched_tokens}.",
        )
    mnbt, mns, mml = cfg.flags.max_num_batched_tokens, cfg.max_num_seqs, cfg.max_model_len
    if mnbt is not None and mnbt > mns * mml:
        log.warning(
            API,
            log.src("scheduler.batched_tokens_exceed"),
            f"max_num_batched_tokens ({mnbt}) exceeds max_num_seqs * max_model_len "
            f"({mns * mml}). This may lead to unexpected behavior.",
        )


def sim_notes(log: VllmLog, command: SimCommand, tokenizer_note: str, exact: bool) -> None:
    """The simulator's own start-up lines: which GPU it models, its time scale, its tokenizer."""
    sim = command.sim
    gpu = sim.gpu
    count = f"{sim.num_gpus} x " if sim.num_gpus > 1 else ""
    if sim.profile is not None:
        p = sim.profile
        log.info(
            API,
            SIM_SRC,
            f"vtc-sim: twin of {p.identity.describe()}: profile {p.name} r{p.revision}, step "
            f"times fitted on that server, error {p.errors_line()}; every number this "
            "server reports is predicted.",
        )
        fitted = p.identity.vllm_version.split("+")[0]
        if fitted and fitted != sim.vllm_version.split("+")[0]:
            log.warning(
                API,
                SIM_SRC,
                f"vtc-sim: profile {p.name} was fitted on vLLM {fitted}, this simulator speaks "
                f"{sim.vllm_version}: its step times are another release's.",
            )
        if command.parsed.model and command.parsed.model != p.identity.model:
            log.warning(
                API,
                SIM_SRC,
                f"vtc-sim: profile {p.name} was fitted on {p.identity.model}, not "
                f"{command.parsed.model}: its step times are another model's.",
            )
    else:
        log.info(
            API,
            SIM_SRC,
            f"vtc-sim: simulated GPU {count}{gpu.name} ({gpu.key}, {gpu.memory_gib:.2f} GiB, "
            f"{gpu.bandwidth_gbs:.0f} GB/s, {gpu.fp16_tflops:.0f} TFLOPS fp16); no real GPU "
            "is used.",
        )
    if sim.fixed is not None:
        log.warning(
            API,
            SIM_SRC,
            f"vtc-sim: injected delays (TTFT {sim.fixed.ttft_s * 1000:g} ms, ITL "
            f"{sim.fixed.itl_s * 1000:g} ms) replace the GPU model.",
        )
    elif sim.speed != 1:
        log.warning(
            API,
            SIM_SRC,
            f"vtc-sim: time is scaled: --sim-speed {sim.speed:g} runs {sim.speed:g}x faster "
            "than the simulated GPU; every latency and throughput this server reports is "
            "scaled by it.",
        )
    if exact:
        log.info(API, SIM_SRC, f"vtc-sim: {tokenizer_note}")
    else:
        log.warning(API, SIM_SRC, f"vtc-sim: {tokenizer_note}")


def engine_config_line(command: SimCommand, cfg: ResolvedConfig) -> str:
    """``core.py:133``: ``Initializing a V1 LLM engine (v0.32.0) with config: ...``."""
    model = command.parsed.model
    served = cfg.flags.served_model_name or model
    capture = max(cfg.cudagraph_capture_sizes, default=0) or None
    trust = bool(command.frontend.values.get("trust_remote_code"))
    return (
        f"Initializing a V1 LLM engine (v{command.sim.vllm_version}) with config: "
        f"model={model!r}, "
        f"speculative_config=None, tokenizer={model!r}, skip_tokenizer_init=False, "
        "tokenizer_mode=auto, revision=None, tokenizer_revision=None, "
        f"trust_remote_code={trust}, "
        f"dtype=torch.{cfg.dtype}, max_seq_len={cfg.max_model_len}, download_dir=None, "
        f"load_format=auto, tensor_parallel_size={cfg.tensor_parallel_size}, "
        f"pipeline_parallel_size={cfg.pipeline_parallel_size}, data_parallel_size=1, "
        f"disable_custom_all_reduce=False, quantization={cfg.quantization}, "
        f"enforce_eager={cfg.enforce_eager}, kv_cache_dtype={cfg.kv_cache_dtype}, "
        f"device_config=cuda, seed=0, served_model_name={served}, "
        f"enable_prefix_caching={cfg.enable_prefix_caching}, "
        f"enable_chunked_prefill={cfg.enable_chunked_prefill}, pooler_config=None, "
        "compilation_config={'mode': <CompilationMode."
        + ("NONE: 0" if cfg.enforce_eager else "VLLM_COMPILE: 3")
        + ">, 'cudagraph_mode': <CUDAGraphMode."
        + ("NONE: 0" if cfg.enforce_eager else "FULL_AND_PIECEWISE: (2, 1)")
        + f">, 'max_cudagraph_capture_size': {capture}}}"
    )


class _Stopped(Exception):
    """A stop was requested while the engine was starting."""


class EngineStartup:
    """EngineCore's start-up log, stage by stage, on the simulated GPU.

    ``pause(sim_seconds)`` sleeps the scaled time and returns True when a stop was requested
    meanwhile; :meth:`run` then returns 0 (SIGTERM during start-up), 1 on a start-up failure
    (vLLM's traceback printed), ``None`` once the engine is up.
    """

    def __init__(
        self,
        log: VllmLog,
        command: SimCommand,
        cfg: ResolvedConfig,
        plan: MemoryPlan,
        pause: Callable[[float], Awaitable[bool]],
        signal_name: Callable[[], str],
    ) -> None:
        self.log = log
        self.command = command
        self.cfg = cfg
        self.plan = plan
        self._pause = pause
        self._signal_name = signal_name
        self.kind = plan.failure.kind if plan.failure else None

    async def run(self) -> int | None:
        """Play every stage; the exit code if the engine does not come up."""
        t_engine = time.monotonic()
        try:
            if self.command.sim.host == "wsl2" and self.command.sim.runner_v2:
                # V2's input buffers need UVA, which WSL2's CUDA does not offer; raised while
                # the worker builds its model runner (init_device), before any weight loads
                await self._pause(T_FAIL_EXIT)
                engine_core_failure(self.log, "runner_uva", "RuntimeError: UVA is not available")
                return 1
            if self.kind == "free_memory":
                return await self._fail("executor")
            if not await self._load():
                return await self._fail("load_model")
            compile_s = await self._compile()
            await self._profile()
            if self.kind == "sampler_oom":
                return await self._fail("profile")
            self._kv_memory()
            if self.kind in ("no_kv_memory", "autofit_impossible", "kv_too_small"):
                return await self._fail("kv_check")
            self._kv_capacity()
            if self.kind in ("kv_alloc_oom", "block_size"):
                return await self._fail("kv_init")
            await self._capture()
        except _Stopped:
            self.log.info(
                ENGINE,
                self.log.src("core.signal"),
                f"[shutdown] EngineCore: trigger received signal={self._signal_name()}",
            )
            return 0
        total = time.monotonic() - t_engine
        suffix = f" (compilation: {compile_s:.2f} s)" if compile_s else ""
        self.log.info(
            ENGINE,
            self.log.src("core.kv_caches.took"),
            f"init engine (profile, create kv cache, warmup model) took {total:.2f} s{suffix}",
        )
        return None

    async def _sleep(self, sim_seconds: float) -> None:
        if await self._pause(sim_seconds):
            raise _Stopped

    async def _fail(self, site: str) -> int:
        failure = self.plan.failure
        assert failure is not None
        await self._pause(T_FAIL_EXIT)
        engine_core_failure(self.log, site, f"{failure.exc_type}: {failure.message}")
        return 1

    async def _load(self) -> bool:
        """Weight loading; False when the weights do not fit (logged like vLLM)."""
        log, cfg, plan = self.log, self.cfg, self.plan
        log.info(
            ENGINE,
            log.src("runner.load_model.start"),
            f"Starting to load model {self.command.parsed.model}...",
        )
        log.info(
            ENGINE,
            log.src("cuda.attention_backend"),
            "Using FLASH_ATTN attention backend out of potential "
            "backends: ['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION'].",
        )
        if cfg.quantization in FP8_QUANT and not cfg.hardware.gpu.supports_fp8:
            log.warning(
                ENGINE,
                log.src("marlin_fp8.weight_only"),
                "Your GPU does not have native support for FP8 computation but FP8 "
                "quantization is being used. Weight-only FP8 compression will be used "
                "leveraging the Marlin kernel. This may degrade performance for "
                "compute-heavy workloads.",
            )
        t0 = time.monotonic()
        await self._sleep(T_LOAD_BASE)  # model init, before the checkpoint is read
        t_weights = time.monotonic()
        await self._sleep(T_LOAD_PER_GIB * plan.weights / GIB)
        if self.kind == "weights_oom":
            assert plan.failure is not None
            log.error(ENGINE, log.src("runner.load_model.error"), plan.failure.logged_error or "")
            return False
        weights_s = time.monotonic() - t_weights
        took = time.monotonic() - t0
        log.info(
            ENGINE, log.src("loader.weights_took"), f"Loading weights took {weights_s:.2f} seconds"
        )
        if self.command.frontend.lora.enabled:
            log.info(ENGINE, log.src("punica.wrapper"), "Using PunicaWrapperGPU.")
        log.info(
            ENGINE,
            log.src("runner.load_model.took"),
            f"Model loading took {kv.format_gib(plan.weights)} GiB memory and {took:.6f} seconds",
        )
        return True

    async def _compile(self) -> float:
        """torch.compile (skipped with --enforce-eager); its seconds."""
        log, cfg = self.log, self.cfg
        if cfg.enforce_eager:
            return 0.0
        t1 = time.monotonic()
        digest = hashlib.sha256(repr(cfg.flags).encode()).hexdigest()[:10]
        log.info(
            ENGINE,
            log.src("compile.cache_dir"),
            f"Using cache directory: ~/.cache/vllm/torch_compile_cache/"
            f"{digest}/rank_0_0/backbone for vLLM's torch.compile",
        )
        await self._sleep(T_COMPILE * 0.3)
        log.info(
            ENGINE,
            log.src("compile.dynamo"),
            f"Dynamo bytecode transform time: {time.monotonic() - t1:.2f} s",
        )
        t2 = time.monotonic()
        await self._sleep(T_COMPILE * 0.7)
        log.info(
            ENGINE,
            log.src("compile.graph"),
            f"Compiling a graph for compile range (1, "
            f"{cfg.max_num_batched_tokens}) takes {time.monotonic() - t2:.2f} s",
        )
        compile_s = time.monotonic() - t1
        log.info(ENGINE, log.src("compile.total"), f"torch.compile took {compile_s:.2f} s in total")
        return compile_s

    async def _profile(self) -> None:
        log, cfg, plan = self.log, self.cfg, self.plan
        t3 = time.monotonic()
        await self._sleep(T_PROFILE)
        log.info(
            ENGINE,
            log.src("compile.warmup"),
            f"Initial profiling/warmup run took {time.monotonic() - t3:.2f} s",
        )
        if self.kind == "sampler_oom":
            return
        sizes = cfg.cudagraph_capture_sizes
        full = [s for s in sizes if s <= cfg.max_num_seqs]
        if sizes:
            log.info(
                ENGINE,
                log.src("runner.cudagraph.profiling"),
                f"Profiling CUDA graph memory: PIECEWISE={len(sizes)} (largest={max(sizes)}), "
                f"FULL={len(full)} (largest={max(full, default=0)})",
            )
            log.info(
                ENGINE,
                log.src("runner.cudagraph.estimate"),
                f"Estimated CUDA graph memory: {kv.format_gib(plan.cudagraph)} GiB total",
            )

    def _kv_memory(self) -> None:
        log, cfg, plan = self.log, self.cfg, self.plan
        if plan.kv_from_flag:
            log.info(
                ENGINE,
                log.src("worker.kv_reserved"),
                f"Initial free memory {kv.format_gib(plan.free_at_start)} GiB, reserved "
                f"{kv.format_gib(plan.available_kv)} GiB memory for KV Cache as specified by "
                "kv_cache_memory_bytes config and skipped memory profiling. This does not "
                "respect the gpu_memory_utilization config. Only use kv_cache_memory_bytes "
                "config when you want manual control of KV cache memory size. If OOM'ed, "
                "check the difference of initial free memory between the current run and "
                "the previous run where kv_cache_memory_bytes is suggested and update it "
                "correspondingly.",
            )
            return
        log.info(
            ENGINE,
            log.src("worker.kv_available"),
            f"Available KV cache memory: {kv.format_gib(plan.available_kv)} GiB",
        )
        if cfg.cudagraph_capture_sizes:
            util = cfg.gpu_memory_utilization
            share = plan.cudagraph / plan.total
            log.info(
                ENGINE,
                log.src("worker.cudagraph_profiling"),
                "CUDA graph memory profiling is enabled (default since v0.21.0). The "
                f"current --gpu-memory-utilization={util:.4f} is equivalent to "
                f"--gpu-memory-utilization={util - share:.4f} without CUDA graph memory "
                "profiling. To maintain the same effective KV cache size as before, "
                f"increase --gpu-memory-utilization to {util + share:.4f}. To disable, "
                "set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
            )

    def _kv_capacity(self) -> None:
        plan, log = self.plan, self.log
        if plan.auto_fit_message:
            reduced = "reduced" in plan.auto_fit_message
            where = log.src("kv.auto_fit.reduced" if reduced else "kv.auto_fit.kept")
            log.info(ENGINE, where, plan.auto_fit_message)
        if plan.capacity is not None:
            log.info(ENGINE, log.src("kv.capacity"), plan.capacity.log_line("GPU"))

    async def _capture(self) -> None:
        log, cfg, plan = self.log, self.cfg, self.plan
        sizes = cfg.cudagraph_capture_sizes
        if not sizes:
            return
        full = [s for s in sizes if s <= cfg.max_num_seqs]
        t4 = time.monotonic()
        await self._sleep(T_CAPTURE)
        secs = time.monotonic() - t4
        rate = len(sizes) / max(secs, 1e-3)
        bar = "██████████"
        log.stderr(
            f"Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|{bar}| "
            f"{len(sizes)}/{len(sizes)} [00:0{min(int(secs), 9)}<00:00, {rate:.2f}it/s]",
            f"Capturing CUDA graphs (decode, FULL): 100%|{bar}| {len(full)}/{len(full)} "
            f"[00:00<00:00, {rate:.2f}it/s]",
        )
        log.info(
            ENGINE,
            log.src("runner.cudagraph.captured"),
            f"Graph capturing finished in {secs:.0f} secs, took {plan.cudagraph / GIB:.2f} GiB",
        )
        log.info(ENGINE, log.src("worker.kv_memory_hint"), kv_cache_memory_hint(plan))
