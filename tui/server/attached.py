"""``vtc --attach URL``: watch and load a server this console did not start.

:class:`AttachedServer` is the session's backend (an ``ExistingServer``) for a server
somebody else runs: it asks ``GET /health`` once a second (``/v1/models`` for the model id)
and reports the transitions as the usual events, ``Ready`` (``timed=False``) when
``/health`` answers 200 and ``Exited`` when it stops answering. Its capabilities say it can
be neither stopped nor detached and is not local (its pids mean nothing here); it never
signals anything. What it saw (the model, a server that stopped answering) goes to
:attr:`~AttachedServer.log_lines` as ``[vtc]`` lines.
"""

from __future__ import annotations

import logging
import time
import urllib.parse
from typing import Protocol

from tui.domain.events import Exited, LogLine, Ready, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.server_config import ServerConfig
from tui.domain.url_credentials import UrlCredential, split_url
from tui.server.backend import ATTACHED_REMOTE, EventSink, Takeover
from tui.server.probe import HealthProber
from tui.server.watching import WatchedServer, wait_first

logger = logging.getLogger(__name__)

UNKNOWN_MODEL = "unknown"
"""The model id used when ``/v1/models`` gives none (e.g. it wants an API key we lack)."""


def attach_url(url: str) -> str:
    """``url`` as the base URL of a vLLM server (``http://host:8000``); ``ValueError`` if not one.

    A trailing ``/`` and a trailing ``/v1`` (an OpenAI client's base URL) are dropped: the
    console adds ``/health``, ``/metrics`` and ``/v1/...`` itself.
    """
    text, _ = split_url(url)  # a user:password never reaches a label, a record or a message
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"--attach needs a server URL like http://host:8000, got {text!r}")
    if parsed.query or parsed.fragment:
        raise ValueError(f"--attach needs a plain server URL (no ?query or #fragment): {text!r}")
    try:
        parsed.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise ValueError(f"--attach: bad port in {text!r}: {exc}") from exc
    path = parsed.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return f"{parsed.scheme}://{parsed.netloc}{path}"


class ConfigReader(Protocol):
    """Reads a server's effective configuration (``tui.server.attached_config`` has one)."""

    async def read(self, url: str, fallback_model: str) -> ServerConfig:
        """What the server (and its log) say; never raises, notes what it could not read."""
        ...


class AttachedServer(WatchedServer):
    """A server at a URL that this console watches and loads but does not own."""

    label = "attached"
    """The label of the board card the session makes for it."""

    def __init__(
        self,
        url: str,
        *,
        prober: HealthProber | None = None,
        api_key: str | None = None,
        poll_interval_s: float = 1.0,
        config_reader: ConfigReader | None = None,
        credential: UrlCredential | None = None,
    ) -> None:
        if poll_interval_s <= 0:
            raise ValueError(f"poll_interval_s must be > 0, got {poll_interval_s}")
        super().__init__(
            ATTACHED_REMOTE,
            prober=prober,
            api_key=api_key,
            max_log_lines=1000,
            credential=credential,
        )
        self._url = attach_url(url)
        self._poll_s = poll_interval_s
        self._model: str | None = None
        self._models: list[str] | None = None  # what /v1/models listed (None: not asked yet)
        self._last_note = ""
        self._t0 = time.monotonic()
        self._reader = config_reader
        self._config: ServerConfig | None = None

    # -- what the session reads -------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        """Always ``None``: the process is not this console's (it may be on another host)."""
        return None

    @property
    def base_url(self) -> str:
        """The server's URL, as attached."""
        return self._url

    @property
    def model(self) -> str | None:
        """The model id ``/v1/models`` listed, once known."""
        return self._model

    @property
    def config(self) -> ServerConfig | None:
        """Its effective configuration as last read (``None``: not read, or no reader)."""
        return self._config

    # -- the session's commands -------------------------------------------------------------
    async def connect(self, on_event: EventSink) -> Takeover:
        """A first look (no events yet): the state, and the flags the board card shows."""
        self._sink = on_event
        self._t0 = time.monotonic()
        await self._probe(quiet=True)
        flags = ServeFlags(model=self._model or UNKNOWN_MODEL)
        if self._state is ServerState.READY and await self._read_config():
            assert self._config is not None
            flags = self._config.flags
        return Takeover(flags=flags, run_id=None, label=self.label)

    def watch(self) -> None:
        """Report what :meth:`connect` saw, then poll every ``poll_interval_s`` (a task)."""
        self._start(self._run, "vtc-attached-server")

    async def stop(self) -> None:
        """Nothing: vtc did not start this server and never stops it (``can_stop`` is False)."""

    async def detach(self) -> bool:
        """Nothing to leave running: this console never owned the server."""
        return False

    # -- the lifecycle ----------------------------------------------------------------------
    def _note(self, text: str) -> None:
        """Log what changed (once: the same observation every second is not news)."""
        if text != self._last_note:
            self._last_note = text
            line = self._log.append(f"[vtc] {text}")
            self._emit(LogLine(text=line))

    async def _probe(self, *, quiet: bool = False) -> None:
        """Ask ``/health`` (and ``/v1/models`` until it names a model); note what changed.

        ``quiet`` (the first look, before the console shows anything) only sets the state:
        the watcher notes it, so every ``[vtc]`` line reaches the log panel exactly once.
        """
        status = await self._prober.health(self._url)
        if status != 200:
            self._set_state(ServerState.STOPPED)
            if not quiet:
                why = "no answer" if status is None else f"HTTP {status}"
                self._note(f"{self._url}/health: {why}: the server is not serving")
            return
        if self._models is None:
            self._models = await self._prober.models(self._url) or []
            if self._models:
                self._model = self._models[0]
        self._set_state(ServerState.READY)
        if quiet:
            return
        if self._model is not None:
            others = self._models[1:] if self._models else []
            more = f" (also {', '.join(others)})" if others else ""
            self._note(f"{self._url}/health: 200: serving {self._model}{more}")
        else:
            self._models = None  # ask again next time
            self._note(
                f"{self._url}/v1/models lists no model (an API key? set VLLM_API_KEY): "
                f"load runs name the model {UNKNOWN_MODEL!r}"
            )

    async def _read_config(self) -> bool:
        """Read the server's configuration (when a reader was given); whether it was read."""
        if self._reader is None:
            return False
        self._config = await self._reader.read(self._url, self._model or UNKNOWN_MODEL)
        return True

    def _note_config(self) -> None:
        config = self._config
        if config is not None:
            self._note(f"read from the server: {config.summary()}")
            for note in config.notes:
                self._note(f"not read: {note}")

    def _ready(self) -> Ready:
        return Ready(elapsed=time.monotonic() - self._t0, timed=False)

    async def _run(self) -> None:
        if self._state is ServerState.READY:
            self._note_config()
            self._emit(self._ready())
        while True:
            # The first notes come a poll after connect(): by then the console shows its
            # log panel (lines sent earlier would also be in the panel's first snapshot).
            await wait_first(self._requests(), timeout_s=self._poll_s)
            if self._requested() is not None:
                return  # released: nothing of ours to stop
            before = self._state
            await self._probe()
            if self._state is ServerState.READY and before is not ServerState.READY:
                # (Re)started: its flags may have changed since the last look.
                if await self._read_config():
                    self._note_config()
                self._emit(self._ready())
            elif before is ServerState.READY and self._state is not ServerState.READY:
                self._emit(Exited(exit_code=None, requested=False))
