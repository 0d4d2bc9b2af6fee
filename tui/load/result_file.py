"""``vtc bench``'s result file: ``vllm bench serve`` 0.32's keys, defaults and name, then ours.

Read from vLLM 0.32.0's ``vllm/benchmarks/serve.py`` (the provisioned wheel): the file is
``{**header, **benchmark_result}`` (``:2254-2290``) where

- the header is ``date`` (``%Y%m%d-%H%M%S``), ``endpoint_type`` and ``backend`` (both
  ``--backend``), ``label`` (``--label``, null by default), ``model_id``, ``tokenizer_id``
  (``--tokenizer`` or the model id), ``num_prompts``, then each ``--metadata KEY=VALUE``,
  then ``request_rate`` (``"inf"`` or the number), ``burstiness``, ``max_concurrency``;
- the result (``:1280-1302``) is ``duration``, ``completed``, ``failed``,
  ``total_input_tokens``, ``total_output_tokens``, ``request_throughput``,
  ``request_goodput`` (null without ``--goodput``), ``output_throughput``,
  ``total_token_throughput``, the per-request ``input_lens``, ``output_lens``, ``ttfts``,
  ``itls``, ``latencies``, ``start_times``, ``queue_times``, ``generated_texts``,
  ``errors``, then ``max_output_tokens_per_s``, ``max_concurrent_requests``, ``rtfx``,
  then the statistics (``mean_/median_/std_/p{P}_{metric}_ms``, ``:1355-1411``);
- without ``--save-detailed`` the lists ``input_lens``, ``output_lens``, ``start_times``,
  ``ttfts``, ``itls``, ``generated_texts`` and ``errors`` are removed (``:2380-2394``):
  ``latencies`` and ``queue_times`` always stay;
- the default name is ``{label or backend}-{request_rate}qps[-concurrency{N}]-{model
  basename}-{date}.json`` in ``--result-dir`` (``:1546-1587``): ``openai-infqps-...``.

vtc adds, after bench serve's keys (documented in ``benchmarks/README.md``):
``endpoint``, ``prompt_tokenizer``, ``num_warmups``, ``duration_limit_s``, ``cancelled``,
``not_sent``, ``aborted_by_server``, ``failed_errors`` (the first failures' texts; bench
serve's ``errors`` is per request), ``client_input_tokens``, ``client_cpu_s``,
``client_max_loop_lag_ms``, ``client_bound_s``.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from tui.domain.results import BenchResult
from tui.load.errors import LoadError
from tui.load.stats import RequestRecord, actual_output_len

#: The per-request lists bench serve drops without ``--save-detailed``.
DETAILED_ONLY = (
    "input_lens",
    "output_lens",
    "start_times",
    "ttfts",
    "itls",
    "generated_texts",
    "errors",
)


class ResultPathError(LoadError):
    """The result file cannot be written where asked."""


class BenchServeHeader(BaseModel):
    """The run settings bench serve writes first (``serve.py:2258-2282``)."""

    date: str
    endpoint_type: str
    backend: str
    label: str | None
    model_id: str
    tokenizer_id: str | None
    num_prompts: int


class BenchServeTraffic(BaseModel):
    """The traffic settings, after the metadata (``serve.py:2278-2282``)."""

    request_rate: float | str
    burstiness: float
    max_concurrency: int | None


class BenchServeBody(BaseModel):
    """The result keys, in bench serve's order (``serve.py:1280-1302``)."""

    duration: float
    completed: int
    failed: int
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    request_goodput: float | None
    output_throughput: float
    total_token_throughput: float
    input_lens: list[int]
    output_lens: list[int]
    ttfts: list[float]
    itls: list[list[float]]
    latencies: list[float]
    start_times: list[float]
    queue_times: list[float]
    generated_texts: list[str]
    errors: list[str]
    max_output_tokens_per_s: float
    max_concurrent_requests: int
    rtfx: float


class VtcAdditions(BaseModel):
    """vtc's keys, after bench serve's."""

    endpoint: str
    prompt_tokenizer: str
    num_warmups: int
    duration_limit_s: float | None
    cancelled: bool
    not_sent: int
    aborted_by_server: int
    failed_errors: list[str]
    client_input_tokens: int | None
    client_cpu_s: float
    client_max_loop_lag_ms: float
    client_bound_s: float
    client: str  # which client measured it (vtc bench: "vtc-bench")


