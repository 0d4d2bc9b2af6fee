"""The console's heap kept out of the garbage collector's full passes.

A full (generation 2) collection walks every object the process holds; the console's are
mostly its widget tree, styles and stylesheet, built once at start. Walking them took tens
of milliseconds, on whichever frame it fell: a key pressed then waited for it (issue 29, the
key-latency tail). Frozen after the first screen is drawn (CPython's ``gc.freeze``, as
vLLM's ``freeze_gc_heap`` and this project's load runner do), they are never walked again;
what the console creates later is collected as usual. Unfrozen when the console ends, so a
process that runs many consoles (the tests) frees them.

Before freezing, only the young generations are collected: that is where start-up's garbage
is. A full pass there was itself the walk this module avoids, on the first frame, and it
grows with everything else the process holds (a test worker runs hundreds of consoles). What
only a full pass would have found (a few per cent of the heap) stays frozen until the
console ends.
"""

from __future__ import annotations

import gc

YOUNG = 1
"""The oldest generation collected before the freeze (0 and 1: start-up's garbage)."""


def freeze_heap() -> int:
    """Collect the young generations, then move every object alive now out of the
    collector's reach; the number of objects frozen."""
    gc.collect(YOUNG)
    gc.freeze()
    return gc.get_freeze_count()


def thaw_heap() -> None:
    """Hand the frozen objects back to the collector (the console is ending)."""
    gc.unfreeze()
