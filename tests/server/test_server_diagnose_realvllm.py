"""The new diagnosis kinds against what the real CPU vLLM 0.32.0 prints (``vtc setup-cpu-vllm``).

Each case runs ``vllm serve`` with a broken setup that fails before any engine starts (a
missing model path, a tensor-parallel size the heads do not divide by, a config that needs
custom code, a tokenizer that cannot be built), feeds its combined output to
``vtc diagnose -`` and checks the kind and the fix. Slow (15-40 s each on two busy cores);
run under the shared lock: ``flock /tmp/vtc-realvllm.lock pytest -m realvllm <this file>``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tui.server.provision import find_provisioned

pytestmark = pytest.mark.realvllm

PROVISIONED = find_provisioned()
needs_vllm = pytest.mark.skipif(
    PROVISIONED is None, reason="real vLLM not provisioned (vtc setup-cpu-vllm)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(model: str, *args: str) -> str:
    """``vllm serve`` output (stdout and stderr), for a start that must fail by itself."""
    assert PROVISIONED is not None
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1")
    done = subprocess.run(
        [
            str(PROVISIONED.vllm),
            "serve",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            str(_free_port()),
            *args,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=600,
        check=False,
    )
    assert done.returncode != 0, "expected the start to fail"
    return done.stdout.decode("utf-8", errors="replace")


def _diagnose(log: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli", "diagnose", "-", "--json"],
        input=log.encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc: dict[str, object] = json.loads(done.stdout)
    return doc


def _model_copy(tmp_path: Path, name: str) -> Path:
    assert PROVISIONED is not None
    copy = tmp_path / name
    shutil.copytree(PROVISIONED.model, copy)
    return copy


@needs_vllm
def test_a_missing_model_path() -> None:
    doc = _diagnose(_serve("/nonexistent/vtc-no-such-model"))
    assert doc["kind"] == "model_not_found"
    assert doc["facts"]["model"] == "/nonexistent/vtc-no-such-model"  # type: ignore[index]


@needs_vllm
def test_tensor_parallel_size_the_heads_do_not_divide_by() -> None:
    assert PROVISIONED is not None
    doc = _diagnose(_serve(str(PROVISIONED.model), "--tensor-parallel-size", "3"))
    assert doc["kind"] == "tp_not_divisible"
    assert doc["fixes"][0]["set"] == {"tensor_parallel_size": 2}  # type: ignore[index]


@needs_vllm
def test_a_config_with_custom_code(tmp_path: Path) -> None:
    model = _model_copy(tmp_path, "custom-code")
    config = json.loads((model / "config.json").read_text())
    config |= {
        "model_type": "vtc_custom",
        "architectures": ["VtcForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_vtc.VtcConfig"},
    }
    (model / "config.json").write_text(json.dumps(config))
    (model / "configuration_vtc.py").write_text(
        "from transformers import LlamaConfig\n\n\nclass VtcConfig(LlamaConfig):\n"
        "    model_type = 'vtc_custom'\n"
    )
    doc = _diagnose(_serve(str(model)))
    assert doc["kind"] == "trust_remote_code_required"
    assert doc["fixes"][0]["set"] == {"extra_args": ["--trust-remote-code"]}  # type: ignore[index]


@needs_vllm
def test_a_tokenizer_that_cannot_be_built(tmp_path: Path) -> None:
    # No tokenizer.json and a class transformers does not have (with tokenizer.json present,
    # vLLM 0.32 ignores the class and starts).
    model = _model_copy(tmp_path, "bad-tokenizer")
    (model / "tokenizer.json").unlink()
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "NoSuchTokenizerFast"
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    doc = _diagnose(_serve(str(model)))
    assert doc["kind"] == "tokenizer_error"
    assert doc["fixes"] == []  # --trust-remote-code would not help: nothing to load
