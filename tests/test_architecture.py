"""Architecture invariants: the UI boundary and the direction of dependencies."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from source_trees import parsed

PACKAGE = Path(__file__).resolve().parent.parent / "tui"


def _imports(path: Path) -> set[str]:
    tree = parsed(path)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _modules_outside(room: str) -> list[Path]:
    return [p for p in PACKAGE.rglob("*.py") if room not in p.relative_to(PACKAGE).parts[:1]]


def test_package_is_found() -> None:
    assert (PACKAGE / "ui").is_dir()
    assert len(_modules_outside("ui")) > 10


@pytest.mark.parametrize("path", _modules_outside("ui"), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_nothing_outside_ui_imports_textual(path: Path) -> None:
    offenders = {m for m in _imports(path) if m == "textual" or m.startswith("textual.")}
    assert not offenders, f"{path} imports {offenders}; only tui/ui may import textual"


@pytest.mark.parametrize("path", sorted((PACKAGE / "domain").rglob("*.py")), ids=lambda p: p.name)
def test_domain_imports_no_services_or_io(path: Path) -> None:
    forbidden_prefixes = (
        "tui.server",
        "tui.telemetry",
        "tui.load",
        "tui.sim",
        "tui.store",
        "tui.ui",
        "tui.session",
        "tui.app",
        "tui.cli",
        "httpx",
        "aiohttp",
        "psutil",
        "pynvml",
        "sqlite3",
        "subprocess",
        "socket",
    )
    bad = {m for m in _imports(path) if m.startswith(forbidden_prefixes)}
    assert not bad, f"domain module {path.name} imports {bad}"


def test_textual_boundary_check_catches_a_violation(tmp_path: Path) -> None:
    # The check above must be able to fail: feed it a module that does import textual.
    bad = tmp_path / "bad.py"
    bad.write_text("from textual.app import App\n")
    assert "textual.app" in _imports(bad)


# -- the sideways rules (issue: reshape the centre) ---------------------------------------------
def _tui_imports(path: Path) -> set[str]:
    return {m for m in _imports(path) if m == "tui" or m.startswith("tui.")}


def _room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


UI_MAY_IMPORT = ("tui.domain", "tui.session.port", "tui.ui")
# The console's only view of the services is the session port; nothing else crosses.
UI_KNOWN_DEBT: dict[str, set[str]] = {}  # empty: it only shrinks


@pytest.mark.parametrize("path", sorted((PACKAGE / "ui").rglob("*.py")), ids=lambda p: p.name)
def test_the_console_imports_only_the_domain_and_the_session_port(path: Path) -> None:
    allowed = UI_KNOWN_DEBT.get(str(path.relative_to(PACKAGE / "ui")), set())
    bad = {m for m in _tui_imports(path) if not m.startswith(UI_MAY_IMPORT)} - allowed
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: the UI sees only the port"


SESSION_MAY_IMPORT = ("tui.domain", "tui.session", "tui.server.backend", "tui.telemetry.poller")


@pytest.mark.parametrize("path", sorted((PACKAGE / "session").rglob("*.py")), ids=lambda p: p.name)
def test_services_import_only_the_domain_and_protocols_never_adapters_or_ui(path: Path) -> None:
    bad = {m for m in _tui_imports(path) if not m.startswith(SESSION_MAY_IMPORT)}
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: adapters come in from a mode"


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if p.relative_to(PACKAGE).parts[0] != "ui"],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_nothing_outside_the_console_imports_the_console(path: Path) -> None:
    bad = {m for m in _tui_imports(path) if _room(m) == "ui"}
    if path.relative_to(PACKAGE).parts[0] == "app":
        bad -= {"tui.ui.app"}  # the composition root opens the console
    assert not bad, f"{path.relative_to(PACKAGE)} imports the console: {bad}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "server").rglob("*.py")), ids=lambda p: p.name)
def test_the_server_room_never_imports_the_simulator(path: Path) -> None:
    bad = {m for m in _tui_imports(path) if _room(m) == "sim"}
    assert not bad, f"{path.relative_to(PACKAGE)} imports the simulator: {bad}"


def test_the_contract_checks_can_fail() -> None:
    # Each rule above must be able to fail: a module importing across every line.
    bad = PACKAGE.parent / "tests" / "__contract_probe__.py"
    try:
        bad.write_text("import tui.sim.catalog\nfrom tui.ui.app import VtcApp\n")
        found = _tui_imports(bad)
        assert {_room(m) for m in found} == {"sim", "ui"}
    finally:
        bad.unlink()


# -- the composition root (tui/app) and the direction between rooms -----------------------------
ROOT = "app"
ENTRY_MODULES = {"cli.py", "__init__.py", "__main__.py"}  # tui/cli.py: `python -m tui.cli`


def _room_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else ""


def room_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Room -> the other rooms its modules import (top-level modules of ``tui`` left out)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        room = _room_of(path) if root == PACKAGE else path.relative_to(root).parts[0]
        if not room or room.endswith(".py"):
            continue
        targets = {_room(m) for m in _tui_imports(path)} - {room, ""}
        graph.setdefault(room, set()).update(t for t in targets if (root / t).is_dir())
    return graph


def room_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle between rooms (``[a, b, a]``), or ``[]`` when the graph has none."""
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(room: str) -> list[str]:
        state[room] = 1
        path.append(room)
        for target in sorted(graph.get(room, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state and (found := visit(target)):
                return found
        path.pop()
        state[room] = 2
        return []

    for room in sorted(graph):
        if room not in state and (found := visit(room)):
            return found
    return []


def test_the_rooms_import_each_other_without_a_cycle() -> None:
    graph = room_graph()
    assert {"app", "modes", "tune", "session", "domain"} <= set(graph)
    assert room_cycle(graph) == [], f"a cycle between rooms: {' -> '.join(room_cycle(graph))}"


def test_the_cycle_check_can_fail(tmp_path: Path) -> None:
    for room, target in (("alpha", "beta"), ("beta", "gamma"), ("gamma", "alpha")):
        (tmp_path / room).mkdir()
        (tmp_path / room / "m.py").write_text(f"import tui.{target}.m\n")
    assert room_cycle(room_graph(tmp_path)) == ["alpha", "beta", "gamma", "alpha"]
    (tmp_path / "gamma" / "m.py").write_text("x = 1\n")
    assert room_cycle(room_graph(tmp_path)) == []


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if _room_of(p) not in ("", ROOT)],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_no_room_imports_the_composition_root(path: Path) -> None:
    bad = {m for m in _tui_imports(path) if _room(m) == ROOT or m == "tui.cli"}
    assert not bad, f"{path.relative_to(PACKAGE)} imports the composition root: {bad}"


@pytest.mark.parametrize("path", sorted((PACKAGE / "tune").rglob("*.py")), ids=lambda p: p.name)
def test_tune_never_imports_the_modes(path: Path) -> None:
    # modes build sessions and may use tune's pieces; the arrow never runs back up.
    bad = {m for m in _tui_imports(path) if _room(m) == "modes"}
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: the sweep's wiring is tui/app"


def test_only_entry_modules_sit_beside_the_rooms() -> None:
    loose = {p.name for p in PACKAGE.glob("*.py")} - ENTRY_MODULES
    assert not loose, f"tui/{loose} sit outside every room: put them in one (or in tui/app)"


# -- no circle between the modules of one room ----------------------------------------------------
# Circles still being removed on other branches this turn; the lead empties this at merge.
MODULE_CYCLE_DEBT: set[frozenset[str]] = {
    # the `ray` helper removes it (app/sweep.py <-> app/ray_sweep.py)
    frozenset({"tui.app.sweep", "tui.app.ray_sweep"}),
}


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of its own room it imports: every import, those inside functions
    and under ``TYPE_CHECKING`` too (``from pkg import mod`` names ``pkg.mod``, not ``pkg``)."""
    paths = {_module_name(p, root): p for p in sorted(root.rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = parsed(path)
        found: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                subs = {f"{node.module}.{alias.name}" for alias in node.names} & paths.keys()
                found.update(subs or {node.module})
        room = name.split(".")[:2]
        graph[name] = {m for m in found if m in paths and m != name and m.split(".")[:2] == room}
    return graph


def module_cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The import circles (strongly connected sets of two or more modules), each as a set."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_no_room_has_an_import_circle_between_its_modules() -> None:
    cycles = [c for c in module_cycles(module_graph()) if c not in MODULE_CYCLE_DEBT]
    assert not cycles, "import circles inside a room: " + "; ".join(
        " <-> ".join(sorted(c)) for c in cycles
    )


def test_the_module_circle_check_can_fail(tmp_path: Path) -> None:
    room = tmp_path / "tui" / "room"
    room.mkdir(parents=True)
    (tmp_path / "tui" / "__init__.py").write_text("")
    (room / "__init__.py").write_text("")
    (room / "a.py").write_text("from tui.room import b\n")
    (room / "b.py").write_text("def f():\n    from tui.room.c import g\n")
    (room / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import tui.room.a\n"
    )
    graph = module_graph(tmp_path / "tui")
    assert module_cycles(graph) == [frozenset({"tui.room.a", "tui.room.b", "tui.room.c"})]
    (room / "c.py").write_text("x = 1\n")
    assert module_cycles(module_graph(tmp_path / "tui")) == []


# -- the twin: one room above the simulator, below the services (issue 27) ------------------------
TWIN_MAY_IMPORT = (
    "tui.domain",
    "tui.sim",
    "tui.store",
    "tui.load",
    "tui.telemetry",
    "tui.server.log_excerpt",
    "tui.session.loads",
    "tui.twin",
)
TWIN_USERS = {"tune", "modes", "app", "twin"}  # the sweep, the mode builder, the root


@pytest.mark.parametrize("path", sorted((PACKAGE / "twin").rglob("*.py")), ids=lambda p: p.name)
def test_the_twin_imports_only_what_lies_below_it(path: Path) -> None:
    bad = {m for m in _tui_imports(path) if not m.startswith(TWIN_MAY_IMPORT)}
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}: the twin sits below services"


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if _room_of(p) not in TWIN_USERS | {""}],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_only_the_services_and_the_root_use_the_twin(path: Path) -> None:
    bad = {m for m in _tui_imports(path) if _room(m) == "twin"}
    assert not bad, f"{path.relative_to(PACKAGE)} imports the twin {bad}: it sits above sim"


TWIN_INSIDE = ("tui.twin.numerics", "tui.twin.fit")
"""The fit's insides: every other room reaches the twin through its entry points
(``predict``, ``calibrate``, ``validation``, ``service``, ``fidelity``)."""
TWIN_INSIDE_READERS = {"tui/tune/twin_profile.py": {"tui.twin.fit"}}  # INITIAL, a cold start


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(PACKAGE.rglob("*.py")) if _room_of(p) != "twin"],
    ids=lambda p: str(p.relative_to(PACKAGE)),
)
def test_the_twins_fit_and_numerics_are_used_only_inside_its_room(path: Path) -> None:
    # One twin runtime: a fit, a validation and scipy's numerics in one room, never a
    # second model beside it (what the room imports is checked above; this, who reads it).
    imports = _imports(path)
    inside = {m for m in imports if m.startswith(TWIN_INSIDE)}
    allowed = TWIN_INSIDE_READERS.get(str(path.relative_to(PACKAGE.parent)), set())
    assert inside <= allowed, f"{path.relative_to(PACKAGE)} reaches into the twin: {inside}"
    fits = {m for m in imports if m.startswith("scipy.optimize")}
    assert not fits, f"{path.relative_to(PACKAGE)} fits outside the twin's room: {fits}"


def test_the_twin_runs_on_the_load_generators_own_arrivals() -> None:
    # The twin is judged on the arrivals the real load uses: one function for both.
    assert "tui.load.arrivals" in _imports(PACKAGE / "sim" / "twin_load.py")
    assert "tui.load.arrivals" in _imports(PACKAGE / "load" / "schedule.py")
