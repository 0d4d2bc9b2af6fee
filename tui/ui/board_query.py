"""The board's filter as the operator types it, and the sort and filter as the title says them.

``served max_num_seqs=256`` keeps the runs that served with 256 sequences: a state word
(``all``, ``served``, ``failed``) and any number of ``NAME=VALUE`` terms, all of which must
hold. Values are typed by the flag's own parser (:func:`~tui.domain.board.table.parse_flag_match`).
"""

from __future__ import annotations

from tui.domain.board.table import BoardError, RowFilter, StateFilter, parse_flag_match
from tui.domain.board.view import Board


def parse_filter(text: str) -> RowFilter:
    """``text`` as a :class:`RowFilter`; :class:`BoardError` naming the term it cannot read."""
    state = StateFilter.ALL
    matches = []
    for term in text.split():
        word = term.lower()
        if word in {s.value for s in StateFilter}:
            state = StateFilter(word)
        elif "=" in term:
            matches.append(parse_flag_match(term))
        else:
            raise BoardError(f"filter term {term!r}: expected all, served, failed or NAME=VALUE")
    return RowFilter(state, tuple(matches))


def check_filter(text: str) -> str | None:
    """Why ``text`` is not a filter (one line), or ``None`` when it is one."""
    try:
        parse_filter(text)
    except BoardError as exc:
        return exc.one_line()
    return None


def filter_text(row_filter: RowFilter) -> str:
    """The filter as it would be typed (``served max_num_seqs=256``; ``""`` for all)."""
    words = [] if row_filter.state is StateFilter.ALL else [row_filter.state.value]
    return " ".join([*words, *(m.describe() for m in row_filter.flags)])


def describe_view(board: Board, *, bare: bool = False) -> str:
    """`` · sort TTFT p99 ↑ · filter served`` for the board's title (``bare``: the filter only)."""
    view = board.view
    shown = filter_text(view.filter)
    if bare:
        return shown
    parts = []
    if view.sort:
        try:
            title = board.table.columns[board.table.index(view.sort)].title
        except BoardError:
            title = view.sort
        parts.append(f"sort {title} {'↓' if view.descending else '↑'}")
    if shown:
        parts.append(f"filter {shown}")
    return "".join(f" · {p}" for p in parts)


def board_title(board: Board, width: int) -> str:
    """The board's title, whole in ``width`` cells (its border's corners left out): the full
    header where it fits (``Runs · 3 runs · vs #3 (first load) · sort ...``), else
    shorter by meaning (the reason in short, then without the count, then the baseline
    alone), never cut mid-word (``vs #3 (newest com…`` at 80 columns)."""
    view = describe_view(board)
    base = board.baseline
    count = board.header().split(" · ", 1)[0]
    if base is None:
        forms = [
            f"Runs · {board.header()}{view}",
            f"Runs · {count} · no baseline yet{view}",
            f"Runs · no baseline yet{view}",
            "Runs · no baseline yet",
        ]
    else:
        short = base.reason.value
        vs = f"vs {base.label}"
        forms = [
            f"Runs · {board.header()}{view}",
            f"Runs · {count} · {vs} ({short}){view}",
            f"Runs · {vs} ({short}){view}",
            f"Runs · {vs}{view}",
            f"Runs · {vs} ({short})",
            f"Runs · {vs}",
        ]
    room = width - 4
    return next((form for form in forms if len(form) <= room), forms[-1])
