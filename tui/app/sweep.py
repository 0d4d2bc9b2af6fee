"""``vtc sweep SPEC.toml [--demo] [--strategy auto_tune|grid|search|twin] [--json FILE]``.

Builds the sweep mode's sessions (one per GPU lane), runs the strategy over them, prints
progress (one updating line on a terminal, plain lines otherwise, a line per finished
trial either way), writes the JSON (``best``, ``trials``, ``starts``, ``strategy``...) and,
for ``auto_tune``, auto_tune.sh's ``result.txt``. Exit 0 when a configuration met the
SLOs, 1 when none did (or the sweep was stopped before one did), 2 for a setup error.
Ctrl-C (or SIGTERM) stops the sweep: the trial in flight is cut short, the servers are
stopped, and the next run of the same spec resumes where it stopped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO

from tui.app.arg_types import gpu_indices, positive_float, positive_int, sim_gpu
from tui.app.sweep_common import Printer, open_journal, stop_on_signals
from tui.domain.credentials import Credentials
from tui.domain.errors import VtcError
from tui.domain.sweep.outcome import SweepStatus
from tui.domain.sweep.spec import STRATEGIES, SweepSpec
from tui.load.result_file import strict_json
from tui.modes.cluster import NO_RAY
from tui.modes.common import assemble
from tui.modes.options import ConsoleOptions, SetupError
from tui.modes.sources import local_client
from tui.modes.sweep import SweepMode
from tui.store.atomic import write_atomic
from tui.store.lock import SweepLock
from tui.tune.journal import journal_path
from tui.tune.prune import Pruner
from tui.tune.report import closing_line, progress_line, result_txt, sweep_json
from tui.tune.run import SweepRun
from tui.tune.session_lane import SessionLane
from tui.tune.spec_file import auto_tune_from_env, load_spec


def add_sweep_parser(subparsers: Any) -> None:
    """Register ``vtc sweep``."""
    p = subparsers.add_parser(
        "sweep",
        help="tune serve flags headless: auto_tune.sh's search, a grid, a model-based search, "
        "or twin-first (rank on the twin, confirm on the server)",
        description="Run a sweep spec (presets/sweeps/*.toml) against real servers (the "
        "simulator with --demo). Resumes a stopped sweep of the same spec.",
    )
    p.add_argument("spec", nargs="?", type=Path, help="the spec (TOML); optional for auto_tune")
    p.add_argument("--demo", action="store_true", help="sweep the built-in simulator")
    p.add_argument("--strategy", choices=STRATEGIES, help="override the spec's strategy")
    p.add_argument("--json", type=Path, metavar="FILE", help="write the results as JSON")
    p.add_argument("--fresh", action="store_true", help="start over instead of resuming")
    p.add_argument("--vllm", default="vllm", metavar="PATH", help="the vllm executable")
    p.add_argument(
        "--gpus", type=gpu_indices, help="GPUs to use, e.g. 0,1,2,3 (default: every visible one)"
    )
    p.add_argument("--sim-gpu", type=sim_gpu, help="demo: the simulated GPU (default: the spec's)")
    p.add_argument("--sim-gpus", type=positive_int, default=1, help="demo: simulated GPUs (lanes)")
    p.add_argument(
        "--sim-speed", type=positive_float, default=4.0, help="demo: simulator time scale"
    )
    p.add_argument(
        "--startup-timeout", type=positive_float, default=900.0, help="seconds per start"
    )
    p.add_argument("--max-starts", type=positive_int, help="override the spec's budget of starts")
    p.add_argument("--result-dir", type=Path, help="auto_tune: where result.txt goes")
    p.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="fan the trials out over a Ray cluster (ADDRESS: join it; none: start a local "
        "instance); needs the ray extra: pip install 'vtc[ray]'",
    )
    p.add_argument(
        "--ray-gpus",
        type=positive_int,
        metavar="N",
        help="GPUs a local Ray instance declares (simulated in --demo; default: Ray's count)",
    )


def check_options(args: argparse.Namespace) -> None:
    """Options that only mean something beside another one, refused without it: the same
    in every mode, before a spec is read or anything starts."""
    if args.ray_gpus is not None and args.ray is None:
        raise SetupError("--ray-gpus goes with --ray (the GPUs a local Ray instance declares)")
    if args.demo and args.gpus is not None:
        raise SetupError("--gpus names real GPUs; the demo's lanes are --sim-gpus N")
    if not args.demo and args.sim_gpu is not None:
        raise SetupError("--sim-gpu is the demo's simulated GPU: add --demo")


def resolve_spec(args: argparse.Namespace, env: Mapping[str, str]) -> SweepSpec:
    """The spec file, the strategy override, auto_tune.sh's environment, the budget."""
    spec = load_spec(args.spec) if args.spec is not None else None
    strategy = args.strategy or (spec.strategy if spec is not None else None)
    if strategy == "auto_tune":
        spec = auto_tune_from_env(env, spec)
    if spec is None:
        raise SetupError(
            "name a sweep spec", hint="e.g. vtc sweep presets/sweeps/llama3b-auto-tune.toml"
        )
    changes: dict[str, Any] = {"strategy": strategy or spec.strategy}
    if args.max_starts:
        changes["budget"] = spec.budget.model_copy(update={"max_starts": args.max_starts})
    return spec.model_copy(update=changes)


