"""Speculative decoding refused at start: vLLM's SpeculativeConfig validation, by version.

Texts (``vllm/config.py`` SpeculativeConfig before 0.10, ``vllm/config/speculative.py``
after; ``vllm/config/vllm.py`` for the token budget):

- 0.5-0.7 ``Expected both speculative_model and num_speculative_tokens to be provided, but
  found speculative_model=X and num_speculative_tokens=N`` (also what an MLP speculator
  with too many tokens said, vLLM issue 5893);
- 0.8+ ``num_speculative_tokens must be provided with speculative model unless the draft
  model config contains an n_predict parameter.``, later ``A speculative model was provided,
  but `num_speculative_tokens` was not provided`` and ``num_speculative_tokens was provided
  but without speculative model.``; ``Unsupported speculative method: 'x'``; ngram's ``Either
  prompt_lookup_max or prompt_lookup_min must be provided``; suffix decoding's ``Arctic
  Inference is required for suffix decoding`` (``config/speculative.py``);
- 0.5+ ``This speculative model supports a maximum of num_speculative_tokens=3, but 4 were
  provided.``; MTP (0.9+) ``num_speculative_tokens:3 must be divisible by n_predict=2``;
- 0.6 ``speculative_draft_tensor_parallel_size=4 cannot be other value than 1`` (vLLM issue
  10483), 0.8+ ``draft_tensor_parallel_size=2 cannot be other value than 1 or target model
  tensor_parallel_size=4``;
- ngram: ``prompt_lookup_min=5 must be <= prompt_lookup_max=3``;
  0.6-0.7 ``Expected num_speculative_tokens to be greater than zero (0).``;
- V1 0.8-0.11: ``Speculative decoding with draft model is not supported yet. Please consider
  using other speculative decoding methods such as ngram, medusa, eagle, or deepseek_mtp.``
  (0.8 ``engine/arg_utils.py`` V1 oracle; 0.9-0.11 SpeculativeConfig; vLLM issue 26547),
  ``VLLM_USE_V1=1 is not supported with Speculative Decoding`` (0.8-0.9, forced V1); before
  0.10 the V0 engine still runs a draft model (``VLLM_USE_V1=0``);
  0.7-0.9 ``Chunked prefill and EAGLE are not compatible``; ``Eagle3 is only supported for
  [...] models``;
- 0.26 (``config/vllm.py`` ``_set_max_num_scheduled_tokens``, vLLM issue 50708):
  ``max_num_scheduled_tokens is set to -1792, which does not allow any tokens to be
  scheduled`` (the drafts' slots, ``max_num_seqs`` of them, eat the whole token budget);
- the draft's vocabulary: V0 (0.5-0.10 ``spec_decode/spec_decode_worker.py`` ``_vocab_size``)
  ``assert all(vocab_sizes[0] == vocab_size for vocab_size in vocab_sizes)`` (vLLM issue 14939),
  later ``Target and draft model should have the same vocabulary size. Target model
  vocab_size=X. Draft model vocab_size=Y.`` (``config/speculative.py``
  ``verify_equal_vocab_size_if_draft_model``); ``'tensor_parallel_size' is not a valid
  argument in the speculative_config. Please pass 'draft_tensor_parallel_size' instead.``;
- a key the version does not know: 0.8 ``SpeculativeConfig.__init__() got an unexpected
  keyword argument 'ngram_prompt_lookup_max'`` (the 0.6-0.7 name of ``prompt_lookup_max``);
  0.10.2's ``'SpeculativeConfig' object has no attribute 'get'`` (vLLM issue 24888, fixed by
  PR 25142: upgrade);
- a pydantic ``validation error for SpeculativeConfig`` block (0.10+).

Fixes rewrite the run's own speculative settings (its ``--speculative-config`` JSON, or the
0.5-0.7 separate flags) with the value the message names; where no value fixes it, the one
fix that can work is serving without speculative decoding, offered when the run's flags are
known (a pasted log's settings cannot be removed by a flag).
"""

