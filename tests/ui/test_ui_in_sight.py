"""What must stay in sight at 80x24 (issue 39 item 2): the server's URL, the figures under
a toast, ids wrapped by meaning."""

from __future__ import annotations

from textual.widgets._toast import Toast
from ui_fakes import FakeSession, served_run

from tui.domain.events import ServerState
from tui.ui.app import create_app
from tui.ui.format import wrap_id
from tui.ui.server_view import ServerView
from tui.ui.widgets.server_panel import status_lines

URL = "http://127.0.0.1:8000"


def test_the_url_is_on_the_first_status_line_and_fits_80_columns() -> None:
    view = ServerView(
        state=ServerState.STARTING, run_label="#12", pid=123456, since_launch=23.0, url=URL
    )
    first = status_lines(view).plain.splitlines()[0]
    assert first.endswith(URL) and len(first) <= 78  # the panel's text width at 80
    # no server: no URL to show
    assert URL not in status_lines(ServerView(state=ServerState.IDLE)).plain


async def test_the_server_panel_shows_where_the_server_answers() -> None:
    session = FakeSession(runs=[served_run(1)], state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        status = str(app.query_one("#server-status").render())
        assert URL in status.splitlines()[0]


async def test_a_toast_sits_over_the_log_tail_not_the_figures() -> None:
    session = FakeSession(runs=[served_run(1)], state=ServerState.READY)
    app = create_app(session, clock=None)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        app.notify("Ready after 4.0s: b runs the load.", title="Server up")
        for _ in range(20):
            await pilot.pause()
            if app.screen.query(Toast):
                break
        (toast,) = app.screen.query(Toast)
        await pilot.pause()
        tail = app.query_one("#log-tail").region
        status = app.query_one("#server-status").region
        strip = app.query_one("#strip").region
        assert toast.region.height == 2  # its title, its message
        assert tail.contains_region(toast.region)
        assert not toast.region.overlaps(status) and not toast.region.overlaps(strip)
        assert app.NOTIFICATION_TIMEOUT <= 3  # a moment, not Textual's 5 s


def test_ids_wrap_at_their_slashes_and_hyphens_never_mid_name() -> None:
    lines = wrap_id("served_model_name meta-llama/Llama-3.1-8B-Instruct", 30)
    assert lines == ["served_model_name meta-llama/", "Llama-3.1-8B-Instruct"]
    spec = '--speculative-config {"method": "ngram", "num_speculative_tokens": 4}'
    assert all(len(line) <= 30 for line in wrap_id(spec, 30))
    assert "".join(wrap_id("org/some-very-long-model-name-that-goes-on", 12)) == (
        "org/some-very-long-model-name-that-goes-on"
    )
    for line in wrap_id("org/some-very-long-model-name-that-goes-on", 12)[:-1]:
        assert line[-1] in "/-", line  # each break after a / or a -
