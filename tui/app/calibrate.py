"""``vtc calibrate URL --name NAME`` and ``vtc calibrate --vllm PATH --name NAME -- serve ...``.

Fits a twin profile of a real server (issue 20): the designed loads of
:func:`tui.domain.calibration.design`, run within ``--budget`` seconds with a progress bar
and an ETA (one updating line on a terminal, a line per load otherwise), the fit, and the
profile saved in the data dir (``profiles/NAME.json``), which ``vtc-sim serve MODEL
--sim-profile NAME``, ``vtc --demo --sim-profile NAME`` and the what-if lane then run.
Ctrl-C (or SIGTERM) stops it: finished loads stay in the journal and the same command
resumes. Exit 0 with the profile saved, 1 when it could not measure or fit, 2 for a setup
error.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from tui.app.arg_types import positive_float, server_url
from tui.domain.calibration import Progress, design
from tui.domain.errors import VtcError
from tui.domain.flags.validation import serve_command
from tui.domain.inert import inert
from tui.domain.prediction import INTERVAL_PERCENTILE
from tui.domain.profile import Profile
from tui.modes.calibrate import AttachedTarget, LaunchedTarget, attached, launched
from tui.store.bounded_read import require_regular_file
from tui.store.history import default_data_dir
from tui.store.profiles import check_name
from tui.twin.calibrate import Calibration

DEFAULT_BUDGET_S = 300.0


def add_design_arguments(parser: argparse.ArgumentParser, prefix: str = "") -> None:
    """The calibration design's size, for ``vtc calibrate`` (``--scale``, ``--passes``) and
    the console's ``k`` (``--calibration-scale``, ``--calibration-passes``)."""
    k = "k: " if prefix else ""
    parser.add_argument(
        f"--{prefix}scale",
        type=positive_float,
        default=1.0,
        metavar="X",
        help=f"{k}requests per load, x this (smaller: quicker, a wider interval)",
    )
    parser.add_argument(
        f"--{prefix}passes",
        type=int,
        default=2,
        choices=range(1, 5),
        metavar="N",
        help=f"{k}run the designed set N times (default 2: noise falls on one pass, and the "
        "server's own spread is measured)",
    )


def add_calibrate_parser(subparsers: Any) -> None:
    """Register ``vtc calibrate``."""
    p = subparsers.add_parser(
        "calibrate",
        help="fit the simulator to a real server: a twin profile with its measured error",
        description="Run a short designed set of loads (decode-heavy at several "
        "concurrencies, long prompts, mixed, a shared prefix) against a running server (URL) "
        "or one it launches (-- serve MODEL [flags]), fit the simulator's step times to them, "
        "score each kind of load on a fit that left it out (the validation error every "
        "prediction states), and save the profile (NAME) with its residuals and the server's "
        "own spread between passes. Interrupted, the same command resumes.",
    )
    p.add_argument(
        "url", nargs="?", type=server_url, help="a running server, e.g. http://127.0.0.1:8000"
    )
    p.add_argument("--name", required=True, help="the profile's name")
    p.add_argument(
        "--vllm",
        dest="calibrate_vllm",
        default="vllm",
        metavar="PATH",
        help="without URL: the vllm executable to launch with the -- serve line",
    )
    p.add_argument(
        "--budget",
        type=positive_float,
        default=DEFAULT_BUDGET_S,
        metavar="SECONDS",
        help=f"the most the loads may take (default {DEFAULT_BUDGET_S:g})",
    )
    add_design_arguments(p)
    p.add_argument("--device", help="the device's name when the server cannot say it")
    p.add_argument("--attach-log", type=Path, metavar="FILE", help="with URL: its startup log")
    p.add_argument("--fresh", action="store_true", help="ignore an earlier run's journal")
    p.add_argument(
        "--startup-timeout",
        type=positive_float,
        default=900.0,
        help="seconds before a launch fails",
    )


def _show(out: TextIO, progress: Progress, tty: bool) -> None:
    if tty:
        out.write("\r" + progress.line()[:200] + "\x1b[K")
    else:
        out.write(progress.line() + "\n")
    out.flush()


