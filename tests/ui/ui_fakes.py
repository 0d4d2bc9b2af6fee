"""A scripted stand-in for ``tui.session.Session`` and the fixed data the UI tests show.

``FakeSession`` implements the surface the console uses (``tui.session.port.SessionPort``)
and records every command, so Pilot tests can assert what the console asked for. Tests push
events with :meth:`FakeSession.emit`, exactly as the real session's callbacks would.
Everything here is fixed data: no clocks, no randomness.
"""

from __future__ import annotations

import asyncio
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fakes.capacity_twin import QueueTwin
from fakes.runs import failed_run, served_run
from rich.console import Console
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Static

from tui.domain.board.saved import SavedBoard
from tui.domain.calibration import Progress
from tui.domain.capacity import CapacityAnswer
from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.errors import VtcError
from tui.domain.events import ServerEvent, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.vllm_cli import VllmCli
from tui.domain.history import TelemetryHistory
from tui.domain.log_tail import LogTail
from tui.domain.prediction import Prediction
from tui.domain.presets import Preset
from tui.domain.record import apply
from tui.domain.results import (
    BenchResult,
    Reproduction,
    RunRecord,
    RunStatus,
    SeriesPoint,
    StageTiming,
    StartupProfile,
    SweepTag,
)
from tui.domain.saved_form import SavedForm
from tui.domain.server_config import ServerConfig
from tui.domain.sweep import SweepSpec, SweepState, SweepStatus
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.slo import SloLimits
from tui.domain.telemetry import GpuDevice, GpuSample, HostSample, ServerMetrics, SourceStatus
from tui.domain.workload import LoadProgress, LoadSpec
from tui.modes import attach, demo
from tui.session.port import RunUpdated, SessionEvent, SessionInfo, SweepUpdated
from tui.twin.capacity import search

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
VLLM_CLI_FIXTURE = Path(__file__).parent.parent / "domain" / "vllm_cli_fixture.json"
GIB = 1024**3
FIXED_TIME = datetime(2026, 1, 1, tzinfo=UTC)


class FakeTools:
    """The board's session commands (``SessionTools``): recorded, with scripted answers."""

    def __init__(self) -> None:
        self.repeats: list[tuple[int | None, int]] = []
        self.exports: list[tuple[int | None, str]] = []
        self.saved: list[Preset] = []
        self.logs: dict[int, LogTail] = {}
        self.log_reads: list[int | None] = []
        self.board = SavedBoard()  # the board's lasting choices, as the files would keep them
        self.board_saves: list[SavedBoard] = []
        self.form_saves: list[SavedForm] = []  # the form kept for the next console

    async def repeat(self, run: RunRecord, times: int) -> list[RunRecord]:
        """Record the request (no runs are made)."""
        self.repeats.append((run.id, times))
        return []

    async def export(self, run: RunRecord, fmt: str) -> Path:
        """Record the request; the path a real export would have."""
        self.exports.append((run.id, fmt))
        return Path("/data/vtc/exports/runs") / str(run.id) / f"{fmt}.out"

    async def save_preset(self, preset: Preset) -> Path:
        """Record the preset."""
        self.saved.append(preset)
        return Path("/config/vtc/presets") / f"{preset.name}.toml"

    async def log_tail(self, run: RunRecord) -> LogTail:
        """The scripted log of ``run``, else what the real tools say without a log."""
        self.log_reads.append(run.id)
        return self.logs.get(run.id or 0, LogTail((), "no log file recorded for this run"))

    async def saved_board(self) -> SavedBoard:
        """The choices a previous console left (set by the test)."""
        return self.board

    async def save_board(self, saved: SavedBoard) -> None:
        """Keep ``saved`` as the files would (recorded)."""
        self.board = saved
        self.board_saves.append(saved)

    async def save_form(self, saved: SavedForm) -> None:
        """Keep the form as the files would (recorded)."""
        self.form_saves.append(saved)


