"""Run results: the benchmark result in ``vllm bench serve``'s keys, and the run record."""

from __future__ import annotations

from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from tui.domain.diagnosis import Diagnosis
from tui.domain.flags.serve import ServeFlags
from tui.domain.prediction import Prediction
from tui.domain.secret_names import holds_secret
from tui.domain.telemetry import LatencyQuantiles, SeriesPoint, ServerLatency
from tui.domain.workload import Endpoint, LoadSpec

# The telemetry summaries a run keeps are declared with the telemetry samples; re-exported here.
__all__ = [
    "BenchResult",
    "LatencyQuantiles",
    "MeasuringClient",
    "Reproduction",
    "RunRecord",
    "RunStatus",
    "SeriesPoint",
    "ServerLatency",
    "StageTiming",
    "StartupProfile",
    "SweepTag",
    "TelemetryPeaks",
]


MeasuringClient = Literal["in-loop", "vtc-worker", "vtc-bench"]
"""Which client measured a load: ``vtc-worker`` (the console's load in its own process,
the same engine as ``vtc bench``), ``vtc-bench`` (``vtc bench``) or ``in-loop`` (the
console's load on the UI's own event loop, before the worker; the default of older rows,
whose figures the UI could delay: issue 23)."""


class BenchResult(BaseModel):
    """One load run's numbers, with ``vllm bench serve``'s JSON key names (ref 4.2).

    Every key is a declared field (a misspelt one fails type checking instead of reading
    as a default). Latency statistics live in ``stats`` keyed exactly as bench serve
    writes them (``mean_ttft_ms``, ``median_tpot_ms``, ``p99_itl_ms``, ``std_e2el_ms``...;
    which percentiles exist depends on the run), so either tool's files compare key for
    key. The per-request lists of a result file are not kept here (see
    ``tui.load.result_file``).

    Records stored by earlier versions carried vtc's fields as untyped extras under the
    same names: they read back into these fields; unknown keys are dropped.
    """

    # Infinities and NaN (a statistic over no requests) as strings: they must read back.
    model_config = ConfigDict(extra="ignore", ser_json_inf_nan="strings")

    # -- bench serve's summary (serve.py:1280-1302), in its order -----------------------------
    duration: float = 0.0
    completed: int = 0
    failed: int = 0
    total_input_tokens: int = 0
    total_output_tokens: int = 0
    request_throughput: float = 0.0
    request_goodput: float | None = None  # None unless goodput SLOs were given
    output_throughput: float = 0.0
    total_token_throughput: float = 0.0
    max_output_tokens_per_s: float = 0.0  # peak chunk arrivals in one 1-second bucket
    max_concurrent_requests: int = 0
    rtfx: float = 0.0  # audio seconds per second: 0 for text workloads, as bench serve
    stats: dict[str, float] = Field(default_factory=dict)

    # -- the run's settings, as bench serve's file header names them (serve.py:2258-2282) -----
    model_id: str = ""
    tokenizer_id: str | None = None  # the tokenizer asked for (bench serve: --tokenizer or model)
    num_prompts: int = 0  # prompts of the run (a timed run: requests sent)
    request_rate: float | str = "inf"
    burstiness: float | str = 1.0
    max_concurrency: int | None = None

    # -- vtc's additions ------------------------------------------------------------------------
    endpoint: Endpoint = "completions"
    prompt_tokenizer: str = ""  # what built the prompts: a tokenizer.json folder or the approx
    num_warmups: int = 0
    duration_limit_s: float | None = None  # the run was bounded by time, not by count
    cancelled: bool = False  # stopped early: partial numbers
    not_sent: int = 0  # prompts of a cancelled count-bounded run never sent
    aborted_by_server: int = 0  # successes the server ended with finish_reason abort/error
    errors: list[str] = Field(default_factory=list)  # the first failures' texts
    client_input_tokens: int | None = None  # the client's own count of the answered prompts
    client_cpu_s: float = 0.0  # the client's CPU time during the run
    client_max_loop_lag_ms: float = 0.0  # worst lateness of the client's event loop
    client_bound_s: float = 0.0  # seconds the client, not the server, was the bottleneck
    client: MeasuringClient = "in-loop"  # which client measured it (older rows: in-loop)

    @property
    def complete(self) -> bool:
        """The load ran to its end: not cancelled, every prompt sent (else its numbers are
        partial, and each such load is kept as its own run, marked so)."""
        return not self.cancelled and self.not_sent == 0

    def metric(self, key: str) -> float | None:
        """A number by bench-serve key, from ``stats`` or the declared fields."""
        if key in self.stats:
            return self.stats[key]
        return self.numbers().get(key)

    def numbers(self) -> dict[str, float]:
        """Every number the result declares, by its key (the summary, the settings that are
        numbers, vtc's counts): typed fields, not names looked up; unset ones left out."""
        declared: dict[str, float | int | str | None] = {
            "duration": self.duration,
            "completed": self.completed,
            "failed": self.failed,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "request_throughput": self.request_throughput,
            "request_goodput": self.request_goodput,
            "output_throughput": self.output_throughput,
            "total_token_throughput": self.total_token_throughput,
            "max_output_tokens_per_s": self.max_output_tokens_per_s,
            "max_concurrent_requests": self.max_concurrent_requests,
            "rtfx": self.rtfx,
            "num_prompts": self.num_prompts,
            "request_rate": self.request_rate,  # "inf": not a number here
            "burstiness": self.burstiness,
            "max_concurrency": self.max_concurrency,
            "num_warmups": self.num_warmups,
            "duration_limit_s": self.duration_limit_s,
            "not_sent": self.not_sent,
            "aborted_by_server": self.aborted_by_server,
            "client_input_tokens": self.client_input_tokens,
            "client_cpu_s": self.client_cpu_s,
            "client_max_loop_lag_ms": self.client_max_loop_lag_ms,
            "client_bound_s": self.client_bound_s,
        }
        return {k: float(v) for k, v in declared.items() if isinstance(v, int | float)}

    def to_bench_json(self) -> dict[str, Any]:
        """Flat JSON in bench serve's layout (stats merged into the top level)."""
        data = self.model_dump(exclude={"stats"})
        data.update(self.stats)
        return data


