"""The model's own tokenizer.json behind the prompt builder's protocol, and the fallback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tui.domain.workload import LoadSpec
from tui.load.prompts import ApproxTokenizer, random_prompts
from tui.load.tokenizer import APPROX_NAME, HfTokenizer, hub_snapshot, load_tokenizer

tokenizers = pytest.importorskip("tokenizers")

VOCAB = {"<s>": 0, "</s>": 1, "<pad>": 2, "<unk>": 3, "<extra>": 4}
VOCAB.update({w: i + 5 for i, w in enumerate(["hello", "world", "the", "of", "and", ",", "."])})


def write_tokenizer(folder: Path, config: dict[str, object] | None = None) -> Path:
    """A word-level tokenizer.json with a BOS post-processor, like a Llama one."""
    from tokenizers import AddedToken, Tokenizer, models, pre_tokenizers, processors

    tok = Tokenizer(models.WordLevel(VOCAB, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.add_special_tokens([AddedToken(t, special=True) for t in ("<s>", "</s>", "<pad>")])
    tok.add_tokens([AddedToken("<extra>", special=True)])
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    if config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_protocol_answers(tmp_path: Path) -> None:
    folder = write_tokenizer(
        tmp_path / "m", {"bos_token": "<s>", "eos_token": {"content": "</s>"}, "pad_token": "<pad>"}
    )
    tok = HfTokenizer.from_dir(folder)
    assert tok.vocab_size == len(VOCAB)
    # Only the tokens the config names are special (the added "<extra>" is not).
    assert sorted(tok.all_special_ids) == [0, 1, 2]
    assert tok.num_special_tokens_to_add() == 1  # the BOS of the template
    assert tok.encode("hello world") == [5, 6]
    assert tok.encode("hello world", add_special_tokens=True) == [0, 5, 6]
    # transformers decodes with skip_special_tokens=False: specials stay in the text.
    assert tok.decode([0, 5, 6, 1]) == "<s> hello world </s>"
    assert tok.count("the of and") == 3


def test_without_config_added_special_tokens_count(tmp_path: Path) -> None:
    tok = HfTokenizer.from_dir(write_tokenizer(tmp_path / "m"))
    assert sorted(tok.all_special_ids) == [0, 1, 2, 4]


def test_extra_special_tokens_and_cleanup(tmp_path: Path) -> None:
    config = {
        "bos_token": "<s>",
        "extra_special_tokens": ["<extra>"],
        "clean_up_tokenization_spaces": True,
    }
    tok = HfTokenizer.from_dir(write_tokenizer(tmp_path / "m", config))
    assert sorted(tok.all_special_ids) == [0, 4]
    assert tok.decode([5, 10, 6, 11]) == "hello, world."  # " ," and " ." cleaned up


def test_random_prompts_hit_their_token_counts(tmp_path: Path) -> None:
    tok = HfTokenizer.from_dir(write_tokenizer(tmp_path / "m", {"bos_token": "<s>"}))
    spec = LoadSpec(input_len=21, output_len=4, prefix_len=5, num_prompts=6, seed=2)
    prompts = random_prompts(spec, tok)
    for p in prompts:
        # prefix + (21 − 1 BOS) sampled tokens, as RandomDataset promises.
        assert p.prompt_len == 5 + 20
        assert len(tok.encode(p.prompt)) == 25


def test_load_tokenizer_prefers_the_flag_then_the_model(tmp_path: Path) -> None:
    model = write_tokenizer(tmp_path / "model", {"bos_token": "<s>"})
    other = write_tokenizer(tmp_path / "other", {"bos_token": "<s>"})
    tok, name = load_tokenizer(str(model))
    assert isinstance(tok, HfTokenizer) and name == str(model)
    _, name = load_tokenizer(str(model), str(other))
    assert name == str(other)


def test_fallback_to_the_approximation(tmp_path: Path) -> None:
    tok, name = load_tokenizer(str(tmp_path / "nothing-here"))
    assert isinstance(tok, ApproxTokenizer) and name == APPROX_NAME
    tok, name = load_tokenizer(None)
    assert isinstance(tok, ApproxTokenizer)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "tokenizer.json").write_text("{not json", encoding="utf-8")
    assert isinstance(load_tokenizer(str(broken))[0], ApproxTokenizer)


def test_hub_cache_lookup_never_downloads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "hub"
    snap = cache / "models--org--tiny" / "snapshots" / "abc123"
    write_tokenizer(snap, {"bos_token": "<s>"})
    assert hub_snapshot("org/tiny", cache) == snap
    assert hub_snapshot("org/absent", cache) is None
    assert hub_snapshot("/abs/path", cache) is None
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    tok, name = load_tokenizer("org/tiny")
    assert isinstance(tok, HfTokenizer) and name == str(snap)