def run_sweep_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``vtc sweep``: 0 when a configuration met the SLOs, 1 otherwise, 2 on setup errors."""
    out = out or sys.stdout
    try:
        check_options(args)
        spec = resolve_spec(args, os.environ)
        return asyncio.run(_sweep(spec, args, out))
    except VtcError as exc:
        print(f"vtc: {exc.one_line()}", file=sys.stderr)
        return 2


async def _sweep(spec: SweepSpec, args: argparse.Namespace, out: TextIO) -> int:
    options = ConsoleOptions.from_args(args, autostart=False)
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()] if args.gpus else None
    mode = SweepMode(spec, sim_gpus=args.sim_gpus, gpus=gpus)
    data_dir = mode.data_dir(options)
    lock = SweepLock.for_journal(journal_path(data_dir, spec.sweep_id()))
    lock.acquire()  # before anything starts: a second process is refused with the holder
    try:
        return await _locked_sweep(spec, args, out, mode, options, data_dir)
    finally:
        lock.release()


async def _locked_sweep(
    spec: SweepSpec,
    args: argparse.Namespace,
    out: TextIO,
    mode: SweepMode,
    options: ConsoleOptions,
    data_dir: Path,
) -> int:
    if args.ray is not None:
        try:
            from tui.app.ray_sweep import ray_sweep  # Ray: imported only when asked for
        except ImportError as exc:
            raise SetupError(NO_RAY, hint="pip install 'vtc[ray]'") from exc
        started = datetime.now()
        final = await ray_sweep(spec, args, out, options, data_dir)
        _outputs(final, spec, args, data_dir, started, out)
        return 0 if final.best is not None and final.best.slo_met else 1
    parts = await asyncio.to_thread(mode.lane_parts, options)
    twin = await asyncio.to_thread(mode.twin, options)
    journal = await asyncio.to_thread(open_journal, data_dir, spec, args.fresh)
    sessions = [
        assemble(p.info, p.services, poll_interval_s=options.poll_interval_s) for p in parts
    ]
    client = local_client(Credentials.from_env(os.environ))
    lanes = [
        SessionLane(s, client, name=p.name, ready_timeout_s=args.startup_timeout)
        for s, p in zip(sessions, parts, strict=True)
    ]
    printer = Printer(out, out.isatty())
    print(f"sweep {spec.sweep_id()}: {spec.strategy} over {len(lanes)} lane(s)", file=out)
    if journal.finished:
        print(f"resuming: {len(journal.finished)} finished trial(s) in {journal.path}", file=out)
    run = SweepRun(
        spec,
        lanes,
        journal=journal,
        pruner=Pruner(parts[0].estimator),
        emit=printer.show,
        twin=twin,
    )
    started = datetime.now()
    with stop_on_signals(run):
        try:
            for session in sessions:
                await session.start()
            final = await run.run()
        finally:
            for session in sessions:
                await session.close()
            await client.aclose()
    printer.end()
    _outputs(final, spec, args, data_dir, started, out)
    return 0 if final.best is not None and final.best.slo_met else 1


def _write_output(path: Path, text: str, what: str) -> None:
    """``text`` into ``path`` (its folder made), or one line saying why not (a full disk)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text, what=what)
    except OSError as exc:
        raise SetupError(
            f"cannot write {what} to {path}: {exc.strerror or exc}",
            hint="the trials are kept in the sweep's journal: the same command prints them again",
        ) from None


def _outputs(
    final: SweepStatus,
    spec: SweepSpec,
    args: argparse.Namespace,
    data_dir: Path,
    started: datetime,
    out: TextIO,
) -> None:
    for note in final.notes:
        print(f"note: {note}", file=out)
    print(closing_line(final), file=out)
    print(progress_line(final), file=out)
    best = final.best
    if best is not None and best.flags is not None:
        verdict = "meets the SLOs" if best.slo_met else "MISSES the SLOs"
        print(f"best (trial {best.index}, {verdict}): {best.flags.command_line()}", file=out)
    if args.json is not None:
        document = json.dumps(strict_json(sweep_json(final, spec)), indent=2, allow_nan=False)
        _write_output(args.json, document + "\n", "the sweep's JSON")
        print(f"json: {args.json}", file=out)
    if spec.strategy == "auto_tune":
        folder = args.result_dir or data_dir / "auto-benchmark" / f"{started:%Y_%m_%d_%H_%M}"
        version = "vtc-sim (vLLM 0.32.0 API)" if args.demo else f"vllm at {args.vllm}"
        _write_output(folder / "result.txt", result_txt(final, spec, version), "result.txt")
        print(f"result file: {folder / 'result.txt'}", file=out)
