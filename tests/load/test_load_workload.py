"""The workload declared once: LoadSpec's fields and their renderings."""

from __future__ import annotations

import math
import tomllib

import pytest
import tomli_w
from pydantic import ValidationError

from tui.domain.workload import LoadSpec, form_fields, workload_fields
from tui.ui.form_values import WORKLOAD_FIELDS, parse_workload, workload_text


def test_every_field_is_declared_with_a_label_help_and_a_bench_flag() -> None:
    names = [f.name for f in workload_fields()]
    assert names == list(LoadSpec.model_fields)
    for field in workload_fields():
        assert field.label and field.help and field.bench_flag.startswith("--"), field
    assert {f.name for f in workload_fields()} >= {"duration_s", "num_warmups", "temperature"}


def test_the_form_shows_the_declared_form_fields() -> None:
    assert form_fields() == WORKLOAD_FIELDS
    assert [f.name for f in WORKLOAD_FIELDS] == [
        "endpoint",
        "input_len",
        "output_len",
        "prefix_len",
        "num_prompts",
        "max_concurrency",
        "request_rate",
    ]
    spec = LoadSpec(max_concurrency=None)
    texts = {f.name: workload_text(spec, f) for f in WORKLOAD_FIELDS}
    assert texts["max_concurrency"] == "" and texts["request_rate"] == ""
    back, problems = parse_workload(LoadSpec(), texts)
    assert problems == [] and back == spec


@pytest.mark.parametrize(
    "spec",
    [
        LoadSpec(),
        LoadSpec(max_concurrency=None, request_rate=2.5, burstiness=math.inf),
        LoadSpec(duration_s=30, num_warmups=3, temperature=0.0, endpoint="chat"),
    ],
)
def test_preset_toml_round_trips(spec: LoadSpec) -> None:
    text = tomli_w.dumps({"workload": spec.to_toml_dict()})
    assert LoadSpec(**tomllib.loads(text)["workload"]) == spec


def test_the_declared_rules_refuse_what_cannot_run() -> None:
    with pytest.raises(ValidationError, match="closed loop"):
        LoadSpec(duration_s=10, max_concurrency=None)
    with pytest.raises(ValidationError, match="finite"):
        LoadSpec(duration_s=math.inf)
    with pytest.raises(ValidationError):
        LoadSpec(range_ratio=1.0)
    with pytest.raises(ValidationError, match="Extra inputs"):
        LoadSpec(input_lenn=5)  # type: ignore[call-arg]
    assert LoadSpec(duration_s=10, request_rate=5, max_concurrency=None).timed
    assert LoadSpec(duration_s=10).closed_loop
