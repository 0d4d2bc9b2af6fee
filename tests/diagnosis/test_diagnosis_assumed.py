"""A fix never claims a flag value the log does not give (issue 39: a bare OOM text was
offered "Lower gpu_memory_utilization from 0.9 to 0.85"; the 0.9 was assumed, not read)."""

from __future__ import annotations

import re

from diagnosis_corpus import CORPUS, ISSUES, load_all

from tui.domain.flags.serve import ServeFlags
from tui.server.diagnose import diagnose
from tui.server.diagnose.reading import LogView

BARE_OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."
_FROM = re.compile(r"gpu_memory_utilization from (?P<v>[\d.]+) to")


def _util_titles(text: str, flags: ServeFlags | None = None) -> list[str]:
    d = diagnose(text, flags=flags)
    assert d is not None
    return [f.title for f in d.fixes if "gpu_memory_utilization" in f.set]


def test_a_bare_oom_text_says_the_utilization_it_assumed() -> None:
    titles = _util_titles(BARE_OOM)
    assert titles, "the OOM still offers a lower utilization"
    for title in titles:
        assert not _FROM.search(title), title
        assert "assumed: vLLM's default, the log does not give it" in title


def test_the_runs_own_flags_are_read_not_assumed() -> None:
    (mine,) = _util_titles(BARE_OOM, ServeFlags(model="m", gpu_memory_utilization=0.8))
    assert mine.startswith("Lower gpu_memory_utilization from 0.8 to 0.75")
    (default,) = _util_titles(BARE_OOM, ServeFlags(model="m"))  # vtc's run: left at default
    assert _FROM.search(default) and "assumed" not in default


def test_no_fix_in_the_corpus_claims_a_utilization_it_did_not_read() -> None:
    for fixture in load_all(CORPUS) + load_all(ISSUES):
        d = diagnose(fixture.text)
        if d is None:
            continue
        log = LogView(fixture.text, None, None)
        for fix in d.fixes:
            found = _FROM.search(fix.title)
            if found is None:
                continue
            read = log.value("gpu_memory_utilization")
            recorded = log.non_default_args or log.namespace_args or log.engine_config
            assert read is not None or (log.version and recorded), (fixture.path.name, fix.title)
