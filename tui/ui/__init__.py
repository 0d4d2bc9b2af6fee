"""The Textual console: the only package of vtc that imports textual.

Build it with :func:`tui.ui.app.create_app` (the CLI, the demo and the tests share it).
"""

import os

# A lone Esc is told from the start of an escape sequence by waiting for the next byte;
# Textual waits ESCDELAY ms (its default 100), which every Esc (close help, leave a field,
# back to the board) showed as ~100 ms of lag (issue 22). tmux and terminals send a whole
# sequence in one write, so 25 ms still tells them apart (neovim's ttimeoutlen is 50, many
# set 10). Read by Textual when it is first imported, so it is set before any import of it
# here; an ESCDELAY the operator set wins. Textual's input thread notices the delay is over
# only when it wakes (every 100 ms with nothing typed): tui.ui.prompt_escape wakes it then.
ESCAPE_DELAY_MS = "25"
os.environ.setdefault("ESCDELAY", ESCAPE_DELAY_MS)
