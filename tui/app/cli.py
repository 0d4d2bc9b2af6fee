"""The ``vtc`` command: the console and its headless subcommands, assembled here.

``tui/app`` is the composition root: every entry point is put together in this package
from the rooms below it (``modes`` builds sessions, ``tune`` runs sweeps, ``load``,
``store``, ``telemetry`` and ``server`` do the work); no room imports it.

``vtc`` (and ``vtc --demo``) open the console; ``vtc --attach URL`` watches and loads a
server it did not start; ``vtc diagnose LOGFILE`` explains a failed start; ``vtc
setup-cpu-vllm`` provisions the real CPU build of vLLM; ``vtc presets`` lists the presets;
``vtc runs`` prints the board, ``vtc export RUN --as FORMAT`` writes a run as a command,
config YAML, compose service, systemd unit or Kubernetes Deployment, and ``vtc report``
writes the board as one HTML page; ``vtc stop`` stops the server a console started and left
running (a hang-up detaches: the next ``vtc`` reattaches to it). Each is a thin layer over
the same services.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tui import __version__
from tui.app import top as top_cli
from tui.app.arg_parser import OneLineParser
from tui.app.arg_types import nonnegative_float, positive_float, sim_gpu
from tui.app.bench import add_bench_parser, run_bench
from tui.app.board import add_board_parsers, history_path, run_board_command
from tui.app.broken_pipe import quiet_on_broken_pipe
from tui.app.calibrate import add_calibrate_parser, add_design_arguments, run_calibrate_command
from tui.app.capacity import add_capacity_parser, run_capacity_command
from tui.app.output import inert_output
from tui.app.setup import cmd_setup_cpu_vllm
from tui.app.sweep import add_sweep_parser, run_sweep_command
from tui.domain.diagnosis import Diagnosis
from tui.domain.errors import VtcError, one_line
from tui.modes import ConsoleOptions, build_session
from tui.server.process import STOP_GRACE_S
from tui.session.slot import LeftRunning
from tui.sim.versions import SIM_HOSTS


def _parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="vtc",
        description="vtc, the vLLM tuning console. Without a subcommand: open the console.",
        epilog="Flags after `--` are a `vllm serve` command line loaded into the form, e.g. "
        "`vtc --vllm ~/venv/bin/vllm -- serve meta-llama/Llama-3.1-8B-Instruct "
        "--max-model-len 4096`.",
    )
    _add_launch_arguments(parser)
    _add_demo_arguments(parser)
    _add_watch_arguments(parser)
    add_design_arguments(parser, prefix="calibration-")  # k's, in the console
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_diagnose_parser(sub)
    add_setup_parser(sub)
    add_bench_parser(sub)
    top_cli.add_parser(sub)
    add_presets_parser(sub)
    add_board_parsers(sub)
    add_sweep_parser(sub)
    add_calibrate_parser(sub)
    add_capacity_parser(sub)
    add_stop_parser(sub)
    return parser


def _add_launch_arguments(parser: argparse.ArgumentParser) -> None:
    """The console: what it launches and how."""
    parser.add_argument("--version", action="version", version=f"vtc {__version__}")
    parser.add_argument(
        "--demo",
        action="store_true",
        help="run against the built-in simulator (no GPU needed) and start it at once",
    )
    parser.add_argument("--preset", help="load this preset into the form (see `vtc presets`)")
    parser.add_argument(
        "--vllm",
        default="vllm",
        metavar="PATH",
        help="the vllm executable to launch (default: `vllm` on PATH)",
    )
    parser.add_argument("--model", help="model to serve (overrides the preset's)")
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="load a `vllm serve --config` YAML file into the form",
    )


def _add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """The demo's simulated machine (and the twin's profile)."""
    parser.add_argument(
        "--sim-gpu", type=sim_gpu, help="demo: simulated GPU (e.g. rtx3080-10gb, h100-80gb)"
    )
    parser.add_argument(
        "--sim-speed", type=positive_float, default=4.0, help="demo: simulator time scale (4)"
    )
    parser.add_argument(
        "--sim-host",
        choices=SIM_HOSTS,
        default="linux",
        help="demo: the simulated machine's OS (wsl2: no UVA, so vLLM 0.33's model runner V2 "
        "fails until VLLM_USE_V2_MODEL_RUNNER=0)",
    )
    parser.add_argument(
        "--sim-profile",
        metavar="NAME|FILE",
        help="a twin profile (`vtc calibrate`): --demo simulates that server; otherwise its "
        "twin predicts each edited command line and load, labelled predicted",
    )


def _add_watch_arguments(parser: argparse.ArgumentParser) -> None:
    """Where the GPU is read, how long a start may take, what is attached."""
    parser.add_argument(
        "--gpu-metrics-url",
        metavar="URL",
        help="read the GPU from DCGM-exporter gauges at URL instead of local NVML",
    )
    parser.add_argument(
        "--startup-timeout", type=positive_float, default=900.0, help="seconds to a failed start"
    )
    parser.add_argument(
        "--no-autostart",
        dest="autostart",
        action="store_false",
        help="demo: do not start the server at launch",
    )
    parser.add_argument(
        "--attach",
        metavar="URL",
        help="watch and load a server vtc did not start, e.g. http://host:8000 "
        "(restart and stop disabled); the form shows its flags as read from it",
    )
    parser.add_argument(
        "--attach-log",
        type=Path,
        metavar="FILE",
        help="with --attach: that server's startup log, read for the flags /v1/models and "
        "/metrics do not tell (quantization, dtype, ...)",
    )


def add_diagnose_parser(sub: Any) -> None:
    """Register ``vtc diagnose``."""
    diag = sub.add_parser(
        "diagnose",
        help="explain a failed `vllm serve` start from its log",
        description="Explain why `vllm serve` failed, from its log (any vLLM from 0.4 on; pasted, "
        "wrapped or cut logs are fine). A long log or an endless stream is read in bounded "
        "memory and time: its first 256 KiB and its last 2 MiB.",
        epilog="exit codes: 0 = the cause was diagnosed; 1 = a failure whose cause is not known; "
        "2 = the log could not be read (or bad arguments); 3 = no failure found in the log.",
    )
    diag.add_argument(
        "logfile", metavar="LOGFILE", help="the server's log (stdout+stderr); `-` reads stdin"
    )
    diag.add_argument("--json", action="store_true", help="print {kind, summary, facts, fixes}")


def add_setup_parser(sub: Any) -> None:
    """Register ``vtc setup-cpu-vllm``."""
    setup = sub.add_parser(
        "setup-cpu-vllm",
        help="build the cached venv with the CPU build of vLLM and tiny models",
        description="Build (once; cached) a venv with vLLM's CPU build and two tiny local "
        "models, for the tests marked realvllm and for trying vtc without a GPU.",
    )
    setup.add_argument("--cache-dir", type=Path, help="where to build it (default: user cache)")
    setup.add_argument("--force", action="store_true", help="rebuild even if cached")


def add_presets_parser(sub: Any) -> None:
    """Register ``vtc presets``."""
    sub.add_parser(
        "presets",
        help="list the shipped and user presets",
        description="List the presets: name, shipped or yours, model, what it is and its "
        "source. Yours live in the platform's config dir (presets/*.toml).",
    )


def add_stop_parser(sub: Any) -> None:
    """Register ``vtc stop``."""
    stop = sub.add_parser(
        "stop",
        help="stop the server a vtc console started and left running (after a hang-up)",
        description="Stop the server a vtc console started and left running (a hang-up "
        "detaches): its whole process tree, SIGTERM then SIGKILL after --grace seconds.",
    )
    stop.add_argument("--demo", action="store_true", help="only the demo's simulator")
    stop.add_argument(
        "--grace",
        type=nonnegative_float,
        default=STOP_GRACE_S,
        help="seconds between SIGTERM and SIGKILL",
    )


def _split_serve_args(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    args = list(argv)
    if "--" in args:
        i = args.index("--")
        return args[:i], args[i + 1 :]
    return args, []


EXIT_DIAGNOSED = 0
EXIT_UNKNOWN_CAUSE = 1
EXIT_UNREADABLE = 2
EXIT_NO_FAILURE = 3


def cmd_diagnose(logfile: str | Path, as_json: bool) -> int:
    """``vtc diagnose``: the same ``diagnose()`` the console uses, on a saved log or stdin.

    Exit codes: 0 diagnosed, 1 a failure of unknown cause, 2 unreadable, 3 no failure found.
    """
    from tui.server.diagnose import diagnose
    from tui.server.log_excerpt import LogReadError, read_log_excerpt

    try:
        excerpt = read_log_excerpt(logfile)
    except LogReadError as exc:
        print(f"vtc: {exc.one_line()}", file=sys.stderr)
        return EXIT_UNREADABLE
    result = diagnose(excerpt.text)
    if as_json:
        print(json.dumps(result.to_json_dict(), indent=2))
    else:
        _print_diagnosis(result)
    if excerpt.note():
        print(f"vtc: note: {excerpt.note()}", file=sys.stderr)
    if not result.failure_found:
        return EXIT_NO_FAILURE
    return EXIT_DIAGNOSED if result.kind != "unknown" else EXIT_UNKNOWN_CAUSE


def _print_diagnosis(result: Diagnosis) -> None:
    print(f"{result.kind}: {result.summary}")
    for key, value in result.facts.items():
        print(f"  {key} = {value}")
    for fix in result.fixes:
        sets = fix.describe()  # flags and environment variables alike
        print(f"  fix: {fix.title}" + (f"  [{sets}]" if sets else ""))
    if result.evidence:
        print(f"  evidence: {result.evidence}")


def cmd_presets() -> int:
    """``vtc presets``: name, where it comes from, what it is."""
    from tui.store.presets import load_presets

    catalog = load_presets()
    for preset in catalog.presets:
        origin = "shipped" if preset.builtin else "user"
        print(f"{preset.name:32} {origin:8} {preset.flags.model}")
        print(f"    {preset.description}")
        print(f"    source: {preset.source}")
    for error in catalog.errors:
        print(f"error: {error}", file=sys.stderr)
    return 0 if not catalog.errors else 1


def cmd_stop(demo: bool, grace_s: float = STOP_GRACE_S) -> int:
    """``vtc stop``: stop the server the state file records (its whole tree); 1 if none.

    Without ``--demo`` it stops the demo's server when that is the only one recorded.
    """
    from tui.server.adopted import stop_recorded_server
    from tui.store.history import default_data_dir
    from tui.store.run_liveness import close_stopped_run
    from tui.store.server_state import file_to_stop

    file, is_demo = file_to_stop(default_data_dir(), demo=demo)
    outcome = stop_recorded_server(file, grace_s=grace_s)
    which = "the demo's server: " if is_demo and not demo else ""
    stream = sys.stdout if outcome.stopped else sys.stderr
    print(f"vtc stop: {which}{outcome.message}", file=stream)
    record = outcome.record
    # A console watching it records the end itself (one writer); else the record says it here.
    unwatched = outcome.watched_by is None
    if outcome.stopped and unwatched and record is not None and record.run_id is not None:
        close_stopped_run(history_path(is_demo), record.run_id, "stopped by `vtc stop`")
    return 0 if outcome.stopped else 1


def detached_message(left: LeftRunning | None, demo: bool) -> str:
    """What a hang-up's detach says: the server left running, by pid and URL when known."""
    flag = " --demo" if demo else ""
    which = f"the server (pid {left.pid}, {left.base_url})" if left is not None else "the server"
    return (
        f"vtc: detached; {which} keeps running: `vtc{flag}` reattaches, `vtc stop{flag}` stops it"
    )