class FakeSession:
    """Records the console's commands; state and events are set by the test."""

    def __init__(
        self,
        *,
        runs: Sequence[RunRecord] = (),
        state: ServerState = ServerState.IDLE,
        initial_flags: ServeFlags | None = None,
        initial_load: LoadSpec | None = None,
        presets: Sequence[Preset] = (),
        mode_label: str = "demo · simulated NVIDIA GeForce RTX 3080 (10 GiB)",
        can_restart: bool = True,
        log_lines: Sequence[str] = (),
        warnings: Sequence[str] = (),
        vllm_cli: VllmCli | None = None,
    ) -> None:
        self.mode_label = mode_label
        self.can_restart = can_restart
        self.presets = list(presets)
        self.runs: list[RunRecord] = list(runs)
        self.current: RunRecord | None = self.runs[-1] if self.runs else None
        self.state = state
        self.initial_flags = initial_flags or ServeFlags(model=MODEL)
        self.initial_load = initial_load or LoadSpec()
        self.initial_preset: str | None = None
        self.log_lines: list[str] = list(log_lines)
        self.notices: list[str] = []
        self.vllm_cli = vllm_cli  # the real session loads it after start (tests set it)
        self.vllm_cli_error: str | None = None
        self.warnings = list(warnings)
        self.listeners: list[Callable[[SessionEvent], None]] = []
        self.calls: list[str] = []
        self.restarted_with: list[ServeFlags] = []
        self.loads: list[LoadSpec] = []
        self.preflighted: list[ServeFlags] = []
        self.closed = False
        self.load_running = False  # a test sets it: the fake's loads end at once
        self.sweeps: FakeSweeps | None = FakeSweeps(self) if can_restart else None
        self.twin: FakeTwin | None = None  # a test sets one: the console's twin
        self.history = TelemetryHistory()  # the samples emitted, as the real hub keeps them
        self.tools = FakeTools()
        self.server_config: ServerConfig | None = None  # attached: what was read (tests set it)
        self.base_url: str | None = "http://127.0.0.1:8000"  # where the server answers

    # -- the session surface ----------------------------------------------------------------
    @property
    def info(self) -> SessionInfo:
        """What the mode decided, from the fake's settable attributes."""
        never = None
        if self.mode_label.startswith("demo"):
            never = demo.NO_FLAG_LIST
        elif self.mode_label.startswith("attached"):
            never = attach.NO_FLAG_LIST
        return SessionInfo(
            label=self.mode_label,
            initial_flags=self.initial_flags,
            initial_load=self.initial_load,
            presets=self.presets,
            initial_preset=self.initial_preset,
            notices=self.notices,
            no_flag_list=never,
            sweeps=self.sweeps,
            twin=self.twin,
        )

    def subscribe(self, callback: Callable[[SessionEvent], None]) -> None:
        """Remember the console's callback."""
        self.listeners.append(callback)

    async def start(self) -> None:
        """Nothing to start."""
        self.calls.append("start")

    async def restart(
        self,
        flags: ServeFlags,
        sweep: SweepTag | None = None,
        *,
        proceed: Callable[[], bool] | None = None,
    ) -> RunRecord:
        """Add a STARTING run and announce it, like the real session."""
        self.calls.append("restart")
        self.restarted_with.append(flags)
        record = RunRecord(
            id=len(self.runs) + 1,
            created_at=FIXED_TIME,
            label=f"#{len(self.runs) + 1}",
            flags=flags,
            sweep=sweep,
        )
        self.runs.append(record)
        self.current = record
        self.state = ServerState.STARTING
        self.emit(RunUpdated(record))
        return record

    async def run_load(self, spec: LoadSpec, model: str | None = None) -> BenchResult | None:
        """Record the request (no load is generated); refused while one runs, as the real
        session refuses it."""
        if self.load_running:
            raise VtcError("a load run is already in progress", hint="c cancels it")
        self.calls.append("run_load")
        self.loads.append(spec)
        return None

    async def cancel_load(self) -> None:
        """Record the request."""
        self.calls.append("cancel_load")

    async def stop_server(self) -> None:
        """Record the request."""
        self.calls.append("stop_server")
        self.state = ServerState.STOPPED

    async def close(self) -> None:
        """Record that the console closed the session."""
        self.calls.append("close")
        self.closed = True

    async def detach(self) -> bool:
        """Record that the console detached (the server would run on)."""
        self.calls.append("detach")
        return True

    async def preflight(self, flags: ServeFlags) -> list[str]:
        """The scripted warnings."""
        self.preflighted.append(flags)
        return list(self.warnings)

    # -- test controls ----------------------------------------------------------------------
    def emit(self, event: SessionEvent) -> None:
        """Deliver ``event`` to the console, as the session's pollers and server slot do.

        A server event is first folded into the current run (announced with ``RunUpdated``),
        as the real session's run book does before the event reaches the console.
        """
        if isinstance(event, GpuSample):
            self.history.record_gpu(event)
        elif isinstance(event, ServerMetrics):
            self.history.record_metrics(event)
        elif isinstance(event, HostSample):
            self.history.record_host(event)
        if isinstance(event, ServerEvent) and self.current is not None:
            folded = apply(self.current, event)
            if folded is not self.current:
                self.update_run(folded)
        for listener in list(self.listeners):
            listener(event)

    def update_run(self, record: RunRecord) -> None:
        """Replace a run by id and announce it."""
        self.runs = [record if r.id == record.id else r for r in self.runs]
        if self.current is not None and self.current.id == record.id:
            self.current = record
        self.emit(RunUpdated(record))


