"""Keypress-to-screen latency of the real console in tmux (issue 22).

    python benchmarks/console_latency.py            # 30 samples per key and situation
    python benchmarks/console_latency.py --quick    # 5 samples per key (checks it works)

Drives ``python -m tui.cli --demo`` (this tree's code, a fresh ``VTC_DATA_DIR`` seeded with
30 and with 200 runs written through :class:`~tui.store.history.RunStore`, a private
``XDG_CONFIG_HOME`` holding the workload presets) in a tmux server of its own
(``-L vtc-latency-PID`` unless ``--socket``), at 80x24 and 120x40, and sends every key of
each view that changes the screen without starting anything (issue 39): on the cards
←/→, Home/End, ``p`` (pin, unpin), and each key that opens a
screen with the Esc that closes it (``?`` help, Enter the run's detail, ``h`` charts, ``v``
Before/After, ``g`` plot, ``w`` sweep, ``/`` filter, ``e`` export, ``n`` repeat, ctrl+p the
palette); in the table ``t`` both ways, ↑/↓ (rows), ←/→ (columns), Home/End, ``[``/``]``
(sort); in a form field a digit and Backspace, Esc out of it. Not sent: the keys that start
or stop something (``r b f c s k``, ``l`` loads a run into the form, ``y`` copies, ``q``
quits): their effect is a server's or a load's, not the screen's; nor ↑/↓ and PgUp/PgDn on
the cards, which scroll a card only when it is longer than the board (the seeded ones fit).

One sample: capture the pane (with its styles), send the key, then capture every ~10 ms
until the work area (the form and the board: below the GPU/Metrics/Load strip, above the
key bar) differs from before; the latency is that time less one capture (tmux's own
cost, the median of 20 captures measured in the same situation). Before each sample the
screen must have been still for 150 ms, so a key never starts while the last one draws.
The panels above the work area (which the load redraws every second) are not compared.

Situations: the console idle (the demo server ready, no load) and while the console's
own load runs (``b``, a time-bounded run at 16 and at 256 concurrent streams against the
simulator). Prints p50/p95/p99/max per key and situation, the load average beside each
situation, and ends with ``key latency: worst p95 N ms (KEY, SITUATION)``. The goal (issue
29): every key's p95 <= 100 ms idle and <= 150 ms under the demo load, at 80x24 and 120x40;
judged by the shared gate (:mod:`benchmarks._quiet`): exit 0 met, 1 missed, 3 not valid (the
machine was busy: its figures are no figures). Beside them, the
console process's CPU time from the key to the change (p50): on a machine shared with
others it moves less than the wall time does; under load it includes the load's own work
in that window.

Every console is ended with SIGTERM (it quits as ``q`` does, stopping the simulator it
started), then ``vtc stop --demo`` on its data dir, then its tmux server is killed.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
from textual.command import CommandPalette  # noqa: E402

from benchmarks._procs import load_average, table  # noqa: E402
from benchmarks._quiet import QuietGate  # noqa: E402
from tui.domain.diagnosis import Diagnosis  # noqa: E402
from tui.domain.flags.serve import ServeFlags  # noqa: E402
from tui.domain.results import BenchResult, RunRecord, RunStatus, StartupProfile  # noqa: E402
from tui.domain.workload import LoadSpec  # noqa: E402
from tui.store.history import RunStore  # noqa: E402

# Textual's palette says this in its empty search line (its default placeholder)
PALETTE_TEXT = str(
    inspect.signature(CommandPalette.__init__).parameters["placeholder"].default
).rstrip("…")

POLL_S = 0.010
QUIET_S = 0.150  # the screen must be this still before a key is sent
KEY_TIMEOUT_S = 3.0  # a key whose effect never shows counts as this (and is reported)
READY_TIMEOUT_S = 180.0
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
DEMO_FLAGS = {  # presets/demo-rtx3080-8b-fp8.toml's: a start that works on the simulator
    "gpu_memory_utilization": 0.92,
    "max_model_len": 512,
    "max_num_seqs": 128,
    "max_num_batched_tokens": 1024,
    "block_size": 32,
    "quantization": "fp8",
    "dtype": "float16",
}
TYPE_FIELD = "gpu-memory-utilization"  # 0.92 -> 0.925: stays valid
GOAL_IDLE_S = 0.100  # every key's p95, the console idle (issue 29)
GOAL_LOADED_S = 0.150  # every key's p95 while the demo load runs
SAMPLES, QUICK_SAMPLES = 30, 5


# -- the runs the board shows -----------------------------------------------------------------
def seeded_run(i: int) -> RunRecord:
    """Run ``i`` of a tuning session: flags that vary (so the table has flag columns), most
    served with numbers, every seventh a failed start with its diagnosis."""
    flags = ServeFlags(
        model=MODEL,
        max_num_seqs=(32, 64, 128, 256)[i % 4],
        max_num_batched_tokens=(1024, 2048, 4096)[i % 3],
        gpu_memory_utilization=(0.85, 0.9, 0.92)[i % 3],
        max_model_len=(512, 1024, 2048, 4096, 8192)[i % 5],
        block_size=(16, 32)[i % 2],
    )
    if i % 7 == 6:
        return RunRecord(
            flags=flags,
            status=RunStatus.FAILED,
            diagnosis=Diagnosis(
                kind="kv_cache_too_small",
                summary="max seq len (8192) is larger than the KV cache (1136 tokens)",
            ),
            exit_code=1,
        )
    tput = 600.0 + 37.0 * (i % 11)
    ttft = 80.0 + 9.0 * (i % 13)
    stats = {
        "mean_ttft_ms": ttft * 0.5,
        "median_ttft_ms": ttft * 0.4,
        "p99_ttft_ms": ttft,
        "mean_tpot_ms": 20.0,
        "mean_itl_ms": 19.0,
        "p99_itl_ms": 40.0,
        "mean_e2el_ms": ttft * 6.0,
        "p99_e2el_ms": ttft * 10.0,
    }
    return RunRecord(
        flags=flags,
        status=RunStatus.STOPPED,
        startup=StartupProfile(seconds_to_ready=10.0 + i % 5, kv_cache_tokens=40_000 + 512 * i),
        bench=BenchResult(
            completed=64,
            duration=10.0,
            output_throughput=tput,
            request_throughput=tput / 128,
            total_token_throughput=tput * 2,
            stats=stats,
        ),
        workload=LoadSpec(),
    )


def seed_history(data_dir: Path, runs: int) -> None:
    """Write ``runs`` runs into the demo's history, through the store."""
    store = RunStore(data_dir / "demo-runs.sqlite")
    try:
        for i in range(runs):
            store.add(seeded_run(i))
    finally:
        store.close()