from __future__ import annotations

import json
from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import before, extra_with, make
from tui.server.diagnose.reading import LogView, group_text, loose, tolerant

V1_ENV: Final = "VLLM_USE_V1"
_SPEC_OPTIONS: Final = {"--speculative-config", "-sc"}
_RULES: Final = tolerant(
    loose(
        r"(?P<both>Expected both speculative_model and num_speculative_tokens to be provided)|"
        r"(?P<missing>num_speculative_tokens must be provided with speculative model|"
        r"A speculative model was provided, but .?num_speculative_tokens.? was not provided|"
        r"num_speculative_tokens was provided but without speculative model)|"
        r"(?P<max>This speculative model supports a maximum of num_speculative_tokens ?= ?"
        r"(?P<maxn>\d+), but (?P<given>\d+) were provided)|"
        r"(?P<div>num_speculative_tokens:? ?=? ?(?P<divn>\d+) must be divisible by "
        r"n_predict ?= ?(?P<np>\d+))|"
        r"(?P<dtp>(?P<dtpname>(?:speculative_)?draft_tensor_parallel_size) ?= ?(?P<dtpn>\d+) "
        r"cannot be other value than 1)|"
        r"(?P<ngram>prompt_lookup_min ?= ?(?P<lmin>\d+) must be <= prompt_lookup_max ?= ?"
        r"(?P<lmax>\d+))|"
        r"(?P<zero>Expected num_speculative_tokens to be greater than zero)|"
        r"(?P<draft>Speculative decoding with draft model is not supported yet|"
        r"Draft model speculative decoding (?:is )?not supported|"
        r"VLLM_USE_V1=1 is not supported with Speculative Decoding)|"
        r"(?P<eagle>Chunked prefill and EAGLE are not compatible|Eagle3 is only supported for)|"
        r"(?P<budget>max_num_scheduled_tokens is set to (?P<budgetn>-?\d+), which does not allow "
        r"any tokens to be scheduled)|"
        r"(?P<other>Unsupported speculative method: \S{1,40}|"
        r"Speculative decoding (?:does not (?:yet )?support|is not (?:yet )?supported (?:with|for|"
        r"on)|requires) [^.]{1,80}|"
        r"Either prompt_lookup_max or prompt_lookup_min must be provided|"
        r"Arctic Inference is required for suffix decoding)|"
        r"(?P<vocab>assert all\(vocab_sizes\[0\] == vocab_size for vocab_size in vocab_sizes\)|"
        r"Target and draft model should have the same vocabulary size|"
        r"draft model vocab(?:ulary)? size \S{0,20} does not match)|"
        r"(?P<tpkey>.?tensor_parallel_size.? is not a valid argument in the speculative_config)|"
        r"(?P<key>SpeculativeConfig(?:\.__init__)?\(\) got an unexpected keyword argument "
        r"\W?(?P<keyname>\w+)|.?SpeculativeConfig.? object has no attribute .?get)|"
        r"(?P<pyd>validation errors? for SpeculativeConfig)"
    ),
    "speculative",
    "num_speculative_tokens",
    "draft_tensor_parallel_size",
    "prompt_lookup",
    "EAGLE",
    "Eagle3",
    "max_num_scheduled_tokens",
    "Arctic Inference",
    "vocab_sizes",
    "vocabulary size",
)
# argparse refusing --speculative-config's JSON: 0.8-0.9 (type=json.loads) "argument
# --speculative-config: invalid loads value: '{model: x}'", 0.10+ "argument
# --speculative-config: Value {...} cannot be converted to <function loads at 0x...>." (a
# launcher that escaped or dropped the JSON's quotes; eugr/spark-vllm-docker issues 111, 163).
_JSON: Final = tolerant(
    loose(
        r"(?P<text>(?:argument (?:--speculative[-_]config|-sc)\S{0,10}: )?Value \S?\{"
        r"[^{}]{0,400}?(?:speculative|method|\"?model)[^{}]{0,400}?\}? cannot be converted to "
        r"<function|argument (?:--speculative[-_]config|-sc)\S{0,10}: invalid loads value)"
    ),
    "cannot be converted to",
    "invalid loads value",
)


