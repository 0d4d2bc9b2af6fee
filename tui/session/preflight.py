"""Pre-flight: what can be told about a flag set before launching it, off the event loop.

The KV estimate reads the device (NVML, psutil) and the model's config (disk, the HF cache)
and the installed vLLM's flag list comes from its own Python: all of it blocks, so all of
it runs in a worker thread, never on the loop the console draws with. An estimate is
advice: if it fails, the launch goes on without it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from tui.domain.errors import one_line
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.vllm_cli import VllmCli
from tui.domain.preflight import KvEstimate

logger = logging.getLogger(__name__)

Estimator = Callable[[ServeFlags], KvEstimate | None]
"""``flags -> estimate`` (``tui.server.kv_estimator.KvEstimator``): blocking, run in a thread."""
CliLoader = Callable[[], VllmCli]
"""Reads the installed vLLM's flags (``tui.server.introspect``): blocking, slow the first time."""

CHUNKED_PREFILL_OFF = "chunked prefill off: vLLM raises max_num_batched_tokens to max_model_len"


class Preflight:
    """Checks flags before launch: the KV estimate and the installed vLLM's own options."""

    def __init__(self, estimator: Estimator | None = None, cli: CliLoader | None = None) -> None:
        self._estimator = estimator
        self._cli_loader = cli
        self._cli_task: asyncio.Task[None] | None = None
        self.vllm_cli: VllmCli | None = None
        self.vllm_cli_error: str | None = None

    def load_cli(self) -> None:
        """Start reading the installed vLLM's flags in the background (once)."""
        if self._cli_loader is not None and self._cli_task is None:
            self._cli_task = asyncio.create_task(self._load_cli(), name="vtc-vllm-cli")

    async def wait_cli(self) -> VllmCli | None:
        """The flag list once loaded (``None`` if unavailable)."""
        if self._cli_task is not None:
            await asyncio.shield(self._cli_task)
        return self.vllm_cli

    async def estimate(self, flags: ServeFlags) -> KvEstimate | None:
        """The KV estimate for ``flags`` (in a thread); ``None`` when it cannot tell or fails."""
        if self._estimator is None:
            return None
        try:
            return await asyncio.to_thread(self._estimator, flags)
        except Exception as exc:  # an estimate is advice: it must never block a launch
            logger.warning("pre-flight estimate failed: %s", one_line(exc))
            return None

    async def check(self, flags: ServeFlags) -> list[str]:
        """Warnings about ``flags``: chunked prefill, the KV estimate, options vLLM rejects."""
        warnings = []
        if flags.enable_chunked_prefill is False and flags.max_num_batched_tokens is None:
            warnings.append(CHUNKED_PREFILL_OFF)
        if self._estimator is not None:
            try:
                estimate = await asyncio.to_thread(self._estimator, flags)
            except Exception as exc:  # shown in the form, never raised into it
                warnings.append(f"pre-flight check failed: {one_line(exc)}")
            else:
                if estimate is not None:
                    warnings.extend(estimate.warnings)
        if self.vllm_cli is not None:
            # one warning per option the installed vLLM would reject (exit 2 before startup)
            warnings.extend(p.message for p in self.vllm_cli.problems(flags.to_argv()))
        return warnings

    async def aclose(self) -> None:
        """Stop waiting for the flag list (its thread ends on its own, within its timeout)."""
        if self._cli_task is not None:
            self._cli_task.cancel()

    async def _load_cli(self) -> None:
        assert self._cli_loader is not None
        try:
            self.vllm_cli = await asyncio.to_thread(self._cli_loader)
        except Exception as exc:  # IntrospectError and kin: the console works without it
            self.vllm_cli_error = one_line(exc).splitlines()[0]
