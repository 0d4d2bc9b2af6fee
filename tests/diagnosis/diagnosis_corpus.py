"""The cited diagnosis fixtures: vLLM's wordings by version (``corpus/``) and logs users posted
in public issue threads (``issues/``).

Each ``.log`` file starts with a header of ``# key: value`` lines, closed by ``# ---``:

- ``kind`` (required): the expected ``Diagnosis.kind``; ``source`` (required): where the text
  comes from (vLLM version and file, or the issue's URL);
- ``fix``: one per expected fix, in order, as the JSON of ``fix.set`` (the diagnosis may offer
  more after them); ``fix: none``: no fix may be offered; ``fix-range: NAME LOW HIGH``: the first
  fix sets ``NAME`` to a value in ``[LOW, HIGH]`` (a bound computed from rounded figures);
- ``facts``: a JSON object the diagnosis' facts must include; ``flags``: the run's
  ``ServeFlags`` as JSON; ``exit``: the exit code; ``version``, ``note``: for the reader.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tui.domain.diagnosis import Diagnosis
from tui.domain.flags.serve import ServeFlags
from tui.server.diagnose import diagnose

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
ISSUES = HERE / "issues"


@dataclass(frozen=True)
class Fixture:
    """One cited log and what its diagnosis must say."""

    path: Path
    kind: str
    source: str
    text: str
    version: str | None = None
    fixes: list[dict[str, Any]] | None = None  # None: not stated; []: none may be offered
    fix_range: tuple[str, float, float] | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    flags: dict[str, Any] | None = None
    exit_code: int | None = None

    @property
    def name(self) -> str:
        """The file's stem, as the test id."""
        return self.path.stem

    def serve_flags(self) -> ServeFlags | None:
        """The run's flags, when the fixture names them."""
        return ServeFlags(**self.flags) if self.flags is not None else None

    def diagnose(self, text: str | None = None) -> Diagnosis:
        """The diagnosis of ``text`` (default: the fixture's own log) with its flags and exit."""
        return diagnose(
            self.text if text is None else text, flags=self.serve_flags(), exit_code=self.exit_code
        )


def _header(lines: list[str]) -> tuple[dict[str, list[str]], int]:
    head: dict[str, list[str]] = {}
    for i, line in enumerate(lines):
        if line.strip() == "# ---":
            return head, i + 1
        if not line.startswith("# ") or ":" not in line:
            raise ValueError(f"bad header line {i + 1}: {line!r}")
        key, _, value = line[2:].partition(":")
        head.setdefault(key.strip(), []).append(value.strip())
    raise ValueError("no '# ---' line closes the header")


def load(path: Path) -> Fixture:
    """Parse one fixture file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    head, start = _header(lines)
    fixes: list[dict[str, Any]] | None = None
    if "fix" in head:
        fixes = [] if head["fix"] == ["none"] else [json.loads(v) for v in head["fix"]]
    fix_range = None
    if "fix-range" in head:
        name, low, high = head["fix-range"][0].split()
        fix_range = (name, float(low), float(high))
    return Fixture(
        path=path,
        kind=head["kind"][0],
        source=head["source"][0],
        text="\n".join(lines[start:]) + "\n",
        version=head.get("version", [None])[0],
        fixes=fixes,
        fix_range=fix_range,
        facts=json.loads(head["facts"][0]) if "facts" in head else {},
        flags=json.loads(head["flags"][0]) if "flags" in head else None,
        exit_code=int(head["exit"][0]) if "exit" in head else None,
    )


def load_all(folder: Path) -> list[Fixture]:
    """Every fixture in ``folder``, by name."""
    return [load(p) for p in sorted(folder.glob("*.log"))]


def plain(value: Any) -> Any:
    """``value`` as JSON would have it (tuples as lists), for comparing fix sets."""
    return json.loads(json.dumps(value))


def fix_sets(d: Diagnosis) -> list[dict[str, Any]]:
    """The offered fixes' ``set`` dicts, JSON-normalised; an environment fix adds ``env``."""
    return [plain({**f.set, **({"env": f.env} if f.env else {})}) for f in d.fixes]


