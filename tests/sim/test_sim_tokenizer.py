"""The simulator counts like vLLM when the model's ``tokenizer.json`` is at hand.

The model folder is :func:`fakes.tiny_model.write_tiny_model`'s, whose tokenizer is the
provisioned tiny Llama's (same corpus, trainer and special tokens; the test checks the
ids against what the real vLLM 0.32 answered, ``tests/sim/captures/tok*.json``). The
server is a real ``python -m tui.sim serve`` process.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.sim_process import SimProcess, sim_process
from fakes.tiny_model import write_tiny_model
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_profiles import examples
from tokenizers import Tokenizer

from tui.sim.hf_tokenizer import HfTokenizer
from tui.sim.model_files import model_folder
from tui.sim.tokenizer import ApproxTokenizer

CAPTURES = Path(__file__).resolve().parent / "captures"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="module")
def server(tiny: Path) -> Iterator[SimProcess]:
    with sim_process(str(tiny), "--sim-speed", "50", "--max-model-len", "4096") as sim:
        sim.wait_ready()
        yield sim


def _post(sim: SimProcess, path: str, body: dict[str, object]) -> dict[str, object]:
    r = sim.client.post(path, json=body)
    assert r.status_code == 200, r.text
    data = r.json()
    assert isinstance(data, dict)
    return data


def test_the_startup_log_says_which_tokenizer_counts(server: SimProcess, tiny: Path) -> None:
    line = server.wait_for("vtc-sim: Counting tokens with")
    assert str(tiny / "tokenizer.json") in line


def test_tokenize_matches_what_real_vllm_answered(server: SimProcess) -> None:
    for name, body in (
        ("tok1.json", {"prompt": "hello there world"}),
        (
            "tok2.json",
            {"prompt": "hello there world", "add_special_tokens": False, "return_token_strs": True},
        ),
        ("tok3.json", {"messages": [{"role": "user", "content": "hello there"}]}),
    ):
        real = json.loads((CAPTURES / name).read_text())
        assert _post(server, "/tokenize", body) == real


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.text(max_size=200))
def test_tokenize_count_equals_tokenizer_json_for_any_text(
    server: SimProcess, tiny: Path, text: str
) -> None:
    reference = Tokenizer.from_file(str(tiny / "tokenizer.json"))
    ids = reference.encode(text).ids
    body = _post(server, "/tokenize", {"prompt": text})
    assert body["count"] == len(ids) and body["tokens"] == ids
    plain = reference.encode(text, add_special_tokens=False).ids
    assert _post(server, "/tokenize", {"prompt": text, "add_special_tokens": False})["tokens"] == (
        plain
    )
    assert _post(server, "/detokenize", {"tokens": plain})["prompt"] == reference.decode(
        plain, skip_special_tokens=False
    )


def test_usage_counts_the_same_ids(server: SimProcess, tiny: Path) -> None:
    reference = Tokenizer.from_file(str(tiny / "tokenizer.json"))
    prompt = "the cache holds keys and values for every layer"
    body = _post(server, "/v1/completions", {"prompt": prompt, "max_tokens": 3})
    usage = body["usage"]
    assert isinstance(usage, dict)
    assert usage["prompt_tokens"] == len(reference.encode(prompt).ids)
    chat = _post(
        server,
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 2},
    )
    real = json.loads((CAPTURES / "tok3.json").read_text())
    chat_usage = chat["usage"]
    assert isinstance(chat_usage, dict) and chat_usage["prompt_tokens"] == real["count"]


def _bench_random_prompts(tok: Tokenizer, n: int, length: int, prefix: int, seed: int) -> list[str]:
    """``vllm bench serve``'s random dataset (reference 4.5): runs of consecutive ids."""
    rng = random.Random(seed)
    special = {0, 1, 2, 3, 4, 5}
    allowed = [i for i in range(tok.get_vocab_size()) if i not in special]
    shared = [rng.choice(allowed) for _ in range(prefix)]
    prompts = []
    for _ in range(n):
        offset = rng.randrange(len(allowed))
        body = [allowed[(offset + i) % len(allowed)] for i in range(length)]
        prompts.append(tok.decode(shared + body))
    return prompts


def _hit_rate(sim: SimProcess, prompts: list[str]) -> float:
    def counters() -> tuple[float, float]:
        text = sim.client.get("/metrics").text
        values = {}
        for line in text.splitlines():
            if line.startswith(("vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total")):
                values[line.split("{", 1)[0]] = float(line.rsplit(" ", 1)[1])
        return values["vllm:prefix_cache_queries_total"], values["vllm:prefix_cache_hits_total"]

    q0, h0 = counters()
    for prompt in prompts:
        _post(sim, "/v1/completions", {"prompt": prompt, "max_tokens": 1, "ignore_eos": True})
    q1, h1 = counters()
    return (h1 - h0) / (q1 - q0)


def test_prefix_hits_follow_the_prompts(tiny: Path) -> None:
    """Random prompts rarely share blocks (real vLLM: 10-24%); a shared prefix does."""
    tok = Tokenizer.from_file(str(tiny / "tokenizer.json"))
    with sim_process(str(tiny), "--sim-speed", "50", "--max-model-len", "4096") as sim:
        sim.wait_ready()
        random_rate = _hit_rate(sim, _bench_random_prompts(tok, 60, 256, 0, seed=1))
        shared_rate = _hit_rate(sim, _bench_random_prompts(tok, 60, 64, 192, seed=2))
    assert random_rate < 0.30
    assert shared_rate > 0.55
    assert shared_rate > 2 * random_rate


def test_models_without_files_count_approximately_and_say_so() -> None:
    with sim_process("meta-llama/Llama-3.2-1B-Instruct", "--sim-speed", "50") as sim:
        line = sim.wait_for("simulator's approximation", 60)
        assert "WARNING" in line and "vtc-sim: no local folder" in line


def test_hub_cache_snapshots_are_found(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub = tmp_path / "hub"
    snapshot = hub / "models--org--tiny" / "snapshots" / "abc123"
    write_tiny_model(snapshot)
    (hub / "models--org--tiny" / "refs").mkdir()
    (hub / "models--org--tiny" / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(hub))
    assert model_folder("org/tiny") == snapshot
    assert model_folder("org/absent") is None
    tok = HfTokenizer.from_dir(snapshot)
    assert tok.prompt_ids("hello there world") == [0, 263, 286, 84, 267, 265, 283, 292, 348]


def test_approximate_tokenizer_is_stable() -> None:
    tok = ApproxTokenizer(vocab_size=128256)
    ids = tok.prompt_ids("alpha beta, gamma")
    assert ids[0] == tok.bos_id and len(ids) == 5
    assert tok.decode(ids) == "alpha beta, gamma"
