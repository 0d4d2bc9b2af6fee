"""A vLLM release is one record: adding one (a fake "0.99") is followed everywhere.

The fake record reuses 0.33's generated flag table (a new release brings its own, written
by ``tools/gen_vllm_serve_options.py``) and otherwise differs from every real record in
each fact, so each consumer below can only pass by reading the record.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator

import pytest

from tui.domain.flags.vllm_tables import TABLE_MODULES, table_for
from tui.domain.vllm_release import (
    RELEASES,
    V0_32,
    V0_33,
    KvSources,
    RunnerUvaLines,
    VllmRelease,
    release_of,
    supported_versions,
)
from tui.server.diagnose import diagnose
from tui.sim.logs import VllmLog, engine_core_failure
from tui.sim.offload_tables import CONFIG_INFO, offload_families
from tui.sim.versions import (
    check_sim_version,
    has_per_request_metrics,
    kv_sources,
    uses_model_runner_v2,
)
from tui.sim.vllm_flags import serve_cli

FAKE = dataclasses.replace(
    V0_33,
    version="0.99.0",
    kv_sources=KvSources(
        auto_fit_kept="kv_cache_planning.py:9901",
        auto_fit_reduced="kv_cache_planning.py:9902",
        capacity="kv_cache_utils.py:9903",
        check_call=("kv_cache_planning.py", 9904),
        check_raise=("kv_cache_planning.py", 9905),
    ),
    runner_uva=RunnerUvaLines(9911, 9912, 9913, 9914, 9915, 9916),
    offload_config_info=False,
    per_request_metrics=False,
    runner_v2_default=False,
)


@pytest.fixture
def fake_release(monkeypatch: pytest.MonkeyPatch) -> Iterator[VllmRelease]:
    monkeypatch.setitem(RELEASES, FAKE.series, FAKE)
    yield FAKE


def test_the_fake_differs_from_every_real_record_in_each_fact() -> None:
    for real in (V0_32, V0_33):
        assert FAKE.kv_sources != real.kv_sources
        assert FAKE.runner_uva != real.runner_uva
    assert (FAKE.offload_config_info, FAKE.per_request_metrics) != (
        V0_33.offload_config_info,
        V0_33.per_request_metrics,
    )
    assert FAKE.series not in RELEASES  # not there until the fixture adds it


def test_the_parser_table_follows_a_new_record(fake_release: VllmRelease) -> None:
    assert TABLE_MODULES[fake_release.series] == fake_release.table_module
    table = table_for("0.99.0")
    assert table.reason == "vLLM 0.99.0: checked against its table"
    assert serve_cli("0.99.0").flag("max_num_seqs") is not None


def test_the_simulator_speaks_a_new_record(fake_release: VllmRelease) -> None:
    assert supported_versions()[-1] == "0.99.0"
    assert check_sim_version("0.99") == "0.99.0"
    assert kv_sources("0.99.0") == fake_release.kv_sources
    assert has_per_request_metrics("0.99.0") is False
    assert uses_model_runner_v2("0.99.0", {}) is False  # the record's default
    assert uses_model_runner_v2("0.99.0", {fake_release.runner_v2_env: "1"}) is True


def test_the_metrics_page_follows_a_new_record(fake_release: VllmRelease) -> None:
    assert CONFIG_INFO in {f.name for f in offload_families("0.33.0")}
    assert CONFIG_INFO not in {f.name for f in offload_families("0.99.0")}


def test_the_simulated_log_and_its_diagnosis_follow_a_new_record(
    fake_release: VllmRelease,
) -> None:
    out, err = io.StringIO(), io.StringIO()
    log = VllmLog(out, err, pid=1, clock=lambda: 0.0, version="0.99.0")
    engine_core_failure(log, "runner_uva", "RuntimeError: UVA is not available")
    text = out.getvalue() + err.getvalue()
    lines = dataclasses.astuple(fake_release.runner_uva)
    assert all(f", line {n}," in text for n in lines), text
    found = diagnose(text)
    assert found.kind == "model_runner_unsupported"
    assert found.fixes[0].env == {fake_release.runner_v2_env: "0"}


def test_a_version_without_a_record_reads_the_newest_older_one() -> None:
    assert release_of("0.34.1") is V0_33
    assert release_of("0.32.5+cpu") is V0_32
    assert release_of("0.20.0") is V0_32
