"""Reading an attached server's effective configuration from the server itself.

:class:`AttachedConfigReader` asks what the server says about its own configuration
(``/v1/models``, ``vllm:cache_config_info`` on ``/metrics``) and, when the operator named
it (``vtc --attach URL --attach-log FILE``), reads its startup log; the domain's
:func:`~tui.domain.server_config.read_config` joins them. Every request is bounded (the
scrapes' deadline and page cap), the log is read in a worker thread with
``read_log_excerpt``'s bounds, and whatever cannot be read becomes a note, never an error:
an attached server runs whatever this console can read of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx

from tui.domain.server_config import ServerConfig, cache_config_values, models_values, read_config
from tui.server.diagnose.reading import LogView
from tui.server.log_excerpt import LogReadError, read_log_excerpt
from tui.store.bounded_read import parse_json
from tui.telemetry.scrape import ScrapeError, fetch_page, parse_families
from tui.telemetry.vllm_metrics import CACHE_CONFIG_INFO

DEADLINE_S = 10.0  # one read at attach (and after a restart), off the console's loop
MODELS_MAX_BYTES = 256 * 1024  # a /v1/models answer is ~0.5 KB a model


class AttachedConfigReader:
    """Reads the configuration of the server at a URL (and its log, if one was named)."""

    def __init__(
        self, client: Callable[[], httpx.AsyncClient], *, log_path: Path | None = None
    ) -> None:
        self._new_client = client  # one client per read: a read is rare (attach, a restart)
        self._log_path = log_path

    async def read(self, url: str, fallback_model: str) -> ServerConfig:
        """What the server and its log say, joined; what could not be read is in the notes."""
        notes: list[str] = []
        async with self._new_client() as client:
            models = await self._models(client, url, notes)
            metrics = await self._cache_labels(client, url, notes)
        log, engine = await self._log(notes)
        return read_config(
            fallback_model,
            log=log,
            engine=engine,
            metrics=cache_config_values(metrics),
            models=models_values(models),
            notes=tuple(notes),
        )

    async def _models(
        self, client: httpx.AsyncClient, url: str, notes: list[str]
    ) -> Mapping[str, Any]:
        try:
            text = await fetch_page(client, f"{url}/v1/models", DEADLINE_S, MODELS_MAX_BYTES)
            data = parse_json(text).get("data")
        except (ScrapeError, ValueError, AttributeError) as exc:
            notes.append(f"/v1/models: {exc}"[:160])
            return {}
        entries = [e for e in data if isinstance(e, dict)] if isinstance(data, list) else []
        if not entries:
            notes.append("/v1/models lists no model")
            return {}
        return entries[0]

    async def _cache_labels(
        self, client: httpx.AsyncClient, url: str, notes: list[str]
    ) -> Mapping[str, str]:
        try:
            text = await fetch_page(client, f"{url}/metrics", DEADLINE_S)
            families = await asyncio.to_thread(parse_families, text)
        except ScrapeError as exc:
            notes.append(f"/metrics: {exc}")
            return {}
        for family in families:
            for sample in family.samples:
                if sample.name == CACHE_CONFIG_INFO:
                    return dict(sample.labels)
        notes.append(f"/metrics has no {CACHE_CONFIG_INFO} (a server with --disable-log-stats)")
        return {}

    async def _log(self, notes: list[str]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """``non-default args`` (``None``: no log read) and the engine's config pairs."""
        path = self._log_path
        if path is None:
            return None, {}
        if str(path) == "-":  # the console's own standard input: never a log
            notes.append("--attach-log -: the console reads no log from standard input")
            return None, {}
        try:
            excerpt = await asyncio.to_thread(read_log_excerpt, path)
        except LogReadError as exc:
            notes.append(f"startup log: {exc.one_line()}")
            return None, {}
        given, engine = await asyncio.to_thread(_log_args, excerpt.text)
        if given is None:
            notes.append(f"startup log {path}: no `non-default args` line (not a vLLM 0.8+ log?)")
        return given, engine


def _log_args(text: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """A log's ``non-default args`` (``None``: it has none) and engine config (a thread)."""
    view = LogView(text, None, None)
    given = dict(view.non_default_args) if view.has("non-default args:") else None
    return given, dict(view.engine_config)
