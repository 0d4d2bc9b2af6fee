"""Asking a server whether it serves, and who holds a port.

:class:`HealthProber` is what every server backend asks (``/health``, ``/v1/models``); the
real one is :class:`HttpxProber`, a fake replaces it in tests. The port helpers answer the
questions readiness needs beyond HTTP: is the port taken before a launch, and is the
process listening on it ours (someone else's ``/health`` must never count as our server's).
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterable
from typing import Any, Protocol

import httpx
import psutil

from tui.domain.url_credentials import UrlCredential, authorization_header
from tui.store.bounded_read import parse_json


class HealthProber(Protocol):
    """How a backend asks a server whether it is up (a fake replaces it in tests).

    Both methods take the server's base URL (``http://127.0.0.1:8000``) and never raise:
    ``None`` means "no answer" (connection refused, timeout) or "cannot tell".
    """

    async def health(self, url: str) -> int | None:
        """The HTTP status of ``GET {url}/health``, or ``None`` without an answer."""
        ...

    async def models(self, url: str) -> list[str] | None:
        """The model ids ``GET {url}/v1/models`` lists, or ``None`` if it cannot tell."""
        ...


class HttpxProber:
    """The real prober: ``httpx.AsyncClient`` with a short timeout, proxies ignored."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        timeout_s: float = 2.0,
        credential: UrlCredential | None = None,
    ) -> None:
        # The URL's user:password (as Basic) or the API key (as Bearer): one header.
        self._headers = authorization_header(credential, api_key)
        self._timeout = timeout_s
        self._client: httpx.AsyncClient | None = None

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            # trust_env=False: an HTTP(S)_PROXY in the environment must not intercept localhost.
            self._client = httpx.AsyncClient(
                timeout=self._timeout, trust_env=False, headers=self._headers
            )
        return self._client

    async def health(self, url: str) -> int | None:
        """``GET /health``; its status, or ``None`` when nothing answers."""
        try:
            response = await self._http().get(url.rstrip("/") + "/health")
        except httpx.HTTPError:
            return None
        return response.status_code

    async def models(self, url: str) -> list[str] | None:
        """The ``id`` of each entry of ``GET /v1/models``; ``None`` on any other answer."""
        try:
            response = await self._http().get(url.rstrip("/") + "/v1/models")
            if response.status_code != 200:
                return None  # e.g. 401 with an API key we were not given: cannot tell
            data = parse_json(response.content).get("data", [])
            return [str(entry["id"]) for entry in data if isinstance(entry, dict) and "id" in entry]
        except (httpx.HTTPError, ValueError, AttributeError, KeyError, TypeError):
            return None

    async def aclose(self) -> None:
        """Close the HTTP client."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def client_host(host: str | None) -> str:
    """The address a local client uses to reach a server bound to ``host``."""
    if host in (None, "", "0.0.0.0"):
        return "127.0.0.1"
    if host == "::":
        return "::1"
    return host


def base_url(host: str | None, port: int) -> str:
    """``http://HOST:PORT`` for a local client of a server bound to ``host``."""
    target = client_host(host)
    if ":" in target:
        target = f"[{target}]"
    return f"http://{target}:{port}"


def port_is_busy(host: str | None, port: int) -> bool:
    """True if something already listens on (or holds) ``port`` where the server would bind.

    A connect that succeeds means a listener (someone else's ``/health`` would answer);
    a failing bind with EADDRINUSE means a socket holds the port without listening yet (a
    vLLM still starting binds first and listens late, reference section 6).
    """
    target = client_host(host)
    try:
        with socket.create_connection((target, port), timeout=0.5):
            return True
    except OSError:
        pass
    bind_host = host or "0.0.0.0"
    family = socket.AF_INET6 if ":" in bind_host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bind_host, port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
    return False


def _listening_on(conn: Any, port: int) -> bool:
    """True for a TCP connection entry (psutil's) that listens on ``port``."""
    return bool(conn.laddr) and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN


def _listener_pids(port: int) -> list[int | None] | None:
    """PIDs of the processes listening on TCP ``port`` (``None`` where the OS hides one).

    ``None`` as a whole when the connection table cannot be read.
    """
    try:
        return [c.pid for c in psutil.net_connections(kind="tcp") if _listening_on(c, port)]
    except (psutil.AccessDenied, OSError):
        return None


def _tree_listens(pids: Iterable[int], port: int) -> bool:
    """True when one of ``pids`` has a TCP socket listening on ``port``."""
    for pid in pids:
        try:
            conns = psutil.Process(pid).net_connections(kind="tcp")
        except (psutil.Error, OSError):
            continue
        if any(_listening_on(c, port) for c in conns):
            return True
    return False


def held_by_stranger(port: int, ours: set[int]) -> bool:
    """True when a process outside ``ours`` is the one listening on ``port``.

    ``False`` when it cannot be told (the connection table hidden, nobody listening): a
    check that cannot decide must not hold readiness back. Blocking (psutil): call it from
    a thread in async code.
    """
    if _tree_listens(ours, port):
        return False  # cheap (a few processes) where the system-wide table costs ~40 ms
    listeners = _listener_pids(port)
    if not listeners:
        return False
    pids = {pid for pid in listeners if pid}
    if not pids:
        return False  # the OS hides the owners
    return not (pids & ours)


def port_holder(port: int) -> str | None:
    """``"pid N (name)"`` of the process listening on ``port`` when the OS tells us."""
    for pid in _listener_pids(port) or []:
        if pid:
            try:
                return f"pid {pid} ({psutil.Process(pid).name()})"
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                return f"pid {pid}"
    return None
