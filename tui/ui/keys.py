"""The key map, declared once: the screen's bindings and the help screen read it.

Letter keys are ordinary bindings, so a letter typed into a form field still types; each
command also has a function key bound with priority, which works wherever focus is.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class Command:
    """One console command: its letter, its always-working function key, what it does."""

    key: str
    key_display: str
    fkey: str
    action: str
    label: str
    help: str


COMMANDS: tuple[Command, ...] = (
    Command("r", "r", "f5", "restart", "Restart",
            "Apply the form and restart the server with it (a new run on the board). "
            "An invalid form restarts nothing: the first bad field gets focus."),
    Command("b", "b", "f6", "bench", "Bench",
            "Run the load (the form's Workload section) against the ready server."),
    Command("f", "f", "f7", "fix", "Fix",
            "Apply the first fix of the latest failed run to the form and restart with it."),
    Command("c", "c", "f8", "cancel_load", "Cancel",
            "Cancel the running load (partial results are kept)."),
    Command("s", "s", "f9", "stop_server", "Stop",
            "Stop the server this console started."),
    Command("a", "a", "f4", "apply_advice", "Advice",
            "Put the first piece of advice's flags into the form (the Metrics panel shows it "
            "while it holds); r then restarts with them."),
    Command("h", "h", "f2", "history", "Charts",
            "The last minutes of KV cache, requests, token rates, server TTFT, GPU memory and "
            "utilization; every GPU; the advice in full."),
    Command("question_mark", "?", "f1", "help", "Help", "This help."),
)  # fmt: skip

QUIT_HELP = "Quit: stops the load and the server this console started (also ctrl+q)."
ESCAPE_HELP = "Leave a form field (focus moves to the board), so letter keys work again."


def screen_bindings() -> list[BindingType]:
    """The main screen's bindings: letters (shown in the footer) plus priority F-keys."""
    bindings: list[BindingType] = []
    for cmd in COMMANDS:
        bindings.append(Binding(cmd.key, cmd.action, cmd.label, key_display=cmd.key_display))
        bindings.append(Binding(cmd.fkey, cmd.action, cmd.label, show=False, priority=True))
    bindings.append(Binding("escape", "leave_field", "Leave field", show=False))
    return bindings
