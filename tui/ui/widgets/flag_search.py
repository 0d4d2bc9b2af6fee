"""The form's flag search: find any flag of the installed vLLM by what it does.

Typing words ("context length", "kv offload", "cuda graph") lists the flags that match, by
name, by the form's sections, by vLLM's own help text for the installed version and by a
table of operator words (:mod:`tui.domain.flags.meaning`), the flag that does what the
words say first. Picking one focuses its field: a declared flag's own, or for any other
flag a row of its own (:mod:`tui.ui.widgets.cli_field_rows`), added on demand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from tui.domain.flags.meaning import FlagDoc, docs_for, rank
from tui.domain.flags.serve import flag_specs
from tui.domain.flags.vllm_cli import CliFlag, VllmCli
from tui.domain.flags.vllm_tables import VllmTable, default_table

MAX_MATCHES = 8
LINE_WIDTH = 38  # the form's text width at 80 columns: longer lines end in "…"
POLL_S = 1.0  # how often to look for the flag list while the session loads it

LOADING_REASON = "loading the installed vLLM's flags…"


@dataclass(frozen=True)
class CliStatus:
    """The flag list, or why there is none; ``settled`` once it can no longer change."""

    cli: VllmCli | None
    reason: str = ""
    settled: bool = True
    table: VllmTable | None = None  # what stands in for ``cli`` while there is none

    @property
    def parser(self) -> VllmCli:
        """The installed vLLM's flags, else the shipped table that stands in for them."""
        if self.cli is not None:
            return self.cli
        return (self.table or default_table()).cli


def flag_docs(status: CliStatus) -> list[FlagDoc]:
    """Every flag the form can edit, as the search reads them (cached per parser)."""
    parser = status.parser
    cached = _DOCS.get(id(parser))
    if cached is None or cached[0] is not parser:
        cached = (parser, docs_for(flag_specs(), parser))
        _DOCS[id(parser)] = cached
    return cached[1]


_DOCS: dict[int, tuple[VllmCli, list[FlagDoc]]] = {}


def cli_status(cli: VllmCli | None, error: str | None, never: str | None) -> CliStatus:
    """What the section can show, from the session's ``vllm_cli``/``vllm_cli_error``.

    ``never`` is the mode's reason no flag list will load (demo, attached: nothing to
    introspect), settled at once; otherwise it is loading until the list or its error
    arrives.
    """
    if cli is not None:
        return CliStatus(cli)
    # Without the installed vLLM's list, extra args are checked against a shipped table:
    # say which (issue 19: with no vLLM known, the newest).
    table = f" · extra args: vLLM {default_table().version}'s table"
    if error:
        return CliStatus(None, f"vLLM's flag list failed to load: {error}{table}")
    if never:
        return CliStatus(None, never + table)
    return CliStatus(None, LOADING_REASON, settled=False)