def write_preset(config_home: Path, name: str, streams: int) -> None:
    """A user preset: the demo's flags and a time-bounded load at ``streams`` streams."""
    folder = config_home / "vtc" / "presets"
    folder.mkdir(parents=True, exist_ok=True)
    flags = "\n".join(
        f"{k} = {v!r}" if not isinstance(v, str) else f'{k} = "{v}"' for k, v in DEMO_FLAGS.items()
    )
    (folder / f"{name}.toml").write_text(
        f'name = "{name}"\ndescription = "console_latency.py: {streams} streams"\n'
        'source = "benchmarks/console_latency.py"\n'
        f'model = "{MODEL}"\nsim_gpu = "rtx3080-10gb"\n\n[flags]\n{flags}\n\n'
        f"[workload]\ninput_len = 128\noutput_len = 128\nnum_prompts = 512\n"
        f"max_concurrency = {streams}\nduration_s = 3600.0\n"
    )


# -- tmux --------------------------------------------------------------------------------------
@dataclass
class Pane:
    """One tmux session (one window, one pane) on a private tmux server."""

    socket: str
    name: str = "console"

    def tmux(self, *args: str) -> str:
        """Run a tmux command on this server; its stdout."""
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            raise RuntimeError(f"tmux {args[0]}: {done.stderr.strip()}")
        return done.stdout

    def start(self, argv: list[str], env: dict[str, str], width: int, height: int) -> None:
        """Start ``argv`` (run directly, no shell) in a detached session of that size."""
        extra = [a for k, v in env.items() for a in ("-e", f"{k}={v}")]
        self.tmux(
            "new-session", "-d", "-s", self.name, "-x", str(width), "-y", str(height), *extra, *argv
        )
        self.tmux("set-option", "-t", self.name, "remain-on-exit", "on")

    def resize(self, width: int, height: int) -> None:
        """Give the window this size."""
        self.tmux("resize-window", "-t", self.name, "-x", str(width), "-y", str(height))

    def capture(self, styles: bool = True) -> list[str]:
        """The screen's lines (with their escape codes when ``styles``)."""
        args = ["capture-pane", "-p", "-t", self.name] + (["-e"] if styles else [])
        return self.tmux(*args).split("\n")

    def send(self, key: str) -> None:
        """Send one key (tmux's key name)."""
        self.tmux("send-keys", "-t", self.name, key)

    def pid(self) -> int | None:
        """The process in the pane (the console), if it still runs."""
        try:
            text = self.tmux("display-message", "-p", "-t", self.name, "#{pane_pid} #{pane_dead}")
        except RuntimeError:
            return None
        pid, dead = text.split()
        return None if dead == "1" else int(pid)

    def kill_server(self) -> None:
        """End this tmux server (only ours: its own socket)."""
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, check=False)


