"""A result's numbers are read from its typed fields: every numeric field has its key."""

from __future__ import annotations

import types
import typing

from tui.domain.results import BenchResult


def _numeric(annotation: object) -> bool:
    args = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    kinds = set(args or (annotation,)) - {type(None)}
    return bool(kinds) and kinds <= {int, float, str} and kinds & {int, float} != set()


def test_every_numeric_field_is_a_number_by_its_key() -> None:
    fields = [n for n, f in BenchResult.model_fields.items() if _numeric(f.annotation)]
    assert "duration" in fields and "client_bound_s" in fields
    result = BenchResult(**{n: 3 for n in fields})
    assert {n: result.metric(n) for n in fields} == {n: 3.0 for n in fields}


def test_flags_texts_and_unset_values_are_not_numbers() -> None:
    result = BenchResult(cancelled=True, request_goodput=None, request_rate="inf")
    assert result.metric("cancelled") is None  # a switch, not a number
    assert result.metric("model_id") is None
    assert result.metric("request_goodput") is None
    assert result.metric("request_rate") is None  # "inf": bench serve's text
    assert result.metric("no_such_key") is None


def test_the_statistics_come_first() -> None:
    result = BenchResult(duration=2.0, stats={"p99_ttft_ms": 40.0})
    assert result.metric("p99_ttft_ms") == 40.0
    assert result.metric("duration") == 2.0
