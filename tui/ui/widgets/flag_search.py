"""The form's "More vLLM flags" section: search the installed vLLM's other flags.

The form declares the common flags (``flag_specs``); every other option of the installed
``vllm serve`` (``VllmCli``, loaded by the session in the background) is found here by
typing, and picking one appends it to the form's extra args, where the operator types its
value.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from tui.domain.flags.vllm_cli import CliFlag, VllmCli

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


def cli_status(cli: VllmCli | None, error: str | None, never: str | None) -> CliStatus:
    """What the section can show, from the session's ``vllm_cli``/``vllm_cli_error``.

    ``never`` is the mode's reason no flag list will load (demo, attached: nothing to
    introspect), settled at once; otherwise it is loading until the list or its error
    arrives.
    """
    if cli is not None:
        return CliStatus(cli)
    if error:
        return CliStatus(None, f"vLLM's flag list failed to load: {error}")
    if never:
        return CliStatus(None, never)
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


def match_prompt(flag: CliFlag) -> Content:
    """Two lines for a match: the option and what it takes, then its help's first sentence."""
    name = _clip(flag.name)
    rest = _clip(describe_value(flag), max(LINE_WIDTH - len(name) - 1, 1))
    head = Content.assemble((name, "bold"), " ", (rest, "$text-muted"))
    help_line = Content.styled(_clip(first_sentence(flag.help)), "$text-muted")
    return Content("\n").join([head, help_line])


def insertion(flag: CliFlag) -> str:
    """The text appended to extra args: a value flag leaves room for its value."""
    return flag.name + (" " if flag.takes_value else "")


class FlagSearch(Vertical):
    """A search box over the installed vLLM's flags that the form does not declare."""

    class Picked(Message):
        """The operator chose ``flag``: append :func:`insertion` to the extra args."""

        def __init__(self, flag: CliFlag) -> None:
            super().__init__()
            self.flag = flag

    def __init__(
        self,
        status: Callable[[], CliStatus],
        declared: Collection[str],
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._status = status
        self._declared = frozenset(declared)
        self._cli: VllmCli | None = None
        self._matches: list[CliFlag] = []
        self._timer: Timer | None = None

    def compose(self) -> ComposeResult:
        """The search box, a one-line reason or count, the matches."""
        yield Input(
            placeholder="search: name or words in its help",
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
    def matches(self) -> list[CliFlag]:
        """The flags listed now, best first."""
        return list(self._matches)

    def _check(self) -> bool:
        """Re-read the session's flag list; True once it can no longer change."""
        status = self._status()
        if status.cli is not self._cli or self._cli is None:
            self._cli = status.cli
            self._refresh(status.reason)
        return status.settled

    def _poll(self) -> None:
        if self._check() and self._timer is not None:
            self._timer.stop()
            self._timer = None

    def others(self, text: str) -> list[CliFlag]:
        """Flags matching ``text`` that the form does not declare (all when ``text`` is blank)."""
        if self._cli is None:
            return []
        return [
            f
            for f in self._cli.search(text)
            if f.dest not in self._declared
            and not any(o in self._declared for o in f.option_strings)
        ]

    def _refresh(self, reason: str = "") -> None:
        text = self.query_one("#flag-search", Input).value
        note = self.query_one("#flag-search-note", Static)
        found = self.others(text)
        self._matches = found[:MAX_MATCHES] if text.strip() else []
        if self._cli is None:
            note.update(Content(reason))
        elif not text.strip():
            note.update(Content(f"{len(found)} more flags of vLLM {self._cli.version}: type"))
        elif not found:
            note.update(Content(f"no other flag matches {text.strip()!r}"))
        else:
            more = len(found) - len(self._matches)
            plural = "" if len(found) == 1 else "es"
            shown = f"{len(found)} match{plural}" + (f", {more} not shown" if more else "")
            note.update(Content(shown + " · Enter: to extra args"))
        options = self.query_one("#flag-matches", OptionList)
        options.clear_options()
        options.add_options(Option(match_prompt(f), id=f.name) for f in self._matches)
        options.display = bool(self._matches)
        if self._matches:
            options.highlighted = 0

    # -- events -----------------------------------------------------------------------------
    @on(Input.Changed, "#flag-search")
    def _typed(self, event: Input.Changed) -> None:
        event.stop()
        self._refresh(self._status().reason)

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