def result_json(
    result: BenchResult,
    records: Sequence[RequestRecord],
    *,
    backend: str,
    label: str | None,
    model_id: str,
    tokenizer_id: str | None,
    num_prompts: int,
    burstiness: float,
    metadata: Sequence[str],
    detailed: bool,
    now: datetime,
    count_tokens: Callable[[str], int] | None = None,
) -> dict[str, Any]:
    """The file, keys in bench serve's order, then vtc's."""
    head = BenchServeHeader(
        date=now.strftime("%Y%m%d-%H%M%S"),
        endpoint_type=backend,
        backend=backend,
        label=label,
        model_id=model_id,
        tokenizer_id=tokenizer_id,
        num_prompts=num_prompts,
    ).model_dump()
    for item in metadata:
        key, sep, value = item.partition("=")
        if not sep:
            raise LoadError("Invalid metadata format. Please use KEY=VALUE format.")
        head[key.strip()] = value.strip()
    head.update(
        BenchServeTraffic(
            request_rate=result.request_rate,
            burstiness=burstiness,
            max_concurrency=result.max_concurrency,
        ).model_dump()
    )
    body = BenchServeBody(
        duration=result.duration,
        completed=result.completed,
        failed=result.failed,
        total_input_tokens=result.total_input_tokens,
        total_output_tokens=result.total_output_tokens,
        request_throughput=result.request_throughput,
        request_goodput=result.request_goodput,
        output_throughput=result.output_throughput,
        total_token_throughput=result.total_token_throughput,
        input_lens=[r.prompt_len for r in records],
        output_lens=[actual_output_len(r, count_tokens) if r.success else 0 for r in records],
        ttfts=[r.ttft for r in records],
        itls=[list(r.itl) for r in records],
        latencies=[r.latency for r in records],
        start_times=[r.start_time for r in records],
        queue_times=[r.queue_time for r in records],
        generated_texts=[r.generated_text for r in records],
        errors=[r.error for r in records],
        max_output_tokens_per_s=result.max_output_tokens_per_s,
        max_concurrent_requests=result.max_concurrent_requests,
        rtfx=result.rtfx,
    ).model_dump(exclude=set() if detailed else set(DETAILED_ONLY))
    ours = VtcAdditions(
        endpoint=result.endpoint,
        prompt_tokenizer=result.prompt_tokenizer,
        num_warmups=result.num_warmups,
        duration_limit_s=result.duration_limit_s,
        cancelled=result.cancelled,
        not_sent=result.not_sent,
        aborted_by_server=result.aborted_by_server,
        failed_errors=result.errors,
        client_input_tokens=result.client_input_tokens,
        client_cpu_s=result.client_cpu_s,
        client_max_loop_lag_ms=result.client_max_loop_lag_ms,
        client_bound_s=result.client_bound_s,
        client=result.client,
    ).model_dump()
    # bench serve 0.33 adds the server's own times after the result when the server reported
    # any (serve.py:391-403,1357); vtc keeps them even without --save-detailed.
    server = _server_times(records)
    return {**head, **body, **server, **result.stats, **ours}


def _server_times(records: Sequence[RequestRecord]) -> dict[str, list[float | None]]:
    if not any(r.server_queue_time is not None or r.server_ttft is not None for r in records):
        return {}
    return {
        "server_queue_times": [r.server_queue_time for r in records],
        "server_ttfts": [r.server_ttft for r in records],
    }


def strict_json(value: Any) -> Any:
    """``value`` with every non-finite float (``nan``, ``inf``) as ``None``, so that
    ``json.dumps(..., allow_nan=False)`` writes it (what ``json.loads`` of any reader takes)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: strict_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json(v) for v in value]
    return value


def result_path(
    *,
    result_dir: str | None,
    result_filename: str | None,
    label: str | None,
    backend: str,
    request_rate: float,
    max_concurrency: int | None,
    model_id: str,
    now: datetime,
) -> Path:
    """bench serve's file name rule (``compute_result_filename``, ``serve.py:1546-1587``)."""
    if result_filename:
        name = result_filename
    else:
        concurrency = f"-concurrency{max_concurrency}" if max_concurrency is not None else ""
        base_model = model_id.split("/")[-1]
        stamp = now.strftime("%Y%m%d-%H%M%S")
        name = f"{label or backend}-{float(request_rate)}qps{concurrency}-{base_model}-{stamp}.json"
    return Path(result_dir) / name if result_dir else Path(name)


def check_writable(path: Path) -> None:
    """Refuse, before the run, a result path that cannot be written (one line)."""
    folder = path.parent if str(path.parent) else Path(".")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if path.is_dir():
            raise ResultPathError(f"cannot write the result to {path}: it is a directory")
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".vtc-bench-check-"):
            pass
    except OSError as exc:
        raise ResultPathError(
            f"cannot write the result to {path}: {exc.strerror or exc}",
            hint="choose another --result-dir or --result-filename",
        ) from exc


def save(data: dict[str, Any], path: Path, fallback_dir: Path) -> tuple[Path, str | None]:
    """Write ``data`` to ``path``, else to ``fallback_dir``; ``(where, why it moved)``.

    A finished result is never lost: when ``path`` fails (the folder went away, a full
    disk), the same file name is tried in ``fallback_dir``; only when both fail does this
    raise :class:`ResultPathError`.
    """
    # Strict JSON (RFC 8259 has no NaN/Infinity): a statistic that is not finite is null.
    text = json.dumps(strict_json(data), allow_nan=False)
    try:
        _write(path, text)
        return path, None
    except OSError as exc:
        why = f"{path}: {exc.strerror or exc}"
    target = fallback_dir / path.name
    try:
        _write(target, text)
    except OSError as exc:
        raise ResultPathError(
            f"the result could not be saved ({why}; {target}: {exc.strerror or exc})"
        ) from exc
    return target, why


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
