"""Property: every fixture, wrapped the way terminals and issue trackers wrap, diagnoses the same.

Hypothesis draws, per fixture: a width (40-200 columns), a wrap style (a terminal's hard wrap
at exactly the width, mid-word; a tracker's word wrap that keeps or drops the space at the
break), whether continuation lines repeat vLLM's ``(EngineCore pid=N)`` prefix, ``> `` quote
marks, trimmed timestamps, colour codes and CRLF line ends. The diagnosis must keep its kind,
its fixes and the facts the fixture's header names (free-text facts excepted where a trimmed
hard break erased the space they depended on).
"""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
from diagnosis_corpus import CORPUS, HERE, ISSUES, Fixture, fix_sets, load_all, plain
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_profiles import examples

CAPTURES = Path(__file__).resolve().parent.parent / "captures"
_PID = re.compile(r"^\([^()]{1,80}? pid=\d+\)\s?")
_TIMESTAMP = re.compile(r"(?<=[A-Z] )\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? ")
_LEVEL = re.compile(r"\b(INFO|WARNING|ERROR)\b")


def _captures() -> list[Fixture]:
    out = []
    for path in sorted(CAPTURES.glob("*.log")):
        if path.name.startswith(("fail_", "try_")):
            out.append(Fixture(path=path, kind="", source="capture", text=path.read_text()))
    return out


FIXTURES = load_all(CORPUS) + load_all(ISSUES) + load_all(HERE / "heldout") + _captures()


def _hard(line: str, width: int, prefix: str, trim: bool) -> list[str]:
    body = line[len(prefix) :] if prefix else line
    room = max(8, width - len(prefix))
    pieces = [body[i : i + room] for i in range(0, len(body), room)] or [""]
    out = [prefix + p if (i == 0 or prefix) else p for i, p in enumerate(pieces)]
    if not prefix:
        out = [line[i : i + width] for i in range(0, len(line), width)] or [""]
    return [p.rstrip() for p in out] if trim else out


def _word(line: str, width: int, keep_space: bool) -> list[str]:
    wrapped = textwrap.wrap(
        line,
        width=width,
        drop_whitespace=not keep_space,
        break_on_hyphens=False,
        replace_whitespace=False,
        expand_tabs=False,
    )
    return wrapped or [line]


@st.composite
def wrappings(draw: st.DrawFn) -> dict[str, object]:
    """One way of wrapping and dressing a log."""
    return {
        "width": draw(st.integers(min_value=40, max_value=200)),
        "style": draw(st.sampled_from(["hard", "hard-trimmed", "word-keep", "word-drop"])),
        "repeat_prefix": draw(st.booleans()),
        "quote": draw(st.booleans()),
        "trim_timestamps": draw(st.booleans()),
        "ansi": draw(st.booleans()),
        "crlf": draw(st.booleans()),
    }


def wrap(text: str, how: dict[str, object]) -> str:
    """``text`` wrapped and dressed as ``how`` says."""
    width = int(how["width"])  # type: ignore[call-overload]
    out: list[str] = []
    for line in text.splitlines():
        if how["trim_timestamps"]:
            line = _TIMESTAMP.sub("", line)
        if len(line) <= width:
            out.append(line)
            continue
        m = _PID.match(line)
        prefix = m.group(0) if (m and how["repeat_prefix"]) else ""
        style = how["style"]
        if style in ("hard", "hard-trimmed"):
            out += _hard(line, width, prefix, style == "hard-trimmed")
        else:
            pieces = _word(line, width, style == "word-keep")
            out += [pieces[0]] + [prefix + p for p in pieces[1:]]
    if how["ansi"]:  # colour takes no columns: added after the wrap, as a terminal shows it
        out = [_LEVEL.sub("\x1b[32m\\1\x1b[0m", line) for line in out]
    if how["quote"]:
        out = ["> " + line for line in out]
    return ("\r\n" if how["crlf"] else "\n").join(out) + "\n"


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda f: f.name)
@settings(
    max_examples=examples(15),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(how=wrappings())
def test_wrapped_logs_diagnose_the_same(fixture: Fixture, how: dict[str, object]) -> None:
    plain_d = fixture.diagnose()
    wrapped = wrap(fixture.text, how)
    d = fixture.diagnose(wrapped)
    assert d.kind == plain_d.kind, (how, d.summary, wrapped[-600:])
    assert fix_sets(d) == fix_sets(plain_d), (how, wrapped[-600:])
    if how["style"] in ("hard-trimmed", "word-drop"):
        # A break that drops its space (a tracker's word wrap, a trimmed hard break) leaves no
        # trace of it where the words filled the line: "--max-num-seq" + "64" cannot be told
        # from a split "--max-num-seq64". Kind, fixes and numbers hold (they are read with
        # whitespace ignored); free text across such a break may not.
        return
    for key in fixture.facts:
        assert plain(d.facts.get(key)) == plain(plain_d.facts.get(key)), (key, how)


def test_the_wrapper_really_wraps() -> None:
    text = "(EngineCore pid=7) ERROR 11-21 10:00:30 [core.py:1] " + "word " * 60 + "\n"
    how = {
        "width": 50,
        "style": "hard",
        "repeat_prefix": True,
        "quote": True,
        "trim_timestamps": True,
        "ansi": False,
        "crlf": False,
    }
    lines = wrap(text, how).splitlines()
    assert len(lines) > 6
    assert all(line.startswith("> (EngineCore pid=7) ") for line in lines)
    assert "11-21" not in lines[0]
