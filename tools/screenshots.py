"""Regenerate the console screenshots the README and docs/ show, the same bytes every time.

    python tools/screenshots.py           # rewrite docs/images/*.svg
    python tools/screenshots.py --check   # exit 1 naming each committed screenshot that is stale

Each scene is the real console (``tui.ui.app.create_app``) driven by keys with Textual's
Pilot, at a fixed terminal size, over a session whose server is the demo's simulator run on
its virtual clock instead of as a process: the demo preset's flags, ``vtc-sim``'s own
configuration checks, memory plan and start-up log (``tui.sim.startup``), the console's own
diagnosis of that log (``tui.server.diagnose``), and a load served by the simulator's
scheduler and cost model (``tui.sim.whatif``, seeded) with ``vtc bench``'s statistics. So
every number on the picture is one the demo computes, and nothing depends on this machine's
speed or clock: the console's clock is frozen (``clock=None``), the log's clock is a fixed
instant in UTC moved on by the simulated stages, the start-up code's own timings (``took
N s``, the CUDA-graph rates) read that virtual clock too, the server's pid is fixed, and the
toasts that expire after seconds are cleared before the picture. ``tests/test_docs.py``
regenerates each scene and fails when the committed file differs.

The scripted session is the UI tests' ``FakeSession`` (``tests/ui/ui_fakes.py``, the one
stand-in for the session port), with ``restart`` and ``run_load`` answered by the simulator.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO
from unittest import mock

from textual.pilot import Pilot

from tui.domain.events import Failed, Launched, LogLine, Ready, ServerState
from tui.domain.flags.serve import ServeFlags
from tui.domain.presets import Preset
from tui.domain.record import LoadRecorded, apply
from tui.domain.results import BenchResult, RunRecord, SweepTag, TelemetryPeaks
from tui.domain.telemetry import GpuDevice, GpuSample, ServerMetrics, SourceStatus
from tui.domain.workload import LoadProgress, LoadSpec
from tui.modes.demo import DEMO_PRESET, demo_label
from tui.server.diagnose import diagnose
from tui.server.stages import StageTracker
from tui.session.port import LoadFinished
from tui.sim import startup as startup_module
from tui.sim.argv import SimCommand, parse_command
from tui.sim.logs import VllmLog
from tui.sim.startup import Checked, EngineStartup, check_command
from tui.sim.whatif import Scenario, Workload
from tui.store.presets import builtin_presets_dir, parse_preset, read_preset_text
from tui.tune.whatif_lane import result_of
from tui.ui.app import VtcApp, create_app
from tui.ui.widgets.run_card import RunCard

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "ui")]  # the UI tests' shared fakes
FakeSession = importlib.import_module("ui_fakes").FakeSession

IMAGES = ROOT / "docs" / "images"
PID = 4242
LOG_EPOCH = 1767225600.0  # 2026-01-01 00:00:00 UTC: the simulated log's fixed instant
MIB = 1024 * 1024


class FixedLog(VllmLog):
    """The simulator's log on the virtual clock: a fixed start in UTC, a fixed pid, and each
    line kept with the simulated seconds since the start at which it was written."""

    def __init__(self) -> None:
        self.now = 0.0
        self.lines: list[tuple[str, float]] = []
        super().__init__(pid=PID, clock=lambda: LOG_EPOCH + self.now)

    async def pause(self, sim_seconds: float) -> bool:
        """The engine's wait for a stage: the virtual clock moves on, no wall time passes."""
        self.now += sim_seconds
        return False

    def prefix(self, proc: str, level: str, src: str) -> str:
        """vLLM's record prefix, as :class:`VllmLog` writes it, in UTC (not local time)."""
        ts = time.strftime("%m-%d %H:%M:%S", time.gmtime(self.clock()))
        return f"({proc} pid={self.pid}) {level} {ts} [{src}] "

    def _write(self, stream: TextIO, text: str) -> None:
        self.lines.extend((line, self.now) for line in text.splitlines())


def demo_preset() -> Preset:
    """The preset ``vtc --demo`` starts from."""
    path = builtin_presets_dir() / f"{DEMO_PRESET}.toml"
    return parse_preset(read_preset_text(path), origin=str(path), builtin=True)


