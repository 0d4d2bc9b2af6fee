"""The held-out style set: real logs from GitHub issues kept apart from the corpus, and the
corpus's GPU-era classes pasted the ways chat apps, trackers and terminals mangle them.

``heldout/`` holds logs taken from issue threads that neither ``corpus/`` nor ``issues/`` cites
(each file's header names its source issue); they check that the patterns generalise beyond the
wordings they were written from. The mangling transforms below are applied to every fixture of
the GPU-era classes (graph-capture OOM, fp8 on a GPU without fp8, a toolchain missing at JIT time,
a worker killed by the host, speculative decoding settings, weights that cannot fit, the KV
capacity line): each mangled paste must give the same kind and the same fixes as the clean one.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from diagnosis_corpus import (
    CORPUS,
    HERE,
    ISSUES,
    Fixture,
    coloured,
    crlf,
    everything,
    fix_sets,
    hard_wrap_80,
    html_entities,
    load_all,
    markdown_escaped,
    mismatches,
    quoted,
    strip_punctuation,
)

from tui.server.diagnose import diagnose

HELDOUT = load_all(HERE / "heldout")

GPU_ERA_KINDS = frozenset(
    {
        "out_of_memory",
        "unsupported_gpu",
        "unsupported_dtype",
        "toolchain_missing",
        "worker_killed",
        "speculative_config_error",
        "weights_oom",
        "kv_cache_too_small",
    }
)
TRANSFORMS: dict[str, Callable[[str], str]] = {
    "no-punctuation": strip_punctuation,
    "wrap-80": hard_wrap_80,
    "quoted": quoted,
    "ansi": coloured,
    "crlf": crlf,
    "markdown": markdown_escaped,
    "html": html_entities,
    "all": everything,
}
GPU_ERA = [f for f in load_all(CORPUS) + load_all(ISSUES) + HELDOUT if f.kind in GPU_ERA_KINDS]


@pytest.mark.parametrize("fixture", HELDOUT, ids=lambda f: f.name)
def test_heldout_log_diagnoses_as_its_issue_shows(fixture: Fixture) -> None:
    d = fixture.diagnose()
    assert mismatches(fixture, d) == [], d.summary


def test_every_heldout_log_cites_an_issue_the_corpus_does_not() -> None:
    cited = {f.source for f in load_all(CORPUS) + load_all(ISSUES)}
    for fixture in HELDOUT:
        first = fixture.path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# source: https://github.com/"), fixture.name
        assert fixture.source not in cited, fixture.name


def test_the_heldout_set_covers_each_class() -> None:
    by_class: dict[str, int] = {}
    for fixture in HELDOUT:
        key = "fp8" if fixture.kind in ("unsupported_gpu", "unsupported_dtype") else fixture.kind
        by_class[key] = by_class.get(key, 0) + 1
    assert set(by_class) == {
        "out_of_memory",
        "fp8",
        "toolchain_missing",
        "worker_killed",
        "speculative_config_error",
        "weights_oom",
        "kv_cache_too_small",
    }
    assert min(by_class.values()) >= 3, by_class


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
@pytest.mark.parametrize("fixture", GPU_ERA, ids=lambda f: f.name)
def test_a_mangled_paste_keeps_kind_and_fixes(fixture: Fixture, name: str) -> None:
    clean = fixture.diagnose()
    mangled_text = TRANSFORMS[name](fixture.text)
    assert mangled_text != fixture.text or name in ("ansi", "markdown", "html")
    d = fixture.diagnose(mangled_text)
    assert d.kind == clean.kind, (name, d.summary, mangled_text[-500:])
    assert fix_sets(d) == fix_sets(clean), (name, mangled_text[-500:])


def test_the_transforms_really_mangle() -> None:
    text = "ERROR 01-01 [x.py:1] ValueError: max seq len (4096) `gpu_memory_utilization` 'a'\n"
    out = everything(text * 3)
    assert "(" not in out and "`" not in out and "'" not in out
    assert "\x1b[" in out and "\r\n> " in out


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        # Python's multiprocessing repr of a dead EngineCore (BaseProcess.__repr__).
        ("<SpawnProcess name='EngineCore_0' pid=12 parent=1 stopped exitcode=-SIGKILL>", "k"),
        # torch.distributed.elastic's report of a signalled rank.
        ("Signal 9 (SIGKILL) received by PID 4242", "k"),
        # systemd's journal for a service the kernel killed.
        ("vllm.service: Main process exited, code=killed, status=9/KILL", "k"),
        # torch/utils/cpp_extension.py verify_ninja_availability.
        ("RuntimeError: Ninja is required to load C++ extensions", "t"),
        # setuptools when no compiler is installed.
        ("error: command 'gcc' failed: No such file or directory", "t"),
        ("FileNotFoundError: [Errno 2] No such file or directory: 'gcc'", "t"),
        # vLLM 0.8-0.9 EngineArgs: --speculative-config typed json.loads (argparse's wording).
        ("vllm: error: argument --speculative-config: invalid loads value: '{model: x}'", "s"),
        # vLLM 0.5 SpeculativeConfig.
        ("ValueError: Speculative decoding requires usage of the V2 block manager.", "s"),
    ],
)
def test_other_wordings_of_the_gpu_era_classes(line: str, kind: str) -> None:
    kinds = {"k": "worker_killed", "t": "toolchain_missing", "s": "speculative_config_error"}
    d = diagnose(line + "\n")
    assert d.kind == kinds[kind], d.summary
    assert diagnose(everything(line) + "\n").kind == kinds[kind]


def test_a_speculative_key_under_its_old_name_is_renamed_in_the_runs_config() -> None:
    """vLLM 0.8's SpeculativeConfig took ``prompt_lookup_max``; 0.6-0.7 called it
    ``ngram_prompt_lookup_max`` (their EngineArgs), which 0.8 refuses by name."""
    from tui.domain.flags.serve import ServeFlags

    config = '{"method":"ngram","num_speculative_tokens":5,"ngram_prompt_lookup_max":5}'
    flags = ServeFlags(model="m", extra_args=("--speculative-config", config))
    line = (
        "TypeError: SpeculativeConfig.__init__() got an unexpected keyword argument "
        "'ngram_prompt_lookup_max'\n"
    )
    for text in (line, everything(line)):
        d = diagnose(text, flags=flags)
        assert d.kind == "speculative_config_error"
        renamed = d.fixes[0].set["extra_args"]
        assert '"prompt_lookup_max":5' in renamed[1] and "ngram_" not in renamed[1]
    bug = "AttributeError: 'SpeculativeConfig' object has no attribute 'get'\n"  # issue 24888
    assert diagnose(bug).kind == "speculative_config_error"
