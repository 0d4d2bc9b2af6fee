"""Introspecting the installed vLLM's serve flags: subprocess, cache, errors, and the real thing.

The unit tests drive :func:`introspect_vllm` with a fake interpreter (an executable Python
script that answers the ``version``/``dump`` modes with canned output). The ``realvllm``
tests ask the real CPU vLLM 0.32.0 (``vtc setup-cpu-vllm``) and prove that ServeFlags'
declarations match the installed vLLM.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from types import ModuleType
from typing import Any

import psutil
import pytest

from tui.domain.flags.config_yaml import load_config_mapping, vllm_config_args
from tui.domain.flags.serve import KV_CACHE_DTYPES, flag_specs
from tui.server.introspect import (
    SCRIPT,
    IntrospectError,
    cache_path,
    introspect_vllm,
    python_for_vllm,
    vllm_dist_version,
)
from tui.server.provision import find_provisioned

DOMAIN_TESTS = Path(__file__).resolve().parent.parent / "domain"
FIXTURE = DOMAIN_TESTS / "vllm_cli_fixture.json"

# The fake interpreter. Behaviour comes from files next to it, so one test can change it
# between calls: "version" (the dist version to report), "mode" (ok / not-installed /
# import-error / hang / garbage / old-schema); each dump appends a line to "dumps".
FAKE_PYTHON = """\
#!{python}
import json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
def read(name, default):
    try:
        with open(os.path.join(here, name)) as fh:
            return fh.read().strip()
    except OSError:
        return default
assert sys.argv[1].endswith("introspect_script.py"), sys.argv
what = sys.argv[2]
mode = read("mode", "ok")
if mode == "not-installed":
    print("vllm is not installed for " + sys.argv[0], file=sys.stderr)
    sys.exit(3)
if what == "version":
    print(json.dumps({{"schema": 1, "dist_version": read("version", "0.32.0+cpu")}}))
    sys.exit(0)
with open(os.path.join(here, "dumps"), "a") as fh:
    fh.write("dump\\n")
if mode == "import-error":
    print("Traceback (most recent call last):", file=sys.stderr)
    print("ImportError: libtorch_cpu.so: cannot open shared object file", file=sys.stderr)
    sys.exit(4)