def wait_for(pane: Pane, found: Callable[[str], bool], timeout_s: float, what: str) -> str:
    """Poll the plain screen until ``found`` holds; its text."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = "\n".join(pane.capture(styles=False))
        if found(text):
            return text
        if time.monotonic() > deadline or pane.pid() is None:
            raise TimeoutError(f"{what}: not seen in {timeout_s:.0f} s; the screen:\n{text}")
        time.sleep(0.2)


# -- one key -----------------------------------------------------------------------------------
@dataclass
class Screen:
    """Where the work area is on this pane's screen (rows ``top`` to the key bar)."""

    pane: Pane
    top: int
    capture_s: float = 0.0
    process: psutil.Process | None = None  # the console: its CPU time per key
    last_cpu_s: float | None = None  # the console's CPU seconds during the last press

    def area(self) -> list[str]:
        """The work area's lines, styles included."""
        lines = self.pane.capture()
        return lines[self.top : len(lines) - 2]

    def settle(self, timeout_s: float = 3.0) -> list[str]:
        """Wait until the work area has been still for QUIET_S; its lines."""
        last, still_since = self.area(), time.perf_counter()
        deadline = still_since + timeout_s
        while time.perf_counter() < deadline:
            time.sleep(POLL_S)
            now = self.area()
            if now != last:
                last, still_since = now, time.perf_counter()
            elif time.perf_counter() - still_since >= QUIET_S:
                break
        return last

    def press(self, key: str) -> float | None:
        """Seconds from sending ``key`` to its first change of the work area (less one
        capture); ``None`` when nothing changed within KEY_TIMEOUT_S."""
        before = self.settle()
        cpu = self._cpu()
        start = time.perf_counter()
        self.pane.send(key)
        tick = start
        while True:
            now_lines = self.area()
            elapsed = time.perf_counter() - start
            if now_lines != before:
                after = self._cpu()
                self.last_cpu_s = after - cpu if after is not None and cpu is not None else None
                return max(0.0, elapsed - self.capture_s)
            if elapsed > KEY_TIMEOUT_S:
                self.last_cpu_s = None
                return None
            tick += POLL_S
            pause = tick - time.perf_counter()
            if pause > 0:
                time.sleep(pause)

    def _cpu(self) -> float | None:
        if self.process is None:
            return None
        try:
            times = self.process.cpu_times()
        except psutil.Error:
            return None
        return times.user + times.system


def capture_cost(pane: Pane, n: int = 20) -> float:
    """The median seconds of one styled capture (tmux's own cost, measured now)."""
    costs = []
    for _ in range(n):
        start = time.perf_counter()
        pane.capture()
        costs.append(time.perf_counter() - start)
    return statistics.median(costs)


def work_area_top(pane: Pane) -> int:
    """The row of the work area's top border (the form's or the board's title)."""
    lines = pane.capture(styles=False)
    for i, line in enumerate(lines[1:], 1):
        if "─Flags" in line or "─Runs" in line:
            return i
    raise RuntimeError("no Flags/Runs panel on the screen:\n" + "\n".join(lines))


# -- what is measured --------------------------------------------------------------------------
@dataclass
class Samples:
    """Latencies (seconds) per key for one situation, and keys whose effect never showed."""

    situation: str
    loaded: bool = False  # the console's own load ran meanwhile (the goal is looser)
    load_before: str = ""
    load_after: str = ""
    by_key: dict[str, list[float]] = field(default_factory=dict)
    cpu_by_key: dict[str, list[float]] = field(default_factory=dict)
    missed: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, key: str, seconds: float | None, cpu_s: float | None = None) -> None:
        """One sample (``None``: the key showed nothing; counted, and as KEY_TIMEOUT_S) and
        the console's CPU seconds meanwhile, when known."""
        if cpu_s is not None:
            self.cpu_by_key.setdefault(key, []).append(cpu_s)
        if seconds is None:
            self.missed[key] = self.missed.get(key, 0) + 1
            seconds = KEY_TIMEOUT_S
        self.by_key.setdefault(key, []).append(seconds)


