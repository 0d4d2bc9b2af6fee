"""Textual's Footer, composed again only when the keys it shows change.

Textual's Footer recomposes on every change of its screen's bindings, each focus move and
screen change included (10-60 ms of such a key for nothing, issue 22; opening the sweep
screen recomposed it twice, closing it once, issue 39). :class:`SteadyFooter` compares what
it would show with what it shows and recomposes only on a difference; the sweep, plot and
capacity screens use it as is, and the console's key bar
(:class:`~tui.ui.widgets.key_bar.KeyBar`) says what it shows in its own way.
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer

Shown = tuple[object, ...]


class SteadyFooter(Footer):
    """Textual's Footer, recomposed only when :meth:`shown_keys` changes."""

    def __init__(
        self, *, id: str | None = None, show_command_palette: bool = True, compact: bool = False
    ) -> None:
        super().__init__(id=id, show_command_palette=show_command_palette, compact=compact)
        self._shown: Shown | None = None  # what the last recompose asked for shows

    def shown_keys(self, screen: Screen[object]) -> Shown:
        """What Textual's Footer shows for ``screen``: every active binding as it draws it."""
        return tuple(
            (
                key,
                active.binding.action,
                active.binding.description,
                active.binding.key_display,
                active.binding.show,
                active.binding.group,
                active.enabled,
                active.tooltip,
            )
            for key, active in screen.active_bindings.items()
        )

    def bindings_changed(self, screen: Screen[object]) -> None:
        """The screen's bindings changed: recompose if the keys shown differ."""
        if screen is self.screen and screen.app.app_focus:
            shown = self.shown_keys(screen)
            if shown == self._shown:
                return
            self._shown = shown
        super().bindings_changed(screen)
