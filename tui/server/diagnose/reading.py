"""Reading a ``vllm serve`` log the way operators paste it: wrapped, quoted, trimmed.

A log reaches the diagnosis straight from the server's pipe, or pasted from a terminal or an
issue tracker, which break long lines at the window's width (mid-word, or at a space they then
drop), quote each line with ``> ``, keep or drop the ``(EngineCore pid=N)`` prefix on the
continuation lines, trim timestamps, and leave colour codes and invisible characters behind.

:class:`LogView` undoes what it can, without guessing at the failure:

- every physical line is cleaned (colour codes, control and zero-width characters, quote
  marks, markdown's backslash escapes, a web page's HTML entities, container, CI, journald
  and timestamp prefixes, torchrun's ``[rank0]:``) and split
  into vLLM's prefix and its message; a line that holds several records (a paste that lost
  its line breaks) is split at each ``(Process pid=N)`` prefix;
- detection searches one *flat* text: the messages joined with nothing between them, with
  the patterns compiled by :func:`tolerant` so that every space in a pattern matches any
  run of whitespace, none included, and case is ignored. A message broken anywhere
  (mid-word, at a kept or a dropped space, with or without a repeated prefix) reads the
  same as the unbroken one; numbers are read there;
- *logical lines* rejoin the physical lines that look wrapped (see :func:`_continues`), for
  free text: the arguments argparse rejects, names, an exception's text, the evidence shown
  to the operator (:meth:`LogView.refine` re-reads a flat match there).

Inputs are bounded: text above :data:`MAX_CHARS` keeps its head and tail (the banner and
``non-default args`` come first, the failure last) and says how much was left out.
"""

from __future__ import annotations

import ast
import bisect
import html
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Final

from tui.domain.flags.serve import ServeFlags, flag_specs
from tui.domain.inert import inert

HEAD_CHARS: Final = 256 * 1024
TAIL_CHARS: Final = 2 * 1024 * 1024
MAX_CHARS: Final = HEAD_CHARS + TAIL_CHARS
"""Longest text diagnosed whole; a longer one keeps its first ``HEAD_CHARS`` and last
``TAIL_CHARS`` characters (about a second of reading on a busy core)."""

# -- cleaning one physical line ------------------------------------------------------------
_INVISIBLE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f\u200b-\u200f\u2060\ufeff\ufffd]")
_SPACES: Final = str.maketrans({"\u00a0": " ", "\u202f": " ", "\u2007": " ", "\t": "    "})
_QUOTE: Final = re.compile(r"^(?:[ ]{0,3}>)+[ ]?")
# A backslash markdown put before punctuation it would otherwise format; not a path's or a
# JSON string's backslash (before a letter, a digit, a quote or another backslash).
_MD_ESCAPE: Final = re.compile(r"\\([_*()\[\]`#.!<>|~-])")
_CONTAINER: Final = re.compile(r"^[\w.-]+[ ]+\|[ ]")  # docker compose: "vllm-1  | "
_OUTER_TIME: Final = re.compile(
    r"^\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?[ ]+"
    r"|^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ [\w./-]+(?:\[\d+\])?: "  # journald
)
# FastChat's "| ERROR | stderr | " after its timestamp; torchrun's "[rank0]: ".
_PIPE_OR_RANK: Final = re.compile(
    r"^\|[ ]*(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)[ ]*\|[ ]*)?(?:std(?:out|err)[ ]*\|[ ]*)?"
    r"|^\[rank\d+\]:[ ]?"
)
# A process prefix in the middle of a line: the paste lost the line breaks before it.
_GLUED: Final = re.compile(r"(?<=\S)(?=\([A-Za-z_][\w:. -]{0,60}? pid=\d+(?:, ip=[\w.:]+)?\) )")
_PID: Final = re.compile(r"^\((?P<proc>[^()]{1,80}?) pid=(?P<pid>\d+)(?:, ip=[\w.:]+)?\)[ ]?")
_LEVELS: Final = r"DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL"
# vLLM's record header, whole or trimmed: "INFO 11-21 05:48:04 [api_utils.py:286] " (0.7+),
# "INFO 05-01 10:00:00 llm_engine.py:100] " (0.4-0.6), "[core.py:1510] ", "05:48:04 [x.py:1] ".
_HEADER: Final = re.compile(
    rf"^(?:(?P<level>{_LEVELS})[ ]+)?[\d:.,\- ]*?"
    r"(?:\[(?P<src>[\w./<>-]+:\d+)\]|(?P<old>[\w./<>-]+\.py:\d+)\])[ ]?"
)
_HEADER_NO_SOURCE: Final = re.compile(
    rf"^(?P<level>{_LEVELS})[ ]+(?:\d\d-\d\d[ ]+)?\d\d:\d\d(?::\d\d)?(?:[.,]\d+)?[ ]"
)
# Lines that start something of their own even without a vLLM header.
_STRUCTURAL: Final = re.compile(
    r"^(?:Traceback \(most recent call last\)|  File \"|During handling of the above|"
    r"The above exception was|[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt)\b[^ ]*:|"
    r"usage: |[\w ]+: error: |(?:INFO|ERROR|WARNING|DEBUG|CRITICAL):  |\[rank\d+\]|"
    r"\d+ validation errors? for )"
)


