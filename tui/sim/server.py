"""One simulated ``vllm serve`` run: start-up log, config and memory checks, serving, shutdown.

The start-up plays vLLM's sequence (reference 2.1-2.3, ``startup_eager_kv64M.log``): banner
and ``non-default args``, the port bound but not listening, config validation, EngineCore
init, weight loading, torch.compile, memory profiling, ``Available KV cache memory``, the
KV checks, ``GPU KV cache size``, CUDA-graph capture, ``init engine ... took``, then
``Starting vLLM server on`` and only then the socket starts listening, so ``/health`` is
refused until the engine is ready, as with vLLM. Each stage sleeps for a realistic share of
a few seconds divided by ``--sim-speed``. Failures print vLLM's texts in vLLM's shapes and
return exit code 1. SIGTERM/SIGINT abort in-flight requests and return 0.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import hashlib
import os
import signal
import socket
import time
from typing import Any

from tui.domain import kv
from tui.domain.flags import ServeFlags
from tui.sim.argv import SimCommand
from tui.sim.catalog import GIB, MIB, ModelEntry, UnknownModelError, resolve_model
from tui.sim.costmodel import CostModel
from tui.sim.engine import AsyncEngine
from tui.sim.http import ROUTES, ApiContext, build_app, running_app
from tui.sim.logs import (
    VERSION,
    VllmLog,
    banner,
    bind_error_traceback,
    config_error_traceback,
    engine_core_failure,
)
from tui.sim.memory import (
    FP8_QUANT,
    MemoryPlan,
    ResolvedConfig,
    SimHardware,
    kv_cache_memory_hint,
    plan_memory,
    resolve,
)
from tui.sim.metrics import GpuGaugeSource, SimMetrics
from tui.sim.scheduler import Scheduler, SchedulerConfig
from tui.sim.tokenizer import SimTokenizer
from tui.sim.validation import ConfigError, ErrorItem, first_config_error

API, ENGINE = "APIServer", "EngineCore"

# Simulated seconds each start-up stage takes at --sim-speed 1 (a few seconds in all).
T_API_INIT = 0.3
T_ENGINE_SPAWN = 0.5
T_LOAD_BASE = 0.1
T_LOAD_PER_GIB = 0.12
T_COMPILE = 1.0
T_PROFILE = 0.2
T_CAPTURE = 0.5
T_API_UP = 0.1
T_FAIL_EXIT = 0.1

# EngineArgs field order, for the ``non-default args`` dict.
_ARG_ORDER = (
    "model",
    "served_model_name",
    "tokenizer",
    "trust_remote_code",
    "download_dir",
    "load_format",
    "dtype",
    "seed",
    "max_model_len",
    "pipeline_parallel_size",
    "tensor_parallel_size",
    "block_size",
    "enable_prefix_caching",
    "cpu_offload_gb",
    "gpu_memory_utilization",
    "kv_cache_memory_bytes",
    "max_num_batched_tokens",
    "max_num_seqs",
    "max_logprobs",
    "disable_log_stats",
    "revision",
    "quantization",
    "enforce_eager",
    "kv_cache_dtype",
    "num_gpu_blocks_override",
    "enable_chunked_prefill",
    "generation_config",
    "performance_mode",
    "async_scheduling",
)
_FRONTEND_ORDER = (
    "host",
    "port",
    "uvicorn_log_level",
    "disable_uvicorn_access_log",
    "api_key",
    "enable_server_load_tracking",
    "disable_fastapi_docs",
    "enable_log_requests",
    "shutdown_timeout",
)


def non_default_args(command: SimCommand) -> dict[str, Any]:
    """What ``api_utils.py:286`` logs: every argument that differs from its default."""
    parsed, front = command.parsed, command.frontend.values
    values: dict[str, Any] = dict(parsed.values)
    out: dict[str, Any] = {"model_tag": parsed.model}
    for name in _FRONTEND_ORDER:
        if name in values:
            out[name] = values[name]
        elif name in front:
            out[name] = "***" if name == "api_key" else front[name]
    if out.get("port") == 8000:
        del out["port"]
    out["model"] = parsed.model
    for name in _ARG_ORDER:
        if name == "model" or name in out:
            continue
        if name in values:
            value = values[name]
            out[name] = [value] if name == "served_model_name" else value
        elif name in front:
            out[name] = front[name]
    for name, value in values.items():
        out.setdefault(name, value)
    return out


class SimServer:
    """Runs one simulated server from a parsed command line."""

    def __init__(self, command: SimCommand, log: VllmLog, install_signals: bool = True) -> None:
        self.command = command
        self.log = log
        self.speed = command.sim.speed
        self.install_signals = install_signals
        self._stop = asyncio.Event()
        self._signal_name = "SIGTERM"
        self.engine: AsyncEngine | None = None
        self.port: int | None = None

    # -- control -------------------------------------------------------------------------------
    def request_stop(self, signame: str = "SIGTERM") -> None:
        """Ask the server to shut down (what SIGTERM/SIGINT do)."""
        self._signal_name = signame
        self._stop.set()

    async def _pause(self, sim_seconds: float) -> bool:
        """Sleep ``sim_seconds / speed``; True if a stop was requested meanwhile."""
        try:
            await asyncio.wait_for(self._stop.wait(), timeout=sim_seconds / self.speed)
        except TimeoutError:
            return False
        return True

    # -- the run -------------------------------------------------------------------------------
    async def run(self) -> int:
        """Start, serve until stopped; the process exit code."""
        loop = asyncio.get_running_loop()
        if self.install_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, self.request_stop, sig.name)
        try:
            return await self._run()
        finally:
            if self.install_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    loop.remove_signal_handler(sig)

    async def _run(self) -> int:
        cmd, log = self.command, self.log
        parsed = cmd.parsed
        model = parsed.model or ""
        for line in banner(model):
            log.info(API, "api_utils.py:347", line)
        log.info(API, "api_utils.py:286", f"non-default args: {non_default_args(cmd)}")
        sock = self._bind()
        if sock is None:
            return 1
        try:
            return await self._start_and_serve(sock)
        finally:
            sock.close()

    def _bind(self) -> socket.socket | None:
        """Bind the port now and listen only when ready (``launcher.py:335-350``)."""
        values = self.command.parsed.values
        host = values.get("host")
        port = int(values.get("port") or 8000)
        family = socket.AF_INET6 if host and ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host or "", port))
        except OverflowError:
            sock.close()
            self.log.stderr(*bind_error_traceback("OverflowError: bind(): port must be 0-65535."))
            return None
        except OSError as exc:
            sock.close()
            code = exc.errno or errno.EADDRINUSE
            text = os.strerror(code)
            self.log.stderr(*bind_error_traceback(f"OSError: [Errno {code}] {text}"))
            return None
        self.port = sock.getsockname()[1]
        return sock

    def _config_failure(self, error: ConfigError) -> int:
        self.log.stderr(
            *config_error_traceback(error.config, error.lines(self.command.parsed.model or ""))
        )
        return 1

    async def _start_and_serve(self, sock: socket.socket) -> int:
        cmd, log = self.command, self.log
        parsed = cmd.parsed
        model = parsed.model or ""
        hardware = SimHardware(cmd.sim.gpu, cmd.sim.num_gpus, cmd.sim.gpu_used_bytes)
        try:
            entry = resolve_model(model)
        except UnknownModelError as exc:
            item = ErrorItem(f"Value error, {exc}")
            return self._config_failure(ConfigError("ModelConfig", (item,)))
        log.info(API, "model.py:733", f"Resolved architecture: {entry.architecture}")
        error, flags = first_config_error(model, parsed.values, (), entry, hardware)
        if error is not None and error.config == "ModelConfig":
            return self._config_failure(error)
        mml = parsed.values.get("max_model_len")
        shown = entry.shape.max_position_embeddings if mml in (None, -1) else mml
        log.info(API, "model.py:2152", f"Using max model len {shown}")
        if error is not None:
            return self._config_failure(error)
        assert flags is not None
        cfg = resolve(flags, entry, hardware, cmd.frontend.performance_mode)
        self._config_notes(cfg, flags)
        if await self._pause(T_API_INIT):
            return self._stopped_during_startup()
        log.info(ENGINE, "core.py:133", self._engine_config_line(cfg))
        if await self._pause(T_ENGINE_SPAWN):
            return self._stopped_during_startup()
        plan = plan_memory(cfg)
        outcome = await self._engine_startup(cfg, plan)
        if outcome is not None:
            return outcome
        return await self._serve(sock, cfg, plan)

    def _config_notes(self, cfg: ResolvedConfig, flags: ServeFlags) -> None:
        log = self.log
        if (
            cfg.entry.checkpoint_quantization
            and cfg.quantization
            and cfg.quantization.endswith("_marlin")
        ):
            log.info(
                API,
                "awq_marlin.py:173" if "awq" in cfg.quantization else "gptq_marlin.py:218",
                f"The model is convertible to {cfg.quantization} during runtime. Using "
                f"{cfg.quantization} kernel.",
            )
        if cfg.enforce_eager:
            log.warning(
                API,
                "vllm.py:1703",
                "Enforce eager set, disabling torch.compile, CUDAGraphs, "
                "and JIT kernel warmup. This is equivalent to setting -cc.mode=none "
                "-cc.cudagraph_mode=none and --kernel_config.enable_jit_warmup=False",
            )
        if self.command.frontend.values.get("async_scheduling", True):
            log.info(API, "vllm.py:1042", "Asynchronous scheduling is enabled.")
        if cfg.enable_chunked_prefill:
            log.info(
                API,
                "scheduler.py:306",
                "Chunked prefill is enabled with "
                f"max_num_batched_tokens={cfg.max_num_batched_tokens}.",
            )
        mnbt, mns, mml = flags.max_num_batched_tokens, cfg.max_num_seqs, cfg.max_model_len
        if mnbt is not None and mnbt > mns * mml:
            log.warning(
                API,
                "scheduler.py:334",
                f"max_num_batched_tokens ({mnbt}) exceeds max_num_seqs * max_model_len "
                f"({mns * mml}). This may lead to unexpected behavior.",
            )

    def _engine_config_line(self, cfg: ResolvedConfig) -> str:
        model = self.command.parsed.model
        served = cfg.flags.served_model_name or model
        capture = max(cfg.cudagraph_capture_sizes, default=0) or None
        return (
            f"Initializing a V1 LLM engine (v{VERSION}) with config: model={model!r}, "
            f"speculative_config=None, tokenizer={model!r}, skip_tokenizer_init=False, "
            "tokenizer_mode=auto, revision=None, tokenizer_revision=None, "
            f"trust_remote_code={bool(self.command.frontend.values.get('trust_remote_code'))}, "
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

    def _stopped_during_startup(self) -> int:
        self.log.info(
            ENGINE,
            "core.py:1454",
            f"[shutdown] EngineCore: trigger received signal={self._signal_name}",
        )
        return 0

    async def _engine_fail(self, site: str, plan: MemoryPlan) -> int:
        assert plan.failure is not None
        f = plan.failure
        await self._pause(T_FAIL_EXIT)
        engine_core_failure(self.log, site, f"{f.exc_type}: {f.message}")
        return 1

    async def _engine_startup(self, cfg: ResolvedConfig, plan: MemoryPlan) -> int | None:
        """Play the engine's start-up; an exit code if it fails or is stopped, else None."""
        log = self.log
        model = self.command.parsed.model
        t_engine = time.monotonic()
        kind = plan.failure.kind if plan.failure else None
        if kind == "free_memory":
            return await self._engine_fail("executor", plan)
        log.info(ENGINE, "gpu_model_runner.py:4962", f"Starting to load model {model}...")
        log.info(
            ENGINE,
            "cuda.py:476",
            "Using FLASH_ATTN attention backend out of potential "
            "backends: ['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION'].",
        )
        if cfg.quantization in FP8_QUANT and not cfg.hardware.gpu.supports_fp8:
            log.warning(
                ENGINE,
                "marlin_utils_fp8.py:61",
                "Your GPU does not have native support for FP8 computation but FP8 "
                "quantization is being used. Weight-only FP8 compression will be used "
                "leveraging the Marlin kernel. This may degrade performance for "
                "compute-heavy workloads.",
            )
        t0 = time.monotonic()
        if await self._pause(T_LOAD_BASE):  # model init, before the checkpoint is read
            return self._stopped_during_startup()
        t_weights = time.monotonic()
        if await self._pause(T_LOAD_PER_GIB * plan.weights / GIB):
            return self._stopped_during_startup()
        if kind == "weights_oom":
            assert plan.failure is not None
            log.error(ENGINE, "gpu_model_runner.py:5143", plan.failure.logged_error or "")
            return await self._engine_fail("load_model", plan)
        weights_s = time.monotonic() - t_weights
        took = time.monotonic() - t0
        log.info(ENGINE, "default_loader.py:501", f"Loading weights took {weights_s:.2f} seconds")
        log.info(
            ENGINE,
            "gpu_model_runner.py:5149",
            f"Model loading took {kv.format_gib(plan.weights)} GiB memory and {took:.6f} seconds",
        )
        compile_s = 0.0
        if not cfg.enforce_eager:
            t1 = time.monotonic()
            digest = hashlib.sha256(repr(cfg.flags).encode()).hexdigest()[:10]
            log.info(
                ENGINE,
                "backends.py:1089",
                f"Using cache directory: ~/.cache/vllm/torch_compile_cache/"
                f"{digest}/rank_0_0/backbone for vLLM's torch.compile",
            )
            if await self._pause(T_COMPILE * 0.3):
                return self._stopped_during_startup()
            log.info(
                ENGINE,
                "backends.py:1148",
                f"Dynamo bytecode transform time: {time.monotonic() - t1:.2f} s",
            )
            t2 = time.monotonic()
            if await self._pause(T_COMPILE * 0.7):
                return self._stopped_during_startup()
            log.info(
                ENGINE,
                "backends.py:302",
                f"Compiling a graph for compile range (1, "
                f"{cfg.max_num_batched_tokens}) takes {time.monotonic() - t2:.2f} s",
            )
            compile_s = time.monotonic() - t1
            log.info(ENGINE, "monitor.py:53", f"torch.compile took {compile_s:.2f} s in total")
        t3 = time.monotonic()
        if await self._pause(T_PROFILE):
            return self._stopped_during_startup()
        log.info(
            ENGINE,
            "monitor.py:81",
            f"Initial profiling/warmup run took {time.monotonic() - t3:.2f} s",
        )
        if kind == "sampler_oom":
            return await self._engine_fail("profile", plan)
        sizes = cfg.cudagraph_capture_sizes
        full = [s for s in sizes if s <= cfg.max_num_seqs]
        if sizes:
            log.info(
                ENGINE,
                "gpu_model_runner.py:6063",
                f"Profiling CUDA graph memory: PIECEWISE={len(sizes)} (largest={max(sizes)}), "
                f"FULL={len(full)} (largest={max(full)})",
            )
            log.info(
                ENGINE,
                "gpu_model_runner.py:6142",
                f"Estimated CUDA graph memory: {kv.format_gib(plan.cudagraph)} GiB total",
            )
        if plan.kv_from_flag:
            log.info(
                ENGINE,
                "gpu_worker.py:660",
                f"Initial free memory {kv.format_gib(plan.free_at_start)} GiB, reserved "
                f"{kv.format_gib(plan.available_kv)} GiB memory for KV Cache as specified by "
                "kv_cache_memory_bytes config and skipped memory profiling. This does not "
                "respect the gpu_memory_utilization config. Only use kv_cache_memory_bytes "
                "config when you want manual control of KV cache memory size. If OOM'ed, "
                "check the difference of initial free memory between the current run and "
                "the previous run where kv_cache_memory_bytes is suggested and update it "
                "correspondingly.",
            )
        else:
            log.info(
                ENGINE,
                "gpu_worker.py:759",
                f"Available KV cache memory: {kv.format_gib(plan.available_kv)} GiB",
            )
            if sizes:
                util = cfg.gpu_memory_utilization
                share = plan.cudagraph / plan.total
                log.info(
                    ENGINE,
                    "gpu_worker.py:578",
                    "CUDA graph memory profiling is enabled (default since v0.21.0). The "
                    f"current --gpu-memory-utilization={util:.4f} is equivalent to "
                    f"--gpu-memory-utilization={util - share:.4f} without CUDA graph memory "
                    "profiling. To maintain the same effective KV cache size as before, "
                    f"increase --gpu-memory-utilization to {util + share:.4f}. To disable, "
                    "set VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=0.",
                )
        if kind in ("no_kv_memory", "autofit_impossible", "kv_too_small"):
            return await self._engine_fail("kv_check", plan)
        if plan.auto_fit_message:
            line = 2476 if "reduced" in plan.auto_fit_message else 2466
            log.info(ENGINE, f"kv_cache_utils.py:{line}", plan.auto_fit_message)
        assert plan.capacity is not None
        log.info(ENGINE, "kv_cache_utils.py:2327", plan.capacity.log_line("GPU"))
        if kind in ("kv_alloc_oom", "block_size"):
            return await self._engine_fail("kv_init", plan)
        if sizes:
            t4 = time.monotonic()
            if await self._pause(T_CAPTURE):
                return self._stopped_during_startup()
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
                "gpu_model_runner.py:6582",
                f"Graph capturing finished in {secs:.0f} secs, took {plan.cudagraph / GIB:.2f} GiB",
            )
            log.info(ENGINE, "gpu_worker.py:1024", kv_cache_memory_hint(plan))
        total = time.monotonic() - t_engine
        suffix = f" (compilation: {compile_s:.2f} s)" if compile_s else ""
        log.info(
            ENGINE,
            "core.py:402",
            f"init engine (profile, create kv cache, warmup model) took {total:.2f} s{suffix}",
        )
        return None

    # -- serving -------------------------------------------------------------------------------
    def _build_engine(
        self, cfg: ResolvedConfig, plan: MemoryPlan
    ) -> tuple[AsyncEngine, SimMetrics]:
        assert plan.capacity is not None
        cap = plan.capacity
        served = cfg.flags.served_model_name or self.command.parsed.model or ""
        cache_info = {
            "block_size": str(cfg.block_size),
            "cache_dtype": cfg.kv_cache_dtype,
            "enable_prefix_caching": str(cfg.enable_prefix_caching),
            "gpu_memory_utilization": str(cfg.gpu_memory_utilization),
            "kv_cache_memory_bytes": str(cfg.kv_cache_memory_bytes),
            "num_gpu_blocks": str(cap.num_blocks),
            "num_gpu_blocks_override": str(cfg.num_gpu_blocks_override),
            "kv_cache_size_tokens": str(cap.kv_cache_size_tokens),
            "kv_cache_max_concurrency": str(cap.max_concurrency),
            "num_cpu_blocks": "None",
            "sliding_window": "None",
            "prefix_caching_hash_algo": "sha256",
            "user_specified_block_size": str(cfg.flags.block_size is not None),
            "kv_offloading_backend": "native",
            "kv_offloading_size": "None",
        }
        metrics = SimMetrics(
            served, plan.max_model_len, cache_info, self.command.frontend.log_stats
        )
        scheduler = Scheduler(
            SchedulerConfig(
                num_gpu_blocks=cap.num_blocks,
                block_size=cfg.block_size,
                max_num_seqs=cfg.max_num_seqs,
                max_num_batched_tokens=cfg.max_num_batched_tokens,
                max_model_len=plan.max_model_len,
                enable_prefix_caching=cfg.enable_prefix_caching,
                enable_chunked_prefill=cfg.enable_chunked_prefill,
            )
        )
        engine = AsyncEngine(
            scheduler,
            CostModel.from_plan(plan),
            metrics,
            SimTokenizer(cfg.entry.shape.vocab_size),
            self.log,
            speed=self.speed,
            seed=self.command.sim.seed,
        )
        self._add_gpus(metrics, engine, cfg, plan)
        return engine, metrics

    def _add_gpus(
        self, metrics: SimMetrics, engine: AsyncEngine, cfg: ResolvedConfig, plan: MemoryPlan
    ) -> None:
        gpu = cfg.hardware.gpu
        total_mib = gpu.total_bytes / MIB

        def gauges(index: int) -> GpuGaugeSource:
            busy = index < cfg.world_size
            ours = plan.process_bytes if busy else 0
            used_mib = float(round((cfg.hardware.used_by_others + ours) / MIB))

            def util() -> float:
                if not busy:
                    return 0.0
                return round(100.0 * engine.busy.utilization(time.monotonic()), 1)

            def used() -> float:
                return used_mib

            def free() -> float:
                return float(round(total_mib - used_mib))

            def copy_util() -> float:
                return round(util() * 0.8, 1)

            def temperature() -> float:
                return round(34.0 + 0.45 * util(), 1)

            def power() -> float:
                return round(gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * util() / 100.0, 1)

            return GpuGaugeSource(
                index=index,
                uuid=gpu.uuid(index),
                model_name=gpu.name,
                pci_bus_id=f"00000000:{index + 1:02X}:00.0",
                fb_used_mib=used,
                fb_free_mib=free,
                util_percent=util,
                mem_copy_util_percent=copy_util,
                temperature_c=temperature,
                power_w=power,
            )

        for index in range(cfg.hardware.num_gpus):
            metrics.add_gpu(gauges(index))

    async def _serve(self, sock: socket.socket, cfg: ResolvedConfig, plan: MemoryPlan) -> int:
        log, cmd = self.log, self.command
        engine, metrics = self._build_engine(cfg, plan)
        self.engine = engine
        entry: ModelEntry = cfg.entry
        served = cfg.flags.served_model_name or cmd.parsed.model or ""
        ctx = ApiContext(
            engine=engine,
            metrics=metrics,
            tokenizer=engine.tokenizer,
            served_name=served,
            model_path=cmd.parsed.model or "",
            max_model_len=plan.max_model_len,
            max_logprobs=cfg.max_logprobs,
            adds_bos=entry.adds_bos,
            chat_template=entry.chat_template,
            api_key=cmd.frontend.api_key,
            load_tracking=cmd.frontend.load_tracking,
            dev_mode=os.environ.get("VLLM_SERVER_DEV_MODE") == "1",
            fixed=cmd.sim.fixed,
        )
        host = cmd.parsed.values.get("host")
        log.info(API, "entry.py:136", "Supported tasks: ['generate']")
        if ctx.dev_mode:
            log.warning(
                API,
                "api_server.py:112",
                "SECURITY WARNING: Development endpoints are enabled! This should NOT be used "
                "in production!",
            )
        log.info(
            API, "entry.py:140", f"Starting vLLM server on http://{host or '0.0.0.0'}:{self.port}"
        )
        log.info(API, "launcher.py:186", "Available routes are:")
        for path, method in ROUTES:
            log.info(API, "launcher.py:195", f"Route: {path}, Methods: {method}")
        engine.start()
        app = build_app(ctx)
        if cmd.sim.fixed is not None:
            # Benchmark mode: keep the start-up heap out of every GC pass, so collections
            # stay short and do not stall a thousand streams (as bench serve does).
            gc.collect()
            gc.freeze()
        try:
            async with running_app(app, sock, log, cmd.frontend.access_log):
                log.stderr(
                    f"INFO:     Started server process [{os.getpid()}]",
                    "INFO:     Waiting for application startup.",
                    "INFO:     Application startup complete.",
                )
                await self._stop.wait()
                self._log_shutdown()
                await engine.stop()
                log.info(
                    API,
                    "launcher.py:304",
                    "[shutdown] API server: shutting down FastAPI HTTP server",
                )
                log.stderr("INFO:     Shutting down")
        finally:
            if cmd.sim.fixed is not None:
                gc.unfreeze()
            with contextlib.suppress(Exception):
                await engine.stop()
        log.stderr(
            "INFO:     Waiting for application shutdown.",
            "INFO:     Application shutdown complete.",
            f"INFO:     Finished server process [{os.getpid()}]",
        )
        return 0

    def _log_shutdown(self) -> None:
        log = self.log
        timeout = int(self.command.frontend.values.get("shutdown_timeout", 0) or 0)
        mode = "abort" if timeout == 0 else "drain"
        log.info(API, "launcher.py:254", "[shutdown] API server: shutdown triggered")
        log.info(
            API,
            "launcher.py:270",
            f"[shutdown] API server: stopping engine client mode={mode} timeout={timeout}s",
        )
        log.info(
            ENGINE,
            "core.py:1454",
            f"[shutdown] EngineCore: trigger received signal={self._signal_name}",
        )
        log.info(
            ENGINE, "core.py:1635", f"[shutdown] EngineCore: start mode={mode} timeout={timeout}s"
        )
        in_flight = self.engine.num_in_flight if self.engine else 0
        if in_flight:
            log.info(
                ENGINE,
                "core.py:1650",
                f"[shutdown] EngineCore: aborting {in_flight} in-flight request(s)",
            )
        log.info(ENGINE, "core.py:1499", "[shutdown] EngineCore: exiting busy loop")
        log.info(API, "launcher.py:279", "[shutdown] API server: engine client stopped")
        log.info(API, "launcher.py:282", "[shutdown] API server: signalling HTTP server shutdown")
