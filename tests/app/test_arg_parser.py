"""Usage errors of every vtc command are one line, inert, exit 2 (argparse printed the whole
usage block first)."""

from __future__ import annotations

import pytest

from tui.app.cli import main


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["calibrate", "--name", "x", "--budget", "nan", "http://h:1"], "argument --budget"),
        (["sweep", "spec.toml", "--ray-gpus", "-3"], "argument --ray-gpus"),
        (["bench", "--port", "0"], "argument --port"),
        (["runs", "--format", "\x1b]0;owned\x07"], "argument --format"),
        (["--no-such-option"], "unrecognized arguments"),
    ],
)
def test_a_usage_error_is_one_inert_line(
    argv: list[str], fragment: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err and err.startswith("vtc")
    assert "\x1b" not in err and "\x07" not in err and not err.startswith("usage:")
