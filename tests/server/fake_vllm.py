"""A fake ``vllm`` executable for the supervisor tests (run as ``python fake_vllm.py ...``).

Options before ``serve`` steer the fake; everything after ``serve`` is the argv the
supervisor built (``MODEL --port N ...``). What it does, in order:

1. prints the lines of ``--capture FILE`` up to and including the first line matching
   ``--until REGEX`` (the whole file without ``--until``);
2. spawns ``--child`` (same process group; ``--child-ignores-term``) and ``--orphan`` (a
   process in its own session, found later only through the supervisor's memory), printing
   ``FAKE child pid=N`` / ``FAKE orphan pid=N``; ``--orphan-ignores-term`` makes the orphan
   ignore SIGTERM, ``--orphan-dies-loudly`` makes it print an EngineCore's fatal-error
   traceback when SIGTERM reaches it (what a real EngineCore may write when the console's
   teardown signals it) and exit;
3. with ``--health-after S``: after S seconds serves ``/health`` (200) and ``/v1/models``
   on 127.0.0.1:PORT;
4. with ``--exit CODE``: after ``--exit-after S`` (or, with ``--exit-on-usr1``, once it
   receives SIGUSR1: a test sends it after it saw ``Ready``) prints the rest of the capture
   and exits with CODE; otherwise it sleeps until signalled (``--ignore-term`` ignores SIGTERM),
   printing ``FAKE tick N`` every ``--tick S`` seconds when given.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# argv[1], when given, is a pipe's write end: closed once the signal handling is in place.
SLEEPER = (
    "import os, signal, sys, time\n{on_term}\n"
    "if len(sys.argv) > 1:\n    os.close(int(sys.argv[1]))\n"
    "while True:\n    time.sleep(1)\n"
)
IGNORE_TERM = "signal.signal(signal.SIGTERM, signal.SIG_IGN)"
# The lines a real EngineCore logs when it dies of an error (core.py), ending in the error
# the issue saw after a console's own teardown: diagnosed alone they read "engine_died".
DYING_WORDS = [
    "(EngineCore pid={pid}) ERROR 01-01 00:00:00 [core.py:1000] EngineCore encountered a "
    "fatal error.",
    "(EngineCore pid={pid}) ERROR 01-01 00:00:00 [core.py:1000] Traceback (most recent call last):",
    '(EngineCore pid={pid}) ERROR 01-01 00:00:00 [core.py:1000]   File "core.py", line 700, '
    "in run_engine_core",
    "(EngineCore pid={pid}) ERROR 01-01 00:00:00 [core.py:1000] RuntimeError: cancelled",
]
DIE_LOUDLY = (
    "def _die(*_):\n"
    "    for line in {lines!r}:\n"
    "        print(line.format(pid=os.getpid()), flush=True)\n"
    "    os._exit(1)\n"
    "signal.signal(signal.SIGTERM, _die)"
)


def _sleeper(ignore_term: bool = False, dies_loudly: bool = False) -> str:
    on_term = IGNORE_TERM if ignore_term else ""
    if dies_loudly:
        on_term = DIE_LOUDLY.format(lines=DYING_WORDS)
    return SLEEPER.format(on_term=on_term)


def _serve_http(port: int, models: list[str]) -> None:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health":
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/v1/models":
                body = json.dumps(
                    {"object": "list", "data": [{"id": m, "object": "model"} for m in models]}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    except OSError as exc:
        print(f"OSError: [Errno {exc.errno}] {exc.strerror}", flush=True)
        os._exit(1)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def main(argv: list[str]) -> int:
    if "serve" not in argv:
        print("usage: fake_vllm.py [options] serve MODEL [flags]", file=sys.stderr)
        return 2
    split = argv.index("serve")
    own, serve = argv[:split], argv[split + 1 :]
    p = argparse.ArgumentParser()
    p.add_argument("--capture")
    p.add_argument("--until")
    p.add_argument("--health-after", type=float)
    p.add_argument("--models")
    p.add_argument("--exit", type=int)
    p.add_argument("--exit-after", type=float, default=0.0)
    p.add_argument("--exit-on-usr1", action="store_true")
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--child", action="store_true")
    p.add_argument("--child-ignores-term", action="store_true")
    p.add_argument("--orphan", action="store_true")
    p.add_argument("--orphan-ignores-term", action="store_true")
    p.add_argument("--orphan-dies-loudly", action="store_true")
    p.add_argument("--echo-env", action="append", default=[])
    p.add_argument("--tick", type=float)
    opts = p.parse_args(own)

    model = serve[0] if serve else "model"
    port = 8000
    for i, token in enumerate(serve):
        if token == "--port" and i + 1 < len(serve):
            port = int(serve[i + 1])

    told: list[int] = []
    signal.signal(signal.SIGUSR1, lambda signum, _frame: told.append(signum))
    if opts.ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # vLLM exits 0 on SIGTERM

    lines: list[str] = []
    if opts.capture:
        with open(opts.capture, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    head, tail = lines, []
    if opts.until:
        pattern = re.compile(opts.until)
        for i, line in enumerate(lines):
            if pattern.search(line):
                head, tail = lines[: i + 1], lines[i + 1 :]
                break
    for line in head:
        print(line)
    for name in opts.echo_env:
        print(f"FAKE env {name}={os.environ.get(name, '')}")
    sys.stdout.flush()

    if opts.child:
        child = subprocess.Popen([sys.executable, "-c", _sleeper(opts.child_ignores_term)])
        print(f"FAKE child pid={child.pid}", flush=True)
    if opts.orphan:
        code = _sleeper(opts.orphan_ignores_term, opts.orphan_dies_loudly)
        ready_r, ready_w = os.pipe()
        orphan = subprocess.Popen(
            [sys.executable, "-c", code, str(ready_w)], start_new_session=True, pass_fds=(ready_w,)
        )
        os.close(ready_w)
        os.read(ready_r, 1)  # end of file: its SIGTERM handling is in place
        os.close(ready_r)
        print(f"FAKE orphan pid={orphan.pid}", flush=True)

    if opts.health_after is not None:
        time.sleep(opts.health_after)
        models = opts.models.split(",") if opts.models else [model]
        _serve_http(port, models)

    if opts.exit is not None:
        if opts.exit_on_usr1:
            while not told:
                time.sleep(0.01)
        else:
            time.sleep(opts.exit_after)
        for line in tail:
            print(line)
        sys.stdout.flush()
        return opts.exit
    tick = 0
    while True:
        time.sleep(opts.tick or 1)
        if opts.tick:
            tick += 1
            print(f"FAKE tick {tick}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
