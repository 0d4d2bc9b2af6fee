"""The key bar: Textual's Footer, composed again only when the keys it shows change.

Textual's Footer recomposes on every change of the screen's bindings: each focus move
(``t``, Esc out of a field, every return from help or a run's detail) and each screen
change, and a recompose mounts a new key widget per key and styles each one. The keys it
shows are mostly the same before and after (the board's, whether the board or its table
has the focus), so that was 10-60 ms of such a key for nothing (issue 22).
"""

from __future__ import annotations

from textual.screen import Screen
from textual.widgets import Footer

Shown = tuple[object, ...]


class KeyBar(Footer):
    """A Footer that recomposes only when what it would show differs from what it shows."""

    def __init__(self, *, id: str | None = None, show_command_palette: bool = True) -> None:
        super().__init__(id=id, show_command_palette=show_command_palette)
        self._shown: Shown | None = None  # what the last recompose asked for shows

    def bindings_changed(self, screen: Screen[object]) -> None:
        """The screen's bindings changed: recompose if the keys shown differ."""
        if screen is self.screen and screen.app.app_focus:
            shown = self.shown_keys(screen)
            if shown == self._shown:
                return
            self._shown = shown
        super().bindings_changed(screen)

    def shown_keys(self, screen: Screen[object]) -> Shown:
        """What the bar shows for ``screen``'s bindings now: each shown key, its label,
        action, state and tooltip, and the palette key's place."""
        app = screen.app
        keys = tuple(
            (
                key,
                app.get_key_display(active.binding),
                active.binding.description,
                active.binding.action,
                active.enabled,
                active.tooltip,
                active.binding.group,
            )
            for key, active in screen.active_bindings.items()
            if active.binding.show or key == app.COMMAND_PALETTE_BINDING
        )
        return (keys, self.show_command_palette, self.combine_groups, self.compact)