def pct(values: list[float], q: float) -> float:
    """The nearest-rank ``q`` quantile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def alternate(screen: Screen, out: Samples, pairs: tuple[tuple[str, str], ...], n: int) -> None:
    """``n`` rounds of each (tmux key, reported name) pair, in order."""
    for _ in range(n):
        for key, name in pairs:
            out.add(name, screen.press(key), screen.last_cpu_s)


def palette_shown(screen: Screen) -> bool:
    """Whether Textual's command palette is open: its search line, anywhere on the screen
    (at 120x40 it sits above the work area, in the panels' rows)."""
    return PALETTE_TEXT in "\n".join(screen.pane.capture(styles=False))


def palette_becomes(screen: Screen, shown: bool) -> bool:
    """Wait (KEY_TIMEOUT_S at most) until the palette is open (``shown``) or closed."""
    deadline = time.perf_counter() + KEY_TIMEOUT_S
    while palette_shown(screen) != shown:
        if time.perf_counter() > deadline:
            return False
        time.sleep(POLL_S)
    return True


def palette(screen: Screen, out: Samples, n: int) -> None:
    """ctrl+p and Esc, when ctrl+p opens the palette and Esc closes it; else a note.

    The palette is told by its own search line, waited for, not by the work area after it
    was still for QUIET_S: at 120x40 that line is above the work area, where only the
    palette's tint shows, and on a loaded machine the palette can take longer to come than
    a still moment lasts (the check read a palette as "nothing changed", or, when Esc came
    before the palette, as "not a palette that Esc closes", and left it open).
    """
    screen.settle()
    first = screen.press("C-p")
    if first is None or not palette_becomes(screen, True):
        out.notes.append("ctrl+p: no palette (its search line never showed)")
        return
    closed = screen.press("Escape")
    if not palette_becomes(screen, False):
        out.notes.append("ctrl+p: Esc left the palette open; skipped")
        screen.pane.send("Escape")
        return
    out.add("ctrl+p (palette)", first)
    out.add("Esc (palette)", closed)  # their CPU: not kept (other presses came between)
    for _ in range(n - 1):
        out.add("ctrl+p (palette)", screen.press("C-p"))
        palette_becomes(screen, True)
        out.add("Esc (palette)", screen.press("Escape"))
        palette_becomes(screen, False)


def focus_field(screen: Screen, label: str, tries: int = 12) -> bool:
    """Tab through the form until typing lands in the field ``label`` (probe: a digit, then
    Backspace); True once focus is there."""
    for _ in range(tries):
        screen.pane.send("Tab")
        before = [_plain(line) for line in screen.settle()]
        screen.press("9")  # waits for the digit to show (a slow screen is not a still one)
        after = [_plain(line) for line in screen.settle()]
        screen.press("BSpace")
        changed = [a for a, b in zip(after, before, strict=False) if a != b]
        if any(label in line for line in changed):
            return True
    return False


def _plain(line: str) -> str:
    """A captured line without its escape codes."""
    out, i = [], 0
    while i < len(line):
        if line[i] == "\x1b":
            j = i + 1
            while j < len(line) and not line[j].isalpha():
                j += 1
            i = j + 1
            continue
        out.append(line[i])
        i += 1
    return "".join(out)


CARD_KEYS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("Left", "←/→ (cards)"), ("Right", "←/→ (cards)")),
    (("Home", "Home/End (cards)"), ("End", "Home/End (cards)")),  # from the last run
    (("p", "p (pin)"), ("p", "p (unpin)")),
    (("?", "? (help)"), ("Escape", "Esc (close help)")),
    (("Enter", "Enter (detail)"), ("Escape", "Esc (close detail)")),
    (("h", "h (charts)"), ("Escape", "Esc (close charts)")),
    (  # v compares the pinned run with another: pin, move, v (on the pin itself it refuses)
        ("p", "p (pin)"),
        ("Left", "←/→ (cards)"),
        ("v", "v (before/after)"),
        ("Escape", "Esc (close before/after)"),
        ("Right", "←/→ (cards)"),
        ("p", "p (unpin)"),
    ),
    (("g", "g (plot)"), ("Escape", "Esc (close plot)")),
    (("w", "w (sweep)"), ("Escape", "Esc (close sweep)")),
    (("/", "/ (filter)"), ("Escape", "Esc (close filter)")),
    (("e", "e (export)"), ("Escape", "Esc (close export)")),
    (  # n on the console's own run (no load yet) only refuses, in a toast over the log
        # tail, outside the work area: it asks how many repeats on a run with numbers
        ("Left", "←/→ (cards)"),
        ("n", "n (repeat)"),
        ("Escape", "Esc (close repeat)"),
        ("Right", "←/→ (cards)"),
    ),
)
"""The card view's keys, each group ending where it began (a screen opened is closed)."""

