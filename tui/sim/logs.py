"""vLLM's log format and the shapes of its failure output, for the simulator to print.

Records look like vLLM's (``logger.py:28-33``):
``(<process> pid=<N>) <LEVEL> <MM-DD HH:MM:SS> [<file>:<line>] <message>``, with every line
of a multi-line message carrying the prefix (vLLM's ``NewLineFormatter``). vLLM's logger
writes to stdout; Python tracebacks of uncaught exceptions (the API server's, and
multiprocessing's ``Process EngineCore:`` block) go to stderr. The traceback frames are the
ones in the CPU captures (``fail_*.log``), so the last lines, the ones a diagnosis reads, are
exactly vLLM's.

Every process prefix uses the simulator's own pid: the simulator is one process, and a
console that acts on pids it reads in a log must never reach an unrelated process.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import NamedTuple, TextIO

from tui.domain.vllm_release import release_of
from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION

VLLM = "/opt/vllm-venv/lib/python3.11/site-packages/vllm"
PY = "/usr/lib/python3.11"
VERSION = DEFAULT_SIM_VLLM_VERSION  # the default; a server speaks its VllmLog.version


class VllmLog:
    """Writes vLLM-format records (stdout) and raw lines (stdout or stderr), flushed."""

    def __init__(
        self,
        out: TextIO | None = None,
        err: TextIO | None = None,
        pid: int | None = None,
        clock: Callable[[], float] = time.time,
        version: str = DEFAULT_SIM_VLLM_VERSION,
    ) -> None:
        self.version = version  # the vLLM version this log speaks (--sim-vllm-version)
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.pid = pid if pid is not None else os.getpid()
        self.clock = clock
        self._lock = threading.Lock()

    def src(self, site: str) -> str:
        """``file.py:line`` of the named log site in the version this log speaks."""
        return release_of(self.version).site(site).source

    def prefix(self, proc: str, level: str, src: str) -> str:
        """``(proc pid=N) LEVEL MM-DD HH:MM:SS [src] ``."""
        ts = time.strftime("%m-%d %H:%M:%S", time.localtime(self.clock()))
        return f"({proc} pid={self.pid}) {level} {ts} [{src}] "

    def record(self, level: str, proc: str, src: str, message: str) -> None:
        """One record; each line of ``message`` gets the prefix."""
        head = self.prefix(proc, level, src)
        text = "\n".join(head + line for line in message.split("\n"))
        self._write(self.out, text)

    def info(self, proc: str, src: str, message: str) -> None:
        """An INFO record."""
        self.record("INFO", proc, src, message)

    def warning(self, proc: str, src: str, message: str) -> None:
        """A WARNING record."""
        self.record("WARNING", proc, src, message)

    def error(self, proc: str, src: str, message: str) -> None:
        """An ERROR record."""
        self.record("ERROR", proc, src, message)

    def stdout(self, *lines: str) -> None:
        """Raw lines on stdout (uvicorn access log)."""
        self._write(self.out, "\n".join(lines))

    def stderr(self, *lines: str) -> None:
        """Raw lines on stderr (tracebacks, argparse, tqdm, uvicorn's server log)."""
        self._write(self.err, "\n".join(lines))

    def _write(self, stream: TextIO, text: str) -> None:
        with self._lock:
            try:
                stream.write(text + "\n")
                stream.flush()
            except (BrokenPipeError, ValueError):
                pass  # the reader went away; nothing useful to do


def banner(model: str, version: str = VERSION) -> list[str]:
    """The logo block ``api_utils.py:347`` prints."""
    return [
        "",
        "       █     █     █▄   ▄█",
        f" ▄▄ ▄█ █     █     █ ▀▄▀ █  version {version}",
        f"  █▄█▀ █     █     █     █  model   {model}",
        "   ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
        "",
    ]


class At(NamedTuple):
    """A traceback frame in vLLM's package: its site is named, the release gives the line."""

    site: str
    func: str
    code: str
    caret: str = ""


_Frame = At | tuple[str, int, str, str, str]
"""A vLLM frame, or one outside vLLM's package: (file, line, function, code, caret)."""


def _frames(version: str, frames: Iterable[_Frame]) -> list[str]:
    """Traceback frame lines, each vLLM frame at ``version``'s line (caret line if any)."""
    release = release_of(version)
    out = []
    for frame in frames:
        if isinstance(frame, At):
            site = release.site(frame.site)
            file, line = f"{VLLM}/{site.path}", site.line
            func, code, caret = frame.func, frame.code, frame.caret
        else:
            file, line, func, code, caret = frame
        out.append(f'  File "{file}", line {line}, in {func}')
        out.append(f"    {code}")
        if caret:
            out.append(f"    {caret}")
    return out


_CLI_FRAMES: list[_Frame] = [
    ("/opt/vllm-venv/bin/vllm", 6, "<module>", "sys.exit(main())", "         ^^^^^^"),
    At("cli.main", "main", "args.dispatch_function(args)", ""),
    At("cli.serve", "cmd", "uvloop.run(run_server(args))", ""),
    (
        f"{PY}/asyncio/runners.py",
        118,
        "run",
        "return self._loop.run_until_complete(task)",
        "       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
]
_TO_ENGINE_CLIENT: list[_Frame] = [
    At(
        "entry.run_server.worker",
        "run_server",
        "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
        "",
    ),
    At(
        "entry.worker.engine_client",
        "run_server_worker",
        "async with build_async_engine_client(",
        "",
    ),
    (
        f"{PY}/contextlib.py",
        210,
        "__aenter__",
        "return await anext(self.gen)",
        "       ^^^^^^^^^^^^^^^^^^^^^",
    ),
    At(
        "entry.engine_client",
        "build_async_engine_client",
        "async with build_async_engine_client_from_engine_args(",
        "",
    ),
    (
        f"{PY}/contextlib.py",
        210,
        "__aenter__",
        "return await anext(self.gen)",
        "       ^^^^^^^^^^^^^^^^^^^^^",
    ),
]
_CONFIG_SITES: dict[str, list[_Frame]] = {
    "ModelConfig": [
        At(
            "args.engine_config.model",
            "create_engine_config",
            "model_config = self.create_model_config()",
            "               ^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        At(
            "args.model_config", "create_model_config", "return ModelConfig(", "       ^^^^^^^^^^^^"
        ),
    ],
    "CacheConfig": [
        At(
            "args.engine_config.cache",
            "create_engine_config",
            "cache_config = CacheConfig(",
            "               ^^^^^^^^^^^^",
        ),
    ],
    "ParallelConfig": [
        At(
            "args.engine_config.parallel",
            "create_engine_config",
            "parallel_config = ParallelConfig(",
            "                  ^^^^^^^^^^^^^^^",
        ),
    ],
    "UVAOffloadConfig": [
        At(
            "args.engine_config.offload",
            "create_engine_config",
            "offload_config = OffloadConfig(",
            "                 ^^^^^^^^^^^^^^",
        ),
    ],
    "SchedulerConfig": [
        At(
            "args.engine_config.scheduler",
            "create_engine_config",
            "scheduler_config = SchedulerConfig(",
            "                   ^^^^^^^^^^^^^^^^",
        ),
    ],
    "LoRAConfig": [
        At("args.engine_config.lora", "create_engine_config", "LoRAConfig(", "^^^^^^^^^^^"),
    ],
    "VllmConfig": [
        At(
            "args.engine_config.vllm",
            "create_engine_config",
            "config = VllmConfig(",
            "         ^^^^^^^^^^^",
        ),
    ],
}


def config_error_traceback(version: str, config: str, exception_lines: list[str]) -> list[str]:
    """The bare API-server traceback of a config ``ValidationError`` (``fail_b2``/``fail_c1``).

    ``exception_lines`` are the pydantic block (first line: ``N validation error(s) for X``).
    """
    site = _CONFIG_SITES.get(config, _CONFIG_SITES["VllmConfig"])
    frames: list[_Frame] = [
        *_CLI_FRAMES,
        *_TO_ENGINE_CLIENT,
        At(
            "entry.from_args.create_config",
            "build_async_engine_client_from_engine_args",
            "vllm_config = engine_args.create_engine_config(usage_context=usage_context)",
            "              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        *site,
        (
            "/opt/vllm-venv/lib/python3.11/site-packages/pydantic/_internal/_dataclasses.py",
            121,
            "__init__",
            "s.__pydantic_validator__.validate_python(ArgsKwargs(args, kwargs), self_instance=s)",
            "",
        ),
    ]
    first, *rest = exception_lines
    return [
        "Traceback (most recent call last):",
        *_frames(version, frames),
        f"pydantic_core._pydantic_core.ValidationError: {first}",
        *rest,
    ]


def api_init_traceback(version: str, exception: str) -> list[str]:
    """The API server's traceback when its app state fails to initialise (static LoRAs)."""
    frames = [
        *_CLI_FRAMES,
        At(
            "entry.worker.init_app_state",
            "run_server_worker",
            "await init_app_state(engine_client, app.state, args, supported_tasks)",
            "",
        ),
        At(
            "app_state.init_static_loras",
            "init_app_state",
            "await state.openai_serving_models.init_static_loras()",
            "",
        ),
        At(
            "serving.init_static_loras.raise",
            "init_static_loras",
            "raise ValueError(load_result.error.message)",
            "",
        ),
    ]
    return ["Traceback (most recent call last):", *_frames(version, frames), *exception.split("\n")]


def bind_error_traceback(version: str, errno_text: str) -> list[str]:
    """The traceback of a port that cannot be bound (``fail_d_port_in_use.log``)."""
    frames = [
        *_CLI_FRAMES,
        At(
            "entry.run_server.setup_server",
            "run_server",
            "listen_address, sock = setup_server(args, reuse_port=False)",
            "                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        At(
            "launcher.setup_server.socket",
            "setup_server",
            "sock = create_server_socket(sock_addr, reuse_port=reuse_port)",
            "       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        At("launcher.create_server_socket.bind", "create_server_socket", "sock.bind(addr)", ""),
    ]
    return ["Traceback (most recent call last):", *_frames(version, frames), errno_text]


_TO_EXECUTOR: list[_Frame] = [
    At(
        "core.init.executor",
        "__init__",
        "self.model_executor = executor_class(vllm_config)",
        "                      ^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
    At("abstract.init.init_executor", "__init__", "self._init_executor()", ""),
]
"""EngineCore builds its executor (the frames every executor-side failure starts with)."""
_TO_DEVICE: list[_Frame] = [
    *_TO_EXECUTOR,
    At("uniproc.init_device", "_init_executor", "self.driver_worker.init_device()", ""),
]
_KV_CACHES = At(
    "core.init.kv_caches",
    "__init__",
    "kv_cache_config = self._initialize_kv_caches(vllm_config)",
    "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
)


# Where in EngineCore's start-up each failure is raised (frames below EngineCore.__init__).
_ENGINE_SITES: dict[str, list[_Frame]] = {
    "executor": [
        *_TO_DEVICE,
    ],
    "load_model": [
        *_TO_EXECUTOR,
        At("uniproc.load_model", "_init_executor", "self.driver_worker.load_model()", ""),
        At(
            "worker.load_model",
            "load_model",
            "self.model_runner.load_model(eep_scale_up=eep_scale_up)",
            "",
        ),
        At("runner.load_model.raise", "load_model", "raise e", ""),
    ],
    "profile": [
        _KV_CACHES,
        At(
            "core.kv_caches.available_memory",
            "_initialize_kv_caches",
            "available_gpu_memory = self.model_executor.determine_available_memory()",
            "                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        At(
            "worker.available_memory.profile_run",
            "determine_available_memory",
            "self.model_runner.profile_run()",
            "",
        ),
        At("runner.dummy_sampler_run.raise", "_dummy_sampler_run", "raise RuntimeError(", ""),
    ],
    "kv_check": [
        _KV_CACHES,
        At(
            "core.kv_caches.configs",
            "_initialize_kv_caches",
            "kv_cache_configs = get_kv_cache_configs(",
            "                   ^^^^^^^^^^^^^^^^^^^^^",
        ),
        At("kv.check.call", "get_kv_cache_configs", "_check_enough_kv_cache_memory(", ""),
        At("kv.check.raise", "_check_enough_kv_cache_memory", "raise ValueError(", ""),
    ],
    "kv_init": [
        _KV_CACHES,
        At(
            "core.kv_caches.initialize",
            "_initialize_kv_caches",
            "self.model_executor.initialize_from_config(kv_cache_configs)",
            "",
        ),
        At(
            "abstract.initialize_from_config",
            "initialize_from_config",
            'self.collective_rpc("initialize_from_config", args=(kv_cache_configs,))',
            "",
        ),
        At(
            "worker.initialize_from_config",
            "initialize_from_config",
            "self.model_runner.initialize_kv_cache(",
            "",
        ),
        At(
            "runner.initialize_kv_cache",
            "initialize_kv_cache",
            "kernel_block_sizes = prepare_kernel_block_sizes(",
            "",
        ),
        At(
            "worker_utils.select_common_block_size.raise",
            "select_common_block_size",
            "raise ValueError(",
            "",
        ),
    ],
}
_ENGINE_HEAD: list[_Frame] = [
    At(
        "core.run_engine_core.proc",
        "run_engine_core",
        "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
        "              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
    At(
        "otel.sync_wrapper",
        "sync_wrapper",
        "return func(*args, **kwargs)",
        "       ^^^^^^^^^^^^^^^^^^^^^",
    ),
    At("core.proc_init.super", "__init__", "super().__init__(", ""),
]
_API_TAIL: list[_Frame] = [
    At(
        "entry.from_args.async_llm",
        "build_async_engine_client_from_engine_args",
        "async_llm = AsyncLLM.from_vllm_config(",
        "            ^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
    At("async_llm.from_vllm_config", "from_vllm_config", "return cls(", "       ^^^^"),
    At(
        "async_llm.init.engine_core",
        "__init__",
        "self.engine_core = EngineCoreClient.make_async_mp_client(",
        "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
    At(
        "core_client.make_async_mp_client",
        "make_async_mp_client",
        "return AsyncMPClient(",
        "       ^^^^^^^^^^^^^^",
    ),
    At("core_client.async_mp.super", "__init__", "super().__init__(", ""),
    At("core_client.mp.launch", "__init__", "with launch_core_engines(", ""),
    (f"{PY}/contextlib.py", 144, "__exit__", "next(self.gen)", ""),
    At("engine_utils.launch_core_engines", "launch_core_engines", "wait_for_engine_startup(", ""),
    At(
        "engine_utils.wait_for_engine_startup", "wait_for_engine_startup", "raise RuntimeError(", ""
    ),
]
ENGINE_INIT_FAILED = (
    "RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {'EngineCore': 1}"
)


_RUNNER_UVA: list[_Frame] = [
    *_TO_DEVICE,
    At(
        "worker.init_device.make_runner",
        "init_device",
        "self.model_runner: GPUModelRunner = self._make_model_runner()",
        "                                    ^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
    At(
        "worker.make_model_runner",
        "_make_model_runner",
        "return GPUModelRunnerV2(self.vllm_config, self.device)  # type: ignore",
        "       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
    At("buffer_utils.uva.raise", "__init__", 'raise RuntimeError("UVA is not available")', ""),
]
"""Model runner V2's UVA refusal (the frames inside the runner's own __init__ left out)."""


def engine_core_failure(log: VllmLog, site: str, exception: str) -> None:
    """Print EngineCore's start-up failure the way vLLM does, ending in the API's RuntimeError.

    ``exception`` is ``"<Type>: <message>"`` (the message may span lines). Writes the
    ``EngineCore failed to start.`` record with its traceback (stdout), multiprocessing's
    ``Process EngineCore:`` traceback and the API server's traceback (stderr).
    """
    at = _RUNNER_UVA if site == "runner_uva" else _ENGINE_SITES[site]
    frames = [*_ENGINE_HEAD, *at]
    tb = [
        "Traceback (most recent call last):",
        *_frames(log.version, frames),
        *exception.split("\n"),
    ]
    log.error(
        "EngineCore",
        log.src("core.failed_to_start"),
        "EngineCore failed to start.\n" + "\n".join(tb),
    )
    log.stderr(
        "Process EngineCore:",
        "Traceback (most recent call last):",
        *_frames(
            log.version,
            [
                (f"{PY}/multiprocessing/process.py", 314, "_bootstrap", "self.run()", ""),
                (
                    f"{PY}/multiprocessing/process.py",
                    108,
                    "run",
                    "self._target(*self._args, **self._kwargs)",
                    "",
                ),
                At("core.run_engine_core.raise", "run_engine_core", "raise e", ""),
                *frames,
            ],
        ),
        *exception.split("\n"),
    )
    log.stderr(
        "Traceback (most recent call last):",
        *_frames(log.version, [*_CLI_FRAMES, *_TO_ENGINE_CLIENT, *_API_TAIL]),
        ENGINE_INIT_FAILED,
    )


def uvicorn_access_line(
    peer: str, method: str, path: str, version: str, status: int, phrase: str
) -> str:
    """uvicorn's access log line, as the captures show it (no vLLM prefix)."""
    return f'INFO:     {peer} - "{method} {path} HTTP/{version}" {status} {phrase}'
