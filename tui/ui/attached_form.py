"""The flags form in attach mode: the attached server's configuration, read-only.

A server this console did not start cannot be restarted from the form, so the form is no
editor there: it shows what was read from the server (``SessionPort.server_config``), each
field marked with where it was read, the unread ones "not known" (or vLLM's default when
the startup log listed every flag that was set). The workload stays editable: ``b`` runs a
load against the attached server.
"""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from tui.domain.flags.serve import flag_specs
from tui.domain.server_config import FROM_LOG, FROM_METRICS, FROM_MODELS, ServerConfig
from tui.session.port import SessionPort
from tui.ui.widgets.flag_form import ENV, EXTRA, MODEL, FlagForm

NOT_READ_YET = "not read yet"
TITLE = "Flags · read from the server (read-only)"
# Beside each field, short (the form is 43 columns at 80x24); the legend above says them whole.
TAGS = {FROM_MODELS: "api", FROM_METRICS: "metrics", FROM_LOG: "log"}
LEGEND = "read-only · ←api /v1/models ←metrics /metrics ←log"


def legend(config: ServerConfig | None) -> str:
    """The line above the fields: what each mark means and what an unmarked field is."""
    if config is None:
        return f"read-only: {NOT_READ_YET} from the server"
    if config.log_read:
        return f"{LEGEND} its log · blank: vLLM's default"
    return f"{LEGEND} (no --attach-log) · blank: not known"


def show_server_config(form: FlagForm, config: ServerConfig | None) -> None:
    """Put ``config`` in ``form``, read-only (``None``: nothing read yet, all "not read")."""
    if config is not None:
        form.load_flags(config.flags, rows=False)  # read-only: the extra args as text
    unread = config.unread() if config is not None else NOT_READ_YET
    form.field(MODEL).mark_read(TAGS[FROM_MODELS] if config is not None else None, unread)
    for spec in flag_specs():
        source = config.source(spec.name) if config is not None else None
        form.field(spec.name).mark_read(TAGS.get(source, source) if source else None, unread)
    form.field(EXTRA).mark_read(None, unread)
    form.field(ENV).mark_read(None, "not known")  # a server never publishes its environment
    form.border_title = TITLE
    boxes = form.query("#form-source").results(Static)
    box = next(boxes, None)
    if box is None:
        box = Static(id="form-source", classes="form-source")
        form.mount(box, before="#form-fields")
    box.update(Content(legend(config)))


class AttachedForm:
    """Keeps the form in step with the attached server's configuration (attach mode only)."""

    def __init__(self, session: SessionPort) -> None:
        self._session = session
        self._shown: ServerConfig | None = None
        self._done = False

    def refresh(self, form: FlagForm) -> None:
        """Show the configuration last read, once per reading (nothing when not attached)."""
        if self._session.can_restart:
            return
        config = self._session.server_config
        if self._done and config is self._shown:
            return
        self._shown, self._done = config, True
        show_server_config(form, config)
