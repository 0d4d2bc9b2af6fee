"""The one reader of files from outside (tui/store/bounded_read.py): its refusals, one line
each, and property tests: arbitrary bytes never raise anything but UntrustedFileError."""

from __future__ import annotations

import json
import math
import os
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.domain.errors import VtcError
from tui.store.bounded_read import (
    MAX_DEPTH,
    UntrustedFileError,
    cut_torn_tail,
    json_depth,
    parse_json,
    read_json,
    read_json_lines,
    read_text,
    require_regular_file,
)

FILES = settings(
    max_examples=examples(150), suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _one_line(exc: VtcError) -> str:
    line = exc.one_line()
    assert "\n" not in line and len(line) < 600
    return line


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"[" * 200_000, "nested 200000 levels deep"),
        (b'{"a": "\xff"}', "not UTF-8 text (byte 7)"),
        (b'{"b0": Infinity}', "Infinity is not a JSON number"),
        (b'{"b0": NaN}', "NaN is not a JSON number"),
        (b'{"b0": 1e400}', "out of range"),
        (b'{"n": ' + b"9" * 400 + b"}", "out of range"),
        (b"{", "not valid JSON"),
    ],
)
def test_each_bad_file_is_one_line_naming_it(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(UntrustedFileError) as caught:
        read_json(path, what="profile")
    line = _one_line(caught.value)
    assert why in line and str(path) in line


def test_size_is_bounded_before_reading_all(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    path.write_bytes(b"[" + b"1," * 1000 + b"1]")
    with pytest.raises(UntrustedFileError, match="larger than 100 bytes"):
        read_json(path, max_bytes=100)


def test_special_files_are_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    seen: list[str] = []

    def read_all() -> None:  # in a thread: a hang fails the join below, not the suite
        for path in (fifo, tmp_path, Path("/dev/zero"), tmp_path / "missing"):
            try:
                read_text(path, what="--attach-log")
            except UntrustedFileError as exc:
                seen.append(exc.one_line())
        try:
            require_regular_file(fifo, "--attach-log")
        except UntrustedFileError as exc:
            seen.append(exc.one_line())

    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    reader.join(60)
    assert not reader.is_alive(), "a special file was waited on"
    assert [s.rsplit(": ", 1)[-1] for s in seen] == [
        "not a regular file (a FIFO)",
        "not a regular file (a directory)",
        "not a regular file (a device)",
        "no such file",
        "not a regular file (a FIFO)",
    ]


def test_depth_ignores_brackets_inside_strings() -> None:
    assert json_depth('["[[[[", {"a": "]]]}"}]') == 2
    assert json_depth('"\\"[["') == 0
    assert parse_json('["[[[["]') == ["[[[["]


def test_json_lines_keep_whole_records_and_find_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "j.jsonl"
    path.write_bytes(b'{"a": 1}\n\nnot json\n{"a": 2}\n{"a": 3, "b')
    lines = read_json_lines(path)
    assert lines.records == [{"a": 1}, {"a": 2}]
    assert lines.bad_lines == 1
    assert lines.torn_at == len(b'{"a": 1}\n\nnot json\n{"a": 2}\n')
    assert cut_torn_tail(path) == lines.torn_at
    assert path.read_bytes().endswith(b'{"a": 2}\n')
    assert cut_torn_tail(path) is None  # whole now


# -- properties ------------------------------------------------------------------------------
@FILES
@given(content=st.binary(max_size=400))
def test_arbitrary_bytes_raise_only_the_one_error(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "any.json"
    path.write_bytes(content)
    for read in (read_json, read_json_lines, read_text):
        try:
            read(path)
        except UntrustedFileError as exc:
            _one_line(exc)


@FILES
@given(depth=st.integers(0, 3 * MAX_DEPTH), opener=st.sampled_from("[{"))
def test_nesting_is_refused_past_the_bound_and_never_recurses_out(
    tmp_path: Path, depth: int, opener: str
) -> None:
    if opener == "[":
        text = "[" * depth + "0" + "]" * depth
    else:
        text = '{"k": ' * depth + "0" + "}" * depth
    path = tmp_path / "deep.json"
    path.write_text(text)
    if depth <= MAX_DEPTH:
        assert json_depth(text) == depth
        read_json(path)
    else:
        with pytest.raises(UntrustedFileError, match=f"nested {depth} levels deep"):
            read_json(path)


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**62), 2**62)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)


@FILES
@given(value=json_values)
def test_strict_json_round_trips(tmp_path: Path, value: object) -> None:
    path = tmp_path / "v.json"
    path.write_text(json.dumps(value, allow_nan=False), encoding="utf-8")
    assert read_json(path) == value


@given(value=st.floats(allow_nan=True, allow_infinity=True))
def test_no_non_finite_number_comes_out(value: float) -> None:
    text = json.dumps([value])  # Python writes NaN/Infinity; 1e400 overflows on reading
    try:
        parsed = parse_json(text)
    except ValueError:
        assert not math.isfinite(value)
    else:
        assert math.isfinite(parsed[0])