class RunStatus(StrEnum):
    """Where a run stands: live (starting, ready) or how it ended.

    ``stopped``: the operator stopped it (``s``, quit). ``replaced``: stopped because the
    next run took its place (``r``). ``lost``: the console lost sight of it without seeing
    it end (a crash, or the server was gone when the next console looked). ``failed``: the
    start failed, or the server died on its own. ``served`` is not a status: a run served
    when it reached ready, whatever its end (:attr:`RunRecord.served`).
    """

    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"
    STOPPED = "stopped"
    REPLACED = "replaced"
    LOST = "lost"

    @property
    def live(self) -> bool:
        """Whether the run's server may still be running (starting or ready)."""
        return self in (RunStatus.STARTING, RunStatus.READY)


class StageTiming(BaseModel):
    """One startup stage and how long the server spent in it."""

    name: str
    started_at: float  # seconds since launch
    seconds: float | None = None
    detail: str = ""


class StartupProfile(BaseModel):
    """What a start cost and what it produced."""

    stages: list[StageTiming] = Field(default_factory=list)
    seconds_to_ready: float | None = None
    kv_cache_tokens: int | None = None
    max_concurrency: float | None = None
    kv_estimate_tokens: int | None = None  # the pre-flight estimate, to show its error


class TelemetryPeaks(BaseModel):
    """The highest readings while the run's load ran (``None``: not seen)."""

    kv_cache_usage: float | None = None  # 0-1
    num_waiting: float | None = None
    generation_tokens_per_s: float | None = None
    gpu_util: float | None = None  # percent
    gpu_mem_used_bytes: float | None = None
    server_rss_bytes: float | None = None


