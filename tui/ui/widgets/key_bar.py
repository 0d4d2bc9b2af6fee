"""The key bar: the current view's keys that fit the width, and one key that lists the rest.

Textual's Footer shows every binding marked ``show``, cut off at the right edge: at 80
columns the keys past ``? Help`` were not on screen and nothing said they existed. The
bar here picks, in the order :data:`~tui.ui.keys.BAR_ORDER` keeps them, the keys of the
focused view that fit (a screen may say which of its keys apply now, ``bar_applies``: the
others go last), and ends with the help key labelled with how many keys it lists besides
("? 9 more"). ctrl+p, the palette, is one of the keys, not a docked extra.

It is also composed again only when the keys it shows change
(:class:`~tui.ui.widgets.steady_footer.SteadyFooter`, which it extends).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from tui.ui.keys import BAR_ALIASES, BAR_LABELS, BAR_ORDER, HELP_ACTION
from tui.ui.widgets.steady_footer import Shown, SteadyFooter

_COPY = re.compile(r"shown\('(\w+)'\)")


@dataclass(frozen=True)
class BarKey:
    """One key the bar may show."""

    key: str
    display: str
    label: str
    action: str
    enabled: bool = True
    tooltip: str = field(default="", compare=False)  # what a focused widget's own says

    @property
    def cells(self) -> int:
        """Columns it takes in the compact bar: key, a space, label, a gap."""
        return len(self.display) + 1 + len(self.label) + 1


def more_label(hidden: int) -> str:
    """The help key's label: how many keys it lists that the bar does not show."""
    return f"{hidden} more" if hidden else "Help"


def fit(keys: Sequence[BarKey], width: int, help_key: BarKey | None) -> tuple[list[BarKey], int]:
    """The first keys that fit ``width`` columns, room kept for the help key (the last
    key: its gap is not needed); and how many did not fit (the help key lists them)."""
    room = width
    if help_key is not None:  # "? 12 more": "Help" and three more cells, no gap after it
        room -= help_key.cells - len(help_key.label) + len(more_label(len(keys))) - 1
    shown: list[BarKey] = []
    used = 0
    for key in keys:
        if used + key.cells > room:
            break
        shown.append(key)
        used += key.cells
    return shown, len(keys) - len(shown)


def _rank(action: str, applies: bool) -> tuple[int, int]:
    place = BAR_ORDER.index(action) if action in BAR_ORDER else len(BAR_ORDER)
    return (0 if applies else 1, place)


class KeyBar(SteadyFooter):
    """The current view's keys that fit, then the key that lists the rest."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, show_command_palette=False, compact=True)

    def candidates(self, screen: Screen[object]) -> tuple[list[BarKey], BarKey | None]:
        """The keys the focused view offers, best first, and the help key (if any)."""
        app = screen.app
        applies = getattr(screen, "bar_applies", None)
        found: dict[str, BarKey] = {}
        help_key: BarKey | None = None
        for key, active in screen.active_bindings.items():
            binding = active.binding
            # a key's width-dependent copy (keys.shown_binding) names the command it runs;
            # the key itself works at every width
            copy = _COPY.fullmatch(binding.action)
            action = copy.group(1) if copy else binding.action
            action, label, display = BAR_ALIASES.get(action, (action, "", ""))
            palette = key == app.COMMAND_PALETTE_BINDING
            if action in found:
                continue  # one key per action
            if not (binding.show or palette or action in BAR_ORDER or action == HELP_ACTION):
                continue
            bar_key = BarKey(
                key,
                display or app.get_key_display(binding),
                label or BAR_LABELS.get(action, binding.description),
                action,
                active.enabled or copy is not None,
                active.tooltip or binding.tooltip or binding.description,
            )
            if action == HELP_ACTION:
                help_key = help_key or bar_key
                continue
            found[action] = bar_key
        ordered = sorted(
            found.values(),
            key=lambda k: _rank(k.action, applies(k.action) if callable(applies) else True),
        )
        return ordered, help_key

    def compose(self) -> ComposeResult:
        """The keys that fit this width, then the help key saying how many it adds (from
        the first compose: the screen's bindings are known once it is mounted)."""
        screen = self.screen
        keys, help_key = self.candidates(screen)
        shown, hidden = fit(keys, screen.size.width or 80, help_key)
        for key in shown:
            yield self._key(key, key.label)
        if help_key is not None:
            yield self._key(help_key, more_label(hidden))

    def _key(self, key: BarKey, label: str) -> FooterKey:
        return FooterKey(
            key.key,
            key.display,
            label,
            key.action,
            disabled=not key.enabled,
            tooltip=key.tooltip,
        ).data_bind(compact=Footer.compact)

    def shown_keys(self, screen: Screen[object]) -> Shown:
        """What the bar shows for ``screen`` now: the keys that fit and the help key's
        label (the width and what applies decide both)."""
        keys, help_key = self.candidates(screen)
        shown, hidden = fit(keys, screen.size.width or 80, help_key)
        return (tuple(shown), help_key, hidden)
