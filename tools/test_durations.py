"""Sum a pytest run's test times per file, per tier and per stage, from its JUnit XML.

    pytest --junitxml=run.xml ...           # any run, any workers
    python tools/test_durations.py run.xml [more.xml ...] [--top 15] [--stage NAME=run.xml]
    python tools/test_durations.py --collected ids.txt --stage NAME=run.xml ... [--also NAME=x.xml]

Each ``testcase`` element carries its file (``classname`` dotted, or ``file``) and its time
(set-up, call and tear-down together, as pytest writes it). The per-file table is what
docs/layout.md#tests shows; ``--stage NAME=FILE`` adds a line per stage of ``.ci/run``
(``.ci/run`` has each stage write its own). Test time summed over workers is not wall time:
with two workers the wall time is about half the sum.

``--collected`` takes ``pytest --collect-only -q -m ''``'s node ids and checks that the
``--stage`` runs partition them: every collected test in exactly one stage (exit 1 naming
those in none or in several). ``--also`` stages (a re-run, such as CI's full property run)
are listed but not counted.
"""

from __future__ import annotations

import argparse
import re
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Case:
    """One test's outcome as the JUnit XML records it."""

    file: str
    name: str
    seconds: float
    outcome: str


def _file_of(case: ET.Element) -> str:
    """The test's file, from ``file`` when pytest wrote it, else from the dotted classname."""
    if case.get("file"):
        return str(case.get("file"))
    parts = (case.get("classname") or "").split(".")
    # "tests.ui.test_ui_twin" or "tests.ui.test_ui_twin.TestClass": the module is the last
    # part that starts with "test_".
    modules = [i for i, part in enumerate(parts) if part.startswith("test_")]
    end = modules[0] + 1 if modules else len(parts)
    return "/".join(parts[:end]) + ".py"


def _outcome(case: ET.Element) -> str:
    for tag in ("failure", "error", "skipped"):
        if case.find(tag) is not None:
            return tag
    return "passed"


def read_cases(path: Path) -> list[Case]:
    """Every test case in one JUnit XML file."""
    root = ET.parse(path).getroot()
    return [
        Case(_file_of(c), c.get("name", ""), float(c.get("time") or 0.0), _outcome(c))
        for c in root.iter("testcase")
    ]


def wall_seconds(path: Path) -> float:
    """The run's own wall time (the testsuite's ``time``), 0 when absent."""
    root = ET.parse(path).getroot()
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    return float(suite.get("time") or 0.0) if suite is not None else 0.0


def per_file(cases: list[Case]) -> list[tuple[str, float, int]]:
    """(file, summed seconds, test count), slowest first."""
    seconds: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for case in cases:
        seconds[case.file] += case.seconds
        counts[case.file] += 1
    return sorted(((f, seconds[f], counts[f]) for f in seconds), key=lambda r: -r[1])


def _print_files(cases: list[Case], top: int) -> None:
    rows = per_file(cases)
    total = sum(r[1] for r in rows)
    print(f"{'file':<60} {'tests':>6} {'seconds':>9} {'share':>6}")
    for name, secs, count in rows[:top]:
        print(f"{name:<60} {count:>6} {secs:>9.1f} {100 * secs / (total or 1):>5.1f}%")
    rest = rows[top:]
    if rest:
        secs = sum(r[1] for r in rest)
        count = sum(r[2] for r in rest)
        print(f"{f'({len(rest)} more files)':<60} {count:>6} {secs:>9.1f}")
    print(f"{'total test time (summed over workers)':<60} {len(cases):>6} {total:>9.1f}")


def _print_tests(cases: list[Case], top: int) -> None:
    print(f"\nslowest {top} tests")
    for case in sorted(cases, key=lambda c: -c.seconds)[:top]:
        print(f"{case.seconds:>8.1f}  {case.file}::{case.name}")


def junit_key(nodeid: str) -> tuple[str, str]:
    """The (classname, name) pytest's JUnit XML writes for a node id (its ``mangle_test_address``:
    the file's path dotted without ``.py``, classes after it, the parameters kept)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    names[-1] += bracket + params
    return ".".join(names[:-1]), names[-1]


def _collection_skip(case: ET.Element) -> bool:
    """A module skipped while collected (``pytest.importorskip`` without its extra): pytest
    writes it as a test case named for the module, but it is no test."""
    skipped = case.find("skipped")
    return skipped is not None and skipped.get("message") == "collection skipped"


def _keys(path: Path) -> list[tuple[str, str]]:
    root = ET.parse(path).getroot()
    keys = {
        (c.get("classname", ""), c.get("name", ""))
        for c in root.iter("testcase")
        if not _collection_skip(c)
    }
    return sorted(keys)  # a test that failed and errored in tear-down is written twice


def check_partition(collected: Path, stages: list[str]) -> list[str]:
    """Problems, one line each: a collected test run by no stage, or by several."""
    ids = [line for line in collected.read_text().splitlines() if "::" in line]
    runs: dict[tuple[str, str], list[str]] = defaultdict(list)
    for spec in stages:
        name, _, file = spec.partition("=")
        for key in _keys(Path(file)):
            runs[key].append(name)
    problems = []
    for nodeid in ids:
        where = runs.pop(junit_key(nodeid), [])
        if len(where) != 1:
            problems.append(f"{nodeid}: run by {', '.join(where) or 'no stage'}")
    problems += [
        f"{'::'.join(key)}: run by {', '.join(names)} but not collected"
        for key, names in runs.items()
    ]
    if not ids:
        problems.append(f"{collected}: no node ids (pytest --collect-only -q -m '')")
    return problems


def _print_stages(stages: list[str]) -> None:
    print(f"\n{'stage':<28} {'tests':>6} {'passed':>7} {'skipped':>8} {'test s':>9} {'wall s':>8}")
    for spec in stages:
        name, _, file = spec.partition("=")
        cases = read_cases(Path(file))
        passed = sum(c.outcome == "passed" for c in cases)
        skipped = sum(c.outcome == "skipped" for c in cases)
        total = sum(c.seconds for c in cases)
        wall = wall_seconds(Path(file))
        print(f"{name:<28} {len(cases):>6} {passed:>7} {skipped:>8} {total:>9.1f} {wall:>8.1f}")


def main(argv: list[str] | None = None) -> int:
    """Print the per-file table (and per-test, per-stage tables) for the given runs."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("xml", nargs="*", type=Path, help="JUnit XML files of one run, merged")
    parser.add_argument("--top", type=int, default=15, help="files and tests to list")
    parser.add_argument("--stage", action="append", default=[], help="NAME=FILE, one per stage")
    parser.add_argument("--also", action="append", default=[], help="NAME=FILE, not partitioned")
    parser.add_argument("--collected", type=Path, help="node ids the stages must partition")
    args = parser.parse_args(argv)
    if not args.xml and not args.stage:
        parser.error("give at least one JUnit XML file or --stage NAME=FILE")
    cases = [case for path in args.xml for case in read_cases(path)]
    if cases:
        _print_files(cases, args.top)
        _print_tests(cases, args.top)
    if args.stage or args.also:
        _print_stages(args.stage + args.also)
    if args.collected is None:
        return 0
    problems = check_partition(args.collected, args.stage)
    for line in problems[:50]:
        print(line)
    print(f"tiers: {len(problems)} problem(s)" if problems else "tiers: every test in one stage")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
