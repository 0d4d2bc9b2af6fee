"""``vtc --config FILE``: any file gives checked flags or one line naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.domain.flags.config_yaml import ConfigYamlError, import_config_yaml
from tui.store.config_file import load_config_file
from tui.store.server_state import ServerStateError, ServerStateFile

BAD: dict[str, tuple[bytes, str]] = {
    "latin1.yaml": ("model: caf\xe9\n".encode("latin-1"), "not UTF-8 text"),
    "broken.yaml": (b"model: [unclosed\n", "not valid YAML"),
    "list.yaml": (b"- a\n- b\n", "must be a mapping"),
    "bool-int.yaml": (b"model: m\nmax-num-seqs: true\n", "max-num-seqs: expected a value"),
    "zero.yaml": (b"model: m\nmax-model-len: 0\n", "must be a positive integer"),
    "huge.yaml": (b"model: m\nmax-model-len: " + b"9" * 400 + b"k\n", "(too large)"),
    "unknown.yaml": (b"model: m\nno-such-key: 1\n", "unrecognized arguments: --no-such-key 1"),
    "watermark.yaml": (b"model: m\nwatermark-config: {key: 42}\n", "vtc does not launch it"),
    "twice.yaml": (b"model: m\nmax_model_len: 1\nmax-model-len: 2\n", "also given as"),
    "big.yaml": (b"model: m\n#" + b"x" * (2 << 20) + b"\n", "larger than"),
    "config.json": (b'{"model": "m"}', "Config file must be of a yaml/yml type. json supplied"),
    "nan-in-json.yaml": (
        b'model: m\nspeculative-config: {"method": ngram, "k": [1, .nan]}\n',
        "speculative-config.k.1: not a finite number",
    ),
    "inf.yaml": (b"model: m\ngpu-memory-utilization: -.inf\n", "not a finite number"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_each_bad_config_file_is_one_line_naming_it(tmp_path: Path, name: str) -> None:
    data, fragment = BAD[name]
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ConfigYamlError) as err:
        load_config_file(path)
    line = str(err.value)
    assert line.startswith(str(path)) and "\n" not in line and fragment in line
    assert "42" not in line


def test_a_good_config_file_loads_with_its_secret_in_the_environment(tmp_path: Path) -> None:
    path = tmp_path / "serve.yml"
    path.write_text("model: m\nmax-model-len: 2k\napi-key: sk-abc\nseed: 3\n")
    result = load_config_file(path)
    assert result.flags.to_argv() == ["m", "--max-model-len", "2000", "--seed", "3"]
    assert result.secret_env == {"VLLM_API_KEY": "sk-abc"}
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ConfigYamlError, match="cannot read it"):
        load_config_file(missing)


def test_a_server_state_file_that_is_not_utf8_is_a_state_error(tmp_path: Path) -> None:
    path = tmp_path / "server.json"
    path.write_bytes(b'{"pid": 1, "argv": ["\xff"]}')
    with pytest.raises(ServerStateError, match="not UTF-8 text") as err:
        ServerStateFile(path).read()
    assert "\n" not in str(err.value)


_SCALAR = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(), st.text(max_size=20)
)
_KEY = st.one_of(
    st.sampled_from(
        [
            "model",
            "max-model-len",
            "max_num_seqs",
            "enforce-eager",
            "no-enforce-eager",
            "api-key",
            "hf-token",
            "served-model-name",
            "seed",
            "compilation-config",
            "config",
            "gpu-memory-utilization",
            "kv-cache-memory",
            "host",
            "port",
        ]
    ),
    st.text(max_size=10),
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(
        _KEY,
        st.one_of(
            _SCALAR,
            st.lists(_SCALAR, max_size=3),
            st.dictionaries(st.text(max_size=5), _SCALAR, max_size=3),
        ),
        max_size=6,
    )
)
# Found with the CPU made scarce: `hf-token: true` (vLLM's nargs="?" flag given bare).
@example({"model": 0, "hf-token": True})
def test_any_yaml_document_gives_flags_or_one_config_error(doc: dict[str, Any]) -> None:
    text = yaml.safe_dump(doc)
    try:
        result = import_config_yaml(text)
    except ConfigYamlError as exc:
        assert "\n" not in str(exc)
        return
    assert result.flags.model
