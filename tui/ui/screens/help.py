"""The help modal: every key and what each panel shows."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tui.ui.keys import (
    BOARD_KEYS,
    COMMANDS,
    ESCAPE_HELP,
    NAVIGATION_HELP,
    PALETTE_HELP,
    QUIT_HELP,
    SAVE_PRESET_HELP,
    offered,
)

HELP_SCREEN = "help"
KEY_WIDTH = 10  # the key column (the widest key, ^PgUp/PgDn, fits)
PANELS: tuple[tuple[str, str], ...] = (
    (
        "Server",
        "State, the startup stage and when it began (seconds after launch), the KV "
        "cache size and max concurrency the server logged, how the console runs servers, and "
        "the last lines of the server's log. Its title names the mode; a simulator says which "
        "GPU it simulates and when time is scaled ('4x time': it runs 4x faster than that GPU "
        "would, so every latency and rate it reports is scaled by 4).",
    ),
    (
        "GPU",
        "Per device: memory used/total, utilization, temperature, power; N/A where the "
        "driver cannot tell, and the reason (with what to do) when there is no GPU reading at "
        "all. Several GPUs: one row each, * marks the server's (its processes, else "
        "CUDA_VISIBLE_DEVICES and the tensor x pipeline sizes); srv: the GPU memory the "
        "server's processes hold (N/A (WDDM) under WSL2). Then the host: CPU, RAM, the server's "
        "RSS (srv). The title says how old the reading is, STALE when two readings were missed, "
        "DOWN when it could not be read, (WSL2) under WSL2. A simulated GPU reads freed once "
        "its simulator exits.",
    ),
    (
        "Metrics",
        "From the server's /metrics, whoever sends the traffic: KV cache usage, "
        "requests running/waiting, prompt (in) and generated (out) tokens per second, the "
        "server's own TTFT, ITL, E2E and queue time as p50/p90/p99 in ms over its last 60 s "
        "(idle: no request finished), prefix-cache hit rate, preemptions; sparklines of the "
        "last two minutes where they fit. 'a: ...' is advice that holds now: a puts its flags "
        "into the form. The title carries the age of the numbers, STALE or DOWN.",
    ),
    (
        "Load",
        "The running load: requests done/total, failed, in flight, output tokens per "
        "second (and its sparkline), TTFT and ITL p50/p99 in ms. 'lag' warns that the client's "
        "own event loop is slow; CLIENT-BOUND that the load generator, not the server, limits "
        "the numbers.",
    ),
    (
        "Flags",
        "The preset picker, the serve flags (placeholder: vLLM's default; empty = not "
        "passed; hint: the allowed range), extra args, and the workload b runs. Problems show "
        "under their field as you type; '!' lines are pre-flight warnings.",
    ),
    (
        "Runs",
        "Every run as cards (oldest left) or a table (t), each with its own end state "
        "(ready, stopped, replaced, lost, failed with its cause). The title says the baseline: "
        "pinned (p, kept across relaunches), else the first completed load of the newest run's "
        "model, workload and machine, so the newest run shows the change you made "
        "(never a run without a load, nor a cancelled or partial one). "
        "Yellow flags differ from it. "
        "Numbers carry their change against it, each by its own direction (lower is better "
        "for latencies): green better, red worse, grey ~ noise (inside the noise band: the "
        "widest spread of repeated runs, at least 2%; n repeats a run to measure it), 'other "
        "load' for another workload (not compared). Each change is judged in one line: "
        "better, worse, within noise or a trade-off, by output throughput and the worst SLO "
        "latency (TTFT p99, TPOT, ITL p99, E2EL p99); v lists every metric, worse first. 'base' "
        "marks the baseline, tN a sweep's trial N (tN pK: the Kth load on its server, a probe), "
        "▸ the selected run.",
    ),
)


ATTACHED_METRICS = (
    "From the server's /metrics, whoever sends the traffic: KV cache usage, requests "
    "running/waiting, prompt (in) and generated (out) tokens per second, the server's own "
    "TTFT, ITL, E2E and queue time as p50/p90/p99 over its last 60 s, prefix-cache hit rate, "
    "preemptions. 'try ...' is advice that holds now: flags to try on the server (attached, "
    "vtc does not restart it; h shows why). The title carries the age of the numbers."
)


def help_rows(*, can_launch: bool = True) -> list[tuple[str, str]]:
    """(section title, "") and (key or panel, text) rows, in display order; attached
    (``can_launch`` False) without the commands attach refuses (``keys.LAUNCH_ACTIONS``)."""
    rows: list[tuple[str, str]] = [("Keys", "")]
    rows += [
        (f"{cmd.key_display} / {cmd.fkey.upper()}", cmd.help)
        for cmd in COMMANDS
        if offered(cmd.action, can_launch=can_launch)
    ]
    rows += [
        ("q", QUIT_HELP),
        ("ctrl+p", PALETTE_HELP),
        ("Esc", ESCAPE_HELP),
        ("ctrl+s", SAVE_PRESET_HELP),
        (
            "",
            "Letters type into text fields; the F-keys work everywhere. Tab moves between "
            "fields; once focused, the board scrolls with the arrow keys.",
        ),
        (
            "",
            "A lost terminal (SSH drop, closed tmux pane) detaches: the server keeps "
            "running, the next vtc reattaches to it, and `vtc stop` stops it. `vtc --attach URL` "
            "watches and loads a server vtc did not start (r and s refuse there).",
        ),
        ("Board", ""),
    ]
    rows += [
        (key.key_display, key.help)
        for key in BOARD_KEYS
        if offered(key.action, can_launch=can_launch)
    ]
    rows += [("Moving", "")]
    rows += list(NAVIGATION_HELP)
    rows += [("Panels", "")]
    rows += [
        (name, ATTACHED_METRICS if name == "Metrics" and not can_launch else text)
        for name, text in PANELS
    ]
    return rows


def help_table(variables: dict[str, str], rows: list[tuple[str, str]] | None = None) -> Table:
    """Every help row in one two-column grid: keys in the accent colour, sections bold.

    One renderable in one widget, not a widget per cell: opening help then lays out and
    styles a handful of widgets instead of ~130 (issue 22: ``?`` took 200-700 ms).
    ``variables`` are the app's theme variables (a Rich table takes colours, not ``$names``).
    """
    accent = variables.get("accent", "")
    primary = variables.get("text-primary", "")
    key_style = f"bold {accent}" if accent.startswith("#") else "bold"
    section_style = f"bold {primary}" if primary.startswith("#") else "bold"
    table = Table.grid(expand=True)
    table.add_column(width=KEY_WIDTH, style=key_style)
    table.add_column(ratio=1)
    for name, text in help_rows() if rows is None else rows:
        if not text:
            if table.row_count:
                table.add_row("", "")  # a blank line above each section but the first
            table.add_row(Text(name, style=section_style, no_wrap=True), "")
        else:
            table.add_row(name, text)
    return table


class HelpScreen(ModalScreen[None]):
    """Keys and panels; any of Esc, ?, q or F1 closes it.

    The console installs one and shows it again each time (:func:`show_help`), so it is
    composed once.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q,f1", "dismiss", "Close", key_display="Esc"),
    ]

    def __init__(self, *, can_launch: bool = True) -> None:
        super().__init__()
        self.rows = help_rows(can_launch=can_launch)  # attached: no refused command listed

    def compose(self) -> ComposeResult:
        """One scrolling text."""
        with VerticalScroll(id="help-box"):
            table = help_table(self.app.theme_variables, self.rows)
            yield Static(table, id="help-text")

    def on_mount(self) -> None:
        """Title the box."""
        box = self.query_one("#help-box")
        box.border_title = "vtc help"
        box.border_subtitle = "Esc closes"

    async def action_dismiss(self, result: None = None) -> None:
        """Close the modal."""
        self.dismiss(result)


def show_help(app: App[None], *, can_launch: bool = True) -> None:
    """Show help: the screen is installed on first use and shown again after (composed once);
    ``can_launch`` False (attached): without the commands attach refuses."""
    if not app.is_screen_installed(HELP_SCREEN):
        app.install_screen(HelpScreen(can_launch=can_launch), HELP_SCREEN)
    app.push_screen(HELP_SCREEN)