@dataclass(frozen=True)
class PhysicalLine:
    """One line as cleaned: ``raw`` (prefix kept, for evidence), ``message``, ``width``."""

    raw: str
    message: str
    headed: bool
    width: int
    level: str | None = None
    source: str | None = None  # the header's file, e.g. "cpu_worker.py"


def clean_line(line: str) -> PhysicalLine:
    """One physical line without noise, split into vLLM's prefix and the message."""
    text = line.rstrip("\r\n")
    if not text.isprintable():  # escapes (7- and 8-bit) and controls, as the console shows it
        text = inert(text, tabs=True)
    if not text.isascii() or not text.isprintable():  # the common line skips both passes
        text = _INVISIBLE.sub("", text).translate(_SPACES)
    if "&" in text and ";" in text:  # a web page's copy: &gt; &#39; &quot;
        text = html.unescape(text)
    if ">" in text[:8]:
        text = _QUOTE.sub("", text, count=1)
    if "\\" in text:  # markdown's escapes: "gpu\_memory\_utilization", "len \(30576\)"
        text = _MD_ESCAPE.sub(r"\1", text)
    width = len(text.rstrip())
    if "|" in text[:64]:
        text = _CONTAINER.sub("", text, count=1)
    if text[:1].isdigit() or text[:1] in "[JFMASOND":
        text = _OUTER_TIME.sub("", text, count=1)
    if text[:1] in "|[":
        text = _PIPE_OR_RANK.sub("", text, count=1)
    rest = text
    for _ in range(2):  # Ray inside a container can stack two process prefixes
        m = _PID.match(rest) if rest[:1] == "(" else None
        if not m:
            break
        rest = rest[m.end() :]
    header = _HEADER.match(rest) or _HEADER_NO_SOURCE.match(rest)
    level = source = None
    if header is not None:
        rest = rest[header.end() :]
        level = header.group("level")
        where = header.groupdict().get("src") or header.groupdict().get("old")
        source = where.rsplit(":", 1)[0].rsplit("/", 1)[-1] if where else None
    return PhysicalLine(
        raw=text.strip(),
        message=rest,
        headed=header is not None,
        width=width,
        level=level,
        source=source,
    )


class Tolerant:
    """A pattern compiled by :func:`tolerant`, with the literal needles that gate its search.

    ``needles``: strings (spaces ignored) of which at least one must occur in the log for the
    pattern to match at all; checking them first skips a regex scan of a log that cannot match.
    """

    def __init__(
        self, pattern: str, needles: tuple[str, ...], flags: int = 0, ignore_case: bool = True
    ) -> None:
        if ignore_case:  # pasted logs get retyped, lower-cased, title-cased
            flags |= re.IGNORECASE
        self.regex = re.compile(pattern.replace(" ", r"\s*"), flags)
        self.needles = tuple(n.replace(" ", "").lower() for n in needles)
        self.pattern = self.regex.pattern

    def search(self, text: str, pos: int = 0) -> re.Match[str] | None:
        """``re.Pattern.search``."""
        return self.regex.search(text, pos)

    def match(self, text: str, pos: int = 0) -> re.Match[str] | None:
        """``re.Pattern.match``."""
        return self.regex.match(text, pos)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        """``re.Pattern.finditer``."""
        return self.regex.finditer(text)


