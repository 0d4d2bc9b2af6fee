"""vLLM's rules on the ``vllm serve`` flags that need nothing but their values, in vLLM's
words (``vllm-0.32-reference.md`` sections 1.3-1.5): the quantization methods, the batch
sizes, and the options vtc refuses in the extra arguments. :class:`~tui.domain.flags.serve.
ServeFlags` applies them on every construction."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tui.domain.flags.vllm_tables import default_cli
from tui.domain.vllm_quantization import Quantization
from tui.domain.vllm_release import PROVISIONED, RELEASES

QUANTIZATION_METHODS = PROVISIONED.quantization.methods
"""The provisioned release's methods (the form's suggestions); each release record holds its
own (:mod:`tui.domain.vllm_quantization`)."""


# Options that take a launch out of vtc's hands when passed through in the extra args.
_NOT_IN_EXTRA_ARGS: Mapping[str, str] = {
    "model": "the model is the form's model field (vLLM would move this one in front of it "
    "and refuse the other)",
    "config": "vLLM would read the file behind the form's back; import it with "
    "`vtc --config FILE` so its values are checked",
    "help": "vLLM would print its help and exit: the server never starts",
}


def quantization_problems(
    q: str | None, extra_args: Iterable[str], quantization: Quantization | None = None
) -> list[str]:
    """vLLM's refusals of a ``--quantization`` method (unknown, or deprecated unless allowed).

    ``quantization``: the methods of the release that will serve; ``None`` (the version is
    not known yet): a method any supported release accepts passes, refused as deprecated
    only where every release that has it deprecates it; the release's own check
    (:mod:`tui.domain.flags.validation`) follows once the version is known.
    """
    if q is None:
        return []
    records = _records(quantization)
    methods = tuple(dict.fromkeys(m for r in records for m in r.methods))
    if q not in methods:
        return [f"Unknown quantization method: {q}. Must be one of {list(methods)}."]
    deprecated = all(q in r.deprecated for r in records if q in r.methods)
    if deprecated and not _has_option(extra_args, "allow_deprecated_quantization"):
        # config/model.py:1459-1472, its words
        return [
            f"quantization: The quantization method {q} is deprecated and will be removed in "
            "future versions of vLLM. To bypass, set `--allow-deprecated-quantization`."
        ]
    return []


def _records(quantization: Quantization | None) -> list[Quantization]:
    """The release's methods, or (``None``) every supported release's."""
    if quantization is not None:
        return [quantization]
    return [r.quantization for r in RELEASES.values()]


def batch_problems(
    mnbt: int | None, mns: int | None, mml: int | None, chunked: bool | None
) -> list[str]:
    """vLLM's refusals of the batch sizes (``max_num_batched_tokens``, ``max_num_seqs``,
    ``max_model_len``, ``enable_chunked_prefill``)."""
    # config/scheduler.py:314-357. Only checkable here when both values are explicit (vLLM
    # derives an unset one with min()); the device-aware path checks the derived values.
    problems: list[str] = []
    if mnbt is not None and mns is not None and mnbt < mns:
        problems.append(
            f"max_num_batched_tokens ({mnbt}) must be greater than or equal to "
            f"max_num_seqs ({mns})."
        )
    chunked_off = chunked is False
    if chunked_off and mnbt is not None and mml is not None and mml > 0 and mnbt < mml:
        problems.append(chunked_prefill_message(mnbt, mml))
    return problems


def chunked_prefill_message(mnbt: int, mml: int) -> str:
    """vLLM's text when, without chunked prefill, the token budget is below the length."""
    return (
        f"max_num_batched_tokens ({mnbt}) is smaller than max_model_len ({mml}). This "
        "effectively limits the maximum sequence length to max_num_batched_tokens and "
        "makes vLLM reject longer sequences. Please increase max_num_batched_tokens or "
        "decrease max_model_len."
    )


def _has_option(extra: Iterable[str], dest: str) -> bool:
    cli = default_cli()
    for token in extra:
        res = cli.resolve(token)
        if res.status == "known" and res.flag is not None and res.flag.dest == dest:
            return not res.flag.is_negative(res.option)
    return False


def extra_arg_problems(extra: Iterable[str]) -> list[str]:
    """Options that would take the launch out of vtc's hands, named in the extra args."""
    cli = default_cli()
    problems: list[str] = []
    for token in extra:
        res = cli.resolve(token)
        if res.status != "known" or res.flag is None:
            continue
        why = _NOT_IN_EXTRA_ARGS.get(res.flag.dest)
        if why is not None:
            problems.append(f"extra_args: {token.split('=', 1)[0]} in extra args: {why}")
    return problems
