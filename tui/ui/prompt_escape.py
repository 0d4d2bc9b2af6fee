"""A lone Esc delivered after ESCDELAY, not after Textual's input thread wakes (issue 39).

A lone Esc is told from the start of an escape sequence by waiting for the next byte
(``ESCDELAY``, 25 ms here: :mod:`tui.ui`). Textual's parser only notices that wait is
over when its input thread calls ``tick()``, and :class:`LinuxDriver`'s thread calls it
after ``select(0.1)`` returns: with no further input, 100 ms after the Esc. Every Esc
(close a screen, leave a field, close the filter) so sat ~100 ms above its key with the
console idle (measured: 20-40 ms of CPU, 130+ ms p50 wall). :class:`PromptEscapeDriver`
runs the same loop, but after input that holds an Esc it waits only until the parser's
delay is over, then ticks; with nothing pending it waits as Textual does.

The loop is Textual's own (8.2.8) with one wait changed: :func:`matches_textual` tells
whether the installed Textual's loop is still the one copied, and the app uses this driver
only then (an upgraded Textual runs its own driver until the copy is reviewed).
"""

from __future__ import annotations

import hashlib
import inspect
import selectors
from codecs import getincrementaldecoder
from functools import cache
from os import read

from textual import constants
from textual._parser import ParseError
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

IDLE_WAIT_S = 0.1
"""How long the input thread waits for input with no Esc pending (Textual's own)."""
ESC = "\x1b"
Selector = selectors.SelectSelector
"""The input thread's selector (Textual's choice: ``select`` copes with every tty)."""
MARGIN_S = 0.002
"""Past the parser's own deadline, so the tick that follows finds it passed."""
COPIED_LOOP_SHA256 = "d796af6d69db337d6fa6bd463984f7d17188d991dbb22f60efb92a8a9619507c"
"""sha256 of ``LinuxDriver.run_input_thread``'s source in the Textual the loop was copied
from (8.2.8)."""


@cache
def matches_textual() -> bool:
    """Whether the installed Textual's input loop is the one :class:`PromptEscapeDriver`
    copies (its source unreadable counts as changed)."""
    try:
        source = inspect.getsource(LinuxDriver.run_input_thread)
    except (OSError, TypeError):  # no source shipped: nothing to compare
        return False
    return hashlib.sha256(source.encode()).hexdigest() == COPIED_LOOP_SHA256


def next_wait(escape_pending: bool) -> float:
    """Seconds the input thread waits for input: the Esc delay (and a margin) while an
    Esc may be waiting for its sequence, else Textual's idle wait."""
    return constants.ESCAPE_DELAY + MARGIN_S if escape_pending else IDLE_WAIT_S


class PromptEscapeDriver(LinuxDriver):
    """Textual's Linux driver, its input thread waking when a lone Esc is due."""

    def run_input_thread(self) -> None:
        """Wait for input and dispatch its events (LinuxDriver's loop, the wait shortened
        while an Esc is pending)."""
        selector = Selector()
        selector.register(self.fileno, selectors.EVENT_READ)
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode
        pending = False

        def process(events: list[tuple[selectors.SelectorKey, int]], final: bool = False) -> bool:
            """Feed what was read, then tick; whether an Esc may still be pending."""
            escape = False
            for index, (_key, mask) in enumerate(events):
                if mask & selectors.EVENT_READ:
                    last = index == len(events) - 1
                    data = decode(read(self.fileno, 1024 * 4), final=final and last)
                    if not data:  # stdin piped, and ended
                        break
                    escape = ESC in data
                    for event in parser.feed(data):
                        self.process_message(event)
            for event in parser.tick():
                self.process_message(event)
            return escape

        try:
            while not self.exit_event.is_set():
                pending = process(selector.select(next_wait(pending)))
            selector.unregister(self.fileno)
            process(selector.select(IDLE_WAIT_S), final=True)
        finally:
            selector.close()
            try:
                for _event in parser.feed(""):
                    pass
            except (EOFError, ParseError):  # the end of input, as Textual's loop ends it
                pass
