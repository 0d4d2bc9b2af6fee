"""What the Server panel shows: a projection of the current run's record plus live state.

The record (folded from the server's events by ``tui.domain.record.apply``) holds what the
start did; the live part is only what no record keeps: the process id and the clock while
it starts, and whether a READY server still answers ``/health`` (``Unanswered``: shown as
NOT RESPONDING with its silence, never as a green READY). Recomputed on every event, so the
panel can never drift from the board.
"""

from __future__ import annotations

from dataclasses import dataclass

from tui.domain.events import ServerState, Stage, Unanswered
from tui.domain.results import RunRecord, RunStatus


@dataclass(frozen=True)
class ServerView:
    """The Server panel's state: lifecycle, stage, KV figures, the failure if any."""

    state: ServerState = ServerState.IDLE
    run_label: str = ""
    pid: int | None = None
    stage: str | None = None
    stage_at: float | None = None  # seconds after launch the stage began
    ready_after: float | None = None
    kv_tokens: int | None = None
    max_concurrency: float | None = None
    exit_code: int | None = None
    failure: str = ""
    since_launch: float | None = None  # live clock while starting (None: not shown)
    silent_s: float | None = None  # READY but /health unanswered this long (None: answering)
    silent_why: str = ""
    can_stop: bool = True  # False (attached): the panel never offers ``s``
    url: str = ""  # where the server answers (shown while it starts and serves)


def project(
    record: RunRecord | None,
    state: ServerState,
    *,
    pid: int | None = None,
    since_launch: float | None = None,
    silence: Unanswered | None = None,
    can_stop: bool = True,
    url: str | None = None,
) -> ServerView:
    """The panel for ``record`` (the current run) in ``state``, with the live ``pid`` and clock."""
    silent = silence if state is ServerState.READY else None  # a stop in progress says so
    silent_s = silent.silent_s if silent is not None else None
    silent_why = silent.reason if silent is not None else ""
    live = state in (ServerState.STARTING, ServerState.READY)
    shown_url = (url or "") if live else ""
    if record is None:
        return ServerView(
            state=state,
            pid=pid,
            silent_s=silent_s,
            silent_why=silent_why,
            can_stop=can_stop,
            url=shown_url,
        )
    startup = record.startup
    last = startup.stages[-1] if startup.stages else None
    ready = startup.seconds_to_ready
    served = ready is not None or record.status is RunStatus.READY
    failed = record.status is RunStatus.FAILED
    return ServerView(
        state=state,
        run_label=record.label,
        pid=pid,
        stage=Stage.READY.value if served else (last.name if last else None),
        stage_at=ready if ready is not None else (last.started_at if last and not served else None),
        ready_after=ready,
        kv_tokens=startup.kv_cache_tokens,
        max_concurrency=startup.max_concurrency,
        exit_code=record.exit_code,
        failure=record.diagnosis.summary if failed and record.diagnosis else "",
        since_launch=since_launch if state is ServerState.STARTING else None,
        silent_s=silent_s,
        silent_why=silent_why,
        can_stop=can_stop,
        url=shown_url,
    )
