"""Ways of running the console, one mode each: demo, local vLLM, attach (later: sweep).

Each mode builds its own backends and sources from :class:`ConsoleOptions` and returns a
ready-to-start :class:`~tui.session.Session`; nothing in the session knows which mode
built it. :func:`mode_for` picks the mode the options ask for.
"""

from __future__ import annotations

from typing import Protocol

from tui.modes.attach import AttachMode
from tui.modes.common import Services
from tui.modes.demo import DemoMode
from tui.modes.local import LocalVllmMode
from tui.modes.options import ConsoleOptions, SetupError
from tui.session.facade import Session
from tui.session.port import SessionInfo
from tui.store.bounded_read import require_regular_file
from tui.store.history import default_data_dir
from tui.store.profiles import profile_file


class Mode(Protocol):
    """A way of running: builds the session for the options."""

    label: str

    def build(self, options: ConsoleOptions) -> Session: ...
    def parts(self, options: ConsoleOptions) -> tuple[SessionInfo, Services]: ...


def mode_for(options: ConsoleOptions) -> Mode:
    """``--attach`` attaches, ``--demo`` runs the simulator, else local vLLM."""
    if options.attach is not None:
        return AttachMode()
    if options.demo:
        return DemoMode()
    return LocalVllmMode()


def build_session(options: ConsoleOptions) -> Session:
    """The session the options ask for (raises :class:`SetupError` with one line).

    A named ``--sim-profile`` is checked first, whatever the mode: the demo simulates it,
    the others predict with it, and a name that is no profile must not leave the twin to
    pick another one silently.
    """
    _check_named_files(options)
    return mode_for(options).build(options)


def _check_named_files(options: ConsoleOptions) -> None:
    """The files the command line names, checked before any mode starts anything: a profile
    that is none, a log that is a FIFO, a device, a folder or missing is one line now, not
    a silent substitute or a 30 s wait later."""
    if options.sim_profile:
        profile_file(options.sim_profile, options.data_dir or default_data_dir())
    if options.attach_log is not None:
        if options.attach is None:
            raise SetupError("--attach-log goes with --attach URL (the log of that server)")
        require_regular_file(options.attach_log, "--attach-log")


__all__ = ["ConsoleOptions", "Mode", "SetupError", "build_session", "mode_for"]