class DemoScene(FakeSession):
    """The console's session port over the demo's simulator on its virtual clock.

    ``restart`` plays ``vtc-sim serve``'s start on the simulated GPU (its log lines, then
    Ready or the failure the console diagnoses); ``run_load`` serves the load with the
    simulator's scheduler and cost model and reports ``vtc bench``'s numbers.
    """

    def __init__(self, preset: Preset) -> None:
        gpu = preset.sim_gpu or "rtx3080-10gb"
        load = (preset.workload or LoadSpec()).model_copy(update={"max_concurrency": None})
        super().__init__(
            initial_flags=preset.flags,
            initial_load=load,
            presets=[preset],
            mode_label=demo_label(gpu, 1.0),
        )
        self.initial_preset = preset.name
        self.sim_args = ["--sim-gpu", gpu]
        self.scenario: Scenario | None = None
        self.checked: Checked | None = None

    async def restart(
        self,
        flags: ServeFlags,
        sweep: SweepTag | None = None,
        *,
        proceed: Callable[[], bool] | None = None,
    ) -> RunRecord:
        """A run, started on the simulated GPU: its log, then Ready or Failed."""
        record = await super().restart(flags, sweep, proceed=proceed)
        argv = [*flags.to_argv(), *self.sim_args]
        command = parse_command(argv)
        checked = check_command(command)
        self.emit(Launched(pid=PID, argv=tuple(argv), log_path=None))
        lines, code = await engine_log(command, checked)
        stages = StageTracker()  # the supervisor's reading of the log, as in the demo
        for line, elapsed in lines:
            self.emit(LogLine(line))
            for event in stages.feed(line, elapsed):
                self.emit(event)
        up_in = lines[-1][1] if lines else 0.0
        if code is not None:
            self.state = ServerState.FAILED
            text = "\n".join(line for line, _ in lines)
            diagnosis = diagnose(text, flags=flags)
            self.emit(Failed(elapsed=up_in, exit_code=code, diagnosis=diagnosis))
        else:
            self.checked = checked
            self.scenario = Scenario.from_argv(argv)
            self.state = ServerState.READY
            kv = stages.kv_cache
            self.emit(
                Ready(
                    elapsed=up_in,
                    kv_cache_tokens=kv.tokens if kv else None,
                    max_concurrency=kv.max_concurrency if kv else None,
                )
            )
        return self.current or record

    async def run_load(self, spec: LoadSpec, model: str | None = None) -> BenchResult | None:
        """``spec`` served by the simulator's scheduler on its virtual clock."""
        self.calls.append("run_load")
        self.loads.append(spec)
        assert self.scenario is not None and self.current is not None
        workload = Workload(
            num_requests=spec.num_prompts,
            input_len=spec.input_len,
            output_len=spec.output_len,
            seed=spec.seed,
        )
        result = result_of(self.scenario.run(workload), workload, {})
        self.update_run(apply(self.current, LoadRecorded(result, spec, TelemetryPeaks())))
        self.emit(finished_progress(result))
        self.emit(LoadFinished(result))
        self.emit(self.idle_gpu())
        self.emit(idle_metrics())
        return result

    def idle_gpu(self) -> GpuSample:
        """The simulator's DCGM gauges once the load is over (an idle GPU)."""
        assert self.checked is not None and self.checked.cfg is not None
        plan, cfg = self.checked.plan, self.checked.cfg
        assert plan is not None
        gpu = cfg.hardware.gpu
        used = round((cfg.hardware.used_by_others + plan.process_bytes) / MIB) * MIB
        device = GpuDevice(
            index=0,
            name=gpu.name,
            memory_used=used,
            memory_total=gpu.total_bytes,
            utilization=0.0,
            temperature_c=34.0,
            power_w=gpu.idle_w,
        )
        return GpuSample(t=0.0, source="dcgm", status=SourceStatus.OK, devices=(device,))


class VirtualTime:
    """The ``time`` module as the simulator's start-up code sees it here: ``monotonic`` reads
    the virtual clock, so the durations and rates its log prints are simulated seconds."""

    def __init__(self, log: FixedLog) -> None:
        self._log = log

    def monotonic(self) -> float:
        """The simulated seconds since the start."""
        return self._log.now

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


async def engine_log(
    command: SimCommand, checked: Checked
) -> tuple[list[tuple[str, float]], int | None]:
    """The simulator's engine start-up log for ``checked`` (each line with its simulated
    second) and its exit code (``None``: the engine is up)."""
    log = FixedLog()
    if checked.error is not None:
        lines = checked.error.lines(checked.model)
        return [(line, 0.0) for line in lines], 1
    assert checked.cfg is not None and checked.plan is not None
    startup = EngineStartup(log, command, checked.cfg, checked.plan, log.pause, lambda: "SIGTERM")
    with mock.patch.object(startup_module, "time", VirtualTime(log)):
        code = await startup.run()
    return log.lines, code


