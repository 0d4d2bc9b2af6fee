"""The results board: flag diffs against the first card and bench deltas, green or red."""

from __future__ import annotations

from ui_fakes import FakeSession, bench, board_runs

from tui.domain.results import RunRecord, RunStatus
from tui.ui.app import create_app
from tui.ui.compare import CARD_METRICS, bench_reference, delta
from tui.ui.widgets.run_card import HIGHLIGHT, CardContext, RunCard, card_body


def styles_of(body: object, fragment: str) -> set[str]:
    """The styles of every span that covers ``fragment`` in a card body."""
    plain = body.plain  # type: ignore[attr-defined]
    start = plain.index(fragment)
    end = start + len(fragment)
    return {
        str(span.style)
        for span in body.spans  # type: ignore[attr-defined]
        if span.start <= start and span.end >= end
    }


def contexts(runs: list[RunRecord]) -> list[CardContext]:
    ref = bench_reference(runs)
    return [
        CardContext(
            number=i + 1,
            baseline=runs[0] if i else None,
            reference=(ref[0] + 1, ref[1]) if ref else None,
        )
        for i in range(len(runs))
    ]


def test_flags_that_differ_from_the_first_card_are_highlighted() -> None:
    runs = board_runs()
    ctx = contexts(runs)
    third = card_body(runs[2], ctx[2])
    assert HIGHLIGHT in styles_of(third, "max_model_len 400 -> 512")
    assert HIGHLIGHT in styles_of(third, "quantization default -> fp8")
    # the flags both runs share are not listed as changes
    assert "gpu_memory_utilization" not in third.plain
    first = card_body(runs[0], ctx[0])
    assert "gpu_memory_utilization 0.9" in first.plain
    assert HIGHLIGHT not in styles_of(first, "gpu_memory_utilization 0.9")


def line_styles(body: object, prefix: str) -> tuple[str, set[str]]:
    """The card line starting with ``prefix`` and the styles of the spans inside it."""
    plain: str = body.plain  # type: ignore[attr-defined]
    line = next(line for line in plain.splitlines() if line.startswith(prefix))
    start = plain.index(line)
    styles = {
        str(span.style)
        for span in body.spans  # type: ignore[attr-defined]
        if span.start >= start and span.end <= start + len(line)
    }
    return line, styles


def test_bench_deltas_are_green_when_better_and_red_when_worse() -> None:
    runs = board_runs()
    body = card_body(runs[2], contexts(runs)[2])
    # output 640 -> 720 tok/s: +12.5%, more is better
    assert line_styles(body, "out tok/s") == ("out tok/s      720.0   +12.5%", {"$success"})
    # TTFT mean 120 -> 135 ms: slower is worse
    assert line_styles(body, "TTFT mean") == ("TTFT mean   135.0 ms   +12.5%", {"$error"})
    # TTFT p99 340 -> 300 ms: faster is better
    assert line_styles(body, "TTFT p99") == ("TTFT p99    300.0 ms   -11.8%", {"$success"})
    # the reference card carries no deltas of its own
    assert "%" not in card_body(runs[0], contexts(runs)[0]).plain


def test_delta_direction_follows_the_metric() -> None:
    throughput, ttft = CARD_METRICS[0], CARD_METRICS[2]
    assert delta(throughput, 110.0, 100.0) is not None
    assert delta(throughput, 110.0, 100.0).better  # type: ignore[union-attr]
    assert not delta(ttft, 110.0, 100.0).better  # type: ignore[union-attr]
    assert delta(ttft, 90.0, 100.0).better  # type: ignore[union-attr]
    assert delta(ttft, 90.0, None) is None and delta(ttft, 90.0, 0.0) is None


def test_when_the_first_run_failed_the_first_run_with_numbers_is_the_reference() -> None:
    runs = board_runs()
    failed_first = [runs[1], runs[0], runs[2]]  # seed 000: run 1 never started
    ref = bench_reference(failed_first)
    assert ref is not None and ref[0] == 1
    assert bench_reference([runs[1]]) is None


async def test_the_board_shows_a_card_per_run_and_keeps_the_newest_in_view() -> None:
    runs = board_runs()
    extra = [
        runs[0].model_copy(update={"id": 4 + i, "label": f"#{4 + i}",
                                   "bench": bench(600.0 + i, 5.0, 120.0, 340.0, 24.0, 45.0)})
        for i in range(3)
    ]  # fmt: skip
    session = FakeSession(runs=[*runs, *extra])
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        cards = list(app.query(RunCard))
        assert [c.border_title for c in cards][:3] == ["#1", "#2", "#3 (vs #1)"]
        assert cards[1].has_class("-failed") and cards[0].has_class("-ready")
        board = app.main_screen.board
        assert board.max_scroll_x > 0 and board.scroll_x == board.max_scroll_x
        newest = cards[-1].region
        assert board.region.contains_region(newest)
        # a status change redraws the card in place
        session.update_run(runs[2].model_copy(update={"status": RunStatus.STOPPED}))
        await pilot.pause()
        assert "STOPPED" in str(cards[2].query_one(".card-body").render())
        assert len(app.query(RunCard)) == 6


def test_a_result_cut_short_says_so_on_its_card() -> None:
    runs = board_runs()
    clean = card_body(runs[2], contexts(runs)[2]).plain
    assert "aborted" not in clean and "cancelled" not in clean and "failed" not in clean
    assert runs[2].bench is not None
    cut = runs[2].bench.model_copy(update={"failed": 2})
    cut = cut.model_validate({**cut.model_dump(), "aborted_by_server": 5, "cancelled": True})
    marked = runs[2].model_copy(update={"bench": cut})
    body = card_body(marked, contexts(runs)[2])
    assert styles_of(body, "2 requests failed") == {"$error"}
    assert styles_of(body, "5 streams aborted by the server") == {"$warning"}
    assert styles_of(body, "cancelled: partial numbers") == {"$warning"}
