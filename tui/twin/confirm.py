"""``--confirm``: at most three real loads that confirm or correct the twin's capacity.

:func:`confirm` runs the loads :func:`tui.domain.capacity.next_confirm_rate` asks for (the
predicted highest rate, :data:`~tui.domain.capacity.ABOVE` times it, and a third only when
those two disagree with the prediction) on a session's ready server, each through the
session's own load path: ``vtc bench``'s engine in its own process, every load kept on the
board as a run like any other (the first on the attached server's run, each further one
a run of its own), with the twin's prediction beside it. Each load is the one the twin's
curve stands for at its rate (:meth:`~tui.domain.capacity.CapacityAnswer.load_at`: with
``load_seconds``, ``rate x load_seconds`` requests, at least
:data:`~tui.domain.capacity.LEAST_PROMPTS`, at most the workload's), so
a slow server's confirmation lasts minutes, not an hour. The answer then carries what was
measured (:class:`~tui.domain.capacity.RealLoad`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Protocol

from tui.domain.capacity import CapacityAnswer, RealLoad, next_confirm_rate
from tui.domain.errors import VtcError
from tui.domain.results import BenchResult, RunRecord
from tui.domain.workload import LoadSpec


class LoadTarget(Protocol):
    """What confirming needs of a session (``tui.session.Session`` is one)."""

    @property
    def runs(self) -> list[RunRecord]: ...

    async def run_load(
        self,
        spec: LoadSpec,
        model: str | None = None,
        goodput: Mapping[str, float] | None = None,
    ) -> BenchResult | None: ...


def real_load(
    answer: CapacityAnswer,
    rate: float,
    result: BenchResult,
    run_id: int | None,
    requests: int | None = None,
) -> RealLoad:
    """What one real load (of ``requests`` requests) measured, against the answer's SLOs."""
    stats = {}
    for key in answer.slos.limits:
        value = result.metric(key)
        stats[key] = float(value) if value is not None else math.inf
    met = (
        result.completed > 0
        and result.failed == 0
        and all(stats[k] <= v for k, v in answer.slos.limits.items())
    )
    return RealLoad(
        rate=rate,
        stats=stats,
        met=met,
        served=float(result.metric("request_throughput") or 0.0),
        run_id=run_id,
        requests=requests,
        predicted_ratio=answer.predicted_ratio(rate),
    )


def _run_of(target: LoadTarget, result: BenchResult) -> int | None:
    """The board's run the load landed on."""
    return next((r.id for r in reversed(target.runs) if r.bench == result), None)


async def confirm(
    answer: CapacityAnswer,
    target: LoadTarget,
    *,
    on_load: Callable[[RealLoad], None] | None = None,
) -> CapacityAnswer:
    """Run the confirming loads on ``target``; the answer with what they measured."""
    goodput = {
        k.removeprefix("p99_").removesuffix("_ms"): v
        for k, v in answer.slos.limits.items()
        if k.startswith("p99_")
        and k.removeprefix("p99_").removesuffix("_ms") in ("ttft", "tpot", "e2el")
    }
    while (rate := next_confirm_rate(answer)) is not None:
        # one warm-up request first, left out of the numbers: a cold server's first load
        # would otherwise carry its warm-up in its p99
        spec = answer.load_at(round(rate, 4)).model_copy(
            update={
                "max_concurrency": None,
                "num_warmups": max(answer.workload.num_warmups, 1),
            }
        )
        result = await target.run_load(spec, goodput=goodput or None)
        if result is None:
            raise VtcError(f"the real load at {rate:.3g} req/s returned no result")
        run_id = _run_of(target, result)
        load = real_load(answer, spec.request_rate, result, run_id, spec.num_prompts)
        answer = answer.model_copy(update={"real_loads": [*answer.real_loads, load]})
        if on_load is not None:
            on_load(load)
    return answer
