"""``vtc capacity``: the traffic a server holds at its SLOs, and the replicas a rate needs.

``vtc capacity --profile NAME --slo p99_ttft_ms=500 [-- serve FLAGS]`` asks the twin (the
profile's) for the latency-versus-rate curve of a workload, the highest rate meeting every
SLO, the interval its stated error implies and, with ``--target-rate``, the replicas
(:func:`tui.twin.capacity.twin_capacity`); ``vtc capacity URL ...`` reads that server's
flags; ``--confirm`` then runs at most three real loads on it
(:func:`tui.twin.confirm.confirm`), each a run on the board. Each load at a rate R sends R x
``--load-seconds`` requests (at least 20, at most ``--num-prompts``), the twin's and the
real ones alike, so a slow server's confirmation is bounded in time. It prints the answer, the curve
as a text plot at the terminal's width, or ``--json``; the answer is kept for ``vtc
report``. Exit 0 when a rate holds the SLOs, 1 when none does (or the flags do not start),
2 for bad input or setup (one line).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
from typing import Any, TextIO

from pydantic import ValidationError

from tui.app.arg_types import positive_float, server_url
from tui.domain.capacity import LEAST_PROMPTS, LOAD_SECONDS, CapacityAnswer, Limit, RealLoad
from tui.domain.capacity_plot import draw, legend
from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.validation import serve_command
from tui.domain.inert import inert, inert_lines
from tui.domain.profile import Profile
from tui.domain.sweep.slo import SloLimits
from tui.domain.workload import LoadSpec
from tui.modes.capacity import confirming, find_profile, read_flags
from tui.store.capacity_answers import save_answer
from tui.store.history import default_data_dir
from tui.twin.capacity import check_slos, twin_capacity
from tui.twin.confirm import confirm

DEFAULT_PROMPTS = 200
PLOT_HEIGHT = 16


def slo_limits(text: str) -> SloLimits:
    """``p99_ttft_ms=500,p99_e2el_ms=3000`` as limits (refused at parse time when bad)."""
    limits: dict[str, float] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep:
            raise argparse.ArgumentTypeError(f"expected KEY=MS, got {part.strip()[:60]!r}")
        try:
            limits[key.strip()] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {value.strip()[:60]!r}") from None
    try:
        return SloLimits(limits=limits)
    except ValidationError as exc:
        msg = exc.errors()[0]["msg"].removeprefix("Value error, ")
        raise argparse.ArgumentTypeError(msg) from None


def rate_shape(text: str) -> float:
    """``poisson`` (burstiness 1) or ``burstiness=B``: the gamma shape of the arrivals."""
    if text.strip().lower() == "poisson":
        return 1.0
    key, sep, value = text.partition("=")
    if key.strip().lower() != "burstiness" or not sep:
        raise argparse.ArgumentTypeError(f"expected poisson or burstiness=B, got {text[:60]!r}")
    return positive_float(value.strip())


def add_capacity_parser(subparsers: Any) -> None:
    """Register ``vtc capacity``."""
    p = subparsers.add_parser(
        "capacity",
        help="the highest request rate meeting SLOs (the twin's curve), replicas for a rate",
        description="The twin's latency-versus-rate curve for a workload, the highest request "
        "rate meeting every SLO, the interval its validation error implies, the replicas a "
        "target rate needs; --confirm URL settles it with at most three real loads, each a "
        "run on the board.",
        epilog="exit codes: 0 = a rate meets the SLOs (with --confirm: measured); 1 = none "
        "does (or the flags do not start); 2 = bad input or setup.",
    )
    p.add_argument("url", nargs="?", type=server_url, help="the server (its flags are read)")
    p.add_argument(
        "--profile",
        metavar="NAME",
        help="the twin's profile (default: the newest of the server's model)",
    )
    p.add_argument(
        "--input-len", type=int, default=LoadSpec().input_len, metavar="N", help="prompt tokens"
    )
    p.add_argument(
        "--output-len", type=int, default=LoadSpec().output_len, metavar="M", help="output tokens"
    )
    p.add_argument(
        "--prefix-len", type=int, default=0, metavar="K", help="shared prefix tokens (default 0)"
    )
    p.add_argument(
        "--num-prompts",
        type=int,
        default=DEFAULT_PROMPTS,
        metavar="N",
        help=f"the most requests of one load, twin and real (default {DEFAULT_PROMPTS})",
    )
    p.add_argument(
        "--load-seconds",
        type=positive_float,
        default=LOAD_SECONDS,
        metavar="S",
        help=f"each load at R req/s sends R x S requests, at least {LEAST_PROMPTS} and at most "
        f"--num-prompts (default {LOAD_SECONDS:g}: a real load lasts about S s, or "
        f"{LEAST_PROMPTS}/R s at a low rate)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the prompts and arrivals")
    p.add_argument(
        "--request-rate-shape",
        type=rate_shape,
        default=1.0,
        dest="burstiness",
        metavar="poisson|burstiness=B",
        help="arrivals (default poisson)",
    )
    p.add_argument(
        "--slo",
        type=slo_limits,
        required=True,
        metavar="KEY=MS[,KEY=MS]",
        help="e.g. p99_ttft_ms=500,p99_e2el_ms=4000",
    )
    p.add_argument(
        "--target-rate", type=positive_float, metavar="R", help="the replicas R req/s needs"
    )
    p.add_argument("--json", action="store_true", help="print the answer as JSON")
    p.add_argument(
        "--confirm",
        nargs="?",
        const=True,
        default=None,
        metavar="URL",
        help="at most three real loads on the server (URL here or before)",
    )


def _workload(args: argparse.Namespace) -> LoadSpec:
    try:
        return LoadSpec(
            input_len=args.input_len,
            output_len=args.output_len,
            prefix_len=args.prefix_len,
            num_prompts=args.num_prompts,
            seed=args.seed,
            burstiness=args.burstiness,
            max_concurrency=None,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first["loc"])
        raise VtcError(f"bad workload: {where}: {first['msg']}") from None


def _confirm_url(args: argparse.Namespace) -> str | None:
    if args.confirm is None:
        return None
    if isinstance(args.confirm, str):
        return server_url(args.confirm)
    if not args.url:
        raise VtcError("--confirm needs the server's URL", hint="vtc capacity URL --confirm")
    return str(args.url)


def _answer_lines(answer: CapacityAnswer, width: int, plot: bool) -> list[str]:
    lines = [inert(answer.label), answer.summary()]
    if answer.replicas is not None:
        lines.append(answer.replicas_line())
    lines.append(
        f"twin: {answer.predictions} predictions in {answer.seconds:.1f} s, "
        f"{answer.sizing()}, saturates at {answer.saturation:.3g} req/s"
    )
    if plot and answer.curve:
        lines += text_plot(answer, width).splitlines()
        lines.append(legend(answer))
    return lines


def text_plot(answer: CapacityAnswer, width: int, height: int = PLOT_HEIGHT) -> str:
    """The curve drawn as text (plotext), inert: no colour, no control sequence."""
    import plotext

    plotext.clear_figure()
    draw(plotext, answer, width=max(40, width), height=height)
    plotext.theme("clear")
    return inert_lines(plotext.uncolorize(plotext.build()))


def _load_line(load: RealLoad) -> str:
    stats = ", ".join(f"{k} {v:.0f}" for k, v in load.stats.items())
    run = f" (run #{load.run_id})" if load.run_id is not None else ""
    sent = f" ({load.requests} requests)" if load.requests is not None else ""
    verdict = "met" if load.met else "missed"
    return f"measured at {load.rate:.3g} req/s{sent}: {stats}: {verdict}{run}"


async def capacity_answer(
    args: argparse.Namespace, serve_args: list[str], out: TextIO
) -> CapacityAnswer:
    """The answer ``vtc capacity`` prints (``--confirm``: its real loads run and said on
    ``out`` as they end, unless ``--json``); :class:`VtcError` for bad input or setup."""
    data_dir = default_data_dir()
    check_slos(args.slo)
    workload = _workload(args)
    confirm_url = _confirm_url(args)
    url = confirm_url or args.url
    flags: ServeFlags | None = None
    if url:
        flags = await read_flags(url)
    elif serve_args:
        flags = serve_command(serve_args).flags
    elif not args.profile:
        raise VtcError("name a profile (--profile NAME), a server URL or a `-- serve` line")
    profile: Profile = find_profile(args.profile, flags.model if flags else "", data_dir, url)
    flags = flags or profile.flags

    def ask(server: Any = None) -> CapacityAnswer:
        return twin_capacity(
            profile,
            flags,
            workload,
            args.slo,
            server=server,
            target_rate=args.target_rate,
            load_seconds=args.load_seconds,
        )

    if confirm_url is None:
        return await asyncio.to_thread(ask)
    async with confirming(confirm_url, args.profile or profile.name, data_dir) as session:
        answer = await asyncio.to_thread(ask, session.current)
        if not args.json:
            _print(out, _answer_lines(answer, _width(), plot=True))
            out.write(
                f"confirming on {inert(confirm_url)}: at most 3 real loads, {answer.sizing()}\n"
            )
            out.flush()

        def said(load: RealLoad) -> None:
            if not args.json:
                out.write(_load_line(load) + "\n")
                out.flush()

        return await confirm(answer, session, on_load=said)


def _width() -> int:
    return shutil.get_terminal_size((80, 24)).columns


def _print(out: TextIO, lines: list[str]) -> None:
    for line in lines:
        out.write(line + "\n")


def run_capacity_command(
    args: argparse.Namespace, serve_args: list[str], out: TextIO | None = None
) -> int:
    """``vtc capacity``; the exit code."""
    out = out or sys.stdout
    try:
        answer = asyncio.run(capacity_answer(args, serve_args, out))
    except VtcError as exc:
        print(f"vtc: {exc.one_line()}", file=sys.stderr)
        return 2
    save_answer(answer, default_data_dir())
    if args.json:
        out.write(json.dumps(answer.to_json(), indent=2) + "\n")
    elif answer.real_loads:
        out.write(answer.verdict() + "\n")
    else:
        _print(out, _answer_lines(answer, _width(), plot=True))
    out.flush()
    if answer.real_loads:  # what was measured decides
        return 0 if answer.confirmed_rate is not None else 1
    return 0 if answer.max_rate > 0 and answer.limit is not Limit.NO_START else 1