def spec_config(log: LogView) -> dict[str, Any] | None:
    """The run's speculative config: its flags' ``--speculative-config`` JSON, else the
    ``speculative_config`` dict the log's non-default args show."""
    if log.flags is not None:
        extra = log.flags.extra_args
        for i, token in enumerate(extra):
            name, eq, value = token.partition("=")
            if name.replace("_", "-") in _SPEC_OPTIONS:
                text = value if eq else (extra[i + 1] if i + 1 < len(extra) else "")
                try:
                    parsed = json.loads(text)
                except ValueError:
                    return None
                return parsed if isinstance(parsed, dict) else None
    logged = log.non_default_args.get("speculative_config")
    return dict(logged) if isinstance(logged, dict) else None


def _with(log: LogView, title: str, **changes: Any) -> Fix | None:
    """A fix that rewrites the run's speculative config (or the 0.5-0.7 flag) with changes."""
    cfg = spec_config(log)
    if cfg is not None:
        new = {**cfg, **changes}
        text = json.dumps(new, separators=(",", ":"))
        return Fix(title=title, set=extra_with(log, _SPEC_OPTIONS, "--speculative-config", text))
    legacy = {
        "num_speculative_tokens": "--num-speculative-tokens",
        "draft_tensor_parallel_size": "--speculative-draft-tensor-parallel-size",
    }
    if len(changes) == 1 and _legacy_flags(log):
        ((key, value),) = changes.items()
        if key in legacy:
            option = legacy[key]
            return Fix(title=title, set=extra_with(log, {option}, option, str(value)))
    return None


def _legacy_flags(log: LogView) -> bool:
    """Whether the run used 0.5-0.7's separate ``--speculative-model`` style flags."""
    if log.namespace_args.get("speculative_model"):
        return True
    extra = log.flags.extra_args if log.flags is not None else ()
    return any(t.replace("_", "-").startswith("--speculative-model") for t in extra)


def _without(log: LogView) -> Fix | None:
    """Serve without speculative decoding: the run's ``--speculative-config`` removed."""
    if log.flags is None:
        return None
    extra = list(log.flags.extra_args)
    out: list[str] = []
    skip = False
    for token in extra:
        if skip:
            skip = False
            continue
        name, eq, _ = token.partition("=")
        if name.replace("_", "-") in _SPEC_OPTIONS:
            skip = not eq
            continue
        out.append(token)
    if len(out) == len(extra):
        return None
    return Fix(
        title="Serve without speculative decoding (remove --speculative-config)",
        set={"extra_args": tuple(out)},
    )


# Keys of the speculative config under their older (or mistaken) names, and today's names.
_RENAMED: Final = {
    "tensor_parallel_size": "draft_tensor_parallel_size",
    "speculative_draft_tensor_parallel_size": "draft_tensor_parallel_size",
    "ngram_prompt_lookup_max": "prompt_lookup_max",
    "ngram_prompt_lookup_min": "prompt_lookup_min",
    "speculative_model": "model",
}


def _renamed(log: LogView, key: str) -> Fix | None:
    """The run's speculative config with ``key`` under the name this vLLM reads."""
    cfg = spec_config(log) or {}
    new_key = _RENAMED.get(key)
    if new_key is None or key not in cfg:
        return None
    rest = {k: v for k, v in cfg.items() if k != key}
    text = json.dumps({**rest, new_key: cfg[key]}, separators=(",", ":"))
    return Fix(
        title=f"Name {key} {new_key} in --speculative-config",
        set=extra_with(log, _SPEC_OPTIONS, "--speculative-config", text),
    )