def kind_ok(fixture: Fixture, d: Diagnosis) -> bool:
    """Whether ``d`` names the fixture's kind."""
    return d.kind == fixture.kind


def fix_ok(fixture: Fixture, d: Diagnosis) -> bool | None:
    """Whether ``d``'s fixes are the expected ones; ``None`` when the fixture expects none."""
    sets = fix_sets(d)
    if fixture.fix_range is not None:
        name, low, high = fixture.fix_range
        value = sets[0].get(name) if sets else None
        return isinstance(value, int | float) and low <= value <= high
    if fixture.fixes is None or fixture.fixes == []:
        return None
    return sets[: len(fixture.fixes)] == fixture.fixes


def mismatches(fixture: Fixture, d: Diagnosis) -> list[str]:
    """What differs between ``d`` and the fixture's expectations (empty: all met)."""
    out: list[str] = []
    if not kind_ok(fixture, d):
        out.append(f"kind {d.kind!r} != {fixture.kind!r} ({d.summary})")
    if fixture.fixes == [] and fixture.fix_range is None and d.fixes:
        out.append(f"no fix expected, got {fix_sets(d)}")
    elif fix_ok(fixture, d) is False:
        out.append(f"fixes {fix_sets(d)} do not start with {fixture.fixes or fixture.fix_range}")
    for key, value in fixture.facts.items():
        if plain(d.facts.get(key)) != value:
            out.append(f"facts[{key!r}] = {d.facts.get(key)!r}, expected {value!r}")
    return out


# -- pastes as chat apps, trackers and terminals mangle them ---------------------------------
# The run's own argument records are left whole: they are Python literals the diagnosis parses,
# and a paste that mangles them loses the flags, not the failure.
_ARG_RECORD = re.compile(r"non-default args:|Namespace\(|with config:")
_PUNCT = str.maketrans("", "", "()'\"`")
_LEVEL = re.compile(r"\b(INFO|WARNING|ERROR)\b")


def strip_punctuation(text: str) -> str:
    """Parentheses, quotes and backticks dropped (markdown, chat apps)."""
    return "\n".join(
        line if _ARG_RECORD.search(line) else line.translate(_PUNCT) for line in text.splitlines()
    )


_MD_SPECIAL = re.compile(r"([_()`*\[\]])")


def markdown_escaped(text: str) -> str:
    """Markdown's backslash before the punctuation it would format (a chat app's copy)."""
    return "\n".join(_MD_SPECIAL.sub(r"\\\1", line) for line in text.splitlines())


def html_entities(text: str) -> str:
    """A web page's copy: quotes and angle brackets as HTML entities."""
    table = {"'": "&#39;", '"': "&quot;", "<": "&lt;", ">": "&gt;"}
    return "".join(table.get(c, c) for c in text)


def hard_wrap_80(text: str) -> str:
    """A terminal's hard wrap at 80 columns, mid-word."""
    out: list[str] = []
    for line in text.splitlines():
        out += [line[i : i + 80] for i in range(0, len(line), 80)] or [""]
    return "\n".join(out)


def quoted(text: str) -> str:
    """Every line quoted with ``> `` (an email or tracker reply)."""
    return "\n".join("> " + line for line in text.splitlines())


def coloured(text: str) -> str:
    """ANSI colour codes around the level names, as a terminal copy keeps them."""
    return _LEVEL.sub("\x1b[1;31m\\1\x1b[0m", text)


def crlf(text: str) -> str:
    """Windows line ends."""
    return text.replace("\n", "\r\n")


def everything(text: str) -> str:
    """All of the above at once."""
    return crlf(quoted(coloured(hard_wrap_80(strip_punctuation(text)))))
