"""The warden a cluster worker starts: once the worker's pipe closes (the worker gone,
however it went), every process the worker named is stopped with its group and the
worker's scratch folder removed. A plain script: no Ray needed to test it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from tui.modes import ray_warden


def test_the_warden_stops_what_its_worker_named_once_the_worker_is_gone(tmp_path: Path) -> None:
    scratch = tmp_path / "trial-x"
    scratch.mkdir()
    (scratch / "runs.sqlite").write_text("", encoding="utf-8")
    server = subprocess.Popen(  # a server in a session of its own, as vtc starts them
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        warden = subprocess.Popen(
            [sys.executable, ray_warden.__file__, str(scratch)], stdin=subprocess.PIPE
        )
        assert warden.stdin is not None
        warden.stdin.write(f"{server.pid}\nnot-a-pid\n".encode())
        warden.stdin.close()  # the worker is gone: its end of the pipe closed
        assert warden.wait(timeout=60) == 0
        assert server.wait(timeout=10) == -signal.SIGTERM
        assert not scratch.exists()
        assert bystander.poll() is None  # never named: left alone
    finally:
        for proc in (server, bystander):
            proc.kill()
            proc.wait()
