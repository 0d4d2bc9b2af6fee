"""The command palette (ctrl+p): every flag of the form by name, and every command.

Choosing a flag focuses its field with its value selected, so typing replaces it; choosing
a command runs it as its key would. The names searched are the form's own labels (the
``vllm serve`` option without its dashes, e.g. ``max-model-len``) and the snake_case names
vLLM's config uses (``max_model_len``), so either spelling finds the field.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider

from tui.domain.flags.serve import flag_specs
from tui.ui.form_values import WORKLOAD_FIELDS
from tui.ui.keys import BOARD_KEYS, COMMANDS


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
    for spec in flag_specs():
        label = spec.cli[2:]
        also = f" ({spec.name})" if spec.name != label else ""
        yield Entry(
            f"{label}{also}",
            partial(screen.jump_to_field, spec.name),
            f"flag · {spec.group.value} · {spec.help}",
        )
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


class ConsoleCommands(Provider):
    """Flags by name and the console's commands, for Textual's command palette."""

    def _entries(self) -> list[Entry]:
        return [*_field_entries(self.screen), *_command_entries(self.screen)]

    async def search(self, query: str) -> Hits:
        """Every flag and command whose name matches ``query`` (fuzzy, best first)."""
        matcher = self.matcher(query)
        for entry in self._entries():
            score = matcher.match(entry.text)
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
