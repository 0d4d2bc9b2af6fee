"""The Pareto frontier: properties of the definition, then the scatter built from runs."""

from __future__ import annotations

import itertools

from fakes.runs import failed_run, served_run
from hypothesis import given
from hypothesis import strategies as st

from tui.domain.board.pareto import build_scatter, pareto_front
from tui.domain.workload import LoadSpec

coord = st.floats(min_value=0.0, max_value=1e4, allow_nan=False, allow_infinity=False)
clouds = st.lists(st.tuples(coord, coord), max_size=30)


def _dominates(q: tuple[float, float], p: tuple[float, float]) -> bool:
    return q[0] <= p[0] and q[1] >= p[1] and q != p


@given(points=clouds)
def test_the_front_is_exactly_the_undominated_points(points: list[tuple[float, float]]) -> None:
    front = set(pareto_front(points))
    for i, p in enumerate(points):
        dominated = any(_dominates(q, p) for q in points)
        assert (i in front) == (not dominated)


@given(points=clouds)
def test_the_front_draws_as_a_line_and_ignores_input_order(
    points: list[tuple[float, float]],
) -> None:
    front = [points[i] for i in pareto_front(points)]
    assert [x for x, _ in front] == sorted(x for x, _ in front)
    assert all(a[1] <= b[1] for a, b in itertools.pairwise(front))
    backwards = list(reversed(points))
    assert sorted(front) == sorted(backwards[i] for i in pareto_front(backwards))


def test_scatter_marks_baseline_selected_and_keeps_other_loads_off_the_frontier() -> None:
    runs = [
        failed_run(1),
        served_run(2, tput=800, ttft_p99=100),
        served_run(3, tput=900, ttft_p99=150, max_num_seqs=512),
        served_run(4, tput=700, ttft_p99=200, max_num_seqs=128),  # dominated by #2
        served_run(5, tput=5000, ttft_p99=50, workload=LoadSpec(num_prompts=8)),
    ]
    scatter = build_scatter(runs, latency="ttft", baseline=runs[1], selected=3)
    by = {p.label: p for p in scatter.points}
    assert set(by) == {"#2", "#3", "#4", "#5"}  # a failed start has no point
    assert [p.label for p in scatter.frontier] == ["#2", "#3"]
    assert by["#2"].is_baseline and by["#3"].is_selected
    assert not by["#5"].comparable and not by["#5"].on_frontier
    e2el = build_scatter(runs, latency="e2el", baseline=runs[1])
    assert e2el.latency.key == "p99_e2el_ms" and by["#3"].latency_ms == 150