class Reproduction(BaseModel):
    """What it takes to run this again: the exact argv and the machine it ran on.

    Secrets never appear here: ``env`` holds only non-secret variables that change what
    vLLM does; ``secret_env`` holds the *names* of secrets the server was given.
    """

    argv: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    secret_env: list[str] = Field(default_factory=list)
    vllm_version: str | None = None
    gpu_name: str | None = None
    gpu_count: int | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    host: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _secrets_by_value(cls, data: Any) -> Any:
        """A variable holding a secret by its value's shape (``https://u:p@host``, a DSN),
        stored by an older vtc, is read back as a secret: its name kept, its value gone."""
        if not isinstance(data, dict) or not isinstance(data.get("env"), dict):
            return data
        env = data["env"]
        hidden = [k for k, v in env.items() if isinstance(v, str) and holds_secret(str(k), v)]
        if not hidden:
            return data
        names = list(data.get("secret_env") or [])
        return {
            **data,
            "env": {k: v for k, v in env.items() if k not in hidden},
            "secret_env": names + [k for k in hidden if k not in names],
        }


class SweepTag(BaseModel):
    """Marks a run as one trial of a sweep.

    ``load``: which load on the trial's server the run holds. A trial's procedure may run
    several (the search's rate bisection, auto_tune's descent): the first lands on the
    trial's own run (1), each further one is a run of its own (2, 3, ...: ``load_of`` the
    trial's run), a probe of the same server, never a trial of its own.
    """

    sweep_id: str
    trial: int
    note: str = ""
    load: int = 1
    where: str = ""  # a cluster sweep: the node and GPUs the trial ran on (``node-a gpu 0,1``)


class RunRecord(BaseModel):
    """One run on the board: flags, how the start went, and the load result if any.

    A run holds one load. Another load on the same server is its own run (every load is
    kept, issue 23): a copy of the server's run, ``load_of`` naming it, with its own time,
    workload and result; it is a repeat in that run's noise group (same flags, same
    setting) and shares its server's status.
    """

    id: int | None = None
    created_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    label: str = ""
    flags: ServeFlags
    status: RunStatus = RunStatus.STARTING
    executable: str = "vllm"
    startup: StartupProfile = Field(default_factory=StartupProfile)
    diagnosis: Diagnosis | None = None
    bench: BenchResult | None = None
    workload: LoadSpec | None = None
    peaks: TelemetryPeaks = Field(default_factory=TelemetryPeaks)
    server_latency: ServerLatency | None = None
    series: list[SeriesPoint] = Field(default_factory=list)
    repro: Reproduction | None = None
    sweep: SweepTag | None = None
    # The console session that made the run (one id per ``vtc`` process), so "the first
    # served run of this session" (the board's default baseline) is knowable; ``None`` on
    # records from before sessions were recorded.
    session: str | None = None
    log_path: str | None = None
    exit_code: int | None = None
    ended_because: str = ""  # one line, when the status alone does not say why it ended
    # The server process a console launched for the run (``None``: attached, or recorded
    # before vtc kept it): how a later reader tells a live run from one whose server is gone.
    server_pid: int | None = None
    last_seen: datetime | None = None  # a lost run: when its server was last known alive
    load_of: int | None = None  # a further load on that run's server (None: its own start)
    # What the twin of the server predicted for the load, before it ran (issue 20).
    prediction: Prediction | None = None

    @model_validator(mode="before")
    @classmethod
    def _migrate(cls, data: Any) -> Any:
        """Read records stored by earlier versions (untyped ``workload`` and ``telemetry``)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if data.get("workload") == {}:
            data["workload"] = None
        legacy = data.pop("telemetry", None)
        if isinstance(legacy, dict) and "peaks" not in data:
            data["peaks"] = {
                key.removeprefix("peak_"): value
                for key, value in legacy.items()
                if key.startswith("peak_")
            }
        return data

    def another_load(self) -> RunRecord:
        """A new run for a further load on this run's server (not stored yet: no id)."""
        return RunRecord(
            flags=self.flags,
            label="",
            status=self.status,
            executable=self.executable,
            startup=self.startup,
            repro=self.repro,
            sweep=self.sweep,
            session=self.session,
            log_path=self.log_path,
            load_of=self.load_of or self.id,
        )

    @property
    def probe(self) -> bool:
        """Whether this run is a further load of a sweep trial's server (a probe, not the
        trial's own run): never an automatic baseline."""
        return self.sweep is not None and self.load_of is not None

    @property
    def served(self) -> bool:
        """Whether the run's server reached ready (a load could be, or was, run)."""
        return self.startup.seconds_to_ready is not None or self.status is RunStatus.READY
