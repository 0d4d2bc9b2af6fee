"""What holds the keyboard focus for the results board in card view: a widget of no size.

Textual restyles a widget and everything under it when its focus changes. The board holds
its cards (~60 widgets at 30 runs, ~80 at 200): focused itself, each ``t``, each Esc out of
a field and each return from help or a run's detail restyled all of them (issue 22). Focus
on this childless widget inside the board restyles one widget; the board's keys still act,
since a key goes to the focused widget's ancestors' bindings too.
"""

from __future__ import annotations

from textual.widget import Widget


class BoardFocus(Widget, can_focus=True):
    """Takes the focus for the board; draws nothing and takes no room."""

    DEFAULT_CSS = """
    BoardFocus { width: 0; height: 0; }
    """