def _unglue(line: str) -> list[str]:
    """``line``, split where a process prefix follows text (lines whose breaks were lost)."""
    if "pid=" not in line or (line.count("pid=") < 2 and line.lstrip().startswith("(")):
        return [line]
    return _GLUED.split(line)


def tolerant(pattern: str, *needles: str, flags: int = 0, ignore_case: bool = True) -> Tolerant:
    """Compile ``pattern`` so that each space in it matches any whitespace, or none.

    Searched over :attr:`LogView.flat`, where line breaks vanish, the pattern then matches a
    message however a terminal or a tracker wrapped it. Write no spaces inside character
    classes or quantified groups of a tolerant pattern. ``needles`` (optional) gate the search:
    literal pieces of which one must occur for the pattern to match (a wrap never splits them
    in the flat text, which has no line breaks and is compared with its spaces removed).
    Matching ignores case unless ``ignore_case`` is False (patterns whose classes tell names
    apart by case, such as pydantic's ``CacheConfig`` + ``gpu_memory_utilization``).
    """
    return Tolerant(pattern, needles, flags, ignore_case)


_LOOSE: Final = (
    (re.compile(r"(?<![?\\])([,:;]) "), r"\1? "),  # first: not after a group's "(?"
    (re.compile(r"\\\("), r"[(\\[]?"),
    (re.compile(r"\\\)"), r"[)\\]]?"),
    (re.compile(r"\\\.(?![*+?{])"), r"\\.?"),
)


def loose(pattern: str) -> str:
    """``pattern`` with its punctuation optional: the numbers and words decide.

    Text pasted through chat apps, markdown and terminals loses characters (a parenthesis,
    a period, a quote or backtick turned into formatting, a comma); a pattern passed through
    this keeps matching. Only the literal ``\\(``, ``\\)``, ``\\.`` and a ``,``, ``:`` or ``;``
    before a space are loosened (not a group's ``(?:``); ``[\\d.]+`` stays a number.
    """
    out = pattern
    for literal, lax in _LOOSE:
        out = literal.sub(lax, out)
    return out


def group_text(match: re.Match[str], group: str = "text") -> str:
    """A captured group with its whitespace (wrapped lines, indents) folded to single spaces."""
    return " ".join((match.group(group) or "").split())


