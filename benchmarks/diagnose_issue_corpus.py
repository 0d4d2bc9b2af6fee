"""How often ``vtc diagnose --json`` is right on startup failures users posted in public issues.

    python benchmarks/diagnose_issue_corpus.py [--before ROOT]

For every fixture in ``tests/diagnosis/issues/`` (each cites its issue thread), the log body
goes through ``vtc diagnose LOG --json`` exactly as a user would run it (the CLI's own
function, once per log, in one process per code base), and the answer is scored against the
fixture's header: the right ``kind``, and, where one can be computed from the log, the right
fix (``fix.set``, or a value inside the fixture's ``fix-range``).

``--before ROOT``: also score another checkout of vtc (a folder holding its ``tui`` package,
e.g. ``git archive <commit> tui | tar -x -C ROOT``) and print both side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests" / "diagnosis"))

from diagnosis_corpus import ISSUES, Fixture, load_all  # noqa: E402

# Runs under the code base being scored: `vtc diagnose FILE --json` for each file, one JSON
# document (or the error) per line.
RUNNER = r"""
import contextlib, io, json, sys
from tui.app.cli import main
for path in sys.argv[1:]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            code = main(["diagnose", path, "--json"])
        except BaseException as exc:  # a crash is a wrong answer, not the end of the run
            code = repr(exc)
    try:
        doc = json.loads(out.getvalue())
    except ValueError:
        doc = None
    print(json.dumps({"path": path, "code": code, "doc": doc}))
"""


def run(code_root: Path, files: list[Path]) -> dict[str, dict[str, Any]]:
    """``vtc diagnose --json`` of each file, run by the ``tui`` under ``code_root``."""
    env = dict(os.environ, PYTHONPATH=str(code_root))
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, *map(str, files)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
        cwd=tempfile.gettempdir(),
    )
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {r["path"]: r for r in results}


def score(fixture: Fixture, doc: dict[str, Any] | None) -> tuple[bool, bool | None]:
    """(kind right, fix right): the fix is ``None`` where the fixture expects none."""
    if not doc:
        return False, (False if (fixture.fixes or fixture.fix_range) else None)
    kind_ok = doc.get("kind") == fixture.kind
    # An environment fix (VLLM_USE_FLASHINFER_SAMPLER=0) is scored with its variables.
    sets = [
        {**f.get("set", {}), **({"env": f["env"]} if f.get("env") else {})}
        for f in doc.get("fixes", [])
    ]
    if fixture.fix_range is not None:
        name, low, high = fixture.fix_range
        value = sets[0].get(name) if sets else None
        return kind_ok, isinstance(value, int | float) and low <= value <= high
    if not fixture.fixes:
        return kind_ok, None
    return kind_ok, kind_ok and sets[: len(fixture.fixes)] == fixture.fixes


def main() -> int:
    """Score the current code base (and ``--before``), print a table and the totals."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="another checkout's root (holds tui/)")
    parser.add_argument("--dir", type=Path, default=ISSUES, help="the fixtures' folder")
    args = parser.parse_args()
    fixtures = load_all(args.dir)
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for fixture in fixtures:
            body = Path(tmp) / f"{fixture.name}.log"
            body.write_text(fixture.text, encoding="utf-8")
            files.append(body)
        bases = {"after": ROOT} | ({"before": args.before} if args.before else {})
        answers = {name: run(root, files) for name, root in bases.items()}
    totals = {name: [0, 0, 0] for name in bases}  # kind right, fix right, fix computable
    print(f"{'fixture':36} {'expected kind':28} " + " ".join(f"{n:>28}" for n in bases))
    for fixture, path in zip(fixtures, files, strict=True):
        cells = []
        for name in bases:
            doc = answers[name][str(path)]["doc"]
            kind_ok, fix_ok = score(fixture, doc)
            totals[name][0] += kind_ok
            if fix_ok is not None:
                totals[name][2] += 1
                totals[name][1] += fix_ok
            got = (doc or {}).get("kind", "crash")
            mark = ("K" if kind_ok else "-") + {True: "F", False: "f", None: " "}[fix_ok]
            cells.append(f"{mark} {got:>25}")
        print(f"{fixture.name:36} {fixture.kind:28} " + " ".join(cells))
    print(f"\n{len(fixtures)} startup failures from public issue threads ({args.dir})")
    for name, (kinds, fixes, computable) in totals.items():
        print(
            f"{name:>6}: right kind {kinds}/{len(fixtures)}; right computed fix {fixes}/"
            f"{computable} (of those where one can be computed)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
