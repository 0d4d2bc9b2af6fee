"""The reference server the twin benchmarks judge against, and its own repeat spread.

The model (issue 27): ``vtc setup-cpu-vllm``'s compute-bound small Llama by default
(``model_small``, ~51M parameters; its timings repeat within a few percent), the tiny one
on request (bound by Python and OS scheduling: five identical loads read 2,498-4,809 tok/s
on a 2-core host, so no twin can be judged against it), or any model directory.

The spread: the same load run ``runs`` times back to back on one warm server, from a cold
prefix cache each time. Per metric, the median absolute deviation of a run from the runs'
mean, in percent, is what a perfect predictor of that mean would score: the floor no twin
can beat. The range (max - min over the mean) is printed beside it.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from tui.domain.results import BenchResult
from tui.domain.workload import LoadSpec
from tui.load.runner import LoadRunner
from tui.server.provision import ProvisionedVllm, find_provisioned

MODEL_CHOICES = ("small", "tiny")
SPREAD_RUNS = 5  # issue 27: at least five identical runs of one load
SPREAD_LOAD = LoadSpec(  # the issue's own repeat figure: 48 prompts, 128 in / 64 out, conc 8
    input_len=128, output_len=64, num_prompts=48, max_concurrency=8, seed=5, ignore_eos=True
)
SPREAD_METRICS = {
    "output_throughput": "throughput",
    "mean_e2el_ms": "mean E2EL",
    "mean_ttft_ms": "mean TTFT",
}


def add_model_option(parser: argparse.ArgumentParser) -> None:
    """``--model small|tiny|PATH`` (default small: the compute-bound reference)."""
    parser.add_argument(
        "--model",
        default="small",
        help="the real server's model: 'small' (default, compute-bound, ~51M parameters), "
        "'tiny' (449k, timings are noise) or a model directory",
    )


def provisioned_or_say() -> ProvisionedVllm | None:
    """The provisioned CPU build of vLLM; ``None`` after one line on stderr saying how to
    get it (the benchmark then exits 2)."""
    found = find_provisioned()
    if found is None:
        print("real vLLM is not provisioned: run `vtc setup-cpu-vllm` first", file=sys.stderr)
    return found


def reference_model(found: ProvisionedVllm, choice: str) -> Path:
    """The model directory ``--model`` names."""
    if choice == "small":
        return found.model_small
    if choice == "tiny":
        return found.model
    return Path(choice).expanduser().absolute()


@dataclass(frozen=True)
class RepeatSpread:
    """A metric's values over identical runs of one load."""

    values: dict[str, list[float]] = field(default_factory=dict)

    def floor_pct(self, key: str) -> float:
        """Median absolute deviation of a run from the runs' mean, percent."""
        values = self.values.get(key, [])
        if len(values) < 2:
            return math.nan
        mean = statistics.fmean(values)
        return statistics.median(100.0 * abs(v - mean) / mean for v in values)

    def range_pct(self, key: str) -> float:
        """``100 * (max - min) / mean``."""
        values = self.values.get(key, [])
        if len(values) < 2:
            return math.nan
        return 100.0 * (max(values) - min(values)) / statistics.fmean(values)

    def report(self) -> str:
        """The printed lines: per metric the runs, the floor and the range."""
        runs = max((len(v) for v in self.values.values()), default=0)
        lines = [f"real server's own repeat spread over {runs} identical runs:"]
        for key, label in SPREAD_METRICS.items():
            shown = ", ".join(f"{v:.1f}" for v in self.values.get(key, []))
            lines.append(
                f"  {label:11} {self.floor_pct(key):5.1f}% from the mean (range "
                f"{self.range_pct(key):5.1f}%): {shown}"
            )
        lines.append("  (the floor no twin can beat)")
        return "\n".join(lines)


def spread_of(results: list[BenchResult]) -> RepeatSpread:
    """The spread of ``results`` (identical loads) over :data:`SPREAD_METRICS`."""
    values: dict[str, list[float]] = {}
    for key in SPREAD_METRICS:
        values[key] = [v for r in results if (v := r.metric(key)) is not None and math.isfinite(v)]
    return RepeatSpread(values)


async def measure_spread(
    base_url: str,
    model: str,
    reset: Callable[[], Awaitable[object]],
    load: LoadSpec = SPREAD_LOAD,
    runs: int = SPREAD_RUNS,
) -> RepeatSpread:
    """``load`` ``runs`` times (one warm-up run first, left out), ``reset`` awaited before
    each (a cold prefix cache, so the runs are identical); the spread."""
    warm = load.model_copy(update={"num_warmups": 1})
    results = []
    for n in range(runs):
        await reset()
        runner = LoadRunner(client="vtc-bench", percentiles=(50.0, 90.0, 99.0))
        spec = warm if n == 0 else load
        results.append(await runner.run(spec, base_url=base_url, model=model))
    return spread_of(results)
