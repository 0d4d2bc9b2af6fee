"""How the board's cells look: the domain's table (:mod:`tui.domain.board`) as styled text.

The words and numbers are the domain's (``render.delta_text``, ``state_text``); this module
only adds colour: a gain green, a loss red, noise muted with its ``~``, another workload
yellow; a flag that differs from the baseline bold yellow; a state by how the run went.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.content import Content

from tui.domain.board.judgement import Judgement
from tui.domain.board.noise import Comparison, Verdict
from tui.domain.board.render import delta_text
from tui.domain.board.table import Cell, Column, ColumnKind, Row
from tui.domain.inert import inert
from tui.domain.results import RunRecord, RunStatus

DIFFERS = "bold $warning"  # a flag or workload value that differs from the baseline's
BASE_MARK = "bold $accent"

VERDICT_STYLES: dict[Verdict, str] = {
    Verdict.GAIN: "$success",
    Verdict.LOSS: "$error",
    Verdict.NOISE: "$text-muted",
    Verdict.OTHER_LOAD: "$warning",
}

STATUS_STYLES: dict[RunStatus, str] = {
    RunStatus.READY: "bold $success",
    RunStatus.FAILED: "bold $error",
    RunStatus.STARTING: "bold $warning",
}


def status_style(status: RunStatus) -> str:
    """The style of a run's state word (ended runs are muted)."""
    return STATUS_STYLES.get(status, "bold $text-muted")


def shown_delta(comparison: Comparison | None) -> str:
    """The domain's delta text, less a change that rounds to nothing (``~+0.0%``)."""
    if comparison is None or comparison.verdict is Verdict.OTHER_LOAD:
        return delta_text(comparison)
    if comparison.percent is not None and round(comparison.percent, 1) == 0:
        return ""
    return delta_text(comparison)


def delta_content(comparison: Comparison | None) -> Content:
    """``+12.0%`` green or red by the metric's direction, ``~+3.1%`` muted, ``(other load)``."""
    text = shown_delta(comparison)
    if not text or comparison is None:
        return Content("")
    return Content.styled(text, VERDICT_STYLES.get(comparison.verdict, ""))


def sweep_mark(run: RunRecord) -> str:
    """``t3`` for trial 3 of a sweep, ``t3 p2`` for its server's second load (a probe:
    ``probe 2 of #N`` on its card), ``""`` for a run the operator made."""
    if run.sweep is None:
        return ""
    return f"t{run.sweep.trial}" + (f" p{run.sweep.load}" if run.probe else "")


def label_content(row: Row, *, selected: bool = False) -> Content:
    """``▸#3 base t2``: the selection, the run, the baseline mark, a sweep trial."""
    parts: list[str | tuple[str, str]] = ["▸" if selected else " ", (row.label, "bold")]
    if row.is_baseline:
        parts.append((" base", BASE_MARK))
    mark = sweep_mark(row.run)
    if mark:
        parts.append((f" {mark}", "$accent"))
    return Content.assemble(*parts)


def state_content(row: Row) -> Content:
    """The run's own end state (``replaced``, ``failed: kv_cache_too_small``), coloured."""
    return Content.styled(row.state, status_style(row.run.status))


def judgement_content(judgement: Judgement) -> Content:
    """``better · out tok/s +2.8% · worst ITL p99 ~+1.0%``: each piece coloured by its own
    verdict (a gain green, a loss red, noise muted), the word bold."""
    parts = judgement.parts()
    styled = [
        (text, VERDICT_STYLES.get(verdict, "") if verdict is not None else "")
        for text, verdict in parts
    ]
    word, style = styled[0]
    return Content.assemble((word, f"bold {style}".strip()), *styled[1:])


def judgement_lines(judgement: Judgement) -> list[Content]:
    """The judgement on a narrow card: the word and the objective, then the SLO metric
    (``worse · out tok/s ~+0.4%`` / ``  worst ITL p99 +24.1%``)."""
    line = judgement_content(judgement)
    parts = judgement.parts()
    if len(parts) <= 3:  # ``not compared``, or no SLO metric measured
        return [line]
    cut = sum(len(text) for text, _ in parts[:3])
    return [line[:cut], Content("  ") + line[cut + len(parts[3][0]) :]]


def verdict_content(row: Row, cell: Cell) -> Content:
    """The verdict column: the judgement's word in its colour, a failed start in red."""
    judgement = row.judgement
    if judgement is not None:
        verdict = judgement.parts()[0][1]  # the word's own colour
        return Content.styled(cell.text, VERDICT_STYLES.get(verdict, "") if verdict else "")
    if row.run.status is RunStatus.FAILED:
        return Content.styled(cell.text, status_style(row.run.status))
    return Content.styled(cell.text, "$text-muted")


def cell_content(row: Row, column: Column, cell: Cell, *, selected: bool = False) -> Content:
    """One table cell as the DataTable shows it."""
    if column.kind is ColumnKind.LABEL:
        return label_content(row, selected=selected)
    if column.kind is ColumnKind.STATE:
        return state_content(row)
    if column.kind is ColumnKind.VERDICT:
        return verdict_content(row, cell)
    if column.kind is ColumnKind.METRIC:
        delta = delta_content(cell.comparison)
        if not delta.plain:
            return Content(cell.text)
        return Content.assemble(cell.text, " ", delta)
    return Content.styled(cell.text, DIFFERS) if cell.differs else Content(cell.text)


def column_title(column: Column, *, sort: str | None, descending: bool) -> Content:
    """A column's header: flags in their CLI spelling, the sorted column with its arrow."""
    title = column.title
    if column.kind is ColumnKind.FLAG:
        title = title.replace("_", "-")
    if sort is not None and column.key == sort:
        return Content.assemble((title, "bold"), (" ↓" if descending else " ↑", "$accent"))
    return Content(title)


def to_rich_text(content: Content, variables: dict[str, str]) -> Text:
    """``content`` as a Rich ``Text`` with the theme's colours (a DataTable cell needs one).

    ``$name`` styles are looked up in the app's theme ``variables``; one that is not a plain
    colour (``text-muted`` is "auto 60%") becomes ``dim``.
    """
    if not content.plain.isprintable():  # text from outside with a control: plain, inert
        return Text(inert(content.plain), no_wrap=True)
    text = Text(content.plain, no_wrap=True)
    for span in content.spans:
        style = span.style if isinstance(span.style, str) else ""
        words = []
        for word in style.split():
            if not word.startswith("$"):
                words.append(word)
                continue
            value = variables.get(word[1:], "")
            words.append(value if value.startswith("#") else "dim")
        if words:
            text.stylize(" ".join(words), span.start, span.end)
    return text


def out_of_view_text(left: Sequence[str], right: Sequence[str], width: int) -> str:
    """What the table leaves out, for the line under it: ``← 2 · → quantization, out
    tok/s +9 more`` (titles whole, as many as ``width`` holds; ``""`` when all show)."""
    parts = [f"← {len(left)}"] if left else []
    if right:
        shown: list[str] = []
        for i, title in enumerate(right):
            rest = len(right) - i - 1
            line = " · ".join([*parts, "→ " + ", ".join([*shown, title])])
            if len(line) + (len(f" +{rest} more") if rest else 0) > width and shown:
                break
            shown.append(title)
        more = len(right) - len(shown)
        parts.append("→ " + ", ".join(shown) + (f" +{more} more" if more else ""))
    return " · ".join(parts)
