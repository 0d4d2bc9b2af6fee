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
from typing import TextIO

from tui.domain.vllm_release import release_of
from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION, kv_sources

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


def _frames(frames: Iterable[tuple[str, int, str, str, str]]) -> list[str]:
    """Traceback frame lines: (file, line, function, code, caret line or "")."""
    out = []
    for file, line, func, code, caret in frames:
        out.append(f'  File "{file}", line {line}, in {func}')
        out.append(f"    {code}")
        if caret:
            out.append(f"    {caret}")
    return out


_CLI_FRAMES = [
    ("/opt/vllm-venv/bin/vllm", 6, "<module>", "sys.exit(main())", "         ^^^^^^"),
    (f"{VLLM}/entrypoints/cli/main.py", 120, "main", "args.dispatch_function(args)", ""),
    (f"{VLLM}/entrypoints/cli/serve.py", 156, "cmd", "uvloop.run(run_server(args))", ""),
    (
        f"{PY}/asyncio/runners.py",
        118,
        "run",
        "return self._loop.run_until_complete(task)",
        "       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
]
_TO_ENGINE_CLIENT = [
    (
        f"{VLLM}/entrypoints/launchers/api_server/entry.py",
        177,
        "run_server",
        "await run_server_worker(listen_address, sock, args, **uvicorn_kwargs)",
        "",
    ),
    (
        f"{VLLM}/entrypoints/launchers/api_server/entry.py",
        195,
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
    (
        f"{VLLM}/entrypoints/launchers/api_server/entry.py",
        61,
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
_CONFIG_SITES: dict[str, list[tuple[str, int, str, str, str]]] = {
    "ModelConfig": [
        (
            f"{VLLM}/engine/arg_utils.py",
            2240,
            "create_engine_config",
            "model_config = self.create_model_config()",
            "               ^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/engine/arg_utils.py",
            1955,
            "create_model_config",
            "return ModelConfig(",
            "       ^^^^^^^^^^^^",
        ),
    ],
    "CacheConfig": [
        (
            f"{VLLM}/engine/arg_utils.py",
            2265,
            "create_engine_config",
            "cache_config = CacheConfig(",
            "               ^^^^^^^^^^^^",
        ),
    ],
    "ParallelConfig": [
        (
            f"{VLLM}/engine/arg_utils.py",
            2441,
            "create_engine_config",
            "parallel_config = ParallelConfig(",
            "                  ^^^^^^^^^^^^^^^",
        ),
    ],
    "UVAOffloadConfig": [
        (
            f"{VLLM}/engine/arg_utils.py",
            2530,
            "create_engine_config",
            "offload_config = OffloadConfig(",
            "                 ^^^^^^^^^^^^^^",
        ),
    ],
    "SchedulerConfig": [
        (
            f"{VLLM}/engine/arg_utils.py",
            2617,
            "create_engine_config",
            "scheduler_config = SchedulerConfig(",
            "                   ^^^^^^^^^^^^^^^^",
        ),
    ],
    "LoRAConfig": [
        (
            f"{VLLM}/engine/arg_utils.py",
            2651,
            "create_engine_config",
            "LoRAConfig(",
            "^^^^^^^^^^^",
        ),
    ],
    "VllmConfig": [
        (
            f"{VLLM}/engine/arg_utils.py",
            2795,
            "create_engine_config",
            "config = VllmConfig(",
            "         ^^^^^^^^^^^",
        ),
    ],
}


def config_error_traceback(config: str, exception_lines: list[str]) -> list[str]:
    """The bare API-server traceback of a config ``ValidationError`` (``fail_b2``/``fail_c1``).

    ``exception_lines`` are the pydantic block (first line: ``N validation error(s) for X``).
    """
    site = _CONFIG_SITES.get(config, _CONFIG_SITES["VllmConfig"])
    frames = [
        *_CLI_FRAMES,
        *_TO_ENGINE_CLIENT,
        (
            f"{VLLM}/entrypoints/launchers/api_server/entry.py",
            83,
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
        *_frames(frames),
        f"pydantic_core._pydantic_core.ValidationError: {first}",
        *rest,
    ]


def api_init_traceback(exception: str) -> list[str]:
    """The API server's traceback when its app state fails to initialise (static LoRAs)."""
    frames = [
        *_CLI_FRAMES,
        (
            f"{VLLM}/entrypoints/launchers/api_server/entry.py",
            197,
            "run_server_worker",
            "await init_app_state(engine_client, app.state, args, supported_tasks)",
            "",
        ),
        (
            f"{VLLM}/entrypoints/launchers/api_server/app_state.py",
            96,
            "init_app_state",
            "await state.openai_serving_models.init_static_loras()",
            "",
        ),
        (
            f"{VLLM}/entrypoints/openai/models/serving.py",
            139,
            "init_static_loras",
            "raise ValueError(load_result.error.message)",
            "",
        ),
    ]
    return ["Traceback (most recent call last):", *_frames(frames), *exception.split("\n")]


def bind_error_traceback(errno_text: str) -> list[str]:
    """The traceback of a port that cannot be bound (``fail_d_port_in_use.log``)."""
    frames = [
        *_CLI_FRAMES,
        (
            f"{VLLM}/entrypoints/launchers/api_server/entry.py",
            176,
            "run_server",
            "listen_address, sock = setup_server(args, reuse_port=False)",
            "                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/entrypoints/launchers/launcher.py",
            398,
            "setup_server",
            "sock = create_server_socket(sock_addr, reuse_port=reuse_port)",
            "       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/entrypoints/launchers/launcher.py",
            348,
            "create_server_socket",
            "sock.bind(addr)",
            "",
        ),
    ]
    return ["Traceback (most recent call last):", *_frames(frames), errno_text]


# Where in EngineCore's start-up each failure is raised (frames below EngineCore.__init__).
_ENGINE_SITES: dict[str, list[tuple[str, int, str, str, str]]] = {
    "executor": [
        (
            f"{VLLM}/v1/engine/core.py",
            144,
            "__init__",
            "self.model_executor = executor_class(vllm_config)",
            "                      ^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (f"{VLLM}/v1/executor/abstract.py", 126, "__init__", "self._init_executor()", ""),
        (
            f"{VLLM}/v1/executor/uniproc_executor.py",
            58,
            "_init_executor",
            "self.driver_worker.init_device()",
            "",
        ),
    ],
    "load_model": [
        (
            f"{VLLM}/v1/engine/core.py",
            144,
            "__init__",
            "self.model_executor = executor_class(vllm_config)",
            "                      ^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (f"{VLLM}/v1/executor/abstract.py", 126, "__init__", "self._init_executor()", ""),
        (
            f"{VLLM}/v1/executor/uniproc_executor.py",
            60,
            "_init_executor",
            "self.driver_worker.load_model()",
            "",
        ),
        (
            f"{VLLM}/v1/worker/gpu_worker.py",
            412,
            "load_model",
            "self.model_runner.load_model(eep_scale_up=eep_scale_up)",
            "",
        ),
        (f"{VLLM}/v1/worker/gpu_model_runner.py", 5147, "load_model", "raise e", ""),
    ],
    "profile": [
        (
            f"{VLLM}/v1/engine/core.py",
            157,
            "__init__",
            "kv_cache_config = self._initialize_kv_caches(vllm_config)",
            "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/v1/engine/core.py",
            301,
            "_initialize_kv_caches",
            "available_gpu_memory = self.model_executor.determine_available_memory()",
            "                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/v1/worker/gpu_worker.py",
            688,
            "determine_available_memory",
            "self.model_runner.profile_run()",
            "",
        ),
        (
            f"{VLLM}/v1/worker/gpu_model_runner.py",
            5993,
            "_dummy_sampler_run",
            "raise RuntimeError(",
            "",
        ),
    ],
    "kv_check": [
        (
            f"{VLLM}/v1/engine/core.py",
            157,
            "__init__",
            "kv_cache_config = self._initialize_kv_caches(vllm_config)",
            "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/v1/engine/core.py",
            326,
            "_initialize_kv_caches",
            "kv_cache_configs = get_kv_cache_configs(",
            "                   ^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/v1/core/kv_cache_utils.py",
            2642,
            "get_kv_cache_configs",
            "_check_enough_kv_cache_memory(",
            "",
        ),
        (
            f"{VLLM}/v1/core/kv_cache_utils.py",
            1030,
            "_check_enough_kv_cache_memory",
            "raise ValueError(",
            "",
        ),
    ],
    "kv_init": [
        (
            f"{VLLM}/v1/engine/core.py",
            157,
            "__init__",
            "kv_cache_config = self._initialize_kv_caches(vllm_config)",
            "                  ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/v1/engine/core.py",
            377,
            "_initialize_kv_caches",
            "self.model_executor.initialize_from_config(kv_cache_configs)",
            "",
        ),
        (
            f"{VLLM}/v1/executor/abstract.py",
            137,
            "initialize_from_config",
            'self.collective_rpc("initialize_from_config", args=(kv_cache_configs,))',
            "",
        ),
        (
            f"{VLLM}/v1/worker/gpu_worker.py",
            894,
            "initialize_from_config",
            "self.model_runner.initialize_kv_cache(",
            "",
        ),
        (
            f"{VLLM}/v1/worker/gpu_model_runner.py",
            7090,
            "initialize_kv_cache",
            "kernel_block_sizes = prepare_kernel_block_sizes(",
            "",
        ),
        (f"{VLLM}/v1/worker/utils.py", 554, "select_common_block_size", "raise ValueError(", ""),
    ],
}
_ENGINE_HEAD = [
    (
        f"{VLLM}/v1/engine/core.py",
        1482,
        "run_engine_core",
        "engine_core = EngineCoreProc(*args, engine_index=dp_rank, **kwargs)",
        "              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
    (
        f"{VLLM}/tracing/otel.py",
        175,
        "sync_wrapper",
        "return func(*args, **kwargs)",
        "       ^^^^^^^^^^^^^^^^^^^^^",
    ),
    (f"{VLLM}/v1/engine/core.py", 1194, "__init__", "super().__init__(", ""),
]
_API_TAIL = [
    (
        f"{VLLM}/entrypoints/launchers/api_server/entry.py",
        95,
        "build_async_engine_client_from_engine_args",
        "async_llm = AsyncLLM.from_vllm_config(",
        "            ^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
    (f"{VLLM}/v1/engine/async_llm.py", 255, "from_vllm_config", "return cls(", "       ^^^^"),
    (
        f"{VLLM}/v1/engine/async_llm.py",
        184,
        "__init__",
        "self.engine_core = EngineCoreClient.make_async_mp_client(",
        "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    ),
    (
        f"{VLLM}/v1/engine/core_client.py",
        167,
        "make_async_mp_client",
        "return AsyncMPClient(",
        "       ^^^^^^^^^^^^^^",
    ),
    (f"{VLLM}/v1/engine/core_client.py", 1120, "__init__", "super().__init__(", ""),
    (f"{VLLM}/v1/engine/core_client.py", 682, "__init__", "with launch_core_engines(", ""),
    (f"{PY}/contextlib.py", 144, "__exit__", "next(self.gen)", ""),
    (f"{VLLM}/v1/engine/utils.py", 1351, "launch_core_engines", "wait_for_engine_startup(", ""),
    (f"{VLLM}/v1/engine/utils.py", 1431, "wait_for_engine_startup", "raise RuntimeError(", ""),
]
ENGINE_INIT_FAILED = (
    "RuntimeError: Engine core initialization failed. See root cause above. "
    "Failed core proc(s): {'EngineCore': 1}"
)


_Frame = tuple[str, int, str, str, str]


def _version_frames(version: str, frames: list[_Frame]) -> list[_Frame]:
    """The KV check's frames where ``version`` has them (0.33: ``kv_cache_planning.py``)."""
    sources = kv_sources(version)
    out = []
    for path, line, func, code, marks in frames:
        if path.endswith("/kv_cache_utils.py") and func == "get_kv_cache_configs":
            name, line = sources.check_call
            path = f"{VLLM}/v1/core/{name}"
        elif path.endswith("/kv_cache_utils.py") and func == "_check_enough_kv_cache_memory":
            name, line = sources.check_raise
            path = f"{VLLM}/v1/core/{name}"
        out.append((path, line, func, code, marks))
    return out


def _runner_uva_frames(version: str) -> list[_Frame]:
    # each wheel's lines (the record's); the frames inside the runner's own __init__ are
    # left out
    lines = release_of(version).runner_uva
    return [
        (
            f"{VLLM}/v1/engine/core.py",
            lines.core,
            "__init__",
            "self.model_executor = executor_class(vllm_config)",
            "                      ^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/v1/executor/abstract.py",
            lines.abstract,
            "__init__",
            "self._init_executor()",
            "",
        ),
        (
            f"{VLLM}/v1/executor/uniproc_executor.py",
            lines.uniproc,
            "_init_executor",
            "self.driver_worker.init_device()",
            "",
        ),
        (
            f"{VLLM}/v1/worker/gpu_worker.py",
            lines.worker_init,
            "init_device",
            "self.model_runner: GPUModelRunner = self._make_model_runner()",
            "                                    ^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/v1/worker/gpu_worker.py",
            lines.worker_make,
            "_make_model_runner",
            "return GPUModelRunnerV2(self.vllm_config, self.device)  # type: ignore",
            "       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        ),
        (
            f"{VLLM}/v1/worker/gpu/buffer_utils.py",
            lines.buffer_raise,
            "__init__",
            'raise RuntimeError("UVA is not available")',
            "",
        ),
    ]


def engine_core_failure(log: VllmLog, site: str, exception: str) -> None:
    """Print EngineCore's start-up failure the way vLLM does, ending in the API's RuntimeError.

    ``exception`` is ``"<Type>: <message>"`` (the message may span lines). Writes the
    ``EngineCore failed to start.`` record with its traceback (stdout), multiprocessing's
    ``Process EngineCore:`` traceback and the API server's traceback (stderr).
    """
    at = _runner_uva_frames(log.version) if site == "runner_uva" else _ENGINE_SITES[site]
    frames = _version_frames(log.version, [*_ENGINE_HEAD, *at])
    tb = ["Traceback (most recent call last):", *_frames(frames), *exception.split("\n")]
    log.error("EngineCore", "core.py:1510", "EngineCore failed to start.\n" + "\n".join(tb))
    log.stderr(
        "Process EngineCore:",
        "Traceback (most recent call last):",
        *_frames(
            [
                (f"{PY}/multiprocessing/process.py", 314, "_bootstrap", "self.run()", ""),
                (
                    f"{PY}/multiprocessing/process.py",
                    108,
                    "run",
                    "self._target(*self._args, **self._kwargs)",
                    "",
                ),
                (f"{VLLM}/v1/engine/core.py", 1514, "run_engine_core", "raise e", ""),
                *frames,
            ]
        ),
        *exception.split("\n"),
    )
    log.stderr(
        "Traceback (most recent call last):",
        *_frames([*_CLI_FRAMES, *_TO_ENGINE_CLIENT, *_API_TAIL]),
        ENGINE_INIT_FAILED,
    )


def uvicorn_access_line(
    peer: str, method: str, path: str, version: str, status: int, phrase: str
) -> str:
    """uvicorn's access log line, as the captures show it (no vLLM prefix)."""
    return f'INFO:     {peer} - "{method} {path} HTTP/{version}" {status} {phrase}'