def validation_line(profile: Profile) -> str:
    """The validation error (each load family left out of the fit in turn) and the real
    server's own repeat spread, or that there were too few families to validate."""
    val = profile.validation
    spread = profile.repeat_spread_pct
    floor = f"; the server's own repeat spread {spread:.1f}%" if spread is not None else ""
    if val is None:
        return f"validation error: none (too few load families to leave one out){floor}"
    per = val.per_metric_line()
    return (
        f"validation error (loads left out of the fit): ±{val.stated_pct:.1f}% covers "
        f"{INTERVAL_PERCENTILE:.0f}% (median {val.median_pct:.1f}%, worst {val.worst_pct:.1f}%); "
        f"{per}{floor}"
    )


def describe(profile: Profile) -> list[str]:
    """What ``vtc calibrate`` prints of a saved profile."""
    c = profile.coefficients
    err = profile.fit_error
    lines = [
        f"profile {profile.name} r{profile.revision}: {profile.identity.describe()}",
        f"  step time = {c.b0 * 1e3:.3f} ms + {c.b1 * 1e6:.2f} us/prefill token + "
        f"{c.b2 * 1e6:.1f} us/decode token + {c.b3 * 1e6:.1f} us/1k KV tokens decode reads + "
        f"{c.b4 * 1e3:.2f} ms/1M prefill attention pairs + {c.b5 * 1e6:.1f} us/sequence",
        f"  API server: {c.a0 * 1e3:.2f} ms/request + {c.a1 * 1e6:.2f} us/prompt token, "
        f"{c.a2 * 1e6:.1f} us/token streamed"
        + (" (on the engine's cores: it slows the steps)" if profile.frontend_blocks else ""),
        f"  KV {profile.memory.kv_tokens:,} tokens, block {profile.memory.block_size}",
        f"  fit error (calibration loads, in-sample): median {err.median_pct:.1f}%, worst "
        f"{err.worst_pct:.1f}%; " + err.per_metric_line(),
        "  " + validation_line(profile),
    ]
    if profile.step_check is not None:
        lines.append("  " + profile.step_check.line())
    return [inert(line) for line in lines]


async def _calibrate(args: argparse.Namespace, serve_args: list[str], out: TextIO) -> Profile:
    data_dir = default_data_dir()
    tty = out.isatty()

    async def measure(target: AttachedTarget | LaunchedTarget) -> Profile:
        limit = target.flags.max_model_len or 4096
        mns = target.flags.max_num_seqs
        loads = design(limit, args.scale, passes=args.passes, max_num_seqs=mns)
        run = Calibration(
            name=args.name,
            target=target,
            loads=loads,
            data_dir=data_dir,
            budget_s=args.budget,
            device=args.device,
            fresh=args.fresh,
            runner=target.load_runner,
        )
        return await run.run(lambda p: _show(out, p, tty))

    if args.url:
        return await measure(await attached(args.url, args.attach_log))
    command = serve_command(serve_args)
    # `vtc --vllm PATH calibrate ...` and `vtc calibrate --vllm PATH ...` both name it.
    vllm = args.calibrate_vllm if args.calibrate_vllm != "vllm" else getattr(args, "vllm", "vllm")
    async with launched(
        vllm,
        command.flags,
        data_dir,
        startup_timeout_s=args.startup_timeout,
        secrets=command.env,
    ) as target:
        return await measure(target)


def run_calibrate_command(
    args: argparse.Namespace, serve_args: list[str], out: TextIO | None = None
) -> int:
    """``vtc calibrate``; the exit code."""
    out = out or sys.stdout
    if bool(args.url) == bool(serve_args):
        print(
            "vtc: calibrate needs a URL or a `-- serve MODEL [flags]` line (one of them)",
            file=sys.stderr,
        )
        return 2
    try:
        check_name(args.name)
        if args.attach_log is not None:  # a FIFO, a device, a folder: refused before any wait
            require_regular_file(args.attach_log, "--attach-log")
    except VtcError as exc:
        print(f"vtc: {exc.one_line()}", file=sys.stderr)
        return 2
    loop = asyncio.new_event_loop()
    task = loop.create_task(_calibrate(args, serve_args, out))
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, task.cancel)
    try:
        profile = loop.run_until_complete(task)
    except asyncio.CancelledError:
        out.write("\n")
        print("vtc: calibration stopped; the same command resumes it", file=sys.stderr)
        return 1
    except VtcError as exc:
        out.write("\n")
        print(f"vtc: {exc.one_line()}", file=sys.stderr)
        return 1
    finally:
        loop.close()
    out.write("\n")
    for line in describe(profile):
        out.write(line + "\n")
    out.write(f"saved: {inert(str(default_data_dir() / 'profiles' / profile.name))}.json\n")
    return 0
