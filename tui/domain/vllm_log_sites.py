"""Where a vLLM release's log records and traceback frames come from.

A :class:`Site` is one ``file.py`` and line in a release's package: a log record prints it
as ``[file.py:line]``, a traceback frame as ``File ".../vllm/path", line N``. Each release
record (:mod:`tui.domain.vllm_release`) holds its sites by name (:data:`SITE_NAMES`), so the
simulator prints each version's own lines; 0.32's are in :mod:`vllm_log_sites_0_32` (from
the CPU captures and the field report), later ones are generated from the release's wheel by
``tools/gen_vllm_log_sites.py``. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class Site:
    """One line of a release's package: ``path`` relative to ``vllm/``."""

    path: str
    line: int

    @property
    def source(self) -> str:
        """How a log record names it: ``file.py:line``."""
        return f"{PurePosixPath(self.path).name}:{self.line}"


LogSites = Mapping[str, Site]
"""A release's sites by name."""


def sites(table: Mapping[str, tuple[str, int]]) -> dict[str, Site]:
    """``{name: (path, line)}`` as :class:`Site` records."""
    return {name: Site(path, line) for name, (path, line) in table.items()}
