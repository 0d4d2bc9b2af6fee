"""Bounded sweep spaces (issue 18, item 2).

A grid of 2x10^8 combinations with a budget of 2 starts used to be built as one list
before the budget applied (a ``MemoryError`` after 55 s); a range of more than 10,000
values was refused with pydantic's union text; ``served_model_name = ["x"]`` said
``...served_model_name.int: Input should be a valid integer``. Now the space is counted
first and refused before anything runs with one line giving its size, each rule in its own
words. Real spec files, real ``vtc sweep`` processes (with a memory cap: counting, not
building).
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.domain.sweep.compose import ComposeError, parse_values
from tui.domain.sweep.spec import MAX_COMBINATIONS, MAX_VALUES
from tui.tune.spec_file import SweepSpecError, load_spec

ROOT = Path(__file__).resolve().parents[2]
HEAD = """name = "bounds"
strategy = "grid"
[base]
model = "meta-llama/Llama-3.2-1B-Instruct"
[workload]
input_len = 32
[budget]
max_starts = 2
"""


def _limit_memory() -> None:  # the child may not build a space of 2x10^8 dicts
    resource.setrlimit(resource.RLIMIT_AS, (2 * 1024**3, 2 * 1024**3))


def _sweep(spec: Path, tmp: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tui.cli", "sweep", str(spec), "--demo"],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_limit_memory,
        env={**os.environ, "PYTHONPATH": str(ROOT), "VTC_DATA_DIR": str(tmp / "data")},
    )


def _one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


def test_a_huge_grid_is_refused_with_its_size_before_anything_runs(tmp_path: Path) -> None:
    spec = tmp_path / "huge.toml"
    spec.write_text(
        HEAD
        + """[parameters]
max_num_seqs = {start = 1, stop = 10000, step = 1}
max_num_batched_tokens = {start = 1000, stop = 10999, step = 1}
enable_chunked_prefill = [true, false]
"""
    )
    line = _one_line(_sweep(spec, tmp_path))
    assert "200,000,000 combinations" in line and f"{MAX_COMBINATIONS:,}" in line
    assert not (tmp_path / "data" / "runs.sqlite").exists()  # nothing started


def test_a_range_too_long_is_refused_with_the_rule(tmp_path: Path) -> None:
    spec = tmp_path / "range.toml"
    spec.write_text(HEAD + "[parameters]\nmax_num_seqs = {start = 1, stop = 1e9, step = 1}\n")
    line = _one_line(_sweep(spec, tmp_path))
    assert "max_num_seqs has 1,000,000,000 values" in line and f"{MAX_VALUES:,}" in line
    assert "Input should be" not in line and "list[" not in line


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ('[base.flags]\nserved_model_name = ["x"]\n', "a flag takes one value"),
        ("[base.flags]\nmax_num_seqs = {a = 1}\n", "a flag takes one value"),
        ("[parameters]\nmax_num_seqs = [[8]]\n", "each value to try"),
        ('[parameters]\nmax_num_seqs = "8"\n', "give a list of values to try"),
        ("[parameters]\nmax_num_seqs = {start = 8, stop = 1, step = 1}\n", "never ends"),
    ],
)
def test_a_wrong_shape_gets_the_rule_in_its_own_words(
    tmp_path: Path, table: str, words: str
) -> None:
    spec = tmp_path / "shape.toml"
    extra = "" if "[parameters]" in table else "[parameters]\nmax_num_seqs = [8, 16]\n"
    spec.write_text(HEAD + table + extra)
    with pytest.raises(SweepSpecError) as refused:
        load_spec(spec)
    line = refused.value.one_line()
    assert words in line and "Input should be" not in line and ".int" not in line, line


@settings(max_examples=examples(50), deadline=None)
@given(st.integers(min_value=MAX_VALUES + 1, max_value=10**15))
def test_the_console_form_refuses_a_long_range_in_the_rules_words(stop: int) -> None:
    with pytest.raises(ComposeError) as refused:
        parse_values("max_num_seqs", f"1..{stop}:1")
    assert f"{stop:,} values" in str(refused.value)