class FakeTwin:
    """A twin whose predictions are given and whose calibration the test steps through.

    ``predict`` answers ``prediction`` (recording each call); ``calibrate`` reports each
    :class:`Progress` the test puts on ``steps`` and ends when it puts ``None``.
    """

    def __init__(self, prediction: Prediction | None) -> None:
        self.prediction = prediction
        self.predicted: list[tuple[ServeFlags, LoadSpec]] = []
        self.steps: asyncio.Queue[Progress | None] = asyncio.Queue()
        self.calibrating = False
        self.calibrated: list[str] = []
        self.capacity_queue: QueueTwin | None = QueueTwin()
        self.capacity_asked: list[tuple[str, ServeFlags, SloLimits]] = []

    async def predict(self, flags: ServeFlags, load: LoadSpec) -> Prediction | None:
        """The given prediction."""
        self.predicted.append((flags, load))
        return self.prediction

    async def calibrate(self, name: str, on_progress: Callable[[Progress], None]) -> str:
        """Report the test's steps until it puts ``None``."""
        self.calibrating = True
        try:
            while (step := await self.steps.get()) is not None:
                on_progress(step)
        finally:
            self.calibrating = False
        self.calibrated.append(name)
        return f"twin {name} r1 saved: validation error ±6% (median 4%, worst 9%); fit error ±3%"

    async def capacity(
        self,
        flags: ServeFlags,
        load: LoadSpec,
        slos: SloLimits,
        *,
        target_rate: float | None = None,
        name: str = "current",
    ) -> CapacityAnswer:
        """The search on a queue of known capacity (``capacity_queue``); each ask recorded."""
        self.capacity_asked.append((name, flags, slos))
        if self.capacity_queue is None:
            raise VtcError("no profile of this server (m)", hint="k calibrates it")
        # A still clock: the fake's queue answers at once, and the view's "in N s" is a
        # scene, not the test machine's load.
        answer = search(self.capacity_queue, load, slos, target_rate=target_rate, clock=lambda: 0.0)
        return answer.model_copy(update={"flags_name": name, "model": flags.model})


