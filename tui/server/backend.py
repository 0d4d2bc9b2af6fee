"""The server a session watches, whichever way it came: launched, adopted or attached.

Three kinds of server stand behind one protocol:

- launched (:class:`Launcher` makes one): this console started it; it can be stopped and
  detached (left running for the next console);
- adopted: a previous console launched it and left it running (the state file); it can be
  stopped, or left running again (detached) for the next console;
- attached: a server at a URL that somebody else runs; it is watched and loaded only.

What a backend can do is declared in :class:`Capabilities`; a caller checks them instead of
calling methods that would refuse. Each backend reports what it sees as
:data:`~tui.domain.events.ServerEvent` values to the :data:`EventSink` it was given, on the
event loop, in order; the sink must not raise (a backend logs and carries on if it does).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from tui.domain.events import ServerEvent, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.server_config import ServerConfig

EventSink = Callable[[ServerEvent], None]
"""Where a backend reports its events (the session's server slot)."""


@dataclass(frozen=True)
class Capabilities:
    """What the console may do with a server.

    ``can_stop``: stop it (its whole process tree). ``can_detach``: leave it running for the
    next console when this one goes away. ``local``: its processes run on this machine, so
    its pids mean something here (local NVML attribution, the GPU-release wait).
    """

    can_stop: bool
    can_detach: bool
    local: bool


LAUNCHED = Capabilities(can_stop=True, can_detach=True, local=True)
ADOPTED = Capabilities(can_stop=True, can_detach=True, local=True)
ATTACHED_REMOTE = Capabilities(can_stop=False, can_detach=False, local=False)


class ServerBackend(Protocol):
    """One server as the session sees it, from the moment it is watched until ``aclose``."""

    @property
    def capabilities(self) -> Capabilities:
        """What the console may do with it."""
        ...

    @property
    def state(self) -> ServerState:
        """Where it is in its lifecycle."""
        ...

    @property
    def pid(self) -> int | None:
        """Its root process (also its process group) when local, else ``None``."""
        ...

    @property
    def base_url(self) -> str:
        """``http://host:port`` where it answers."""
        ...

    @property
    def log_lines(self) -> Sequence[str]:
        """The tail of its log (for an attached server: what the console observed)."""
        ...

    def pids(self) -> set[int]:
        """Every process of its tree seen so far (empty when not local)."""
        ...

    async def stop(self) -> None:
        """Stop it and its whole tree (only when ``capabilities.can_stop``).

        Emits ``Exited(requested=True)`` unless it had already ended. Safe to call more
        than once; concurrent calls share one stop.
        """
        ...

    async def detach(self) -> bool:
        """Stop watching and leave it running; ``False`` (nothing changed) if it cannot."""
        ...

    async def aclose(self) -> None:
        """Stop watching and release what watching holds; never stops the server."""
        ...


@dataclass(frozen=True)
class Takeover:
    """What a first look at an existing server found.

    ``flags``: what it runs with (as far as can be told); ``run_id``: the stored run it
    continues (an adopted server's own card), else ``None``; ``label``: the label of the
    card made for it when there is no stored run.
    """

    flags: ServeFlags
    run_id: int | None
    label: str


class ExistingServer(ServerBackend, Protocol):
    """A server already running when the session starts (adopted or attached)."""

    @property
    def config(self) -> ServerConfig | None:
        """Its configuration as read from the server (attached); ``None``: its flags are
        this console's own (adopted: the state file has them) or could not be read."""
        ...

    async def connect(self, on_event: EventSink) -> Takeover:
        """A first look, without events; later events go to ``on_event``."""
        ...

    def watch(self) -> None:
        """Announce it (``Launched``, the log tail, ``Ready``...), then keep watching."""
        ...


class LaunchingServer(ServerBackend, Protocol):
    """A launched server in hand before it starts (:meth:`Launcher.prepare`)."""

    async def begin(self) -> None:
        """Start it; returns once launched or refused (a ``Failed`` event says why)."""
        ...


class Launcher(Protocol):
    """Launches servers for a session (each launch a new :class:`ServerBackend`)."""

    def prepare(
        self, flags: ServeFlags, on_event: EventSink, *, extra_args: Sequence[str] = ()
    ) -> LaunchingServer:
        """The server a launch of ``flags`` makes, not started yet: its caller holds it
        before its first event (``Launched`` comes while :meth:`LaunchingServer.begin`
        runs), so a stop or a detach asked meanwhile reaches it. Readiness and failure
        arrive later as events."""
        ...

    async def aclose(self) -> None:
        """Release what launching holds (a prober's client); servers it launched run on."""
        ...
