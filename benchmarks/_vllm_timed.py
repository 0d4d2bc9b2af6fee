"""``vllm bench serve``, unchanged, plus the CPU time of its streaming phase in the result.

    <vllm venv>/bin/python benchmarks/_vllm_timed.py [vllm bench serve flags]

Runs vLLM's own CLI entry point (``vllm.entrypoints.cli.main``) exactly as the ``vllm``
command does, after wrapping ``vllm.benchmarks.serve.benchmark`` to measure the process
CPU time it takes, minus the CPU time of ``calculate_metrics`` (the statistics at the end,
which our client's figure leaves out too). The figure lands in the saved result as
``client_cpu_s``; nothing else changes. Run with the vLLM venv's python.

With ``VTC_START_GATE=1`` it also stops right before the timed run (after the last thing
``benchmark()`` does before taking its start time, the ``/metrics`` fetch), prints
``VTC-READY`` on stderr and waits for a line on stdin: ``agreement.py`` uses that to let
both tools go at the same instant.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import vllm.benchmarks.serve as serve

_original_benchmark = serve.benchmark
_original_metrics = serve.calculate_metrics
_metrics_cpu = [0.0]


def _timed_metrics(*args: Any, **kwargs: Any) -> Any:
    started = time.process_time()
    try:
        return _original_metrics(*args, **kwargs)
    finally:
        _metrics_cpu[0] += time.process_time() - started


async def _timed_benchmark(*args: Any, **kwargs: Any) -> Any:
    started = time.process_time()
    result = await _original_benchmark(*args, **kwargs)
    result["client_cpu_s"] = time.process_time() - started - _metrics_cpu[0]
    return result


serve.benchmark = _timed_benchmark
serve.calculate_metrics = _timed_metrics

if os.environ.get("VTC_START_GATE") == "1":
    _original_fetch = serve.fetch_diffusion_metrics

    async def _gated_fetch(*args: Any, **kwargs: Any) -> Any:
        result = await _original_fetch(*args, **kwargs)
        if not _gate_passed[0]:  # the first call is the one before the run
            _gate_passed[0] = True
            print("VTC-READY", file=sys.stderr, flush=True)
            sys.stdin.readline()
        return result

    _gate_passed = [False]
    serve.fetch_diffusion_metrics = _gated_fetch

if __name__ == "__main__":
    from vllm.entrypoints.cli.main import main

    sys.argv = ["vllm", "bench", "serve", *sys.argv[1:]]
    main()
