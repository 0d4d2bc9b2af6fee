"""``vtc bench`` with two recorders for ``clock_probe.py``: GC pauses and live statistics.

    python benchmarks/_probe_vtc.py SPANS.json [vtc bench flags]

Runs ``tui.app.bench.main`` unchanged, with ``gc.callbacks`` (public) recording every
collection and a wrapper on the runner's own ``LiveStats.snapshot`` (the once-a-second
harvest) recording its spans, both as ``perf_counter`` intervals written to SPANS.json at
the end. Works on any checkout of vtc whose ``tui`` comes first on ``sys.path``.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from typing import Any

spans: dict[str, list[tuple[float, float]]] = {"gc": [], "live stats": []}
_gc_start: list[float] = []


def _on_gc(phase: str, info: dict[str, Any]) -> None:
    if phase == "start":
        _gc_start.append(time.perf_counter())
    elif _gc_start:
        spans["gc"].append((_gc_start.pop(), time.perf_counter()))


def main() -> int:
    out = sys.argv[1]
    from tui.load import bench_cli, live

    original = live.LiveStats.snapshot

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            spans["live stats"].append((start, time.perf_counter()))

    live.LiveStats.snapshot = timed  # type: ignore[method-assign]
    gc.callbacks.append(_on_gc)
    try:
        return bench_cli.main(sys.argv[2:])
    finally:
        with open(out, "w", encoding="utf-8") as handle:
            json.dump(spans, handle)


if __name__ == "__main__":
    sys.exit(main())
