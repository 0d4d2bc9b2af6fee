"""The board's questions: which runs to show, how many repeats, which export format.

Each function pushes its dialog and hands the answer (``None``: dismissed) to ``done``; the
board keeps only what it does with the answer.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.app import App

from tui.domain.export import EXPORT_FORMATS
from tui.ui.board_query import check_filter
from tui.ui.screen_keeper import open_screen
from tui.ui.screens.ask import AskScreen
from tui.ui.screens.choice import Choice, ChoiceScreen

DEFAULT_REPEATS = 3
EXPORT_CHOICES: dict[str, str] = {
    "command": "the vllm serve command line (a shell script)",
    "yaml": "vLLM's --config YAML",
    "compose": "a docker compose service (GPU reservation, HF cache, shm)",
    "systemd": "a systemd unit (secrets from its EnvironmentFile=)",
    "k8s": "a Kubernetes Deployment (secrets from a Secret)",
}
FILTER_HINT = (
    "all · served · failed · NAME=VALUE (e.g. max_num_seqs=256); several terms: all must hold; "
    "empty: all"
)


def ask_filter(app: App[object], suggestion: str, done: Callable[[str | None], None]) -> None:
    """Ask which runs to show, ``suggestion`` typed in (selected: typing replaces it)."""
    ask = AskScreen("Filter runs", suggestion, hint=FILTER_HINT, check=check_filter)
    open_screen(app, ask, done)


def ask_repeats(app: App[object], label: str, done: Callable[[int], object]) -> None:
    """Ask how many times to repeat the run ``label``; ``done`` gets the count if given."""

    def answered(text: str | None) -> None:
        if text is not None:
            done(int(text))

    ask = AskScreen(
        f"Repeat {label} how many times?",
        str(DEFAULT_REPEATS),
        hint="each: restart with its flags, wait ready, run its workload",
        check=check_times,
    )
    open_screen(app, ask, answered)


def ask_export_format(app: App[object], label: str, done: Callable[[str], object]) -> None:
    """Ask which format to export the run ``label`` as; ``done`` gets it if chosen."""
    choices = [Choice(fmt, f"{fmt:<8} {EXPORT_CHOICES.get(fmt, '')}") for fmt in EXPORT_FORMATS]

    def chosen(fmt: str | None) -> None:
        if fmt is not None:
            done(fmt)

    open_screen(app, ChoiceScreen(f"Export {label} as", choices), chosen)


def check_times(text: str) -> str | None:
    """Why ``text`` is not a repeat count, or ``None``."""
    if not text.strip().isdigit() or not 1 <= int(text) <= 20:
        return "a whole number from 1 to 20"
    return None