def _clip(text: str, width: int = LINE_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def first_sentence(text: str) -> str:
    """The help text's first sentence, whitespace collapsed."""
    flat = " ".join(text.split())
    end = flat.find(". ")
    return flat if end < 0 else flat[: end + 1]


def describe_value(flag: CliFlag) -> str:
    """What the flag takes, compactly: ``switch``, ``int =1``, ``{a|b|c}``."""
    if flag.is_boolean:
        kind = "switch" if flag.negation is None else f"switch ({flag.negation})"
    elif flag.choices:
        kind = "{" + "|".join(str(c) for c in flag.choices) + "}"
    else:
        kind = flag.metavar or flag.type_name or "value"
        if flag.nargs == "+":
            kind += " ..."
    if flag.default is None or flag.default is False or flag.default == "" or flag.is_boolean:
        return kind
    return f"{kind} ={flag.default}"


def match_prompt(doc: FlagDoc, cli: VllmCli) -> Content:
    """Two lines for a match: the option and what it takes (or its form section), then
    its help's first sentence. A deprecated flag is marked, not hidden: vLLM still accepts
    it (with a warning)."""
    flag = cli.flag(doc.dest)
    deprecated = flag is not None and flag.is_deprecated
    name = _clip(doc.option + (" (deprecated)" if deprecated else ""))
    what = doc.section if doc.declared or flag is None else describe_value(flag)
    rest = _clip(what, max(LINE_WIDTH - len(name) - 1, 1))
    head = Content.assemble((name, "bold"), " ", (rest, "$text-muted"))
    help_line = Content.styled(_clip(first_sentence(doc.help)), "$text-muted")
    return Content("\n").join([head, help_line])


class FlagSearch(Vertical):
    """A search box over every flag the form can edit, by name or by what it does."""

    class Picked(Message):
        """The operator chose ``doc``: focus its field (a row of its own if undeclared)."""

        def __init__(self, doc: FlagDoc) -> None:
            super().__init__()
            self.doc = doc

    def __init__(
        self,
        status: Callable[[], CliStatus],
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._status = status
        self._cli: VllmCli | None = None
        self._matches: list[FlagDoc] = []
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        """The search box, a one-line reason or count, the matches."""
        yield Input(
            placeholder="find a flag: name or what it does",
            compact=True,
            id="flag-search",
            select_on_focus=False,
        )
        yield Static("", id="flag-search-note")
        yield OptionList(id="flag-matches", compact=True)

    def on_mount(self) -> None:
        """Show what is known now; poll while the session is still loading the list."""
        if not self._check():
            self._timer = self.set_interval(POLL_S, self._poll)

    # -- state ------------------------------------------------------------------------------
    @property
    def matches(self) -> list[FlagDoc]:
        """The flags listed now, best first."""
        return list(self._matches)

    def _check(self) -> bool:
        """Re-read the session's flag list; True once it can no longer change."""
        status = self._status()
        if status.cli is not self._cli or self._cli is None:
            self._cli = status.cli
            self._refresh(status)
        return status.settled

    def _poll(self) -> None:
        if self._check() and self._timer is not None:
            self._timer.stop()
            self._timer = None

    def found(self, text: str) -> list[FlagDoc]:
        """Every flag matching ``text``, best first (none when ``text`` is blank)."""
        return [hit.doc for hit in rank(text, flag_docs(self._status()))]

    def _refresh(self, status: CliStatus) -> None:
        text = self.query_one("#flag-search", Input).value
        note = self.query_one("#flag-search-note", Static)
        found = self.found(text)
        self._matches = found[:MAX_MATCHES]
        parser = status.parser
        if not text.strip():
            others = sum(1 for d in flag_docs(status) if not d.declared)
            where = "" if status.cli else f" ({status.reason})"
            note.update(Content(f"{others} more flags of vLLM {parser.version}{where}: type"))
        elif not found:
            note.update(Content(f"no flag matches {text.strip()!r}"))
        else:
            more = len(found) - len(self._matches)
            plural = "" if len(found) == 1 else "es"
            shown = f"{len(found)} match{plural}" + (f", {more} not shown" if more else "")
            note.update(Content(shown + " · Enter: edit it"))
        options = self.query_one("#flag-matches", OptionList)
        options.clear_options()
        options.add_options(Option(match_prompt(d, parser), id=d.key) for d in self._matches)
        options.display = bool(self._matches)
        if self._matches:
            options.highlighted = 0

    # -- events -----------------------------------------------------------------------------
    @on(Input.Changed, "#flag-search")
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        self._refresh(self._status())

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """Focus is a cheap moment to look again (the list may have arrived meanwhile)."""
        if self._cli is None:
            self._poll()

    @on(Input.Submitted, "#flag-search")
    def _enter(self, event: Input.Submitted) -> None:
        """Enter in the box picks the highlighted (first) match."""
        event.stop()
        index = self.query_one("#flag-matches", OptionList).highlighted
        if self._matches:
            self.post_message(self.Picked(self._matches[index or 0]))

    @on(OptionList.OptionSelected, "#flag-matches")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.post_message(self.Picked(self._matches[event.option_index]))