def idle_metrics() -> ServerMetrics:
    """The simulator's /metrics once the load is over: nothing running, nothing waiting."""
    return ServerMetrics(
        t=0.0,
        status=SourceStatus.OK,
        kv_cache_usage=0.0,
        num_running=0,
        num_waiting=0,
        prompt_tokens_per_s=0.0,
        generation_tokens_per_s=0.0,
        prefix_cache_hit_rate=0.0,
        preemptions_total=0,
    )


def finished_progress(result: BenchResult) -> LoadProgress:
    """The load panel's last tick: every request done."""
    stats = result.stats
    return LoadProgress(
        elapsed=result.duration or 0.0,
        done=result.completed,
        failed=result.failed,
        in_flight=0,
        total=result.completed + result.failed,
        output_tokens_per_s=result.output_throughput or 0.0,
        ttft_p50_ms=stats.get("median_ttft_ms"),
        ttft_p99_ms=stats.get("p99_ttft_ms"),
        itl_p50_ms=stats.get("median_itl_ms"),
        itl_p99_ms=stats.get("p99_itl_ms"),
    )


async def until(pilot: Pilot[None], done: Callable[[], bool], what: str) -> None:
    """Let the app run until ``done()`` holds (bounded, never a timing assertion)."""
    for _ in range(500):
        if done():
            return
        await pilot.pause(0.02)
    raise RuntimeError(f"screenshot scene: gave up waiting for {what}")


async def fail_fix_load(pilot: Pilot[None]) -> None:
    """The demo's first minute: raise max_model_len, r (fails), f (the fix), b (a load);
    then the board scrolled back to the failure's card."""
    app = pilot.app
    assert isinstance(app, VtcApp)
    scene = app.session
    assert isinstance(scene, DemoScene)
    screen = app.main_screen
    screen.form.field("max_model_len").set_value("30576")
    await pilot.pause()
    await pilot.press("r")
    await until(pilot, lambda: scene.state is ServerState.FAILED, "the failed start")
    await pilot.press("f")
    await until(pilot, lambda: scene.state is ServerState.READY, "the fixed start")
    await pilot.press("b")
    await until(
        pilot, lambda: scene.current is not None and scene.current.bench is not None, "the load"
    )
    await pilot.pause()
    cards = list(screen.query(RunCard))
    screen.board.scroll_to_widget(cards[0], animate=False)
    # the toasts of f and of the ready server expire after seconds: how many are still up
    # would depend on this machine's speed, so none is kept on the picture
    app.clear_notifications()
    await pilot.pause()


async def as_table(pilot: Pilot[None]) -> None:
    """The same minute, then ``t``: the board as a table, one row per run."""
    await fail_fix_load(pilot)
    await pilot.press("t")
    await pilot.pause()


@dataclass(frozen=True)
class Scene:
    """One screenshot: its file under docs/images, terminal size and the keys that make it."""

    name: str
    size: tuple[int, int]
    play: Callable[[Pilot[None]], Awaitable[None]]


SCENES = (
    Scene("console-80x24.svg", (80, 24), fail_fix_load),
    Scene("board-table-120x40.svg", (120, 40), as_table),
)


async def render(scene: Scene) -> str:
    """The scene's SVG, as Textual exports the screen."""
    app = create_app(DemoScene(demo_preset()), clock=None)
    async with app.run_test(size=scene.size) as pilot:
        await scene.play(pilot)
        svg = app.export_screenshot(title="vtc --demo")
    return svg


def stale(scenes: Sequence[Scene] = SCENES, folder: Path = IMAGES) -> list[str]:
    """The scenes whose committed file differs from what the console renders now."""
    return [s.name for s in scenes if _read(folder / s.name) != asyncio.run(render(s))]


def _read(path: Path) -> str | None:
    return path.read_text(encoding="utf-8") if path.exists() else None


def main(argv: Sequence[str] | None = None) -> int:
    """Write every scene, or with ``--check`` say which committed ones are stale."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare, write nothing")
    args = parser.parse_args(argv)
    if args.check:
        old = stale()
        for name in old:
            print(f"stale: docs/images/{name} (run: python tools/screenshots.py)")
        return 1 if old else 0
    IMAGES.mkdir(parents=True, exist_ok=True)
    for scene in SCENES:
        (IMAGES / scene.name).write_text(asyncio.run(render(scene)), encoding="utf-8")
        print(f"wrote docs/images/{scene.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
