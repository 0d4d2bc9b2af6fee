"""The Server panel: lifecycle state, the current startup stage, KV figures, the log tail."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.reactive import reactive
from textual.widgets import Static

from tui.domain.events import ServerState
from tui.ui.format import inert_rendering, seconds, tokens
from tui.ui.server_view import ServerView
from tui.ui.widgets.log_tail import LogTail

_STATE_STYLE = {
    ServerState.IDLE: "$text-muted",
    ServerState.STARTING: "$warning",
    ServerState.READY: "$success",
    ServerState.STOPPING: "$warning",
    ServerState.STOPPED: "$text-muted",
    ServerState.FAILED: "$error",
}


NOT_RESPONDING = "NOT RESPONDING"


def _silent_lines(view: ServerView) -> Content:
    """A READY server whose /health does not answer: alive, not serving (hung, stopped)."""
    head: list[str | tuple[str, str]] = [(f"● {NOT_RESPONDING}", "bold $error")]
    if view.run_label:
        head.append(f"  run {view.run_label}")
    if view.pid is not None:
        head.append(f" · pid {view.pid}")
    head.append(f" · silent {view.silent_s or 0:.0f}s")
    # Short enough for 80 columns: what to do must not be cut off.
    todo = "s stops it" if view.can_stop else "not vtc's to stop"
    detail = Content.styled(
        f"{view.silent_why or 'no /health answer'} · alive, hung or stopped · {todo}", "$error"
    )
    return Content("\n").join([Content.assemble(*head), detail])


def fit_failure(summary: str, width: int | None) -> str:
    """A failure's summary whole in ``width`` cells, shortened by meaning, never cut mid-value
    (``... 0.28 GiB a…``): as it is, else without its parenthesised figures, else its
    leading clauses; the run's card has it all."""
    if width is None or len(summary) <= width:
        return summary
    bare = re.sub(r"\s*\([^)]*\)", "", summary)
    if len(bare) <= width:
        return bare
    clauses = re.split(r"(?<=[;:]) ", bare)
    kept = clauses[0].rstrip(";:")
    for clause in clauses[1:]:
        longer = f"{kept}; {clause.rstrip(';:')}"
        if len(longer) + len(CARD_SAYS) > width:
            break
        kept = longer
    return kept + CARD_SAYS if len(kept) + len(CARD_SAYS) <= width else kept[:width]


CARD_SAYS = " · its card says all"


def _head(view: ServerView) -> Content:
    """The first line: the state, the run, its process and clock, where it answers."""
    head: list[str | tuple[str, str]] = [
        (f"● {view.state.value.upper()}", f"bold {_STATE_STYLE[view.state]}"),
    ]
    if view.run_label:
        head.append(f"  run {view.run_label}")
    if view.pid is not None:
        head.append(f" · pid {view.pid}")
    if view.ready_after is not None and view.state is ServerState.READY:
        head.append(f" · up in {seconds(view.ready_after)}")
    if view.since_launch is not None:
        head.append(f" · {view.since_launch:.0f}s since launch")
    if view.exit_code is not None and view.state is not ServerState.READY:
        head.append(f" · exit {view.exit_code}")
    if view.url:
        head.append((f" · {view.url}", "$text-muted"))
    return Content.assemble(*head)


def _progress(view: ServerView) -> str:
    """The second line of a server that did not fail: its stage, its KV figures."""
    parts = []
    if view.stage and view.state is not ServerState.READY:  # READY: "up in" says it
        at = f" @{seconds(view.stage_at)}" if view.stage_at is not None else ""
        parts.append(f"stage {view.stage}{at}")
    if view.kv_tokens is not None:
        parts.append(f"KV cache {tokens(view.kv_tokens)} tok")
    if view.max_concurrency is not None:
        parts.append(f"max concurrency {view.max_concurrency:.2f}x")
    if not parts and view.state is ServerState.READY:
        parts.append("serving (its KV figures were not in a log this console read)")
    elif not parts:
        parts.append("no server yet: r starts one with the form's flags")
    return " · ".join(parts)


@inert_rendering
def status_lines(view: ServerView, width: int | None = None) -> Content:
    """The two status lines above the log tail (``width``: the failure's line fits it)."""
    if view.silent_s is not None and view.state is ServerState.READY:
        return _silent_lines(view)
    if view.failure and view.state is ServerState.FAILED:
        detail = Content.styled(fit_failure(view.failure, width), "$error")
    else:
        detail = Content(_progress(view))
    return Content("\n").join([_head(view), detail])


class ServerPanel(Vertical):
    """Renders a :class:`ServerView` and holds the log tail."""

    view: reactive[ServerView] = reactive(ServerView)

    def compose(self) -> ComposeResult:
        """Status lines, then the tail."""
        yield Static(status_lines(self.view), id="server-status")
        yield LogTail(id="log-tail")

    def watch_view(self, view: ServerView) -> None:
        """Redraw the status lines."""
        if self.is_mounted:
            status = self.query_one("#server-status", Static)
            status.update(status_lines(view, status.size.width or None))

    def on_resize(self) -> None:
        """A new width: the failure's line fits it again."""
        self.watch_view(self.view)

    @property
    def tail(self) -> LogTail:
        """The log tail widget."""
        return self.query_one(LogTail)
