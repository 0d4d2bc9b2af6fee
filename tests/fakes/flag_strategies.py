"""Hypothesis strategies for valid ``ServeFlags``: every declared flag, hostile model names."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from pydantic import ValidationError

from tui.domain.flags.serve import QUANTIZATION_METHODS, FlagKind, FlagSpec, ServeFlags, flag_specs

#: Text that quoting must survive in every export: spaces, quotes, $, %, backslashes, ;.
AWKWARD = "abcXYZ019 ._/-'\"$%\\;:{}=,"
model_names = (
    st.text(alphabet=AWKWARD, min_size=1, max_size=24)
    .map(str.strip)
    .filter(lambda m: bool(m) and not m.startswith("-") and m not in ("vllm", "serve"))
)
EXTRA_ARGS = [
    (),
    ("--compilation-config", '{"mode": 0}'),
    ("--enable-log-requests",),
    ("--max-loras", "4", "--lora-modules", "a=/x/a b=/x/b"),
]


def _value(spec: FlagSpec) -> st.SearchStrategy[Any]:
    if spec.kind is FlagKind.CHOICE:
        assert spec.choices is not None
        return st.sampled_from(spec.choices)
    if spec.kind is FlagKind.BOOL:
        return st.booleans()
    if spec.kind is FlagKind.INT:
        low = int(spec.ge) if spec.ge is not None else int(spec.gt or 0) + 1
        return st.integers(min_value=low, max_value=int(spec.le or 1 << 20))
    if spec.kind is FlagKind.FLOAT:
        low = spec.ge if spec.ge is not None else spec.gt or 0.0
        return st.floats(min_value=low, max_value=spec.le or 1e3, exclude_min=spec.gt is not None)
    if spec.name == "quantization":
        return st.sampled_from(QUANTIZATION_METHODS)
    if spec.name == "host":
        return st.sampled_from(["0.0.0.0", "127.0.0.1", "::"])
    # a value starting with "-" cannot follow its option as a separate argv word (argparse
    # reads it as an option); ServeFlags.to_argv renders "--flag value", so none here
    return st.text(alphabet="abc-_.09", min_size=1, max_size=12).filter(
        lambda v: not v.startswith("-")
    )


@st.composite
def serve_flags(draw: st.DrawFn, *, extra: bool = True) -> ServeFlags:
    """A valid flag set: any subset of the declared flags, set to any allowed value."""
    values: dict[str, Any] = {"model": draw(model_names)}
    for spec in flag_specs():
        if draw(st.booleans()):
            values[spec.name] = draw(_value(spec))
    if extra:
        values["extra_args"] = draw(st.sampled_from(EXTRA_ARGS))
    try:
        return ServeFlags.model_validate(values)
    except ValidationError:  # a cross-field rule (e.g. batched tokens < seqs): draw again
        from hypothesis import reject

        reject()
