"""A fake ``vllm`` executable for the supervisor tests (run as ``python fake_vllm.py ...``).

Options before ``serve`` steer the fake; everything after ``serve`` is the argv the
supervisor built (``MODEL --port N ...``). What it does, in order:

1. prints the lines of ``--capture FILE`` up to and including the first line matching
   ``--until REGEX`` (the whole file without ``--until``);
2. spawns ``--child`` (same process group; ``--child-ignores-term``) and ``--orphan`` (a
   process in its own session, found later only through the supervisor's memory), printing
   ``FAKE child pid=N`` / ``FAKE orphan pid=N``;
3. with ``--health-after S``: after S seconds serves ``/health`` (200) and ``/v1/models``
   on 127.0.0.1:PORT;
4. with ``--exit CODE``: after ``--exit-after S`` prints the rest of the capture and exits
   with CODE; otherwise it sleeps until signalled (``--ignore-term`` ignores SIGTERM).
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

SLEEPER = "import signal, time\n{ignore}\nwhile True:\n    time.sleep(1)\n"


def _sleeper(ignore_term: bool) -> str:
    ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN)" if ignore_term else ""
    return SLEEPER.format(ignore=ignore)


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
    p.add_argument("--ignore-term", action="store_true")
    p.add_argument("--child", action="store_true")
    p.add_argument("--child-ignores-term", action="store_true")
    p.add_argument("--orphan", action="store_true")
    p.add_argument("--echo-env", action="append", default=[])
    opts = p.parse_args(own)

    model = serve[0] if serve else "model"
    port = 8000
    for i, token in enumerate(serve):
        if token == "--port" and i + 1 < len(serve):
            port = int(serve[i + 1])

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
        orphan = subprocess.Popen([sys.executable, "-c", _sleeper(False)], start_new_session=True)
        print(f"FAKE orphan pid={orphan.pid}", flush=True)

    if opts.health_after is not None:
        time.sleep(opts.health_after)
        models = opts.models.split(",") if opts.models else [model]
        _serve_http(port, models)

    if opts.exit is not None:
        time.sleep(opts.exit_after)
        for line in tail:
            print(line)
        sys.stdout.flush()
        return opts.exit
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
