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
    footer: bool = True  # in the key bar (80 columns hold only so many: help lists them all)


COMMANDS: tuple[Command, ...] = (
    Command(
        "r",
        "r",
        "f5",
        "restart",
        "Restart",
        "Apply the form and restart the server with it (a new run on the board). "
        "An invalid form restarts nothing: the first bad field gets focus.",
    ),
    Command(
        "b",
        "b",
        "f6",
        "bench",
        "Bench",
        "Run the load (the form's Workload section) against the ready server.",
    ),
    Command(
        "f",
        "f",
        "f7",
        "fix",
        "Fix",
        "Apply the next untried fix of the latest failed run (its card says which) to the "
        "form and restart with it; stops, saying why, when fixes fail the same way.",
    ),
    Command(
        "c",
        "c",
        "f8",
        "cancel_load",
        "Cancel",
        "Cancel the running load (partial results are kept).",
    ),
    Command("s", "s", "f9", "stop_server", "Stop", "Stop the server this console started."),
    Command(
        "w",
        "w",
        "f4",
        "sweep",
        "Sweep",
        "The sweep screen: compose a sweep from the form's flags (parameters, SLOs, "
        "budget, strategy), watch its trials on the board, stop it, apply its best, "
        "Before/After of baseline vs best. While a sweep runs, r, b and f are refused.",
        footer=False,
    ),
    Command(
        "a",
        "a",
        "f3",
        "apply_advice",
        "Advice",
        "Put the first piece of advice's flags into the form (the Metrics panel shows it "
        "while it holds, 'a: ...'); r then restarts with them.",
        footer=False,
    ),
    Command(
        "h",
        "h",
        "f2",
        "history",
        "Charts",
        "The last minutes of KV cache, requests, token rates, server TTFT, GPU memory and "
        "utilization; every GPU; the advice in full.",
        footer=False,
    ),
    Command(
        "k",
        "k",
        "f10",
        "calibrate",
        "Calibrate",
        "Calibrate the twin of the ready server: a few minutes of designed loads (progress "
        "and ETA under the form), then its profile predicts each edited command line in "
        "the form and each load on the board, labelled predicted.",
        footer=False,
    ),
    Command(
        "m",
        "m",
        "f12",
        "capacity",
        "Capacity",
        "The twin's capacity: for the form's flags, the running server's and the "
        "baseline's, the latency against the request rate for the form's workload, the "
        "highest rate meeting the SLOs with the interval the twin's error implies, and the "
        "replicas a target rate needs (`vtc capacity URL --confirm` checks it with real loads).",
        footer=False,
    ),
    Command("question_mark", "?", "f1", "help", "Help", "This help."),
)

LAUNCH_ACTIONS: frozenset[str] = frozenset(
    {"restart", "fix", "stop_server", "sweep", "apply_advice", "repeat", "load_run"}
)
"""The commands that need a console that launches its own servers (their flags go to a
restart). Attached to a server it did not start (``SessionPort.can_restart`` False) the
console offers none of them: the key bar hides them (``check_action``)."""


def offered(action: str, *, can_launch: bool) -> bool:
    """Whether ``action`` applies in a console that can (or cannot) launch servers."""
    return can_launch or action not in LAUNCH_ACTIONS


QUIT_HELP = (
    "Quit: stops the load, the sweep and the server this console started (also ctrl+q); "
    "while any of them runs it asks first: q or y again quits, any other key stays."
)
PALETTE_HELP = (
    "The command palette: type a flag's name (max-model-len, mml) or what it does (context "
    "length, cuda graph, kv offload, speculative) to jump to its field, its value selected so "
    "typing replaces it (any flag of the installed vLLM: one the form lacks gets a row of its "
    "own); or a command's name to run it. The key bar shows the keys that fit: this help "
    "lists them all."
)
ESCAPE_HELP = "Leave a form field (focus moves to the board), so letter keys work again."
SAVE_PRESET_HELP = (
    "Save the form (flags and workload) as one of your presets: asks its name. Works in a field."
)


