"""What the Server panel shows, folded from the session's server events (a pure reducer)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from tui.domain.events import (
    Exited,
    Failed,
    KvCacheReported,
    Launched,
    LogLine,
    Ready,
    ServerEvent,
    ServerState,
    Stage,
    StageReached,
)
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


def view_from_record(record: RunRecord | None, state: ServerState) -> ServerView:
    """The panel's state for a run already on the board (the console was started late)."""
    if record is None:
        return ServerView(state=state)
    stages = record.startup.stages
    last = stages[-1] if stages else None
    ready = record.startup.seconds_to_ready
    return ServerView(
        state=state,
        run_label=record.label,
        stage=Stage.READY.value if ready is not None else (last.name if last else None),
        stage_at=ready if ready is not None else (last.started_at if last else None),
        ready_after=ready,
        kv_tokens=record.startup.kv_cache_tokens,
        max_concurrency=record.startup.max_concurrency,
        exit_code=record.exit_code,
        failure=(
            record.diagnosis.summary
            if record.status is RunStatus.FAILED and record.diagnosis
            else ""
        ),
    )


def reduce(view: ServerView, event: ServerEvent, state: ServerState) -> ServerView:
    """``view`` after ``event``; ``state`` is the session's own (authoritative) state."""
    if isinstance(event, Launched):
        return ServerView(
            state=state,
            run_label=view.run_label,
            pid=event.pid,
            stage=Stage.LAUNCHING.value,
            stage_at=0.0,
        )
    if isinstance(event, StageReached):
        return replace(view, state=state, stage=event.stage.value, stage_at=event.elapsed)
    if isinstance(event, KvCacheReported):
        return replace(
            view, state=state, kv_tokens=event.tokens, max_concurrency=event.max_concurrency
        )
    if isinstance(event, Ready):
        return replace(
            view,
            state=state,
            stage=Stage.READY.value,
            stage_at=event.elapsed,
            ready_after=event.elapsed,
            kv_tokens=event.kv_cache_tokens
            if event.kv_cache_tokens is not None
            else view.kv_tokens,
            max_concurrency=(
                event.max_concurrency if event.max_concurrency is not None else view.max_concurrency
            ),
            since_launch=None,
        )
    if isinstance(event, Failed):
        return replace(
            view,
            state=state,
            exit_code=event.exit_code,
            failure=event.diagnosis.summary,
            since_launch=None,
        )
    if isinstance(event, Exited):
        return replace(view, state=state, exit_code=event.exit_code, since_launch=None)
    if isinstance(event, LogLine):
        return view if view.state is state else replace(view, state=state)
    return view
