"""When each request is sent: ``vllm bench serve``'s arrival process.

Mirrors ``get_request`` in ``benchmarks/serve.py:402-516`` (reference section 4.3),
without ramp-up:

- rate ``inf``: every delay is 0, everything is sent at once;
- burstiness ``inf``: a constant gap of ``1/rate``;
- otherwise gaps are ``gamma(shape=burstiness, scale=1/(rate·burstiness))`` (mean
  ``1/rate``, coefficient of variation ``1/sqrt(burstiness)``; burstiness 1 is Poisson);
- gaps are accumulated, then rescaled so that the last send is at exactly ``N/rate``.

Seeding: bench serve calls ``np.random.seed(seed)`` and draws from numpy's legacy global
generator; a private ``np.random.RandomState(seed)`` is the same generator, so the
schedule matches bench serve's for a seed without touching global state.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np


def send_times(
    num_requests: int,
    request_rate: float,
    burstiness: float = 1.0,
    seed: int = 0,
) -> list[float]:
    """Send offsets in seconds from the start, one per request, non-decreasing.

    Note the first offset is itself one gap (bench serve does not send request 0 at
    t=0 unless the rate is infinite).
    """
    if num_requests < 1:
        raise ValueError("num_requests must be >= 1")
    if not request_rate > 0:
        raise ValueError(f"request_rate must be > 0 (or inf), got {request_rate}")
    if not burstiness > 0:
        raise ValueError(f"A positive burstiness factor is expected, but given {burstiness}.")
    if math.isinf(request_rate):
        return [0.0] * num_requests
    if math.isinf(burstiness):
        gaps = [1.0 / request_rate] * num_requests
    else:
        rng = np.random.RandomState(seed)
        scale = 1.0 / (request_rate * burstiness)
        # One draw per request, in order, as bench serve's loop does.
        gaps = [float(rng.gamma(shape=burstiness, scale=scale)) for _ in range(num_requests)]
    delays = np.cumsum(gaps).tolist()
    if delays[-1] != 0:
        factor = (num_requests / request_rate) / delays[-1]
        delays = [d * factor for d in delays]
    return [float(d) for d in delays]


def open_ended_times(
    request_rate: float, burstiness: float = 1.0, seed: int = 0
) -> Iterator[float]:
    """Send offsets without an end, for runs bounded by a duration instead of a count.

    The same gaps as :func:`send_times` (constant ``1/rate`` for infinite burstiness,
    else gamma with mean ``1/rate``, same seeded generator) accumulated as they come, but
    with no rescaling, since there is no last request to pin to ``N/rate``. The rate must
    be finite: an infinite rate with a duration is a closed loop, paced by the
    concurrency cap instead (see the runner).
    """
    if not request_rate > 0 or math.isinf(request_rate):
        raise ValueError(f"request_rate must be finite and > 0, got {request_rate}")
    if not burstiness > 0:
        raise ValueError(f"A positive burstiness factor is expected, but given {burstiness}.")
    offset = 0.0
    if math.isinf(burstiness):
        while True:
            offset += 1.0 / request_rate
            yield offset
    rng = np.random.RandomState(seed)
    scale = 1.0 / (request_rate * burstiness)
    while True:
        offset += float(rng.gamma(shape=burstiness, scale=scale))
        yield offset
