"""A vLLM release is one record: adding one (a fake "0.99") is followed everywhere.

The fake record reuses 0.33's generated flag table (a new release brings its own, written
by ``tools/gen_vllm_serve_options.py``) and otherwise differs from every real record in
each fact, so each consumer below can only pass by reading the record.
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Iterator

import pytest

from tui.domain import budget, kv
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.validation import ModelFacts, ValidationContext, check_flags
from tui.domain.flags.vllm_defaults import V0_33_DEFAULTS
from tui.domain.flags.vllm_tables import TABLE_MODULES, table_for
from tui.domain.vllm_log_sites import Site
from tui.domain.vllm_quantization import Quantization
from tui.domain.vllm_release import (
    RELEASES,
    V0_32,
    V0_33,
    VllmRelease,
    release_of,
    supported_versions,
)
from tui.server.diagnose import diagnose
from tui.server.diagnose.common import util_setting
from tui.server.diagnose.reading import LogView
from tui.sim.logs import VllmLog, bind_error_traceback, config_error_traceback, engine_core_failure
from tui.sim.offload_tables import CONFIG_INFO, offload_families
from tui.sim.versions import check_sim_version, has_per_request_metrics, uses_model_runner_v2
from tui.sim.vllm_flags import serve_cli

# every site on a line no real release has (9900 + its place), in the file 0.33 has it in
FAKE_SITES = {
    name: Site(site.path, 9900 + i) for i, (name, site) in enumerate(V0_33.log_sites.items())
}
FAKE = dataclasses.replace(
    V0_33,
    version="0.99.0",
    log_sites=FAKE_SITES,
    defaults=dataclasses.replace(
        V0_33_DEFAULTS,
        gpu_memory_utilization=0.77,
        kv_cache_dtype="fp8",
        max_logprobs=7,
        gpu_block_size=32,
    ),
    quantization=Quantization(
        methods=("fake_q", "fp8"), deprecated=("fp8",), needs_checkpoint=frozenset({"fake_q"})
    ),
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
        assert set(FAKE.log_sites) == set(real.log_sites)  # the same names, other lines
        assert all(FAKE.site(n) != s for n, s in real.log_sites.items())
        assert FAKE.defaults != real.defaults
        assert set(FAKE.quantization.methods) != set(real.quantization.methods)
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
    assert has_per_request_metrics("0.99.0") is False
    assert uses_model_runner_v2("0.99.0", {}) is False  # the record's default
    assert uses_model_runner_v2("0.99.0", {fake_release.runner_v2_env: "1"}) is True


def test_the_metrics_page_follows_a_new_record(fake_release: VllmRelease) -> None:
    assert CONFIG_INFO in {f.name for f in offload_families("0.33.0")}
    assert CONFIG_INFO not in {f.name for f in offload_families("0.99.0")}


def _log(version: str) -> tuple[VllmLog, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return VllmLog(out, err, pid=1, clock=lambda: 0.0, version=version), out, err


@pytest.mark.parametrize(
    "site", ["runner_uva", "executor", "load_model", "profile", "kv_check", "kv_init"]
)
def test_every_engine_failure_prints_a_new_records_frames(
    fake_release: VllmRelease, site: str
) -> None:
    log, out, err = _log("0.99.0")
    engine_core_failure(log, site, "RuntimeError: boom")
    text = out.getvalue() + err.getvalue()
    lines = [int(n) for n in re.findall(r'/vllm/[^"]+", line (\d+),', text)]
    assert lines and all(n >= 9900 for n in lines), text  # every vLLM frame is the record's
    assert f"[{fake_release.site('core.failed_to_start').source}]" in text


def test_the_api_server_tracebacks_print_a_new_records_frames(fake_release: VllmRelease) -> None:
    for text in (
        "\n".join(bind_error_traceback("0.99.0", "OSError: [Errno 98] Address already in use")),
        "\n".join(config_error_traceback("0.99.0", "CacheConfig", ["1 validation error"])),
    ):
        lines = [int(n) for n in re.findall(r'/vllm/[^"]+", line (\d+),', text)]
        assert lines and all(n >= 9900 for n in lines), text


def test_a_log_record_names_a_new_records_source(fake_release: VllmRelease) -> None:
    log, out, _ = _log("0.99.0")
    log.info("APIServer", log.src("entry.starting"), "Starting vLLM server on http://x:1")
    assert f"[{FAKE_SITES['entry.starting'].source}] Starting" in out.getvalue()


def test_the_runner_failure_and_its_diagnosis_follow_a_new_record(
    fake_release: VllmRelease,
) -> None:
    log, out, err = _log("0.99.0")
    engine_core_failure(log, "runner_uva", "RuntimeError: UVA is not available")
    text = out.getvalue() + err.getvalue()
    uva = ["core.init.executor", "worker.make_model_runner", "buffer_utils.uva.raise"]
    assert all(f", line {fake_release.site(n).line}," in text for n in uva), text
    found = diagnose(text)
    assert found.kind == "model_runner_unsupported"
    assert found.fixes[0].env == {fake_release.runner_v2_env: "0"}


def test_the_defaults_follow_a_new_record(fake_release: VllmRelease) -> None:
    shape = kv.ModelShape(
        name="m",
        num_layers=2,
        num_kv_heads=2,
        head_dim=64,
        hidden_size=256,
        num_attention_heads=4,
        vocab_size=1000,
        max_position_embeddings=2048,
        param_count=1_000_000,
    )
    engine = budget.resolve_engine(
        ServeFlags(model="m"), shape, total_bytes=2**34, defaults=release_of("0.99.0").defaults
    )
    assert engine.gpu_memory_utilization == 0.77
    assert (engine.kv_cache_dtype, engine.block_size, engine.max_logprobs) == ("fp8", 32, 7)
    # a log that names the release is read with its default utilization
    assert util_setting(LogView("INFO vLLM API server version 0.99.0", None, None)).value == 0.77


def test_the_quantization_methods_follow_a_new_record(fake_release: VllmRelease) -> None:
    fake, real = ValidationContext(installed="0.99.0"), ValidationContext(installed="0.33.0")
    new = ServeFlags(model="m", quantization="fake_q")  # accepted: a supported release has it
    assert check_flags(new, fake) == []
    assert [p.message for p in check_flags(new, real)] == [
        f"Unknown quantization method: fake_q. Must be one of {list(V0_33.quantization.methods)}."
    ]
    awq = ServeFlags(model="m", quantization="awq")
    assert [p.message for p in check_flags(awq, fake)] == [
        "Unknown quantization method: awq. Must be one of ['fake_q', 'fp8']."
    ]
    deprecated = check_flags(ServeFlags(model="m", quantization="fp8"), fake)
    assert [p.field for p in deprecated] == ["quantization"] and "deprecated" in (
        deprecated[0].message
    )
    unquantized = dataclasses.replace(fake, model=ModelFacts(attention_heads=4))
    assert [p.message for p in check_flags(new, unquantized)] == [
        "Cannot find the config file for fake_q (the checkpoint is not quantized)"
    ]


def test_a_version_without_a_record_reads_the_newest_older_one() -> None:
    assert release_of("0.34.1") is V0_33
    assert release_of("0.32.5+cpu") is V0_32
    assert release_of("0.20.0") is V0_32
