"""Numbers from outside (issue 33): a server's reported times and counts checked before
use, result files strict JSON, every printed line bounded; and a load worker killed
mid-run recorded with what it measured."""

from __future__ import annotations

import asyncio
import io
import json
import math
import os
import signal
from pathlib import Path

import pytest
from fakes.load import serve_fake
from hypothesis import given
from hypothesis import strategies as st

from tui.app.output import CUT_MARK, LINE_LIMIT, InertWriter
from tui.domain.record import LoadRecorded
from tui.domain.results import BenchResult, TelemetryPeaks
from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.account import MAX_SERVER_MS, StreamRecorder
from tui.load.process import ProcessLoadRunner, measured_before_death
from tui.load.result_file import save
from tui.load.stats import RequestRecord
from tui.session.loads import LoadService


def _final_chunk(
    metrics: str, usage: str = '{"completion_tokens": 3, "prompt_tokens": 8}'
) -> bytes:
    body = (
        'data: {"choices": [{"text": "a"}]}\n\n'
        f'data: {{"choices": [], "usage": {usage}, "metrics": {metrics}}}\n\n'
        "data: [DONE]\n\n"
    )
    return body.encode()


@pytest.mark.parametrize(
    "ttft",
    [
        "1" + "0" * 400,
        "1e400",
        "NaN",
        "Infinity",
        "-Infinity",
        "-5",
        '"12"',
        "true",
        str(MAX_SERVER_MS * 2),
    ],
)
def test_a_server_time_that_is_no_time_is_dropped_and_the_request_kept(ttft: str) -> None:
    rec = RequestRecord(start_time=0.0)
    recorder = StreamRecorder(rec, "completions", collect_text=False)
    recorder.feed(0.5, _final_chunk(f'{{"time_to_first_token_ms": {ttft}, "queue_time_ms": 2}}'))
    recorder.finish(0.6)
    assert rec.success and rec.output_tokens == 3
    assert rec.server_ttft is None and rec.server_queue_time == 0.002


@pytest.mark.parametrize("count", ["1" + "0" * 400, "1e400", "NaN", "-1", "2.5", '"x"'])
def test_a_token_count_that_is_no_count_is_not_taken(count: str) -> None:
    rec = RequestRecord(start_time=0.0, prompt_len=8)
    recorder = StreamRecorder(rec, "completions", collect_text=False)
    usage = f'{{"completion_tokens": {count}, "prompt_tokens": {count}}}'
    recorder.feed(0.5, _final_chunk("{}", usage))
    recorder.finish(0.6)
    assert rec.success and rec.prompt_len == 8 and rec.output_tokens >= 0


def test_a_result_file_is_strict_json(tmp_path: Path) -> None:
    data = {"mean_ttft_ms": math.nan, "p99": math.inf, "server_ttfts": [1.0, -math.inf], "ok": 2.0}
    where, moved = save(data, tmp_path / "r.json", tmp_path)
    text = where.read_text()
    assert moved is None and "NaN" not in text and "Infinity" not in text
    loaded = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in a result file"))
    assert loaded == {"mean_ttft_ms": None, "p99": None, "server_ttfts": [1.0, None], "ok": 2.0}


@given(pieces=st.lists(st.text(max_size=3000), max_size=60))
def test_no_printed_line_is_over_the_bound(pieces: list[str]) -> None:
    raw = io.StringIO()
    writer = InertWriter(raw, line_limit=1000)
    for piece in pieces:
        writer.write(piece)
    assert all(len(line) <= 1000 + len(CUT_MARK) for line in raw.getvalue().split("\n"))


def test_a_one_mebibyte_id_is_cut_to_one_bounded_line() -> None:
    raw = io.StringIO()
    InertWriter(raw).write(f"First model id: {'m' * 2**20}, again {'m' * 2**20}\nnext\n")
    lines = raw.getvalue().split("\n")
    assert len(lines[0]) == LINE_LIMIT + len(CUT_MARK) and lines[1] == "next"


class _Watch:
    def begin_load(self) -> None:
        pass

    def end_load(self, result: BenchResult | None) -> TelemetryPeaks:
        return TelemetryPeaks()


async def test_a_killed_load_worker_leaves_a_failed_load_with_what_it_measured() -> None:
    spec = LoadSpec(input_len=16, output_len=400, num_prompts=12, max_concurrency=4)
    kept: list[LoadRecorded] = []
    events: list[object] = []
    with serve_fake() as fake:
        fake.chunk_delay_s = 0.05
        runner = ProcessLoadRunner(progress_interval_s=0.05)
        killed = asyncio.Event()

        def on_event(event: object) -> None:  # kill it once it has said it measured something
            events.append(event)
            if isinstance(event, LoadProgress) and event.in_flight and not killed.is_set():
                killed.set()
                os.killpg(runner.pid or 0, signal.SIGKILL)

        async def keep(recorded: LoadRecorded) -> None:
            kept.append(recorded)

        service = LoadService(runner, on_event)
        result = await service.run_kept(
            spec,
            fake.base_url,
            "fake",
            None,
            watch=_Watch(),
            keep=keep,  # type: ignore[arg-type]
        )
    assert result is None and killed.is_set()
    assert len(kept) == 1  # recorded: `vtc runs` lists it
    partial = kept[0].result
    assert partial.cancelled and partial.failed >= 1 and partial.duration > 0
    assert partial.errors and "exited with code -9" in partial.errors[0]
    finished = events[-1]
    assert getattr(finished, "result", None) is partial and "code -9" in getattr(
        finished, "error", ""
    )


def test_the_partial_result_is_what_the_last_progress_said() -> None:
    progress = LoadProgress(
        elapsed=4.0, done=6, failed=1, in_flight=3, total=20, output_tokens_per_s=50.0
    )
    result = measured_before_death(LoadSpec(num_prompts=20), progress, "killed")
    assert result is not None
    assert (result.completed, result.failed, result.not_sent) == (6, 4, 10)
    assert result.request_throughput == 1.5 and result.errors == ["killed"]
    assert measured_before_death(LoadSpec(), None, "killed") is None  # nothing said: nothing