@dataclass(frozen=True)
class BoardKey:
    """A key of the results board: active while the board has focus (cards or table)."""

    key: str
    key_display: str
    action: str
    label: str
    help: str
    show: bool = False  # in the key bar (80 columns hold only a few)


BOARD_KEYS: tuple[BoardKey, ...] = (
    BoardKey(
        "t",
        "t",
        "toggle_table",
        "Table",
        "Cards or table: one row per run, the flags that differ as columns, then the "
        "metrics with their change against the baseline.",
        show=True,
    ),
    BoardKey(
        "enter",
        "Enter",
        "detail",
        "Detail",
        "The selected run in full: every flag, the numbers and their verdicts, the "
        "startup profile, telemetry over time, the server log (Esc closes).",
    ),
    BoardKey(
        "p",
        "p",
        "pin",
        "Pin",
        "Pin the selected run as the baseline (again: unpin). Every delta and flag diff "
        "is against it; the board's title says which run and why.",
    ),
    BoardKey(
        "v",
        "v",
        "before_after",
        "Before/After",
        "The Before / After table: the baseline against the selected run, metric by metric.",
    ),
    BoardKey(
        "g",
        "g",
        "plot",
        "Plot",
        "Throughput against p99 TTFT or E2EL for every served run, the Pareto frontier "
        "drawn, the selected run and the baseline marked.",
    ),
    BoardKey(
        "n",
        "n",
        "repeat",
        "Repeat",
        "Run the selected run again N times (same flags, same workload): repeats form a "
        "group whose spread tells noise from a gain.",
    ),
    BoardKey(
        "e",
        "e",
        "export",
        "Export",
        "Write the selected run as a command, vLLM config YAML, compose service, systemd "
        "unit or Kubernetes Deployment, under the data dir (secrets only by name).",
    ),
    BoardKey(
        "l",
        "l",
        "load_run",
        "Load",
        "Put the selected run's flags and workload into the form (r then runs them).",
    ),
    BoardKey(
        "y",
        "y",
        "copy_command",
        "Copy",
        "Copy the selected run's vllm serve command to your terminal's clipboard "
        "(OSC 52: works over SSH and in tmux with set-clipboard on).",
    ),
    BoardKey(
        "slash",
        "/",
        "filter",
        "Filter",
        "Filter the runs: all, served, failed, NAME=VALUE (e.g. max_num_seqs=256).",
    ),
    BoardKey(
        "left_square_bracket",
        "[",
        "sort(False)",
        "Sort asc",
        "Table: sort by the cursor's column, ascending (on the run column: oldest first).",
    ),
    BoardKey(
        "right_square_bracket",
        "]",
        "sort(True)",
        "Sort desc",
        "Table: sort by the cursor's column, descending.",
    ),
)

NAVIGATION_HELP: tuple[tuple[str, str], ...] = (
    (
        "←/→",
        "Cards: the previous / next run. Table: the previous / next column "
        "(columns scroll; the run column stays).",
    ),
    ("↑/↓", "Cards: scroll the selected card. Table: the previous / next run."),
    ("PgUp/PgDn", "Cards: page the selected card. Table, the run detail and help: a page."),
    (
        "Home/End",
        "Cards: the first / last run. Table: the first / last column; "
        "ctrl+Home / ctrl+End: the first / last run.",
    ),
    ("^PgUp/PgDn", "Cards: a screenful of runs back / on (ctrl+PgUp, ctrl+PgDn)."),
)


HELP_ACTION = "help"
"""The key that lists every key: the key bar shows it last, saying how many it adds."""

BAR_ORDER: tuple[str, ...] = (
    "leave_field",
    "restart",
    "bench",
    "fix",
    "cancel_load",
    "sweep",
    "apply_advice",
    "history",
    "calibrate",
    "command_palette",
    "toggle_table",
    "stop_server",
    "detail",
    "pin",
    "before_after",
    "plot",
    "repeat",
    "load_run",
    "export",
    "copy_command",
    "filter",
    "quit",
)
"""The order the key bar keeps keys in, the first kept when the width runs out (the help
key, last, lists the rest; a key a screen says does not apply now goes after these)."""

