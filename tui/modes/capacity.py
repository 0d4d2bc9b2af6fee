"""The capacity mode: the profile ``vtc capacity`` asks the twin of, and the server it confirms on.

Built like the console's modes: :func:`find_profile` reads the named profile, or the newest
one of the server's model (none: one line that offers ``vtc calibrate`` and the console's
``k``); :func:`confirming` opens an attach session on the server at a URL, the console's
own (:class:`~tui.modes.attach.AttachMode`): its run book, its load engine in its own
process and its twin, so every confirming load is a run on the board like any other, and
the session is closed however the confirmation ends. :func:`read_flags` reads a server's
flags as ``vtc --attach`` does, when nothing is to be loaded.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from tui.domain.events import ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.profile import Profile, ProfileError
from tui.modes.attach import AttachMode
from tui.modes.calibrate import attached
from tui.modes.options import ConsoleOptions, SetupError
from tui.session.facade import Session
from tui.store.profiles import list_profiles, load_profile

READY_TIMEOUT_S = 60.0
"""How long an attached server may take to answer its first health check."""


class NoProfile(SetupError):
    """No profile of this server: capacity needs a calibrated twin."""


def _offer(url: str | None) -> str:
    where = url or "URL"
    return f"calibrate it: `vtc calibrate {where} --name NAME`, or k in the console"


def find_profile(name: str | None, model: str, data_dir: Path, url: str | None = None) -> Profile:
    """The profile ``name`` (a name in the data dir or a file), else the newest usable one
    of ``model``; :class:`NoProfile` with one line offering calibration otherwise."""
    if name:
        try:
            return load_profile(name, data_dir)
        except ProfileError as exc:
            raise NoProfile(exc.message, hint=_offer(url)) from None
    fits = []
    for summary in list_profiles(data_dir):
        if summary.usable:
            try:
                profile = load_profile(summary.name, data_dir)
            except ProfileError:
                continue
            if profile.identity.model == model:
                fits.append(profile)
    if not fits:
        raise NoProfile(f"no profile of this server ({model})", hint=_offer(url))
    return max(fits, key=lambda p: p.created)


async def read_flags(url: str) -> ServeFlags:
    """The flags of the server at ``url``, as ``vtc --attach`` reads them."""
    return (await attached(url, None)).flags


async def _ready(session: Session, timeout_s: float) -> None:
    changed = asyncio.Event()
    session.subscribe(lambda _event: changed.set())
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while session.state is not ServerState.READY:
        if session.state in (ServerState.FAILED, ServerState.STOPPED):
            raise SetupError(f"the server is {session.state.value}")
        left = deadline - loop.time()
        if left <= 0:
            raise SetupError(
                f"the server did not answer as ready within {timeout_s:.0f} s",
                hint="check the URL, and that its /health answers",
            )
        changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(changed.wait(), timeout=min(left, 1.0))


@asynccontextmanager
async def confirming(
    url: str,
    profile: str,
    data_dir: Path,
    *,
    ready_timeout_s: float = READY_TIMEOUT_S,
) -> AsyncIterator[Session]:
    """An attach session on ``url`` (its twin: ``profile``), ready; closed on the way out."""
    options = ConsoleOptions(attach=url, data_dir=data_dir, sim_profile=profile)
    session = AttachMode().build(options)
    try:
        await session.start()
        await _ready(session, ready_timeout_s)
        yield session
    finally:
        await session.close()