def _budget_fix(log: LogView, scheduled: int) -> Fix | None:
    """max_num_batched_tokens = the drafts' slots plus vLLM's smallest default budget."""
    mnbt = log.value("max_num_batched_tokens")
    if not isinstance(mnbt, int) or isinstance(mnbt, bool) or scheduled >= 0:
        return None
    new = mnbt - scheduled + 2048
    return Fix(
        title=f"Raise max_num_batched_tokens from {mnbt} to {new} (room for the drafts' "
        f"{mnbt - scheduled} slots and 2048 tokens)",
        set={"max_num_batched_tokens": new},
    )


def _fixes(log: LogView, m: Any) -> tuple[list[Fix], dict[str, Any]]:
    """Value fixes for the rule that failed, and the numbers read."""
    facts: dict[str, Any] = {}
    fix: Fix | None = None
    if m.group("max"):
        top, given = int(m.group("maxn")), int(m.group("given"))
        facts.update(max_speculative_tokens=top, num_speculative_tokens=given)
        fix = _with(log, f"Lower num_speculative_tokens to {top}", num_speculative_tokens=top)
    elif m.group("div"):
        n, npred = int(m.group("divn")), int(m.group("np"))
        good = max(npred, n // npred * npred)
        facts.update(num_speculative_tokens=n, n_predict=npred)
        fix = _with(log, f"Set num_speculative_tokens to {good}", num_speculative_tokens=good)
    elif m.group("dtp"):
        facts["draft_tensor_parallel_size"] = int(m.group("dtpn"))
        fix = _with(log, "Set the draft's tensor parallel size to 1", draft_tensor_parallel_size=1)
    elif m.group("ngram"):
        lmin, lmax = int(m.group("lmin")), int(m.group("lmax"))
        facts.update(prompt_lookup_min=lmin, prompt_lookup_max=lmax)
        fix = _with(log, f"Set prompt_lookup_min to {lmax}", prompt_lookup_min=lmax)
    elif m.group("budget"):
        scheduled = int(m.group("budgetn"))
        facts["max_num_scheduled_tokens"] = scheduled
        fix = _budget_fix(log, scheduled)
    elif m.group("tpkey"):
        fix = _renamed(log, "tensor_parallel_size")
    elif m.group("keyname"):
        fix = _renamed(log, m.group("keyname"))
    elif m.group("draft") and before(log.version, (0, 10)):
        # 0.8-0.9 still ship the V0 engine, which runs a draft model.
        fix = Fix(
            title=f"Run the V0 engine, which has draft models: set {V1_ENV}=0", env={V1_ENV: "0"}
        )
    fixes = [fix] if fix is not None else []
    without = _without(log)
    if without is not None:
        fixes.append(without)
    return fixes, facts


def speculative_json_error(log: LogView) -> Diagnosis | None:
    """argparse could not read ``--speculative-config`` as JSON (before the generic
    invalid-value reader, which would name it an invalid flag value)."""
    found = log.find(_JSON)
    if found is None:
        return None
    m, evidence = found
    text = group_text(m)
    without = _without(log)
    return make(
        log,
        "speculative_config_error",
        f"--speculative-config is not valid JSON ({text}); quote the JSON whole for the shell "
        "(single quotes around double-quoted keys), with no escaped quotes or commas",
        evidence,
        {"error": text},
        [without] if without is not None else [],
    )


def speculative_config_error(log: LogView) -> Diagnosis | None:
    """vLLM refused the speculative decoding settings before starting the engine."""
    found = log.find(_RULES)
    if found is None:
        return None
    m, evidence = found
    fixes, facts = _fixes(log, m)
    text = group_text(m, next(k for k, v in m.groupdict().items() if v and k[0] != "_"))
    facts["error"] = text
    remedy = (
        "the fix corrects it"
        if fixes
        else "the draft must use the target's tokenizer (same vocabulary size): choose a draft "
        "of the same model family, or remove --speculative-config"
        if m.group("vocab")
        else "no flag computed from this log fixes it: correct or remove --speculative-config"
    )
    return make(
        log,
        "speculative_config_error",
        f"vLLM refused the speculative decoding settings: {text}; {remedy}",
        evidence,
        facts,
        fixes,
    )
