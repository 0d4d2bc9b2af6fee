"""Open the console's passing screens so that closing one costs its parent no layout.

Textual removes a pushed screen when it is popped, unless it is installed; removing a
screen asks the app for a layout, and the app lays out the screen now on top: the main
screen, every panel of it, twice for a run's detail (issue 39 item 6: every Esc to a
screen's parent sat near 90 ms above the key that opened it, and the parent had not
changed at all). :func:`open_screen` installs each passing screen under a name of its own,
so Esc only pops it; the closed screens are removed the next time a screen opens, once
the new one is on top, so that layout falls on the (small) new screen, off the key that
closes anything.

A screen dear to build and the same each time (the sweep screen while the form's flags
stay) is kept instead: :func:`open_kept` installs it under a name of its own and shows that
one screen again, composed once; a new one under the name replaces it (the old one is
removed once the new one is on top, as above).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import count
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from textual.app import App
from textual.screen import Screen

ResultType = TypeVar("ResultType")

_PREFIX = "vtc-passing-"


class ScreenKeeper:
    """The passing screens one app opened, by name, until the next one opens."""

    def __init__(self, app: App[Any]) -> None:
        self._app = app
        self._names = count(1)
        self._kept: list[str] = []

    @property
    def kept(self) -> list[str]:
        """The names of the passing screens still installed (open or closed)."""
        return list(self._kept)

    def open(
        self,
        screen: Screen[ResultType],
        callback: Callable[[ResultType | None], object] | None = None,
    ) -> None:
        """Push ``screen`` (installed: popping it removes nothing), then remove the screens
        closed before it."""
        app = self._app
        name = f"{_PREFIX}{next(self._names)}"
        app.install_screen(screen, name)
        app.push_screen(name, callback)  # type: ignore[arg-type]
        self._drop_closed()
        self._kept.append(name)

    def _drop_closed(self) -> None:
        app = self._app
        open_now = set(map(id, app.screen_stack))
        for name in list(self._kept):
            screen = app.get_screen(name)
            if id(screen) in open_now:
                continue  # still open (under the new one)
            app.uninstall_screen(name)
            self._kept.remove(name)
            screen.remove()  # lays out the screen on top now: the one just opened


_KEEPERS: WeakKeyDictionary[App[Any], ScreenKeeper] = WeakKeyDictionary()


def open_screen(
    app: App[Any],
    screen: Screen[ResultType],
    callback: Callable[[ResultType | None], object] | None = None,
) -> None:
    """Push ``screen`` on ``app`` so that closing it lays out nothing (module docstring)."""
    keeper = _KEEPERS.get(app)
    if keeper is None:
        keeper = _KEEPERS[app] = ScreenKeeper(app)
    keeper.open(screen, callback)


def open_kept(
    app: App[Any],
    name: str,
    screen: Screen[ResultType],
    callback: Callable[[ResultType | None], object] | None = None,
) -> None:
    """Show ``screen``, kept installed under ``name`` (module docstring): shown again, it
    is neither composed nor laid out anew; another screen under ``name`` replaces it."""
    old = app.get_screen(name) if app.is_screen_installed(name) else None
    if old is not screen:
        if old is not None:
            app.uninstall_screen(name)
        app.install_screen(screen, name)
    app.push_screen(name, callback)  # type: ignore[arg-type]
    if old is not None and old is not screen:
        old.remove()  # lays out the screen on top now: the one just opened


def keeper_of(app: App[Any]) -> ScreenKeeper | None:
    """The keeper of ``app``'s passing screens (``None`` before the first opened)."""
    return _KEEPERS.get(app)
