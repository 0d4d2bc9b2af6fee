"""``vtc-sim``: a drop-in for ``vllm serve`` backed by a simulated GPU.

    vtc-sim serve MODEL [vllm serve flags] [--sim-gpu NAME] [--sim-gpus N]
                        [--sim-speed X] [--sim-gpu-used-gb X] [--sim-seed N]
                        [--sim-fixed-ttft-ms MS] [--sim-fixed-itl-ms MS]

Same argv (every flag of vLLM 0.32's serve parser), log format, errors, exit codes, HTTP
API and metric names as ``vllm serve`` 0.32 (see :mod:`tui.sim.server` and
``tui/sim/README.md``). ``--sim-*`` options: ``--sim-gpu`` picks a catalog GPU
(``vtc-sim gpus`` lists them), ``--sim-gpus`` how many the node has, ``--sim-speed`` scales
all time (start-up stages and token timing; 10 = ten times faster), ``--sim-gpu-used-gb``
memory other processes already hold on each GPU, ``--sim-seed`` the random seed.
``--sim-fixed-ttft-ms``/``--sim-fixed-itl-ms`` inject fixed wall-clock delays instead: every
streamed sequence gets its first token TTFT ms after arrival and then one every ITL ms,
bypassing the scheduler and cost model (for measuring load clients against known delays).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import TextIO

from tui.domain.flags.serve import ArgvError
from tui.sim.argv import UnrecognizedArgs, parse_command
from tui.sim.catalog import GPUS, catalog_models
from tui.sim.logs import VERSION, VllmLog
from tui.sim.server import SimServer

_VLLM_USAGE = (
    "usage: vllm [-h] [-v]\n"
    "            {chat,complete,serve,launch,bench,collect-env,download-kernels,preload,"
    "run-batch,snapshot}\n"
    "            ..."
)
_SERVE_USAGE = "usage: vllm serve [model_tag] [options]"


def _usage_error(err: TextIO, usage: str, prog: str, message: str) -> int:
    err.write(f"{usage}\n{prog}: error: {message}\n")
    err.flush()
    return 2


def _catalog(out: TextIO) -> int:
    out.write("Simulated GPUs (--sim-gpu):\n")
    for gpu in GPUS.values():
        fp8 = "fp8" if gpu.supports_fp8 else "no fp8"
        out.write(
            f"  {gpu.key:14} {gpu.name:26} {gpu.memory_gib:6.2f} GiB  "
            f"{gpu.bandwidth_gbs:5.0f} GB/s  {gpu.fp16_tflops:5.0f} TFLOPS fp16  {fp8}\n"
        )
    out.write("Models (or a directory with a config.json):\n")
    for name in catalog_models():
        out.write(f"  {name}\n")
    return 0


def run(
    argv: Sequence[str],
    out: TextIO | None = None,
    err: TextIO | None = None,
    install_signals: bool = True,
) -> int:
    """Run ``vtc-sim`` with ``argv`` (without the program name); the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    args = list(argv)
    if not args or args[0] in ("-h", "--help"):
        out.write(__doc__ or "")
        return 0
    if args[0] in ("-v", "--version"):
        out.write(f"{VERSION}\n")
        return 0
    if args[0] in ("gpus", "models", "catalog"):
        return _catalog(out)
    if args[0] != "serve":
        return _usage_error(
            err,
            _VLLM_USAGE,
            "vllm",
            f"argument subparser: invalid choice: {args[0]!r} (choose from "
            "'chat', 'complete', 'serve', 'launch', 'bench', 'collect-env', "
            "'download-kernels', 'preload', 'run-batch', 'snapshot')",
        )
    rest = args[1:]
    if any(a == "-h" or a == "--help" or a.startswith("--help=") for a in rest):
        out.write(__doc__ or "")
        return 0
    try:
        command = parse_command(rest)
    except UnrecognizedArgs as exc:
        return _usage_error(err, _VLLM_USAGE, "vllm", str(exc))
    except ArgvError as exc:
        return _usage_error(err, _SERVE_USAGE, "vllm serve", str(exc))
    if not command.parsed.model:
        return _usage_error(
            err,
            _SERVE_USAGE,
            "vllm serve",
            "No model specified! Please specify model either as a positional "
            "argument or in a config file.",
        )
    log = VllmLog(out, err)
    server = SimServer(command, log, install_signals=install_signals)
    try:
        return asyncio.run(server.run())
    except KeyboardInterrupt:
        return 0


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point (``vtc-sim``)."""
    sys.exit(run(sys.argv[1:] if argv is None else argv))