class FakeSweeps:
    """The session's sweeps as the console sees them: starts recorded, status set by tests."""

    def __init__(self, session: FakeSession) -> None:
        self._session = session
        self.status: SweepStatus | None = None
        self.started: list[tuple[SweepSpec, int | None]] = []
        self.clusters: list[ClusterChoice | None] = []
        self.stops = 0
        self.unfinished: list[SweepSpec] = []
        self.resumed: list[str] = []

    @property
    def running(self) -> bool:
        """Whether the scripted status says it runs."""
        return self.status is not None and self.status.live

    def start(
        self,
        spec: SweepSpec,
        *,
        baseline_run_id: int | None = None,
        cluster: ClusterChoice | None = None,
    ) -> None:
        """Record the spec (and where it runs) and announce a running sweep."""
        self.started.append((spec, baseline_run_id))
        self.clusters.append(cluster)
        self.publish(
            SweepStatus(
                sweep_id=spec.sweep_id(),
                name=spec.name,
                strategy=spec.strategy,
                objective=spec.objective,
                state=SweepState.RUNNING,
                baseline_run_id=baseline_run_id,
            )
        )

    async def stop(self) -> None:
        """Record the stop and announce it."""
        self.stops += 1
        if self.status is not None:
            self.publish(replace(self.status, state=SweepState.STOPPED, message="stopped"))

    async def resume(self, sweep_id: str, *, baseline_run_id: int | None = None) -> SweepSpec:
        """Resume a scripted unfinished sweep by id (``VtcError`` when none has it)."""
        spec = next((s for s in self.unfinished if s.sweep_id() == sweep_id), None)
        if spec is None:
            raise VtcError(f"sweep {sweep_id} has no journal here: nothing to resume")
        self.resumed.append(sweep_id)
        self.start(spec, baseline_run_id=baseline_run_id)
        return spec

    async def resumable(self) -> list[SweepSpec]:
        """The scripted unfinished sweeps."""
        return list(self.unfinished)

    def publish(self, status: SweepStatus) -> None:
        """Set the status and deliver it, as the real service does."""
        self.status = status
        self._session.emit(SweepUpdated(status))


# -- fixed data -------------------------------------------------------------------------------
def baseline_flags() -> ServeFlags:
    """Seed 000's working run: 0.9 utilization, 400 tokens, 256 sequences, fp16."""
    return ServeFlags(
        model=MODEL,
        gpu_memory_utilization=0.9,
        max_model_len=400,
        dtype="float16",
    )


def kv_failure() -> Diagnosis:
    """Seed 000 run 1: the KV cache cannot hold one max-length sequence."""
    return Diagnosis(
        kind="kv_cache_too_small",
        summary=(
            "max_model_len 30576 needs more KV cache than fits: at most 1136 tokens "
            "fit in 0.9 x 10 GiB"
        ),
        facts={"max_model_len": 30576, "estimated_max_model_len": 1136},
        fixes=[
            Fix(title="Lower max_model_len to 1136", set={"max_model_len": 1136}),
            Fix(title="Use an fp8 KV cache", set={"kv_cache_dtype": "fp8"}),
        ],
    )


def bench(
    output_tps: float, req_s: float, ttft: float, p99_ttft: float, tpot: float, itl99: float
) -> BenchResult:
    """A bench result with the six numbers a card shows."""
    return BenchResult(
        completed=64,
        failed=0,
        duration=12.5,
        output_throughput=output_tps,
        request_throughput=req_s,
        stats={
            "mean_ttft_ms": ttft,
            "median_ttft_ms": ttft * 0.9,
            "p99_ttft_ms": p99_ttft,
            "mean_tpot_ms": tpot,
            "median_itl_ms": tpot * 0.95,
            "p99_itl_ms": itl99,
        },
    )


def board_runs() -> list[RunRecord]:
    """Three runs: a baseline with numbers, a failed start, a faster fp8 run."""
    base = baseline_flags()
    return [
        RunRecord(
            id=1,
            created_at=FIXED_TIME,
            label="#1",
            flags=base,
            status=RunStatus.READY,
            startup=StartupProfile(
                seconds_to_ready=41.2, kv_cache_tokens=10944, max_concurrency=27.36
            ),
            bench=bench(640.0, 5.0, 120.0, 340.0, 24.0, 45.0),
        ),
        RunRecord(
            id=2,
            created_at=FIXED_TIME,
            label="#2",
            flags=base.replace(max_model_len=30576),
            status=RunStatus.FAILED,
            exit_code=1,
            diagnosis=kv_failure(),
        ),
        RunRecord(
            id=3,
            created_at=FIXED_TIME,
            label="#3",
            flags=base.replace(max_model_len=512, quantization="fp8", max_num_seqs=256),
            status=RunStatus.READY,
            startup=StartupProfile(
                seconds_to_ready=38.0, kv_cache_tokens=21888, max_concurrency=42.75
            ),
            bench=bench(720.0, 5.6, 135.0, 300.0, 21.0, 50.0),
        ),
    ]


