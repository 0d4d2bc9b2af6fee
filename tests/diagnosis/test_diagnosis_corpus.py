"""Every cited fixture diagnoses as its header says: vLLM's wordings from 0.4 to 0.32 and the
logs users posted in public issue threads (tests/diagnosis/corpus/, issues/)."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import get_args

import pytest
from diagnosis_corpus import CORPUS, ISSUES, Fixture, load_all, mismatches

from tui.domain.diagnosis import Diagnosis, DiagnosisKind, Fix
from tui.server.diagnose.reading import LogView

VERSIONED = load_all(CORPUS)
POSTED = load_all(ISSUES)


@pytest.mark.parametrize("fixture", VERSIONED + POSTED, ids=lambda f: f.name)
def test_fixture_diagnoses_as_cited(fixture: Fixture) -> None:
    d = fixture.diagnose()
    assert mismatches(fixture, d) == []
    # Every offered fix changes something, and carries the value its title names (an
    # invalid-choice fix with empty settings applied nothing: issue 19).
    for fix in d.fixes:
        assert fix.title and not fix.is_empty, fix
        for named in _named_values(fix.title):
            assert named in fix.describe() or None in fix.set.values(), (fix.title, fix)
    # ... and none is one the log itself shows cannot help (issue 31).
    assert [f.title for f in d.fixes if _cannot_work(fixture, d, f)] == []


def _cannot_work(fixture: Fixture, d: Diagnosis, fix: Fix) -> bool:
    """A fix the log rules out: a lower utilization for weights above the GPU or for CUDA
    graphs' memory, eager mode for a run already eager, more GPUs than the box shows."""
    log = LogView(fixture.text, fixture.serve_flags(), fixture.exit_code)
    util = fix.set.get("gpu_memory_utilization")
    if util is not None and (
        d.kind == "weights_oom" or d.facts.get("stage") == "cuda_graph_capture"
    ):
        return True
    if fix.set.get("enforce_eager") is True and log.value("enforce_eager") is True:
        return True
    tp, box = fix.set.get("tensor_parallel_size"), d.facts.get("gpus_on_box")
    return isinstance(tp, int) and isinstance(box, int) and tp > box


def _named_values(title: str) -> list[str]:
    """The values a fix's title promises: "... to 1136", "Use --dtype float16", "set X=0"."""
    found = re.findall(r"\bto (?:the model's )?(\d[\d.]*\d|\d)\b", title)
    found += re.findall(r"^Use (?:--)?[a-z][\w-]* ([\w.]+)$", title)
    found += re.findall(r"\bset ([A-Z_][A-Z0-9_]*=\S+)", title)
    return found


def test_every_fixture_cites_its_source() -> None:
    for fixture in VERSIONED:
        assert fixture.version and fixture.source.startswith(f"vLLM {fixture.version}, ")
    for fixture in POSTED:
        assert fixture.source.startswith("https://github.com/"), fixture.name


def test_every_kind_has_wordings_from_two_vllm_versions() -> None:
    versions: dict[str, set[str]] = defaultdict(set)
    for fixture in VERSIONED:
        assert fixture.version is not None
        versions[fixture.kind].add(fixture.version)
    kinds = set(get_args(DiagnosisKind)) - {"unknown"}
    assert {k for k in kinds if len(versions[k]) < 2} == set()
    assert set(versions) <= kinds