TABLE_KEYS: tuple[tuple[tuple[str, str], ...], ...] = (
    (("Up", "↑/↓ (table)"), ("Down", "↑/↓ (table)")),
    (("Right", "←/→ (columns)"), ("Left", "←/→ (columns)")),
    (("End", "Home/End (columns)"), ("Home", "Home/End (columns)")),
    (("]", "]/[ (sort)"), ("[", "]/[ (sort)")),
)
"""The table view's keys (entered and left with ``t``, each measured too)."""


def measure_keys(screen: Screen, out: Samples, n: int) -> None:
    """Every key of each view (module docstring), from the card view, the board focused."""
    for group in CARD_KEYS:
        alternate(screen, out, group, n)
    palette(screen, out, n)
    if focus_field(screen, TYPE_FIELD):
        alternate(screen, out, (("5", "type (field)"), ("BSpace", "type (field)")), n)
        out.add("Esc (leave field)", screen.press("Escape"), screen.last_cpu_s)
    else:
        out.notes.append(f"typing: the {TYPE_FIELD} field was not reached by Tab")
        screen.pane.send("Escape")
    for _ in range(n):
        alternate(screen, out, (("t", "t (to table)"),), 1)
        for group in TABLE_KEYS:
            alternate(screen, out, group, 1)
        alternate(screen, out, (("t", "t (to cards)"),), 1)


# -- one console -------------------------------------------------------------------------------
@contextmanager
def console(
    runs: int, streams: int, socket: str, size: tuple[int, int], tree: Path
) -> Iterator[Pane]:
    """A demo console (the code of ``tree``) over ``runs`` seeded runs, its load at
    ``streams`` streams running (0: none), in a tmux pane of ``size``; ended with
    everything it started."""
    tmp = Path(tempfile.mkdtemp(prefix="vtc-latency-"))
    data, config = tmp / "data", tmp / "config"
    data.mkdir()
    seed_history(data, runs)
    preset = f"latency-{max(streams, 16)}"
    write_preset(config, preset, max(streams, 16))
    env = {
        "VTC_DATA_DIR": str(data),
        "XDG_CONFIG_HOME": str(config),
        "PYTHONPATH": str(tree),
        "TERM": "xterm-256color",
    }
    pane = Pane(socket)
    try:
        pane.start([sys.executable, "-m", "tui.cli", "--demo", "--preset", preset], env, *size)
        wait_for(pane, lambda s: "● READY" in s, READY_TIMEOUT_S, "the demo server ready")
        time.sleep(6.0)  # the "Server up" notification goes away
        if streams:
            pane.send("b")
            wait_for(pane, lambda s: "idle · b runs" not in s, 30.0, "the load started")
            time.sleep(5.0)  # streams ramped up
        yield pane
    finally:
        stop(pane, data, tree)
        shutil.rmtree(tmp, ignore_errors=True)


def stop(pane: Pane, data: Path, tree: Path) -> None:
    """SIGTERM the console (it stops what it started), then ``vtc stop --demo``, then tmux."""
    pid = pane.pid()
    if pid is not None:
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 30.0
        while pane.pid() is not None and time.monotonic() < deadline:
            time.sleep(0.2)
    subprocess.run(
        [sys.executable, "-m", "tui.cli", "stop", "--demo"],
        env={**os.environ, "VTC_DATA_DIR": str(data), "PYTHONPATH": str(tree)},
        capture_output=True,
        check=False,
        timeout=60,
    )
    pane.kill_server()


def console_process(pane: Pane) -> psutil.Process | None:
    """The console's process (the pane runs it directly), for its CPU time."""
    pid = pane.pid()
    try:
        return psutil.Process(pid) if pid is not None else None
    except psutil.Error:
        return None


