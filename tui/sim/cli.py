"""``vtc-sim``: a drop-in for ``vllm serve`` backed by a simulated GPU.

Same argv (every flag of vLLM 0.32's serve parser), log format, errors, exit codes, HTTP
API and metric names as ``vllm serve`` 0.32 (see :mod:`tui.sim.server` and
``tui/sim/README.md``). :data:`HELP` is what ``vtc-sim --help`` prints: plain text, for a
terminal (this docstring is reST, for the code).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import TextIO

from tui.domain.flags.serve import ArgvError
from tui.domain.inert import inert
from tui.sim.argv import UnrecognizedArgs, parse_command
from tui.sim.catalog import DEFAULT_GPU, GPUS, catalog_models
from tui.sim.logs import VERSION, VllmLog
from tui.sim.server import SimServer
from tui.sim.versions import DEFAULT_SIM_VLLM_VERSION, SIM_VLLM_VERSIONS
from tui.store.profiles import list_profiles

HELP = f"""\
usage: vtc-sim serve MODEL [vllm serve flags] [--sim-gpu NAME] [--sim-gpus N]
                     [--sim-speed X] [--sim-gpu-used-gb X] [--sim-seed N]
                     [--sim-fixed-ttft-ms MS] [--sim-fixed-itl-ms MS]
                     [--sim-vllm-version V] [--sim-host linux|wsl2]
                     [--sim-profile NAME|FILE]
       vtc-sim gpus        list the simulated GPUs and the models it knows
       vtc-sim --version   the vLLM version it speaks ({VERSION})

A drop-in for `vllm serve` {VERSION} backed by a simulated GPU: the same flags, log lines,
errors, exit codes, HTTP API and metric names. Each effect of its cost model and the vLLM
behaviour it imitates: tui/sim/README.md.

Simulator options:
  --sim-gpu NAME         the GPU simulated (default {DEFAULT_GPU}, as `vtc --demo`);
                         `vtc-sim gpus` lists them
  --sim-gpus N           how many GPUs the node has
  --sim-speed X          scale all time (start-up stages and token timing; 10 = ten times
                         faster)
  --sim-gpu-used-gb X    memory other processes already hold on each GPU
  --sim-seed N           the random seed
  --sim-fixed-ttft-ms MS, --sim-fixed-itl-ms MS
                         fixed wall-clock delays instead of the cost model: every streamed
                         sequence gets its first token MS after arrival, then one every MS
                         (for measuring load clients against known delays)
  --sim-vllm-version V   the vLLM it speaks: {", ".join(SIM_VLLM_VERSIONS)} (default
                         {DEFAULT_SIM_VLLM_VERSION}): its flags, log lines, metric families
  --sim-host linux|wsl2  the machine's OS; under wsl2 CUDA offers no UVA, so vLLM 0.33's
                         model runner V2 stops with "UVA is not available" unless the
                         server's environment has VLLM_USE_V2_MODEL_RUNNER=0
  --sim-profile NAME|FILE
                         the twin of a calibrated server (`vtc calibrate`): its step times,
                         request overheads, KV capacity and vLLM's defaults for its device
                         replace the GPU model; `vtc-sim gpus` lists the profiles
"""

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
    out.write("Simulated GPUs (--sim-gpu; * the default; hand-made from datasheet figures):\n")
    for gpu in GPUS.values():
        fp8 = "fp8" if gpu.supports_fp8 else "no fp8"
        mark = "*" if gpu.key == DEFAULT_GPU else " "
        out.write(
            f"{mark} {gpu.key:14} {gpu.name:26} {gpu.memory_gib:6.2f} GiB  "
            f"{gpu.bandwidth_gbs:5.0f} GB/s  {gpu.fp16_tflops:5.0f} TFLOPS fp16  {fp8}\n"
        )
    profiles = list_profiles()
    out.write(
        "Twin profiles (--sim-profile NAME|FILE; fitted on a real server by `vtc calibrate`):\n"
    )
    if not profiles:
        out.write("  none yet\n")
    for p in profiles:
        if p.usable:
            out.write(f"  {inert(p.name)} r{p.revision}  {inert(p.description)}  {p.error}\n")
        else:
            out.write(f"  {inert(p.name)}  not usable: {inert(p.error)}\n")
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
        out.write(HELP)
        return 0
    if args[0] in ("-v", "--version"):
        out.write(f"{VERSION}\n")
        return 0
    if args[0] in ("gpus", "models", "catalog"):
        if args[1:2] in (["-h"], ["--help"]):
            out.write(HELP)
            return 0
        if len(args) > 1:  # it takes nothing: an option here was meant for something else
            err.write(f"vtc-sim {args[0]}: takes no arguments, got {inert(args[1])[:80]!r}\n")
            return 2
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
        out.write(HELP)
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
    log = VllmLog(out, err, version=command.sim.vllm_version)
    server = SimServer(command, log, install_signals=install_signals)
    try:
        return asyncio.run(server.run())
    except KeyboardInterrupt:
        return 0


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m tui.sim`` (how vtc launches the simulator); ``vtc-sim`` is
    :func:`tui.app.sim.main`, which also ends quietly into a closed pipe."""
    sys.exit(run(sys.argv[1:] if argv is None else argv))
