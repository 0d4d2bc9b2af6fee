"""Generate a vLLM release's log sites from its package's source.

Usage (``VLLM_DIR``: the ``vllm`` package of a venv with that release, e.g. the parser env
of ``python -m tui.server.parser_env 0.33.0``)::

    python tools/gen_vllm_log_sites.py VLLM_DIR 0.33.0 --write

Each site of :mod:`tui.domain.vllm_log_sites_0_32` is looked up by what it says, never by
its number: the text of the frame's code, or a literal piece of the record's message, in
the named function, in the file of the same name (or, when the release moved it, any file
of the package). A traceback frame is that line; a log record is the line that calls the
logger (Python reports a multi-line call at its first line). ``--write`` puts the table in
``tui/domain/vllm_log_sites_<major>_<minor>.py`` (the release's record then names it; run
``ruff format`` on it);
without it, the table goes to stdout. A site not found is named on stderr and kept at its
0.32 line (a text the release no longer logs); look at the release's source: where the
text only moved or changed, adjust its needle here.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from pathlib import Path

from tui.domain.vllm_log_sites import Site
from tui.domain.vllm_log_sites_0_32 import SITES
from tui.domain.vllm_release import series

# name -> (function, needle): the site is the line in ``function`` (any, when "") that holds
# ``needle``; "code\nanchor": the nearest line holding the code above the anchor's.
FRAMES: dict[str, tuple[str, str]] = {
    "cli.main": ("main", "args.dispatch_function(args)"),
    "cli.serve": ("cmd", "uvloop.run(run_server(args))"),
    "entry.run_server.setup_server": ("run_server", "setup_server(args, reuse_port=False)"),
    "entry.run_server.worker": ("run_server", "await run_server_worker("),
    "entry.worker.engine_client": ("run_server_worker", "async with build_async_engine_client("),
    "entry.worker.init_app_state": ("", "await init_app_state(engine_client, app.state"),
    "entry.engine_client": (
        "build_async_engine_client",
        "async with build_async_engine_client_from_engine_args(",
    ),
    "entry.from_args.create_config": (
        "build_async_engine_client_from_engine_args",
        "engine_args.create_engine_config(",
    ),
    "entry.from_args.async_llm": (
        "build_async_engine_client_from_engine_args",
        "AsyncLLM.from_vllm_config(",
    ),
    "app_state.init_static_loras": ("init_app_state", "init_static_loras()"),
    "serving.init_static_loras.raise": ("init_static_loras", "raise ValueError("),
    "launcher.setup_server.socket": ("setup_server", "create_server_socket("),
    "launcher.create_server_socket.bind": ("create_server_socket", "sock.bind("),
    "args.engine_config.model": ("create_engine_config", "self.create_model_config()"),
    "args.model_config": ("create_model_config", "return ModelConfig("),
    "args.engine_config.cache": ("create_engine_config", "cache_config = CacheConfig("),
    "args.engine_config.parallel": ("create_engine_config", "parallel_config = ParallelConfig("),
    "args.engine_config.offload": ("create_engine_config", "offload_config = OffloadConfig("),
    "args.engine_config.scheduler": (
        "create_engine_config",
        "scheduler_config = SchedulerConfig(",
    ),
    "args.engine_config.lora": ("create_engine_config", "LoRAConfig("),
    "args.engine_config.vllm": ("create_engine_config", "config = VllmConfig("),
    "core.run_engine_core.proc": ("run_engine_core", "engine_core = EngineCoreProc("),
    "core.run_engine_core.raise": ("run_engine_core", "raise e"),
    "otel.sync_wrapper": ("sync_wrapper", "return func(*args, **kwargs)"),
    "core.proc_init.super": ("__init__", "super().__init__("),
    "core.init.executor": ("__init__", "self.model_executor = executor_class(vllm_config)"),
    "core.init.kv_caches": ("__init__", "self._initialize_kv_caches(vllm_config)"),
    "core.kv_caches.available_memory": (
        "_initialize_kv_caches",
        "self.model_executor.determine_available_memory()",
    ),
    "core.kv_caches.configs": ("_initialize_kv_caches", "get_kv_cache_configs("),
    "core.kv_caches.initialize": (
        "_initialize_kv_caches",
        "self.model_executor.initialize_from_config(",
    ),
    "async_llm.from_vllm_config": ("from_vllm_config", "return cls("),
    "async_llm.init.engine_core": ("__init__", "EngineCoreClient.make_async_mp_client("),
    "core_client.make_async_mp_client": ("make_async_mp_client", "return AsyncMPClient("),
    "core_client.async_mp.super": ("__init__", "super().__init__("),
    "core_client.mp.launch": ("__init__", "with launch_core_engines("),
    "engine_utils.launch_core_engines": ("launch_core_engines", "wait_for_engine_startup("),
    "engine_utils.wait_for_engine_startup": ("wait_for_engine_startup", "raise RuntimeError("),
    "abstract.init.init_executor": ("__init__", "self._init_executor()"),
    "abstract.initialize_from_config": ("initialize_from_config", '"initialize_from_config"'),
    "uniproc.init_device": ("_init_executor", "self.driver_worker.init_device()"),
    "uniproc.load_model": ("_init_executor", "self.driver_worker.load_model()"),
    "worker.init_device.make_runner": ("", "self._make_model_runner()"),
    "worker.make_model_runner": ("_make_model_runner", "return GPUModelRunnerV2("),
    "worker.load_model": ("load_model", "self.model_runner.load_model("),
    "worker.available_memory.profile_run": (
        "determine_available_memory",
        "self.model_runner.profile_run(",
    ),
    "worker.initialize_from_config": (
        "initialize_from_config",
        "self.model_runner.initialize_kv_cache(",
    ),
    "runner.load_model.raise": ("load_model", "raise e"),
    "runner.dummy_sampler_run.raise": ("_dummy_sampler_run", "raise RuntimeError("),
    "runner.initialize_kv_cache": ("initialize_kv_cache", "prepare_kernel_block_sizes("),
    "worker_utils.select_common_block_size.raise": (
        "select_common_block_size",
        "raise ValueError(",
    ),
    "buffer_utils.uva.raise": ("__init__", 'raise RuntimeError("UVA is not available")'),
    "kv.check.call": ("get_kv_cache_configs", "_check_enough_kv_cache_memory("),
    "kv.check.raise": (
        "_check_enough_kv_cache_memory",
        "raise ValueError(\nTo serve at least one request",
    ),
}

# name -> (function, a literal piece of the message): the site is the logger call's line.
RECORDS: dict[str, tuple[str, str]] = {
    "kv.auto_fit.kept": ("", "full model context length"),
    "kv.auto_fit.reduced": ("", "Auto-fit max_model_len: reduced"),
    "kv.capacity": ("", "KV cache size"),
    "awq_marlin.convertible": ("", "is convertible to"),
    "gptq_marlin.convertible": ("", "is convertible to"),
    "config.enforce_eager": ("", "disabling torch.compile, CUDAGraphs, and"),
    "config.async_scheduling": ("", "Asynchronous scheduling is enabled"),
    "scheduler.chunked_prefill": ("", "Chunked prefill is enabled"),
    "scheduler.batched_tokens_exceed": ("", "exceeds max_num_seqs "),
    "model.architecture": ("", "Resolved architecture"),
    "model.max_model_len": ("", "Using max model len"),
    "core.init.config": ("", "Initializing a V1 LLM engine"),
    "core.signal": ("", "trigger received signal"),
    "core.kv_caches.took": ("", 'warmup model) took %.2f s"'),
    "core.failed_to_start": ("", "EngineCore failed to start."),
    "core.shutdown.start": ("", "EngineCore: start mode"),
    "core.shutdown.abort": ("", "EngineCore: aborting in-flight"),
    "core.shutdown.exit_loop": ("", "exiting busy loop"),
    "runner.load_model.start": ("", "Starting to load model"),
    "runner.load_model.error": ("load_model", "logger.error("),
    "runner.load_model.took": ("", "Model loading took"),
    "runner.cudagraph.profiling": ("", "Profiling CUDA graph memory"),
    "runner.cudagraph.estimate": ("", "Estimated CUDA graph memory"),
    "runner.cudagraph.captured": ("", "Graph capturing finished in"),
    "cuda.attention_backend": ("", "attention backend out of potential"),
    "marlin_fp8.weight_only": ("", "does not have native support for FP8"),
    "loader.weights_took": ("", "Loading weights took"),
    "punica.wrapper": ("", "Using %s."),
    "compile.cache_dir": ("", "Using cache directory"),
    "compile.dynamo": ("", "Dynamo bytecode transform time"),
    "compile.graph": ("", "Compiling a graph for compile range"),
    "compile.total": ("", "logger.info(message, log_prefix, total_compile_time)"),
    "compile.warmup": ("", "Initial profiling/warmup run took"),
    "worker.kv_reserved": ("", "KV Cache as specified by kv_cache_memory_bytes"),
    "worker.kv_available": ("", "Available KV cache memory"),
    "worker.cudagraph_profiling": ("", "CUDA graph memory profiling is enabled"),
    "worker.kv_memory_hint": ("", "config with `--kv-cache-memory="),
    "api.banner": ("", "lgr.info(message, version, model_name)"),
    "api.non_default_args": ("", "non-default args"),
    "serving.lora_loaded": ("", "Loaded new LoRA adapter"),
    "entry.supported_tasks": ("", "Supported tasks"),
    "entry.starting": ("", "Starting vLLM server on"),
    "serve.dev_endpoints": ("", "Development endpoints are enabled"),
    "request_logger.limited": ("", "the minimum log level is higher than DEBUG"),
    "request_logger.received": ("", "Received request"),
    "launcher.routes": ("", "Available routes are"),
    "launcher.route": ("", "Route: %s, Methods: %s"),
    "launcher.shutting_down": ("", "API server: shutting"),
    "launcher.shutdown_triggered": ("", "API server: shutdown triggered"),
    "launcher.shutdown_handle": ("", "stopping engine client"),
    "launcher.engine_stopped": ("", "engine client stopped"),
    "launcher.http_shutdown": ("", "signalling HTTP server shutdown"),
    "block_pool.reset": ("", "Successfully reset prefix cache"),
    "block_pool.reset_failed": ("", "Failed to reset prefix cache"),
    "metrics.stats": ("log", "log_fn("),
    "async_llm.added": ("_add_request", "Added request"),
    "cache_router.reset": ("", "Resetting prefix cache"),
}


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _inner(
    funcs: list[ast.FunctionDef | ast.AsyncFunctionDef], line: int
) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    around = [f for f in funcs if f.lineno <= line <= (f.end_lineno or f.lineno)]
    return max(around, key=lambda f: f.lineno, default=None)


def _found(path: Path, func: str, needle: str, record: bool) -> int | None:
    """The line of ``needle`` in ``func`` of ``path`` (for a record: its logger call's)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    funcs = _functions(ast.parse(text))
    code, _, anchor = needle.partition("\n")
    for n, line in enumerate(lines, 1):
        if (anchor or code) not in line:
            continue
        inner = _inner(funcs, n)
        if func and (inner is None or inner.name != func):
            continue
        if anchor:
            return next((b for b in range(n, max(0, n - 4), -1) if code in lines[b - 1]), None)
        if not record:
            return n
        for back in range(n, max(0, n - 6), -1):  # the call's first line
            if _LOGGER.search(lines[back - 1]):
                return back
        for ahead in range(n, min(len(lines), n + 20)):  # msg = (...); logger.info(msg)
            if _LOGGER.search(lines[ahead]):
                return ahead + 1
    return None


_LOGGER = re.compile(r"\b(logger|lgr)\.\w+\(|\blog_fn\(")


def locate(root: Path, name: str, hint: Site) -> Site | None:
    """``name``'s site in the package at ``root`` (the 0.32 site's file first)."""
    record = name in RECORDS
    func, needle = RECORDS[name] if record else FRAMES[name]
    first = root / hint.path
    others = sorted(p for p in root.rglob(Path(hint.path).name) if p != first)
    for path in [first, *others] if first.exists() else others:
        line = _found(path, func, needle, record)
        if line is not None:
            return Site(str(path.relative_to(root)), line)
    for path in sorted(root.rglob("*.py")):  # moved to a file of another name
        if path.name != first.name and needle.split("\n")[-1] in path.read_text(encoding="utf-8"):
            line = _found(path, func, needle, record)
            if line is not None:
                return Site(str(path.relative_to(root)), line)
    return None


def main(argv: list[str]) -> int:
    """Write (or print) the table; 1 when a site is not found."""
    root, version = Path(argv[0]), argv[1]
    found: dict[str, Site] = {}
    missing = []
    for name, hint in SITES.items():
        site = locate(root, name, hint)
        if site is None:
            missing.append(name)
        else:
            found[name] = site
    for name in missing:
        print(f"not found: {name} ({SITES[name].path}); kept from 0.32", file=sys.stderr)
    module = render(version, found, missing)
    if "--write" in argv:
        target = Path(__file__).resolve().parent.parent / "tui" / "domain"
        target /= f"vllm_log_sites_{series(version).replace('.', '_')}.py"
        target.write_text(module, encoding="utf-8")
    else:
        print(module)
    return 0


def _q(text: str) -> str:
    return json.dumps(text)  # ruff's quotes


def render(version: str, found: dict[str, Site], missing: list[str]) -> str:
    """The generated module's text: the sites found, then the ones kept from 0.32 (the
    release no longer logs that text; the simulator still prints it)."""
    rows = "\n".join(f"        {_q(name)}: ({_q(s.path)}, {s.line})," for name, s in found.items())
    kept = "".join(f"\n    {_q(name)}," for name in missing)
    return (
        f'"""vLLM {version}\'s log sites, generated by ``tools/gen_vllm_log_sites.py`` from its\n'
        'package: do not edit."""\n\n'
        "from __future__ import annotations\n\n"
        "from typing import Final\n\n"
        "from tui.domain.vllm_log_sites import LogSites, sites\n"
        "from tui.domain.vllm_log_sites_0_32 import SITES as OLDER\n\n"
        f"KEPT_FROM_0_32: Final = ({kept}\n)\n"
        '"""Texts this release no longer logs: their 0.32 sites."""\n\n'
        f"SITES: Final[LogSites] = sites(\n    {{\n{rows}\n    }}\n)"
        " | {name: OLDER[name] for name in KEPT_FROM_0_32}\n"
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