def _say_detached(left: LeftRunning | None, demo: bool) -> None:
    """After a hang-up: where the server runs on (the terminal may be gone: best effort)."""
    with contextlib.suppress(OSError):
        print(detached_message(left, demo), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``vtc`` console script; a closed pipe ends it quietly (141)."""
    return quiet_on_broken_pipe(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    own, serve_args = _split_serve_args(sys.argv[1:] if argv is None else argv)
    args = _parser().parse_args(own)
    if args.command is None:
        return run_console(ConsoleOptions.from_args(args, serve_args))
    with inert_output():  # text from outside reaches the terminal inert
        if args.command == "calibrate":
            return run_calibrate_command(args, serve_args)
        if args.command == "capacity":
            return run_capacity_command(args, serve_args)
        return _headless(args)


def _headless(args: argparse.Namespace) -> int:
    """Run one headless command (``vtc bench``, ``top``, ``diagnose``...)."""
    if args.command == "bench":
        return run_bench(args)
    if args.command == "top":
        return top_cli.run(args)
    if args.command == "diagnose":
        return cmd_diagnose(args.logfile, args.json)
    if args.command == "setup-cpu-vllm":
        return cmd_setup_cpu_vllm(force=args.force, cache_dir=args.cache_dir)
    if args.command == "presets":
        return cmd_presets()
    if args.command in ("runs", "export", "report"):
        return run_board_command(args)
    if args.command == "stop":
        return cmd_stop(args.demo, args.grace)
    if args.command == "sweep":
        return run_sweep_command(args)
    raise AssertionError(f"unhandled command {args.command!r}")


def run_console(options: ConsoleOptions) -> int:
    """Build the mode's session and run the console over it; 2 with one line if it cannot."""
    try:
        session = build_session(options)
    except VtcError as exc:
        print(f"vtc: {exc.one_line()}", file=sys.stderr)
        return 2
    from tui.ui.app import LOAD_REFRESH_S, create_app

    try:
        create_app(session, load_refresh_s=LOAD_REFRESH_S).run()
    except BaseException as exc:
        # The console crashed: kill the server it started and say so in the run, so the
        # history never says READY for a server that is gone.
        session.abandon(f"the console crashed ({one_line(exc)}); vtc killed its server")
        raise
    session.abandon()  # no-op after a quit or a detach
    if session.detached:
        _say_detached(session.left_running, options.demo)
    return 0


if __name__ == "__main__":
    sys.exit(main())