BAR_LABELS: dict[str, str] = {"command_palette": "Find", "calibrate": "Twin"}
"""Labels the key bar uses instead of the binding's, short for 80 columns (ctrl+p finds
flags and commands; k calibrates the twin)."""

BAR_ALIASES: dict[str, tuple[str, str, str]] = {"select_cursor": ("detail", "Detail", "Enter")}
"""A focused widget's own binding that does a command's work, shown as that command: Enter
in the board's table selects the row, which opens its detail as Enter on the cards does."""

BAR_FROM_COLUMNS = 84
"""Below this width the key bar holds the main commands only (``?`` lists the rest)."""
BAR_EXTRAS: tuple[str, ...] = (
    "sweep",
    "apply_advice",
    "history",
    "pin",
    "before_after",
    "detail",
    "load_run",
    "copy_command",
    "filter",
    "plot",
    "export",
    "repeat",
)
"""The commands the key bar adds as the width allows, the most used first."""


def _bar_label_width(action: str) -> int:
    """Cells one extra key takes in the key bar: its key, its label, the gaps."""
    named = {c.action: (c.key_display, c.label) for c in COMMANDS}
    named |= {k.action: (k.key_display, k.label) for k in BOARD_KEYS}
    key, label = named[action]
    return len(key) + len(label) + 4


def bar_widths() -> dict[str, int]:
    """The terminal width from which each extra command shows in the key bar."""
    widths, width = {}, BAR_FROM_COLUMNS
    for action in BAR_EXTRAS:
        width += _bar_label_width(action)
        widths[action] = width
    return widths


BAR_WIDTHS = bar_widths()


def shown_binding(key: str, key_display: str, action: str, label: str) -> Binding:
    """The key bar's copy of a hidden binding: the same key and command, through the
    ``shown`` action, which a screen or widget enables only where the width allows (the
    hidden binding stays for narrower terminals: the key works at every width)."""
    return Binding(key, f"shown('{action}')", label, key_display=key_display)


def board_bindings() -> list[BindingType]:
    """The results board's bindings (only the board acts on them)."""
    bindings: list[BindingType] = []
    for k in BOARD_KEYS:
        if not k.show and k.action in BAR_WIDTHS:
            bindings.append(shown_binding(k.key, k.key_display, k.action, k.label))
        bindings.append(Binding(k.key, k.action, k.label, key_display=k.key_display, show=k.show))
    return bindings


def screen_bindings() -> list[BindingType]:
    """The main screen's bindings: letters (shown in the footer) plus priority F-keys."""
    bindings: list[BindingType] = []
    for cmd in COMMANDS:
        if not cmd.footer and cmd.action in BAR_WIDTHS:
            bindings.append(shown_binding(cmd.key, cmd.key_display, cmd.action, cmd.label))
        bindings.append(
            Binding(cmd.key, cmd.action, cmd.label, key_display=cmd.key_display, show=cmd.footer)
        )
        # Shown: in a form field the letters are text, and the key bar then lists the F-keys
        # (the footer shows one key per action, and Textual drops the letters a field eats).
        bindings.append(
            Binding(
                cmd.fkey,
                cmd.action,
                cmd.label,
                key_display=cmd.fkey.upper(),
                priority=True,
                show=cmd.footer,
            )
        )
    # Esc shows only while a field has focus (MainScreen.check_action); ctrl+s works in
    # fields too but stays out of the key bar (80 columns), help lists it.
    bindings.append(Binding("escape", "leave_field", "Leave", key_display="Esc"))
    bindings.append(
        Binding(
            "ctrl+s",
            "save_preset",
            "Save preset",
            key_display="^s",
            priority=True,
            show=False,
            tooltip=SAVE_PRESET_HELP,
        )
    )
    return bindings
