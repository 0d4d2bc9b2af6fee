"""The command palette (ctrl+p): every flag by name or by what it does, and every command.

Choosing a flag focuses its field with its value selected, so typing replaces it (a flag
the form does not declare gets a row of its own first); choosing a command runs it as its
key would. Flags are ranked by :mod:`tui.domain.flags.meaning`: their names (``max model
len``, ``max_model_len``), the form's sections, vLLM's own help text for the installed
version and a table of operator words ("context length", "cuda graph", "kv offload"), the
flag that does what the words say first. The form's other fields and the commands are
matched by name, as Textual's fuzzy matcher does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.content import Content

from tui.domain.flags.meaning import holds_words, rank
from tui.ui.form_values import WORKLOAD_FIELDS
from tui.ui.keys import BOARD_KEYS, COMMANDS
from tui.ui.widgets.flag_search import first_sentence, flag_docs

MAX_FLAG_HITS = 20  # words found in many help texts: the best of them are enough
FUZZY_WEIGHT = 0.75
WORDS_SCORE = 0.72  # a field or command whose name holds every word typed ("request rate")


def fuzzy_score(score: float, query: str) -> float:
    """Textual's fuzzy score (it grows with the query: about 3 a letter, more at word
    starts) as 0-0.75: a flag named by the words typed (0.7-1) comes before scattered
    letters ("qu" in "request-rate"), a command's name before a flag found only in a help
    text (0.3-0.4)."""
    return FUZZY_WEIGHT * min(1.0, score / (3 * len(query) + 9))


@dataclass(frozen=True)
class Entry:
    """One thing the palette finds: what it reads, what it does, a line of help."""

    text: str
    run: Callable[[], object]
    help: str


def _field_entries(screen: object) -> Iterator[Entry]:
    from tui.ui.screens.main import MainScreen  # the palette acts on the main screen only

    if not isinstance(screen, MainScreen):
        return
    yield Entry("model", partial(screen.jump_to_field, "model"), "flag · the model to serve")
    yield Entry(
        "extra args",
        partial(screen.jump_to_field, "extra_args"),
        "flag · any other vllm serve arguments",
    )
    yield Entry(
        "environment",
        partial(screen.jump_to_field, "env"),
        "the server's environment variables (NAME=value)",
    )
    for field in WORKLOAD_FIELDS:
        name = f"load-{field.name}"
        yield Entry(
            f"workload {field.label}",
            partial(screen.jump_to_field, name),
            f"workload · {field.help}",
        )


def _command_entries(screen: object) -> Iterator[Entry]:
    from tui.ui.screens.main import MainScreen

    if not isinstance(screen, MainScreen):
        return
    for cmd in COMMANDS:
        yield Entry(
            f"{cmd.label} ({cmd.key_display})", partial(screen.run_command, cmd.action), cmd.help
        )
    for key in BOARD_KEYS:
        yield Entry(
            f"{key.label} ({key.key_display}, board)",
            partial(screen.run_command, f"board.{key.action}"),
            key.help,
        )


def _flag_hits(screen: object, query: str) -> Iterator[Hit]:
    """The flags that answer ``query``, best first (scores 0.3-1: above most fuzzy hits)."""
    from tui.ui.screens.main import MainScreen

    if not isinstance(screen, MainScreen):
        return
    for hit in rank(query, flag_docs(screen.cli_status()))[:MAX_FLAG_HITS]:
        doc = hit.doc
        label = doc.option[2:]
        also = f" ({doc.dest})" if doc.dest != label.replace("-", "_") else ""
        where = doc.section if doc.declared else f"{doc.section}, its own row"
        yield Hit(
            hit.score / 1000,
            Content(f"{label}{also}"),
            partial(screen.jump_to_field, doc.key),
            text=f"{label}{also}",
            help=f"flag · {where} · {first_sentence(doc.help)}",
        )


class ConsoleCommands(Provider):
    """Flags by name and meaning, and the console's commands, for Textual's palette."""

    def _entries(self) -> list[Entry]:
        return [*_field_entries(self.screen), *_command_entries(self.screen)]

    async def search(self, query: str) -> Hits:
        """Every flag that answers ``query`` (:mod:`tui.domain.flags.meaning`), then every
        field and command whose name matches it (fuzzy), best first."""
        for hit in _flag_hits(self.screen, query):
            yield hit
        matcher = self.matcher(query)
        for entry in self._entries():
            score = fuzzy_score(matcher.match(entry.text), query)
            if holds_words(query, entry.text):
                score = max(score, WORDS_SCORE)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(entry.text),
                    entry.run,
                    text=entry.text,
                    help=entry.help,
                )

    async def discover(self) -> Hits:
        """With nothing typed: the commands (flags appear as you type their name)."""
        for entry in _command_entries(self.screen):
            yield DiscoveryHit(entry.text, entry.run, text=entry.text, help=entry.help)