if mode == "hang":
    with open(os.path.join(here, "pid"), "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(60)
if mode == "garbage":
    print("INFO 05-09 loading plugins")
    sys.exit(0)
with open({fixture!r}) as fh:
    data = json.load(fh)
if mode == "old-schema":
    data["schema"] = 0
print(json.dumps(data))
"""


def _executable(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    home = tmp_path / "venv" / "bin"
    home.mkdir(parents=True)
    return _executable(
        home / "python", FAKE_PYTHON.format(python=sys.executable, fixture=str(FIXTURE))
    )


def _dumps(fake: Path) -> int:
    marker = fake.parent / "dumps"
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def _set(fake: Path, name: str, value: str) -> None:
    (fake.parent / name).write_text(value)


# -- the subprocess and its cache ------------------------------------------------------------
def test_introspect_returns_the_dumped_flags(fake_python: Path, tmp_path: Path) -> None:
    cli = introspect_vllm(fake_python, cache_dir=tmp_path / "cache")
    assert cli.version == "0.32.0"
    assert cli.flag("max_model_len") is not None
    assert cli.unknown_options(["m", "--swap-space", "4"]) == ["--swap-space"]


def test_a_second_call_is_served_from_the_cache(fake_python: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = introspect_vllm(fake_python, cache_dir=cache)
    second = introspect_vllm(fake_python, cache_dir=cache)
    assert _dumps(fake_python) == 1
    assert second.flags == first.flags
    entry = cache_path(cache, str(fake_python), "0.32.0+cpu")
    assert entry.is_file()
    assert json.loads(entry.read_text())["dist_version"] == "0.32.0+cpu"


def test_a_new_vllm_version_is_introspected_again(fake_python: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    introspect_vllm(fake_python, cache_dir=cache)
    _set(fake_python, "version", "0.33.0")
    introspect_vllm(fake_python, cache_dir=cache)
    introspect_vllm(fake_python, cache_dir=cache)
    assert _dumps(fake_python) == 2
    assert len(list(cache.glob("*.json"))) == 2


def test_refresh_and_a_corrupt_entry_introspect_again(fake_python: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    introspect_vllm(fake_python, cache_dir=cache)
    introspect_vllm(fake_python, cache_dir=cache, refresh=True)
    assert _dumps(fake_python) == 2
    cache_path(cache, str(fake_python), "0.32.0+cpu").write_text("{truncated")
    cli = introspect_vllm(fake_python, cache_dir=cache)
    assert _dumps(fake_python) == 3
    assert cli.flag("--port") is not None


def test_the_cache_key_is_the_interpreter_path_not_its_symlink_target(tmp_path: Path) -> None:
    # every venv's bin/python links to one base interpreter; their vLLMs differ
    a = cache_path(tmp_path, "/venvs/a/bin/python", "0.32.0")
    b = cache_path(tmp_path, "/venvs/b/bin/python", "0.32.0")
    assert a != b
    assert a == cache_path(tmp_path, "/venvs/a/bin/python", "0.32.0")
    assert a != cache_path(tmp_path, "/venvs/a/bin/python", "0.32.1")


def test_an_unwritable_cache_still_returns_the_flags(fake_python: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    cli = introspect_vllm(fake_python, cache_dir=blocker / "introspect")
    assert cli.flag("--port") is not None


# -- failures ------------------------------------------------------------------------------------
def test_a_missing_python_is_reported(tmp_path: Path) -> None:
    with pytest.raises(IntrospectError) as err:
        introspect_vllm(tmp_path / "nope" / "python", cache_dir=tmp_path)
    assert err.value.kind == "python-missing"
    assert "cannot run" in str(err.value)


def test_a_non_executable_python_is_reported(tmp_path: Path) -> None:
    text_file = tmp_path / "python"
    text_file.write_text("not a program")
    with pytest.raises(IntrospectError) as err:
        introspect_vllm(text_file, cache_dir=tmp_path)
    assert err.value.kind == "python-missing"


def test_vllm_not_installed(fake_python: Path, tmp_path: Path) -> None:
    _set(fake_python, "mode", "not-installed")
    with pytest.raises(IntrospectError) as err:
        introspect_vllm(fake_python, cache_dir=tmp_path)
    assert err.value.kind == "vllm-missing"
    assert "vtc setup-cpu-vllm" in str(err.value)


def test_the_real_script_reports_vllm_missing_in_a_python_without_it(tmp_path: Path) -> None:
    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("this interpreter has vLLM installed")
    with pytest.raises(IntrospectError) as err:
        vllm_dist_version(sys.executable)
    assert err.value.kind == "vllm-missing"
    with pytest.raises(IntrospectError) as err:
        introspect_vllm(sys.executable, cache_dir=tmp_path)
    assert err.value.kind == "vllm-missing"


def test_an_import_error_carries_the_stderr_tail(fake_python: Path, tmp_path: Path) -> None:
    _set(fake_python, "mode", "import-error")
    with pytest.raises(IntrospectError) as err:
        introspect_vllm(fake_python, cache_dir=tmp_path)
    assert err.value.kind == "failed"
    assert "libtorch_cpu.so" in err.value.detail
    assert "exit 4" in str(err.value)
    assert not list(tmp_path.glob("*.json"))  # failures are not cached


def test_a_hang_times_out_and_the_process_is_killed(fake_python: Path, tmp_path: Path) -> None:
    _set(fake_python, "mode", "hang")
    with pytest.raises(IntrospectError) as err:
        introspect_vllm(fake_python, cache_dir=tmp_path, timeout_s=2)
    assert err.value.kind == "timeout"
    pid_file = fake_python.parent / "pid"
    if pid_file.exists():  # on a very loaded machine the fake may be killed before writing it
        pid = int(pid_file.read_text())
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("mode", ["garbage", "old-schema"])
def test_unexpected_output_is_reported(fake_python: Path, tmp_path: Path, mode: str) -> None:
    _set(fake_python, "mode", mode)
    with pytest.raises(IntrospectError) as err:
        introspect_vllm(fake_python, cache_dir=tmp_path)
    assert err.value.kind == "bad-output"


# -- helpers ---------------------------------------------------------------------------------------
def test_python_for_vllm_reads_the_shebang_then_a_sibling(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = _executable(bin_dir / "vllm", f"#!{sys.executable}\nprint('hi')\n")
    assert python_for_vllm(script) == Path(sys.executable)
    wrapper = _executable(bin_dir / "vllm-wrapper", '#!/bin/sh\nexec docker run vllm "$@"\n')
    assert python_for_vllm(wrapper) is None
    sibling = _executable(bin_dir / "python", f"#!{sys.executable}\n")
    assert python_for_vllm(wrapper) == sibling
    assert python_for_vllm(tmp_path / "missing" / "vllm") is None


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("vtc_introspect_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_never_imports_tui() -> None:
    source = SCRIPT.read_text()
    assert "import tui" not in source and "from tui" not in source


def test_script_json_safe_and_type_names() -> None:
    script = _load_script()

    class Mode(Enum):
        NONE = 0

    @dataclass
    class Config:
        mode: Mode = Mode.NONE
        sizes: frozenset[int] = frozenset({4, 1})

    assert script.json_safe(Config()) == {"mode": 0, "sizes": [1, 4]}
    assert script.json_safe(float("inf")) == "inf"
    assert script.json_safe({1: (2, 3)}) == {"1": [2, 3]}
    assert script.json_safe(object).startswith("<class")

    # vLLM's wrappers, re-created here: optional_type(int), parse_type(json.loads)
    def optional_type(return_type: Any) -> Any:
        def _optional_type(val: str) -> Any:
            return None if val in ("", "None") else return_type(val)

        return _optional_type

    def parse_type(return_type: Any) -> Any:
        def _parse_type(val: str) -> Any:
            return return_type(val)

        return _parse_type

    def human_readable_int(value: str) -> int:
        return int(value)

    assert script.type_name(optional_type(int)) == ("int", True)
    assert script.type_name(parse_type(json.loads)) == ("json", False)
    assert script.type_name(optional_type(human_readable_int)) == ("human_readable_int", True)
    assert script.type_name(lambda s: s.lower()) == ("str", False)
    assert script.type_name(None) == (None, False)


# -- the real vLLM ---------------------------------------------------------------------------------
PROVISIONED = find_provisioned()
needs_real_vllm = pytest.mark.skipif(
    PROVISIONED is None, reason="real vLLM not provisioned (vtc setup-cpu-vllm)"
)


@pytest.mark.realvllm
@needs_real_vllm
def test_real_vllm_flags_match_our_declarations(tmp_path: Path) -> None:
    assert PROVISIONED is not None
    cli = introspect_vllm(PROVISIONED.python, cache_dir=tmp_path, timeout_s=300)
    assert cli.version == "0.32.0"
    assert len(cli.flags) >= 300
    # Every spelling ServeFlags renders must be known, and mean the same flag.
    for spec in flag_specs():
        for spelling in spec.spellings:
            resolved = cli.resolve(spelling)
            assert resolved.status == "known", f"{spelling} unknown to vLLM {cli.version}"
            assert resolved.flag is not None and resolved.flag.dest == spec.name, spelling
        real = cli.flag(spec.name)
        assert real is not None
        if spec.kind == "bool":
            assert real.negation == "--no-" + spec.cli[2:], spec.name
        if spec.vllm_default is not None:
            assert real.default == spec.vllm_default, spec.name
    gpu = cli.flag("gpu_memory_utilization")
    logprobs = cli.flag("max_logprobs")
    kv_dtype = cli.flag("--kv-cache-dtype")
    assert gpu is not None and gpu.default == 0.92 and gpu.type_name == "float"
    assert logprobs is not None and logprobs.default == 20
    assert kv_dtype is not None and kv_dtype.choices == KV_CACHE_DTYPES
    mml = cli.flag("--max-model-len")
    assert mml is not None and mml.type_name == "human_readable_int_or_auto"
    assert "context length" in mml.help
    assert not cli.known("--swap-space")
    assert not cli.known("--disable-log-requests")
    assert cli.known("--enable-log-requests")
    kinds = {p.option: p.kind for p in cli.problems(["m", "--disable-cascade-attn", "--device"])}
    assert kinds == {"--disable-cascade-attn": "deprecated", "--device": "ambiguous"}
    # a second call is a cache hit and gives the same answer
    assert introspect_vllm(PROVISIONED.python, cache_dir=tmp_path).flags == cli.flags


@pytest.mark.realvllm
@needs_real_vllm
def test_real_vllm_expands_a_config_file_as_we_mirror_it(tmp_path: Path) -> None:
    assert PROVISIONED is not None
    config = tmp_path / "serve.yaml"
    config.write_text(
        textwrap.dedent(
            """\
            enable-prefix-caching: false
            enforce_eager: true
            max_model_len: 2k
            no-enable-chunked-prefill: true
            served-model-name: [a, b]
            compilation-config: {mode: 0, cudagraph_capture_sizes: [1, 2]}
            gpu-memory-utilization: 0.5
            kv_cache_memory_bytes: null
            allowed-origins: []
            """
        )
    )
    probe = (
        "import json, sys\n"
        "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
        "out = FlexibleArgumentParser().load_config_file(sys.argv[1])\n"
        "sys.stderr.write('ARGS=' + json.dumps(out) + '\\n')\n"
    )
    env = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"}
    result = subprocess.run(
        [str(PROVISIONED.python), "-c", probe, str(config)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(x for x in result.stderr.splitlines() if x.startswith("ARGS="))
    theirs = json.loads(line.removeprefix("ARGS="))
    assert vllm_config_args(load_config_mapping(config.read_text())) == theirs