def contains(text: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``text``, whitespace ignored on both sides (a wrap may have
    dropped or added a space anywhere in flat text)."""
    return _WS.sub("", needle) in _WS.sub("", text)


_WS: Final = re.compile(r"\s+")


def _first_word(text: str) -> str:
    return text.split(" ", 1)[0]


def _continues(prev: PhysicalLine, nxt: PhysicalLine, wrap: tuple[int, bool, bool] | None) -> bool:
    """Whether ``nxt`` is the rest of ``prev``, broken by a terminal or a tracker.

    ``wrap`` is the width the log looks wrapped at and whether many lines show it (``strong``).
    A hard wrap fills the line to the width exactly; a word wrap breaks where the next word
    would not have fit. With a single wrapped line in sight only the exact fill counts. Records
    of their own (a vLLM header, a traceback line, an exception, uvicorn and argparse lines)
    never continue anything.
    """
    if wrap is None or nxt.headed or not nxt.message.strip():
        return False
    if _STRUCTURAL.match(nxt.message):
        return False
    width, strong, _ = wrap
    if prev.width >= width:
        return True
    if not strong or nxt.message[:1].isspace():
        return False
    return prev.width * 2 >= width and prev.width + 1 + len(_first_word(nxt.message)) > width


def _wrap_width(lines: list[PhysicalLine]) -> tuple[int, bool, bool] | None:
    """The width the log looks wrapped at, whether several lines show it, and whether the
    wrap looks hard (lines filled to the width exactly) rather than word by word."""
    widths = [line.width for line in lines if line.width]
    if not widths:
        return None
    wrap = max(widths)
    if wrap < 24:
        return None
    exact = sum(1 for w in widths if w == wrap)
    near = sum(1 for w in widths if w >= wrap - 12)
    return wrap, exact >= 2 or near >= 3, exact * 2 >= near


def bound_text(text: str) -> tuple[str, int]:
    """``text`` cut to its head and tail when longer than :data:`MAX_CHARS`; chars left out."""
    if len(text) <= MAX_CHARS:
        return text, 0
    omitted = len(text) - MAX_CHARS
    marker = f"\n[vtc: {omitted} characters of the log left out here]\n"
    return text[:HEAD_CHARS] + marker + text[-TAIL_CHARS:], omitted


# -- the view --------------------------------------------------------------------------------
class LogView:
    """A log ready for the detectors: physical and logical lines, the flat text, the run.

    ``flags`` (what the run was launched with, when known) and the log's own records of the
    arguments (``non-default args``, the ``args: Namespace(...)`` of older servers, the
    engine's ``with config:`` line) answer :meth:`value` and :meth:`explicit`.
    """

    def __init__(self, text: str, flags: ServeFlags | None, exit_code: int | None) -> None:
        text, self.omitted_chars = bound_text(text)
        self.flags = flags
        self.exit_code = exit_code
        self.physical = [clean_line(piece) for line in text.splitlines() for piece in _unglue(line)]
        self._logical_of: list[int] = []
        self.logical: list[str] = []
        self.logical_raw: list[str] = []
        self._join()
        self._starts: list[int] = []
        pos = 0
        for line in self.physical:
            self._starts.append(pos)
            pos += len(line.message)
        self.logical_start = [0] * len(self.logical)
        for physical in range(len(self.physical) - 1, -1, -1):
            self.logical_start[self._logical_of[physical]] = self._starts[physical]
        self.flat = "".join(line.message for line in self.physical)
        self.skeleton = re.sub(r"\s+", "", self.flat).lower()

    def _join(self) -> None:
        wrap = _wrap_width(self.physical)
        prev: PhysicalLine | None = None
        for line in self.physical:
            if prev is not None and wrap is not None and _continues(prev, line, wrap):
                # A hard wrap breaks mid-word and keeps every character; a word wrap drops
                # the space it broke at, even where the words filled the line exactly.
                glue = "" if prev.width >= wrap[0] and wrap[2] else " "
                self.logical[-1] += glue + line.message
                self.logical_raw[-1] += glue + line.message
            else:
                self.logical.append(line.message)
                self.logical_raw.append(line.raw)
            self._logical_of.append(len(self.logical) - 1)
            prev = line

    # -- searching ---------------------------------------------------------------------------
    def has(self, needle: str) -> bool:
        """Whether ``needle`` (spaces ignored) occurs anywhere: a cheap gate before a regex."""
        return needle.replace(" ", "").lower() in self.skeleton

    def _gated_out(self, pattern: Tolerant | re.Pattern[str], needle: str | None) -> bool:
        if needle is not None:
            return not self.has(needle)
        needles = getattr(pattern, "needles", ())
        return bool(needles) and not any(n in self.skeleton for n in needles)

    def logical_at(self, offset: int) -> int:
        """The logical line holding flat offset ``offset``."""
        physical = max(0, bisect.bisect_right(self._starts, offset) - 1)
        return self._logical_of[physical] if self._logical_of else 0

    def find(
        self, pattern: Tolerant | re.Pattern[str], needle: str | None = None
    ) -> tuple[re.Match[str], str] | None:
        """The first match of ``pattern`` in the flat text, with its logical line's raw text."""
        for match, evidence, _ in self.find_all(pattern, needle):
            return match, evidence
        return None

    def find_all(
        self, pattern: Tolerant | re.Pattern[str], needle: str | None = None
    ) -> Iterator[tuple[re.Match[str], str, int]]:
        """Every match in the flat text: (match, evidence, logical line index)."""
        if self._gated_out(pattern, needle):
            return
        for match in pattern.finditer(self.flat):
            index = self.logical_at(match.start())
            yield match, self.logical_raw[index] if self.logical_raw else "", index

    def refine(self, match: re.Match[str]) -> re.Match[str]:
        """``match`` (found in the flat text) found again in its logical line, when it fits one.

        The logical line keeps the spaces a tracker's wrap dropped (``Tesla`` / ``T4`` reads
        ``Tesla T4``, not ``TeslaT4``): use it for free text (names, messages), keep the flat
        match for offsets.
        """
        index = self.logical_at(match.start())
        if index != self.logical_at(max(match.start(), match.end() - 1)):
            return match
        again = match.re.search(self.logical[index])
        return again if again is not None else match

    def line_after(self, match: re.Match[str], marker: str) -> str:
        """The rest of ``match``'s logical line after ``marker``, or the next line when empty.

        For texts that run to the end of their line (argparse's unrecognized arguments).
        """
        index = self.logical_at(max(0, match.end() - 1))
        line = self.logical[index]
        at = line.rfind(marker)
        rest = line[at + len(marker) :] if at >= 0 else ""
        if not rest.strip() and index + 1 < len(self.logical):
            nxt = self.logical[index + 1]
            if nxt.strip() and not _STRUCTURAL.match(nxt):
                rest = nxt
        return rest

    def find_line(
        self, pattern: Tolerant | re.Pattern[str], needle: str | None = None
    ) -> Iterator[tuple[re.Match[str], str, int]]:
        """Matches of ``pattern`` in each logical line (for texts that end with their line)."""
        if self._gated_out(pattern, needle):
            return
        for i, message in enumerate(self.logical):
            m = pattern.search(message)
            if m:
                yield m, self.logical_raw[i], i

    # -- what the run was given --------------------------------------------------------------
    @cached_property
    def non_default_args(self) -> dict[str, Any]:
        """The ``non-default args: {...}`` dict vLLM 0.8+ logs (``api_utils.py:284-286``)."""
        m = _NON_DEFAULT.search(self.flat) if self.has("non-default args:") else None
        if m is None:
            return {}
        return _parse_dict(_balanced(self.flat, m.end() - 1, "{", "}"))

    @cached_property
    def namespace_args(self) -> dict[str, Any]:
        """``args: Namespace(...)``: every argument, as the 0.4-0.7 servers log them."""
        m = _NAMESPACE.search(self.flat) if self.has("Namespace(") else None
        if m is None:
            return {}
        return _parse_pairs(_balanced(self.flat, m.end() - 1, "(", ")")[1:-1])

    @cached_property
    def engine_config(self) -> dict[str, Any]:
        """The engine's ``... with config: model='...', dtype=..., max_seq_len=...`` pairs."""
        m = _ENGINE_CONFIG.search(self.flat) if self.has("with config:") else None
        if m is None:
            return {}
        line = self.logical[self.logical_at(m.start())]
        at = line.find("with config:")
        pairs = _parse_pairs(line[at + len("with config:") :] if at >= 0 else line)
        out: dict[str, Any] = {}
        for key, value in pairs.items():
            name = _CONFIG_ALIASES.get(key, key)
            if isinstance(value, str) and value.startswith("torch."):
                value = value[len("torch.") :]
            out[name] = value
        return out

    @cached_property
    def version(self) -> str | None:
        """The vLLM version the log names, when it names one."""
        for m, _, _ in self.find_line(_VERSION):
            return m.group("v")
        return None

    @cached_property
    def device(self) -> str:
        """``cpu`` or ``gpu`` by the backend the log shows, ``unknown`` when it shows neither."""
        sources = {line.source for line in self.physical if line.source}
        if sources & _CPU_SOURCES or _CPU_MARKERS.search(self.flat):
            return "cpu"
        if sources & _GPU_SOURCES or _GPU_MARKERS.search(self.flat):
            return "gpu"
        return "unknown"

    def value(self, name: str) -> Any:
        """The value the run used for ``name``: flags, then the log's own records."""
        if self.flags is not None:
            v = getattr(self.flags, name, None)
            if v is not None:
                return v
        for source in (self.non_default_args, self.namespace_args, self.engine_config):
            if source.get(name) is not None:
                return source[name]
        return None

    def explicit(self, name: str) -> bool:
        """Whether the run set ``name`` itself (not vLLM's default)."""
        if self.flags is not None and getattr(self.flags, name, None) is not None:
            return True
        if name in self.non_default_args:
            return True
        logged = self.namespace_args.get(name)
        if logged is None:
            return False
        # Only 0.4-0.8 servers log a Namespace: compare with their defaults.
        return bool(logged != _NAMESPACE_DEFAULTS.get(name, _DEFAULTS.get(name)))


# The files whose records only one backend logs (headers), then texts only one backend prints.
# gpu_model_runner.py is no GPU marker: the CPU runner subclasses it (try_headdim16 capture).
_CPU_SOURCES: Final = frozenset({"cpu_worker.py", "cpu_model_runner.py", "cpu.py"})
_GPU_SOURCES: Final = frozenset({"gpu_worker.py"})
_CPU_MARKERS: Final = tolerant(
    r"\[cpu_worker\.py:|\[cpu_model_runner\.py:|\[cpu\.py:\d+\]|device_config=cpu|"
    r"CPU KV cache size|CPU_ATTN|Available memory on node \d+|"
    r"desired CPU memory utilization|Unsupported CPU attention"
)
_GPU_MARKERS: Final = tolerant(
    r"device_config=cuda|GPU KV cache size|\[gpu_worker\.py:|Free memory on device|"
    r"CUDA out of memory|torch\.cuda\.|NCCL|CUDA graphs?|not enough GPU memory|"
    r"# GPU blocks: |compute capability|NVIDIA|CUDA error"
)
_DEFAULTS: Final = {s.name: s.vllm_default for s in flag_specs()}
# The defaults of the servers that log ``args: Namespace(...)`` (0.4-0.8: vllm/config.py and
# engine/arg_utils.py of those versions) where they differ from 0.32's or depend on the device.
_NAMESPACE_DEFAULTS: Final = {"gpu_memory_utilization": 0.9, "block_size": 16, "max_num_seqs": 256}
_NON_DEFAULT: Final = tolerant(r"non-default args: \{", "non-default args:")
_NAMESPACE: Final = tolerant(r"args: Namespace\(", "Namespace(")
# "LLM engine (v0.4.0) with config:"; 0.2-0.3 named no version ("an LLM engine with config:").
_ENGINE_CONFIG: Final = tolerant(r"engine (?:\(v?[\w.+-]+\) )?with config: ", "with config:")
_VERSION: Final = tolerant(
    r"(?:vLLM API server version |engine \(v|LLM engine \(v|█ version )(?P<v>\d+\.\d+[\w.+-]*)"
)
_CONFIG_ALIASES: Final = {"max_seq_len": "max_model_len", "quantization_param_path": "_"}


def _balanced(text: str, start: int, open_: str, close: str) -> str:
    """``text[start:]`` up to the bracket matching the one at ``start`` (quotes respected)."""
    depth = 0
    quote = ""
    limit = min(len(text), start + 20000)
    for i in range(start, limit):
        ch = text[i]
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == open_:
            depth += 1
        elif ch == close:
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return text[start:limit]


def _parse_dict(body: str) -> dict[str, Any]:
    try:
        value = ast.literal_eval(body)
        return dict(value) if isinstance(value, dict) else {}
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        # A value that is not a literal (an enum repr): fall back to simple pairs.
        pairs = re.findall(r"'(\w+)': ?('[^']*'|-?[\d.]+|True|False|None)", body)
        out: dict[str, Any] = {}
        for key, val in pairs:
            literal = _literal(val)
            if literal is not _NOT_LITERAL:
                out[key] = literal
        return out


_NOT_LITERAL: Final = object()


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


_PAIR: Final = re.compile(
    r"(?:^|,)\s*(?P<key>[a-z_]\w*)=(?P<value>'[^']*'|\"[^\"]*\"|\[[^\]]*\]|\{[^}]*\}|"
    r"<[^>]*>|[\w.+:/-]+(?:\([^()]*\))?)"
)


def _parse_pairs(body: str) -> dict[str, Any]:
    """``key=value, key=value`` (a Namespace or a config repr): literals, else bare words."""
    out: dict[str, Any] = {}
    for m in _PAIR.finditer(body):
        raw = m.group("value")
        value = _literal(raw)
        out[m.group("key")] = raw if value is _NOT_LITERAL else value
    return out