def gpu_sample() -> GpuSample:
    """One RTX 3080 under load."""
    return GpuSample(
        t=100.0,
        source="nvml",
        status=SourceStatus.OK,
        devices=(
            GpuDevice(
                index=0,
                name="NVIDIA GeForce RTX 3080",
                memory_used=int(9.1 * GIB),
                memory_total=10 * GIB,
                utilization=97.0,
                temperature_c=71.0,
                power_w=318.0,
            ),
        ),
    )


def host_sample() -> HostSample:
    """The host the server runs on."""
    return HostSample(
        t=100.0,
        cpu_percent=12.0,
        memory_used=8 * GIB,
        memory_total=32 * GIB,
        server_rss=int(3.2 * GIB),
        server_processes=3,
    )


def server_metrics() -> ServerMetrics:
    """A busy server's /metrics."""
    return ServerMetrics(
        t=100.0,
        status=SourceStatus.OK,
        kv_cache_usage=0.431,
        num_running=12,
        num_waiting=0,
        prompt_tokens_per_s=1180.0,
        generation_tokens_per_s=702.0,
        prefix_cache_hit_rate=0.0,
        preemptions_total=0,
    )


def load_progress(done: int, tps: float) -> LoadProgress:
    """One progress tick of a 64-prompt run."""
    return LoadProgress(
        elapsed=done / 5,
        done=done,
        failed=0,
        in_flight=16,
        total=64,
        output_tokens_per_s=tps,
        ttft_p50_ms=118.0,
        ttft_p99_ms=330.0,
        itl_p50_ms=22.0,
        itl_p99_ms=48.0,
        loop_lag_ms=3.0,
    )


LOG_TAIL = (
    "INFO 01-01 00:00:30 [gpu_worker.py:298] Available KV cache memory: 1.34 GiB",
    "INFO 01-01 00:00:30 [kv_cache_utils.py:1087] GPU KV cache size: 21,888 tokens",
    "INFO 01-01 00:00:31 [kv_cache_utils.py:1091] Maximum concurrency for 512 tokens per "
    "request: 42.75x",
    "INFO 01-01 00:00:38 [api_server.py:1880] Starting vLLM API server 0 on http://127.0.0.1:8000",
    "INFO:     Started server process [4242]",
    "INFO:     Application startup complete.",
)


def presets() -> list[Preset]:
    """Two presets: seed 000's best run and a throughput-first one."""
    return [
        Preset(
            name="rtx3080-8b-fp8-best",
            description="Seed 000's best run on a 10 GB RTX 3080.",
            source="seed 000, run 17",
            flags=ServeFlags(
                model=MODEL, max_model_len=512, quantization="fp8", block_size=32, dtype="float16"
            ),
            workload=LoadSpec(input_len=200, output_len=200, num_prompts=32, max_concurrency=8),
        ),
        Preset(
            name="max-throughput",
            description="Throughput first.",
            source="seeds/002",
            flags=ServeFlags(
                model=MODEL,
                gpu_memory_utilization=0.95,
                max_num_seqs=512,
                enable_prefix_caching=True,
            ),
        ),
    ]


def populated_session() -> FakeSession:
    """The snapshot scene: a ready server, a GPU sample, a board with a failed run."""
    runs = board_runs()
    return FakeSession(
        runs=runs,
        state=ServerState.READY,
        initial_flags=runs[-1].flags,
        initial_load=LoadSpec(num_prompts=64, max_concurrency=16),
        presets=presets(),
        log_lines=LOG_TAIL,
    )


def fixture_cli() -> VllmCli:
    """A small flag list: part of vLLM 0.32.0's ``vllm serve`` (tests/domain's fixture)."""
    return VllmCli.from_json(json.loads(VLLM_CLI_FIXTURE.read_text()))


# -- the board (issue 10) ------------------------------------------------------------------------
BOARD_LOAD = LoadSpec(num_prompts=64, max_concurrency=16)


