"""Flags found by what they do (issue 39 item 1): every phrase the new-user walk tried."""

from __future__ import annotations

import pytest

from tui.domain.flags.meaning import FlagDoc, docs_for, rank, score
from tui.domain.flags.serve import flag_specs
from tui.domain.flags.vllm_tables import table_for

VERSIONS = ("0.32.0", "0.33.0")


def found(query: str, version: str) -> list[str]:
    docs = docs_for(flag_specs(), table_for(version).cli)
    return [hit.doc.option for hit in rank(query, docs)]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("context length", "--max-model-len"),
        ("cuda graph", "--enforce-eager"),
        ("prefix cache", "--enable-prefix-caching"),
        ("kv offload", "--kv-offloading-size"),
        ("speculative", "--speculative-config"),
        ("graph", "--enforce-eager"),
        ("max model len", "--max-model-len"),
        ("max_model_len", "--max-model-len"),
        ("cuda", "--enforce-eager"),
        ("offload", "--kv-offloading-size"),
        ("draft", "--speculative-config"),
        ("quantization", "--quantization"),
        ("batch size", "--max-num-seqs"),
        ("memory", "--gpu-memory-utilization"),
        ("mml", "--max-model-len"),
        ("tp", "--tensor-parallel-size"),
    ],
)
def test_the_flag_that_does_what_the_words_say_comes_first(
    query: str, first: str, version: str
) -> None:
    hits = found(query, version)
    assert hits and hits[0] == first, hits[:5]


@pytest.mark.parametrize("version", VERSIONS)
def test_offload_finds_the_kv_offloading_flags_and_the_weights_one(version: str) -> None:
    top = found("offload", version)[:3]
    assert set(top) == {"--kv-offloading-size", "--kv-offloading-backend", "--cpu-offload-gb"}
    # cuda graph: the compilation config right after enforce-eager
    assert found("cuda graph", version)[:2] == ["--enforce-eager", "--compilation-config"]


@pytest.mark.parametrize("version", VERSIONS)
def test_vllms_own_help_text_is_searched(version: str) -> None:
    """No operator word and no name: words only vLLM's help text holds find the flag."""
    docs = docs_for(flag_specs(), table_for(version).cli)
    by_option = {d.option: d for d in docs}
    assert "GPU" in by_option["--cpu-offload-gb"].help  # vLLM's text beside the form's own
    hit = score("virtual way to increase", by_option["--cpu-offload-gb"])
    assert hit is not None and hit.why == "help"
    assert found("eager mode pytorch", version)[0] == "--enforce-eager"


def test_section_names_match_and_a_query_matches_nothing_it_should_not() -> None:
    docs = docs_for(flag_specs(), table_for("0.32.0").cli)
    batching = [h.doc.option for h in rank("batching scheduling", docs)]
    assert "--max-num-seqs" in batching and "--enable-chunked-prefill" in batching
    assert rank("zzzz no such words", docs) == []
    assert rank("   ", docs) == []


def test_every_flag_of_the_installed_vllm_is_a_doc_once_and_secrets_are_not() -> None:
    cli = table_for("0.33.0").cli
    docs = docs_for(flag_specs(), cli)
    options = [d.option for d in docs]
    assert len(options) == len(set(options))
    assert "--api-key" not in options and "--config" not in options
    undeclared = {d.option for d in docs if not d.declared}
    assert {"--speculative-config", "--kv-offloading-size", "--kv-offloading-backend"} <= undeclared
    assert "--max-model-len" not in undeclared  # the form's own field


def test_a_doc_without_help_is_still_found_by_name() -> None:
    doc = FlagDoc(key="x", option="--some-flag", dest="some_flag", section="", help="")
    hit = score("some", doc)
    assert hit is not None and hit.why == "name"