def situation_name(size: tuple[int, int], runs: int, streams: int) -> str:
    """``80x24 30 runs idle``, ``120x40 200 runs 256 streams``."""
    load = f"{streams} streams" if streams else "idle"
    return f"{size[0]}x{size[1]} {runs} runs {load}"


def parse_size(text: str) -> tuple[int, int]:
    """``80x24`` -> ``(80, 24)``."""
    width, height = text.lower().split("x")
    return int(width), int(height)


def run_situations(args: argparse.Namespace, gate: QuietGate) -> list[Samples]:
    """Every (board, load) console, measured at every size."""
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    results: list[Samples] = []
    for runs in (int(r) for r in args.boards.split(",")):
        for streams in (int(s) for s in args.loads.split(",")):
            with console(runs, streams, args.socket, sizes[0], args.tree) as pane:
                for size in sizes:
                    pane.resize(*size)
                    time.sleep(1.0)
                    out = Samples(situation_name(size, runs, streams), loaded=streams > 0)
                    out.load_before = load_average()
                    top, cost = work_area_top(pane), capture_cost(pane)
                    screen = Screen(pane, top, cost, console_process(pane))
                    measure_keys(screen, out, args.samples)
                    out.load_after = load_average()
                    gate.sample()  # the busiest moment decides whether the figures count
                    report(out, screen.capture_s)
                    results.append(out)
    return results


def report(out: Samples, capture_s: float) -> None:
    """One situation's table."""
    print(
        f"\n## {out.situation}  ({out.load_before} -> {out.load_after}; "
        f"one capture {capture_s * 1000:.1f} ms, subtracted)"
    )
    rows = [["key", "n", "p50 ms", "p95 ms", "p99 ms", "max ms", "no change", "cpu p50 ms"]]
    for key, values in out.by_key.items():
        ms = [v * 1000 for v in values]
        cpu = [v * 1000 for v in out.cpu_by_key.get(key, [])]
        rows.append(
            [
                key,
                str(len(ms)),
                f"{pct(ms, 0.5):.0f}",
                f"{pct(ms, 0.95):.0f}",
                f"{pct(ms, 0.99):.0f}",
                f"{max(ms):.0f}",
                str(out.missed.get(key, 0)),
                f"{pct(cpu, 0.5):.0f}" if cpu else "-",
            ]
        )
    table(rows)
    for note in out.notes:
        print(f"note: {note}")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    """Measure, print the tables, end with the worst p95."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"{QUICK_SAMPLES} samples per key (default {SAMPLES}): checks it works",
    )
    parser.add_argument("--samples", type=int, help="samples per key and situation")
    parser.add_argument("--sizes", default="80x24,120x40", help="terminal sizes, WxH,...")
    parser.add_argument("--boards", default="30,200", help="seeded runs per board, N,...")
    parser.add_argument("--loads", default="0,16,256", help="load streams (0: idle), N,...")
    parser.add_argument("--socket", default=f"vtc-latency-{os.getpid()}", help="tmux -L name")
    parser.add_argument(
        "--tree",
        type=Path,
        default=ROOT,
        help="the source tree the console runs from (default: this one; "
        "another checkout measures its code: before/after)",
    )
    args = parser.parse_args(argv)
    args.samples = args.samples or (QUICK_SAMPLES if args.quick else SAMPLES)
    if shutil.which("tmux") is None:
        print("console_latency: tmux is needed (apt install tmux)", file=sys.stderr)
        return 2
    gate = QuietGate("console_latency")
    print(f"console latency: {args.samples} samples per key; console from {args.tree}")
    results = run_situations(args, gate)
    worst = max(
        ((pct(v, 0.95), key, r.situation) for r in results for key, v in r.by_key.items()),
        default=(0.0, "-", "-"),
    )
    print(f"\nkey latency: worst p95 {worst[0] * 1000:.0f} ms ({worst[1]}, {worst[2]})")
    judge(gate, results)
    return gate.finish()


def judge(gate: QuietGate, results: list[Samples]) -> None:
    """Every key's p95 in every situation against its goal (idle or under load)."""
    for out in results:
        goal = GOAL_LOADED_S if out.loaded else GOAL_IDLE_S
        for key, values in out.by_key.items():
            gate.check(f"{out.situation} {key} p95 ms", pct(values, 0.95) * 1000, goal=goal * 1000)


if __name__ == "__main__":
    sys.exit(main())
