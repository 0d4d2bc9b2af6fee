"""The HTML report is one file that references nothing outside itself."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from html.parser import HTMLParser

from fakes.runs import failed_run, served_run
from hypothesis import given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.domain.board.view import BoardView, build_board
from tui.domain.results import Reproduction
from tui.domain.workload import LoadSpec
from tui.store.report import CSP, report_html
from tui.store.report_plot import BASELINE_COLOR, SELECTED_COLOR, log_ticks, nice_ticks

URL_ATTRS = {
    "src",
    "href",
    "xlink:href",
    "action",
    "data",
    "poster",
    "srcset",
    "background",
    "formaction",
    "ping",
    "manifest",
    "codebase",
    "cite",
    "longdesc",
}


class _Refs(HTMLParser):
    """Collects every tag and every URL-bearing attribute of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.urls: list[str] = []
        self.meta: list[dict[str, str | None]] = []
        self.css: list[str] = []  # <style> bodies and style="" attributes
        self._in_style = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.urls += [v or "" for k, v in attrs if k in URL_ATTRS]
        self.css += [v or "" for k, v in attrs if k == "style"]
        self._in_style = tag == "style"
        if tag == "meta":
            self.meta.append(dict(attrs))

    def handle_endtag(self, tag: str) -> None:
        self._in_style = False

    def handle_data(self, data: str) -> None:
        if self._in_style:
            self.css.append(data)


def external_references(html: str) -> list[str]:
    """What in ``html`` could make a browser fetch something."""
    refs = _Refs()
    refs.feed(html)
    found = [u for u in refs.urls if not u.startswith(("#", "data:"))]
    found += [t for t in refs.tags if t in ("script", "link", "iframe", "object", "embed", "base")]
    for css in refs.css:
        found += re.findall(r"url\(\s*['\"]?(?!data:|#)[^)]*\)|@import", css)
    return found


def _page(runs, **view) -> str:  # type: ignore[no-untyped-def]
    board = build_board(runs, BoardView(**view))
    return report_html(board, generated=datetime(2026, 1, 2, tzinfo=UTC), source="/h/runs.sqlite")


def sample_runs() -> list:  # type: ignore[type-arg]
    return [
        failed_run(1, max_model_len=30576),
        served_run(2, tput=800, ttft_p99=120, max_num_seqs=256),
        served_run(3, tput=950, ttft_p99=180, max_num_seqs=512),
        served_run(4, tput=700, ttft_p99=300, max_num_seqs=128),
        served_run(5, tput=2000, ttft_p99=2500, workload=LoadSpec(num_prompts=200)),
    ]


def test_the_page_is_self_contained_and_forbids_fetching() -> None:
    html = _page(sample_runs(), selected=3)
    assert external_references(html) == []
    refs = _Refs()
    refs.feed(html)
    csp = [m for m in refs.meta if m.get("http-equiv") == "Content-Security-Policy"]
    assert csp and csp[0]["content"] == CSP and "default-src 'none'" in CSP
    assert "<style>" in html and html.count("<svg") == 2  # TTFT and E2EL plots


def test_the_page_holds_table_plot_comparison_and_each_reproduction() -> None:
    html = _page(sample_runs(), selected=3, pinned=2)
    assert "failed: kv_cache_too_small" in html and "30576" in html
    assert html.count('class="baseline"') == 1  # one baseline row
    assert BASELINE_COLOR in html and SELECTED_COLOR in html and "<polyline" in html
    assert "Before / After: #2 → #3" in html
    for n in range(1, 6):
        assert f'id="run-#{n}"' in html
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-num-seqs 512" in html


def test_the_check_itself_catches_a_fetch() -> None:
    assert external_references('<img src="https://example.com/a.png">')
    assert external_references("<style>a { background: url(http://x/y) }</style>")
    assert external_references('<link rel="stylesheet" href="x.css">')


PIECES = [*"<>\"'&/=:ab ", "http://x.invalid/", "<script>", "url(", "<img src=", "</td>"]
hostile = st.lists(st.sampled_from(PIECES), min_size=1, max_size=12).map("".join)


@settings(max_examples=examples(40), deadline=None)
@given(model=hostile, summary=hostile, label=hostile)
def test_recorded_text_cannot_inject_markup(model: str, summary: str, label: str) -> None:
    runs = [
        failed_run(1, model=model.strip() or "m", summary=summary),
        served_run(2, model=model.strip() or "m").model_copy(update={"label": label}),
    ]
    assert external_references(_page(runs)) == []


def test_axis_ticks_cover_the_data() -> None:
    for low, high in ((0, 2500), (0, 0.7), (3, 3), (0, 987654)):
        ticks = nice_ticks(low, high)
        assert ticks[0] <= low and ticks[-1] >= high and ticks == sorted(ticks)
    ticks = log_ticks(90, 2500)
    assert ticks[0] <= 90 and ticks[-1] >= 2500 and all(t > 0 for t in ticks)


def test_each_reproduction_names_its_vllms_image_and_environment() -> None:
    # issue 19: the image tag of the vLLM the run used, and the run's environment
    runs = [
        served_run(1, repro=Reproduction(vllm_version="0.32.0")),
        served_run(
            2, repro=Reproduction(vllm_version="0.33.0"), env={"VLLM_USE_V2_MODEL_RUNNER": "0"}
        ),
    ]
    html = _page(runs)
    assert "vllm/vllm-openai:v0.32.0" in html and "vllm/vllm-openai:v0.33.0" in html
    assert "VLLM_USE_V2_MODEL_RUNNER=0 vllm serve" in html
