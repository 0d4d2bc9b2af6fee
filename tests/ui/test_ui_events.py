"""Session events reach the right panel: the console renders what the session reports."""

from __future__ import annotations

from textual.pilot import Pilot
from ui_fakes import (
    FakeSession,
    gpu_sample,
    host_sample,
    kv_failure,
    load_progress,
    server_metrics,
)

from tui.domain.events import (
    Failed,
    KvCacheReported,
    Launched,
    LogLine,
    Ready,
    ServerState,
    Stage,
    StageReached,
)
from tui.domain.results import RunStatus
from tui.domain.telemetry import GpuSample, SourceStatus
from tui.domain.workload import LoadProgress
from tui.session import LoadFinished
from tui.ui.app import VtcApp, create_app
from tui.ui.widgets.run_card import RunCard


def text(app: VtcApp, selector: str) -> str:
    """The rendered text of one widget."""
    return str(app.query_one(selector).render())


async def test_a_server_start_flows_into_the_server_panel_and_the_log_tail() -> None:
    session = FakeSession()
    now = [100.0]  # a hand-driven clock: the "since launch" counter reads it
    app = create_app(session, clock=lambda: now[0])
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        await pilot.app.workers.wait_for_complete()
        session.emit(Launched(pid=4242, argv=("vllm", "serve", "m"), log_path=None))
        session.emit(StageReached(Stage.LOADING_WEIGHTS, 3.5))
        session.emit(LogLine("INFO Loading weights took 3.10 seconds [model_runner.py:1]"))
        await pilot.pause()
        now[0] = 112.0
        app.main_screen._tick()
        await pilot.pause()
        status = text(app, "#server-status")
        assert "STARTING" in status and "pid 4242" in status
        assert "loading weights @3.5s" in status and "12s since launch" in status
        assert "Loading weights took 3.10 seconds [model_runner.py:1]" in text(app, "#log-tail")

        session.emit(KvCacheReported("GPU", 21888, 512, 42.75))
        session.state = ServerState.READY
        session.emit(Ready(elapsed=38.0))
        await pilot.pause()
        status = text(app, "#server-status")
        assert "READY" in status and "up in 38.0s" in status
        assert "KV cache 21,888 tok" in status and "max concurrency 42.75x" in status
        assert len(app.query(RunCard)) == 1  # the restart put run #1 on the board


async def test_a_failed_start_shows_its_diagnosis_in_the_panel_and_on_its_card() -> None:
    session = FakeSession()
    app = create_app(session, clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("r")
        await pilot.app.workers.wait_for_complete()
        run = session.runs[-1]
        session.state = ServerState.FAILED
        session.emit(Failed(elapsed=20.0, exit_code=1, diagnosis=kv_failure()))
        session.update_run(
            run.model_copy(update={"status": RunStatus.FAILED, "diagnosis": kv_failure()})
        )
        await pilot.pause()
        assert "FAILED" in text(app, "#server-status")
        assert "at most 1136 tokens" in text(app, "#server-status")
        card = str(app.query_one(RunCard).query_one(".card-body").render())
        assert "kv_cache_too_small" in card
        assert "fix 1: Lower max_model_len to 1136" in card
        assert "fix 2: Use an fp8 KV cache" in card


async def _telemetry(pilot: Pilot[None], session: FakeSession) -> None:
    session.emit(gpu_sample())
    session.emit(host_sample())
    session.emit(server_metrics())
    for done, tps in ((10, 300.0), (20, 610.0), (30, 700.0)):
        session.emit(load_progress(done, tps))
    await pilot.pause()


async def test_telemetry_and_load_progress_reach_their_panels() -> None:
    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        await _telemetry(pilot, session)
        gpu = text(app, "#gpu")
        assert "GeForce RTX 3080" in gpu and "9.1/10.0 GiB" in gpu
        assert "util 97%" in gpu and "71°C" in gpu and "318W" in gpu
        metrics = text(app, "#metrics")
        assert "KV 43.1%" in metrics and "run 12" in metrics and "out 702" in metrics
        assert "done 30/64" in text(app, "#load-summary")
        assert "TTFT p50/99 118/330 ms" in text(app, "#load-latency")  # labelled, with a unit
        assert app.query_one("#load-spark").data == [300.0, 610.0, 700.0]  # type: ignore[attr-defined]

        # a source with no GPU says why, and numbers the driver cannot give read N/A
        session.emit(
            GpuSample(
                t=1.0, source="nvml", status=SourceStatus.UNAVAILABLE, message="no NVIDIA driver"
            )
        )
        # a client-bound tick says so: the numbers understate the server
        session.emit(
            LoadProgress(
                elapsed=9.0,
                done=40,
                failed=0,
                in_flight=16,
                total=64,
                output_tokens_per_s=650.0,
                loop_lag_ms=40.0,
                client_bound=True,
            )
        )
        await pilot.pause()
        assert "CLIENT-BOUND" in text(app, "#load-summary")
        session.emit(LoadFinished(result=None, error="ConnectError: connection refused"))
        await pilot.pause()
        assert "no NVIDIA driver" in text(app, "#gpu")
        assert "load failed: ConnectError" in text(app, "#load-summary")


async def test_a_finished_load_labels_its_counts_and_a_cancelled_one_says_so() -> None:
    """80x24: ``done 3.0 s: 64 ok, 0 failed`` (never ``64 ok 0 fail``); a load cut short
    reads ``cancelled``, not green ``done``."""
    from fakes.runs import served_run

    session = FakeSession(state=ServerState.READY)
    app = create_app(session, clock=None)
    bench = served_run(1).bench
    assert bench is not None
    async with app.run_test(size=(80, 24)) as pilot:
        session.emit(LoadFinished(result=bench.model_copy(update={"duration": 3.0}), error=None))
        await pilot.pause()
        summary = text(app, "#load-summary")
        width = app.query_one("#load-summary").size.width
        assert summary.splitlines()[0] == "done: 64 ok, 0 failed"
        assert all(len(line) <= width for line in summary.splitlines())
        cut = bench.model_copy(update={"duration": 1.5, "cancelled": True})
        session.emit(LoadFinished(result=cut, error=None))
        await pilot.pause()
        assert text(app, "#load-summary").splitlines()[0] == "cancelled 64 ok/0 failed"
        assert "TTFT p50/99 48/120 ms" in text(app, "#load-latency")
    app = create_app(session, clock=None)
    async with app.run_test(size=(120, 40)) as pilot:
        session.emit(LoadFinished(result=bench.model_copy(update={"duration": 3.0}), error=None))
        await pilot.pause()
        assert "done 3.0 s: 64 ok, 0 failed" in text(app, "#load-summary")
