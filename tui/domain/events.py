"""What the server supervisor reports while a run starts, serves and ends.

Plain data: the supervisor emits these, the UI renders them, the store keeps their summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from tui.domain.diagnosis import Diagnosis


class ServerState(StrEnum):
    """The lifecycle of one server process as the console sees it."""

    IDLE = "idle"
    STARTING = "starting"
    READY = "ready"
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


class Stage(StrEnum):
    """Startup stages recognised in vLLM's log (in the order they normally happen)."""

    LAUNCHING = "launching"
    LOADING_WEIGHTS = "loading weights"
    PROFILING = "profiling memory"
    KV_CACHE = "KV cache allocated"
    COMPILING = "compiling / capturing graphs"
    API_UP = "API up"
    READY = "ready"


@dataclass(frozen=True)
class Launched:
    """The process started; ``argv`` is exactly what was executed."""

    pid: int
    argv: tuple[str, ...]
    log_path: str | None


@dataclass(frozen=True)
class StageReached:
    """The log shows the server entered ``stage`` at ``elapsed`` seconds after launch."""

    stage: Stage
    elapsed: float
    detail: str = ""


@dataclass(frozen=True)
class LogLine:
    """One line of the server's combined stdout/stderr."""

    text: str


@dataclass(frozen=True)
class KvCacheReported:
    """The server logged ``<DEV> KV cache size: N tokens, Maximum concurrency ...: Cx``."""

    device: str
    tokens: int
    max_model_len: int
    max_concurrency: float


@dataclass(frozen=True)
class Ready:
    """Own process alive and /health answered 200.

    ``timed``: ``elapsed`` is this console's measure of a start it watched from launch;
    ``False`` for a server found already running (adopted, attached), whose start time is
    not known here.
    """

    elapsed: float
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    timed: bool = True


@dataclass(frozen=True)
class Failed:
    """The start failed (process exited, or timed out), with its diagnosis."""

    elapsed: float
    exit_code: int | None
    diagnosis: Diagnosis


@dataclass(frozen=True)
class Exited:
    """The process ended (after a stop, or on its own after being ready)."""

    exit_code: int | None
    requested: bool = field(default=False)  # True when the console asked it to stop


@dataclass(frozen=True)
class Unanswered:
    """The process is alive but ``/health`` gave no 200 within its deadline (hung, stopped
    with SIGSTOP, or swamped): ``silent_s`` since its last answer, ``reason`` the last probe's
    outcome. Sent again at each failed probe (the age grows) until :class:`Answered`."""

    silent_s: float
    reason: str = ""


@dataclass(frozen=True)
class Answered:
    """``/health`` answers again after :class:`Unanswered`."""


ServerEvent = (
    Launched
    | StageReached
    | LogLine
    | KvCacheReported
    | Ready
    | Failed
    | Exited
    | Unanswered
    | Answered
)
