"""Launching servers: :class:`ProcessLauncher` (the session's ``Launcher``).

Each launch makes a :class:`~tui.server.launched.LaunchedServer`: the server runs in its
own session and process group, its merged stdout/stderr goes to a log relay that writes the
log file and tees the lines to the console (:mod:`tui.server.spawn`), and one task watches
it. Events, in order, for one start (the sink given to :meth:`ProcessLauncher.launch`
receives each):

- pre-launch port check fails: ``Failed(port_in_use)`` only; nothing is launched.
- launched: ``Launched``, ``StageReached(LAUNCHING)``, then ``LogLine`` per line, with
  ``StageReached``/``KvCacheReported`` as the log shows them.
- ready: ``StageReached(READY)``, ``Ready``. Readiness is: our own process alive AND
  ``/health`` answers 200 AND (when the prober can list models) ``/v1/models`` lists the
  model; plus no process outside our tree is the one listening on the port. Probed at once,
  then every poll interval, and every 50 ms once the log says "Starting vLLM server on".
- exit before ready: ``Failed(diagnose(log, flags, exit_code))`` as soon as the process
  exits (not at a timeout), diagnosed from what it wrote before it exited; any leftover
  children are killed after that (``wait_settled()``, ``stop()`` and ``wait_finished()``
  return once they are).
- no ready within ``startup_timeout_s``: the tree is killed, then ``Failed`` of kind
  ``unknown`` naming the stage it was stuck in (or the log's own diagnosis if it has one).
- exit on its own after ready: ``Failed`` first when the exit looks like a failure (the log
  diagnoses to a known kind, or the exit code is not 0; vLLM exits 0 when its engine died,
  so the log decides too), then, once the leftovers are killed, ``Exited(requested=False)``.
  State ends FAILED or STOPPED.
- ``stop()``: ``Exited(requested=True)``; state STOPPED.
- ``detach()``: no event; the server and its relay run on, the log file keeps growing.

What ends a server is what happened first: an exit before the console's request is reported
as that exit (with its cause), a request before the exit as requested.

Secrets (``VLLM_API_KEY``, ``HF_TOKEN``...) travel in ``env`` only, never in argv, and
their values are redacted from every stored log line. Launched servers listen on
:data:`DEFAULT_HOST` (loopback) unless the flags (or the extra arguments) set a host.

"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from tui.domain.diagnosis import FixChecker
from tui.domain.flags.serve import LAUNCH_HOST, ServeFlags
from tui.server.backend import EventSink
from tui.server.health_watch import HEALTH_INTERVAL_S
from tui.server.launched import LaunchedServer, LaunchSettings
from tui.server.logbuffer import DEFAULT_MAX_LINES
from tui.server.probe import HealthProber, HttpxProber
from tui.server.process import STOP_GRACE_S

DEFAULT_HOST = LAUNCH_HOST  # declared with the flags (the form shows it as the default)
"""Where a launched server listens unless the operator sets ``--host``: the console only
needs loopback, and vLLM's own default (all interfaces) would expose it to the network."""


def _sets_host(args: Sequence[str]) -> bool:
    return any(a == "--host" or a.startswith("--host=") for a in args)


def with_default_host(
    flags: ServeFlags, extra_args: Sequence[str] = (), host: str | None = DEFAULT_HOST
) -> ServeFlags:
    """``flags`` with ``host`` when neither they nor ``extra_args`` name a host."""
    if host is None or flags.host is not None:
        return flags
    if _sets_host(flags.extra_args) or _sets_host(extra_args):
        return flags
    # Only the host changes, to vtc's own constant: the rest is judged by the launch gate
    # (``ServerSlot.ensure_valid``), not here, so flags built unchecked pass through as given.
    return flags.model_copy(update={"host": host})


class ProcessLauncher:
    """Launches ``vllm serve`` (or ``vtc-sim serve``) servers; one ``LaunchedServer`` each.

    ``command`` is the executable prefix (``["vllm"]``, ``["/venv/bin/vllm"]``, the
    simulator); the argv is ``[*command, "serve", *flags.to_argv(), *extra_args]``. ``env``
    is merged over ``os.environ`` and the run's own environment (``flags.env``, its
    configuration: ``VLLM_USE_V2_MODEL_RUNNER=0``...) at each launch, last, so the
    launcher's credentials and a lane's ``CUDA_VISIBLE_DEVICES`` win; secrets go there.
    ``prober`` asks for readiness (default: :class:`HttpxProber` with ``VLLM_API_KEY`` from
    the merged environment, closed by :meth:`aclose`). ``default_host``: see :data:`DEFAULT_HOST`
    (``None``: vLLM's own default).
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        log_dir: Path,
        env: Mapping[str, str] | None = None,
        prober: HealthProber | None = None,
        startup_timeout_s: float = 900,
        grace_s: float = STOP_GRACE_S,
        poll_interval_s: float = 0.25,
        default_host: str | None = DEFAULT_HOST,
        max_log_lines: int = DEFAULT_MAX_LINES,
        fix_check: FixChecker | None = None,
        health_interval_s: float = HEALTH_INTERVAL_S,
    ) -> None:
        if isinstance(command, str) or not command:
            raise ValueError("command must be a non-empty argv list, e.g. ['vllm']")
        if startup_timeout_s <= 0 or grace_s < 0 or poll_interval_s <= 0:
            raise ValueError("startup_timeout_s and poll_interval_s must be > 0, grace_s >= 0")
        self.settings = LaunchSettings(
            command=tuple(command),
            env=dict(env or {}),
            log_dir=Path(log_dir),
            startup_timeout_s=startup_timeout_s,
            grace_s=grace_s,
            poll_interval_s=poll_interval_s,
            max_log_lines=max_log_lines,
            fix_check=fix_check,
            health_interval_s=health_interval_s,
        )
        self.default_host = default_host
        self._own_prober = prober is None
        api_key = {**os.environ, **self.settings.env}.get("VLLM_API_KEY")
        self._prober: HealthProber = prober or HttpxProber(api_key=api_key)

    def argv(self, flags: ServeFlags, extra_args: Sequence[str] = ()) -> tuple[str, ...]:
        """What a launch of ``flags`` executes."""
        return (*self.settings.command, "serve", *flags.to_argv(), *extra_args)

    async def launch(
        self, flags: ServeFlags, on_event: EventSink, *, extra_args: Sequence[str] = ()
    ) -> LaunchedServer:
        """Launch ``flags``; returns once launched or refused (a ``Failed`` event says why).

        Only a validated :class:`ServeFlags` is accepted, so an invalid flag set can never
        reach a launch.
        """
        server = self.prepare(flags, on_event, extra_args=extra_args)
        await server.begin()
        return server

    def prepare(
        self, flags: ServeFlags, on_event: EventSink, *, extra_args: Sequence[str] = ()
    ) -> LaunchedServer:
        """The server :meth:`launch` would start, not started yet (``begin()`` starts it).

        For a caller that needs the backend in hand before its first event arrives (the
        launch's own events come before :meth:`launch` returns).
        """
        if not isinstance(flags, ServeFlags):
            raise TypeError(f"launch() takes ServeFlags, not {type(flags).__name__}")
        if isinstance(extra_args, str):
            raise TypeError("extra_args must be a sequence of arguments, not a string")
        flags = with_default_host(flags, extra_args, self.default_host)
        return LaunchedServer(
            flags, self.argv(flags, extra_args), self.settings, self._prober, on_event
        )

    async def aclose(self) -> None:
        """Close the default prober (servers it launched are not touched)."""
        if self._own_prober and isinstance(self._prober, HttpxProber):
            await self._prober.aclose()