def three_session_runs() -> list[RunRecord]:
    """Issue 10's scene: three runs from three console sessions.

    Two served with different flags (the second raised max_num_seqs and turned prefix
    caching on), the third failed to start (max_model_len too large for the KV cache).
    """
    first = served_run(
        1,
        tput=640.0,
        ttft_p99=340.0,
        workload=BOARD_LOAD,
        session="s1",
        max_num_seqs=128,
        max_model_len=4096,
    )
    second = served_run(
        2,
        tput=905.0,
        ttft_p99=410.0,
        workload=BOARD_LOAD,
        session="s2",
        max_num_seqs=256,
        max_model_len=4096,
        enable_prefix_caching=True,
    )
    third = failed_run(3, session="s3", max_num_seqs=128, max_model_len=30576)
    third = third.model_copy(update={"diagnosis": kv_failure(), "exit_code": 1})
    return [r.model_copy(update={"created_at": FIXED_TIME}) for r in (first, second, third)]


def many_runs(count: int) -> list[RunRecord]:
    """``count`` served runs of one session, max_num_seqs stepping up (a long board)."""
    return [
        served_run(
            i,
            tput=500.0 + 37.0 * i,
            ttft_p99=200.0 + 11.0 * i,
            workload=BOARD_LOAD,
            session="s1",
            max_num_seqs=16 * i,
        ).model_copy(update={"created_at": FIXED_TIME})
        for i in range(1, count + 1)
    ]


def detailed_run(run: RunRecord) -> RunRecord:
    """``run`` with what its full view shows: startup stages, telemetry over time, repro."""
    stages = [
        StageTiming(name="load weights", started_at=1.0, seconds=6.5, detail="8.5 GiB"),
        StageTiming(name="profile memory", started_at=7.5, seconds=2.1),
        StageTiming(name="CUDA graphs", started_at=9.6, seconds=2.2),
    ]
    series = [
        SeriesPoint(
            t=15.0 + 2 * i,
            kv_cache_usage=min(0.9, 0.05 * i),
            num_running=min(16, i),
            num_waiting=max(0, i - 16),
            generation_tokens_per_s=40.0 * i,
            gpu_mem_used_bytes=9.1 * GIB,
            gpu_util=min(99.0, 6.0 * i),
        )
        for i in range(24)
    ]
    repro = Reproduction(
        argv=["vllm", "serve", run.flags.model, "--max-num-seqs", "256", "--port", "8000"],
        env={"VLLM_USE_V1": "1"},
        secret_env=["HF_TOKEN"],
        vllm_version="0.32.0",
        gpu_name="NVIDIA GeForce RTX 3080",
        gpu_count=1,
        driver_version="550.54",
        cuda_version="12.4",
        host="gpu-box",
    )
    startup = run.startup.model_copy(update={"stages": stages, "kv_estimate_tokens": 48_000})
    return run.model_copy(
        update={
            "startup": startup,
            "series": series,
            "repro": repro,
            "log_path": "/data/vtc/logs/run-2.log",
        }
    )


def board_session(runs: Sequence[RunRecord] | None = None) -> FakeSession:
    """A session whose board holds ``runs`` (default: :func:`three_session_runs`), idle."""
    shown = list(runs) if runs is not None else three_session_runs()
    return FakeSession(runs=shown, presets=presets(), initial_load=BOARD_LOAD, log_lines=LOG_TAIL)


class NoteLog:
    """Collects an app's notifications (title and message), for tests that read them."""

    def __init__(self, app: App[None]) -> None:
        self.items: list[tuple[str, str, str]] = []
        original = app.notify

        def record(message: str, *, title: str = "", severity: Any = "information", **kw: Any):
            self.items.append((title, message, str(severity)))
            return original(message, title=title, severity=severity, **kw)

        app.notify = record  # type: ignore[method-assign]

    def text(self) -> str:
        """Every notification as ``title: message`` lines."""
        return "\n".join(f"{t}: {m}" for t, m, _ in self.items)


def help_lines(app: App[None], width: int = 80) -> list[str]:
    """The help screen's text as it reads at ``width`` columns, line by line."""
    console = Console(width=width, record=True, file=io.StringIO(), color_system=None)
    console.print(app.screen.query_one("#help-text", Static).content)
    return console.export_text().splitlines()


async def press_each(pilot: Pilot[Any], *keys: str) -> None:
    """Each key pressed, the app let settle after each (its handlers and refreshes run)."""
    for key in keys:
        await pilot.press(key)
        await pilot.pause()
