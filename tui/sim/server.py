"""One simulated ``vllm serve`` run: start-up log, config and memory checks, serving, shutdown.

The start-up plays vLLM's sequence (reference 2.1-2.3, ``startup_eager_kv64M.log``): banner
and ``non-default args``, the port bound but not listening, config validation
(:func:`~tui.sim.startup.check_command`), EngineCore's stages
(:class:`~tui.sim.startup.EngineStartup`), the static LoRA adapters, then ``Starting vLLM
server on`` and only then the socket starts listening, so ``/health`` is refused until the
engine is ready, as with vLLM. Failures print vLLM's texts in vLLM's shapes and return exit
code 1. SIGTERM/SIGINT abort in-flight requests and return 0.
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

from tui.sim.api_context import ApiContext
from tui.sim.argv import SimCommand, non_default_args
from tui.sim.build import build_engine, build_tokenizer
from tui.sim.engine import AsyncEngine
from tui.sim.http import ROUTES, build_app, dev_routes, running_app
from tui.sim.logs import (
    VllmLog,
    api_init_traceback,
    banner,
    bind_error_traceback,
    config_error_traceback,
)
from tui.sim.lora import adapter_rank_error
from tui.sim.memory import ResolvedConfig
from tui.sim.startup import (
    API,
    ENGINE,
    T_API_INIT,
    T_ENGINE_SPAWN,
    Checked,
    EngineStartup,
    check_command,
    config_notes,
    engine_config_line,
    sim_notes,
)
from tui.sim.tokenizer import Tokenizer
from tui.sim.validation import ConfigError
from tui.sim.versions import has_per_request_metrics

__all__ = ["SimServer", "non_default_args", "system_fingerprint"]


def system_fingerprint(command: SimCommand, cfg: ResolvedConfig) -> str | None:
    """``system_fingerprint`` per ``--fingerprint-mode`` (``serve/utils/fingerprint.py``).

    ``full``: ``vllm-0.32.0[-tpN][-ppN]-<hash8>``; the hash stands for vLLM's
    ``compute_hash()`` of the config (here: of the resolved flags and model).
    """
    mode, value = command.frontend.fingerprint
    if mode == "none":
        return None
    if mode == "custom":
        return value
    hash8 = hashlib.sha256(repr((command.parsed.model, cfg.flags)).encode()).hexdigest()[:8]
    parts = [f"vllm-{command.sim.vllm_version}"]
    if mode == "full":
        if cfg.tensor_parallel_size > 1:
            parts.append(f"tp{cfg.tensor_parallel_size}")
        if cfg.pipeline_parallel_size > 1:
            parts.append(f"pp{cfg.pipeline_parallel_size}")
    parts.append(hash8)
    return "-".join(parts)


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

    def _stopped_during_startup(self) -> int:
        self.log.info(
            ENGINE,
            self.log.src("core.signal"),
            f"[shutdown] EngineCore: trigger received signal={self._signal_name}",
        )
        return 0

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
        for line in banner(cmd.parsed.model or "", cmd.sim.vllm_version):
            log.info(API, log.src("api.banner"), line)
        log.info(API, log.src("api.non_default_args"), f"non-default args: {non_default_args(cmd)}")
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
            self.log.stderr(
                *bind_error_traceback(
                    self.log.version, "OverflowError: bind(): port must be 0-65535."
                )
            )
            return None
        except (OSError, UnicodeError, ValueError) as exc:
            sock.close()
            self.log.stderr(*bind_error_traceback(self.log.version, self._bind_error_text(exc)))
            return None
        self.port = sock.getsockname()[1]
        return sock

    @staticmethod
    def _bind_error_text(exc: Exception) -> str:
        if isinstance(exc, socket.gaierror):
            return f"socket.gaierror: [Errno {exc.errno}] {exc.strerror}"
        if isinstance(exc, OSError):
            code = exc.errno or errno.EADDRINUSE
            return f"OSError: [Errno {code}] {os.strerror(code)}"
        return f"{type(exc).__name__}: {exc}"

    def _config_failure(self, error: ConfigError) -> int:
        self.log.stderr(
            *config_error_traceback(
                self.log.version, error.config, error.lines(self.command.parsed.model or "")
            )
        )
        return 1

    async def _start_and_serve(self, sock: socket.socket) -> int:
        cmd, log = self.command, self.log
        checked = check_command(cmd)
        if checked.entry is not None:
            log.info(
                API,
                log.src("model.architecture"),
                f"Resolved architecture: {checked.entry.architecture}",
            )
        if checked.max_len_shown is not None:
            log.info(
                API, log.src("model.max_model_len"), f"Using max model len {checked.max_len_shown}"
            )
        if checked.error is not None:
            return self._config_failure(checked.error)
        cfg, plan = checked.cfg, checked.plan
        assert cfg is not None and plan is not None
        config_notes(log, cmd, cfg)
        tokenizer, note = build_tokenizer(cmd, cfg, checked.folder)
        sim_notes(log, cmd, note, tokenizer.exact)
        if await self._pause(T_API_INIT):
            return self._stopped_during_startup()
        log.info(ENGINE, log.src("core.init.config"), engine_config_line(cmd, cfg))
        if await self._pause(T_ENGINE_SPAWN):
            return self._stopped_during_startup()
        startup = EngineStartup(log, cmd, cfg, plan, self._pause, lambda: self._signal_name)
        outcome = await startup.run()
        if outcome is not None:
            return outcome
        return await self._serve(sock, checked, tokenizer)

    def _load_loras(self) -> int | None:
        """The static ``--lora-modules`` (``models/serving.py:124-139``); 1 if one fails."""
        lora = self.command.frontend.lora
        for module in lora.modules:
            if lora.enabled:
                problem = adapter_rank_error(module, lora.max_lora_rank)
            else:
                problem = (
                    f"Got lora_request LoRARequest(lora_name='{module.name}', lora_int_id=1, "
                    f"lora_path='{module.path}') but LoRA is not enabled!"
                )
            if problem is not None:
                self.log.stderr(*api_init_traceback(self.log.version, f"ValueError: {problem}"))
                return 1
            self.log.info(
                API,
                self.log.src("serving.lora_loaded"),
                f"Loaded new LoRA adapter: name '{module.name}', path '{module.path}'",
            )
        return None

    def _context(self, checked: Checked, tokenizer: Tokenizer, engine: AsyncEngine) -> ApiContext:
        cmd, cfg, plan = self.command, checked.cfg, checked.plan
        assert cfg is not None and plan is not None
        front = cmd.frontend
        return ApiContext(
            engine=engine,
            metrics=engine.metrics,
            tokenizer=tokenizer,
            served_name=cfg.flags.served_model_name or cmd.parsed.model or "",
            model_path=cmd.parsed.model or "",
            max_model_len=plan.max_model_len,
            max_logprobs=cfg.max_logprobs,
            api_key=front.api_key,
            load_tracking=front.load_tracking,
            dev_mode=os.environ.get("VLLM_SERVER_DEV_MODE") == "1",
            fixed=cmd.sim.fixed,
            loras={m.name: m for m in front.lora.modules} if front.lora.enabled else {},
            log=self.log,
            log_requests=front.log_requests,
            fingerprint=system_fingerprint(cmd, cfg),
            per_request_metrics=has_per_request_metrics(cmd.sim.vllm_version)
            and bool(front.values.get("enable_per_request_metrics")),
        )

    def _log_ready(self, ctx: ApiContext) -> None:
        log = self.log
        log.info(API, log.src("entry.supported_tasks"), "Supported tasks: ['generate']")
        if ctx.dev_mode:
            log.warning(
                API,
                log.src("serve.dev_endpoints"),
                "SECURITY WARNING: Development endpoints are enabled! This should NOT be used "
                "in production!",
            )
        if ctx.log_requests:
            log.info(
                API,
                log.src("request_logger.limited"),
                "`--enable-log-requests` is set but the minimum log level is higher than DEBUG. "
                "Only limited information will be logged to minimize overhead. To view more "
                "details, set `--log-level DEBUG`.",
            )

    async def _serve(self, sock: socket.socket, checked: Checked, tokenizer: Tokenizer) -> int:
        log, cmd = self.log, self.command
        cfg, plan = checked.cfg, checked.plan
        assert cfg is not None and plan is not None
        engine = build_engine(cmd, cfg, plan, tokenizer, log)
        self.engine = engine
        ctx = self._context(checked, tokenizer, engine)
        self._log_ready(ctx)
        failed = self._load_loras()
        if failed is not None:
            return failed
        host = cmd.parsed.values.get("host")
        log.info(
            API,
            log.src("entry.starting"),
            f"Starting vLLM server on http://{host or '0.0.0.0'}:{self.port}",
        )
        log.info(API, log.src("launcher.routes"), "Available routes are:")
        for path, method in [*ROUTES, *(dev_routes() if ctx.dev_mode else [])]:
            log.info(API, log.src("launcher.route"), f"Route: {path}, Methods: {method}")
        engine.start()
        return await self._run_http(ctx, sock, engine)

    async def _run_http(self, ctx: ApiContext, sock: socket.socket, engine: AsyncEngine) -> int:
        log, cmd = self.log, self.command
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
                    log.src("launcher.shutting_down"),
                    "[shutdown] API server: shutting down FastAPI HTTP server",
                )
                log.stderr("INFO:     Shutting down")
        finally:
            if cmd.sim.fixed is not None:
                gc.unfreeze()
            with contextlib.suppress(Exception):  # already stopped above unless we unwind
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
        log.info(
            API, log.src("launcher.shutdown_triggered"), "[shutdown] API server: shutdown triggered"
        )
        log.info(
            API,
            log.src("launcher.shutdown_handle"),
            f"[shutdown] API server: stopping engine client mode={mode} timeout={timeout}s",
        )
        log.info(
            ENGINE,
            log.src("core.signal"),
            f"[shutdown] EngineCore: trigger received signal={self._signal_name}",
        )
        log.info(
            ENGINE,
            log.src("core.shutdown.start"),
            f"[shutdown] EngineCore: start mode={mode} timeout={timeout}s",
        )
        in_flight = self.engine.num_in_flight if self.engine else 0
        if in_flight:
            log.info(
                ENGINE,
                log.src("core.shutdown.abort"),
                f"[shutdown] EngineCore: aborting {in_flight} in-flight request(s)",
            )
        log.info(
            ENGINE, log.src("core.shutdown.exit_loop"), "[shutdown] EngineCore: exiting busy loop"
        )
        log.info(
            API, log.src("launcher.engine_stopped"), "[shutdown] API server: engine client stopped"
        )
        log.info(
            API,
            log.src("launcher.http_shutdown"),
            "[shutdown] API server: signalling HTTP server shutdown",
        )
