"""A compiler missing when a kernel is built on first use (JIT): nvcc, a C compiler, headers.

vLLM's pip wheels carry compiled kernels, but some paths compile on the machine the first time
they run: FlashInfer's sampler and attention kernels (``flashinfer/jit``: ``nvcc`` from
``CUDA_HOME``, default ``/usr/local/cuda``), Triton's launcher stub (``triton/runtime/build.py``:
a C compiler and ``Python.h``) and torch.compile's Inductor (a C++ compiler). Their wordings:

- FlashInfer 0.4+: ``RuntimeError: Could not find nvcc and default cuda_home='/usr/local/cuda'
  doesn't exist`` (vLLM 0.11, flashinfer issue 1919 ``Worker failed with error 'Could not find
  nvcc'``); before it the shell's ``/bin/sh: 1: /usr/local/cuda/bin/nvcc: not found`` (vLLM
  nightly with flashinfer 0.2.9rc2, vLLM issue 21960) or ``FileNotFoundError: [Errno 2] No such
  file or directory: 'nvcc'`` (vLLM 0.11.0rc2 with flashinfer 0.3.0, flashinfer issue 1781);
- torch's ``CUDA_HOME environment variable is not set`` (``torch/utils/cpp_extension.py``);
- Triton: ``RuntimeError: Failed to find C compiler. Please specify via CC environment
  variable.`` (vLLM 0.3 issue 2997, 0.8 issue 15329), ``Python.h: No such file or directory``;
- Inductor: ``InvalidCxxCompiler: No working C++ compiler found``.

What helps depends on who compiled: the FlashInfer sampler is optional
(``VLLM_USE_FLASHINFER_SAMPLER=0``, ``envs.py`` 0.6.4+), FlashInfer attention can give way to
FlashAttention (``VLLM_ATTENTION_BACKEND=FLASH_ATTN``), torch.compile is skipped in eager mode
(``--enforce-eager``); Triton's own stub and FlashInfer elsewhere need the toolchain itself
(no flag helps: install the CUDA toolkit / ``build-essential``, or point ``CUDA_HOME``/``CC``
at them), and the diagnosis says so.
"""

from __future__ import annotations

from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import make
from tui.server.diagnose.reading import LogView, group_text, loose, tolerant

_MISSING: Final = tolerant(
    loose(
        r"(?P<nvcc>Could not find nvcc|nvcc: not found|"
        r"No such file or directory: \W{0,2}[\w/.-]{0,80}nvcc\b|"
        r"CUDA_HOME environment variable is not set|nvcc not found)|"
        r"(?P<cc>Failed to find C compiler|No working C\+?\+? compiler found|InvalidCxxCompiler|"
        r"Python\.h: No such file or directory|(?:gcc|cc|g\+\+): not found)"
    ),
    "nvcc",
    "CUDA_HOME environment variable is not set",
    "Failed to find C compiler",
    "compiler found",
    "InvalidCxxCompiler",
    "Python.h",
    "cc: not found",
    "g++: not found",
)
_SAMPLER: Final = tolerant(
    r"topk_topp_sampler|flashinfer[/\\.]sampling|flashinfer_sample|top_k_top_p_sampling|"
    r"get_sampling_module|FlashInfer (?:top-p & top-k )?sampl",
    "topk_topp_sampler",
    "sampling",
    "flashinfer_sample",
    "top_k_top_p",
    "get_sampling_module",
    "FlashInfer",
)
_FI_ATTENTION: Final = tolerant(
    r"flashinfer[/\\.](?:prefill|decode|attention)|backends[/\\.]flashinfer|FlashInferImpl|"
    r"FlashInferMetadataBuilder|Using FlashInfer backend|FLASHINFER",
    "flashinfer",
    "FlashInferImpl",
    "FlashInferMetadataBuilder",
)
_INDUCTOR: Final = tolerant(
    r"torch[/\\.]_inductor|InvalidCxxCompiler|torch\._dynamo",
    "_inductor",
    "InvalidCxxCompiler",
    "_dynamo",
)
SAMPLER_ENV: Final = "VLLM_USE_FLASHINFER_SAMPLER"
BACKEND_ENV: Final = "VLLM_ATTENTION_BACKEND"


def _fixes(log: LogView, nvcc: bool) -> tuple[list[Fix], str]:
    """The flags that avoid the compile, and who compiled (for the summary)."""
    if nvcc and log.find(_SAMPLER) is not None:
        return [
            Fix(
                title=f"Use vLLM's own sampler, not FlashInfer's JIT one: set {SAMPLER_ENV}=0",
                env={SAMPLER_ENV: "0"},
            )
        ], "FlashInfer's sampler"
    if nvcc and log.find(_FI_ATTENTION) is not None:
        return [
            Fix(
                title=f"Use FlashAttention, not FlashInfer: set {BACKEND_ENV}=FLASH_ATTN",
                env={BACKEND_ENV: "FLASH_ATTN"},
            )
        ], "FlashInfer's attention kernels"
    if log.find(_INDUCTOR) is not None and log.value("enforce_eager") is not True:
        return [
            Fix(
                title="Run eagerly (--enforce-eager): torch.compile needs no compiler then",
                set={"enforce_eager": True},
            )
        ], "torch.compile (Inductor)"
    return [], ("a JIT kernel build" if nvcc else "Triton's launcher stub")


def toolchain_missing(log: LogView) -> Diagnosis | None:
    """nvcc / a C compiler / Python headers missing when a kernel is compiled on first use."""
    found = log.find(_MISSING)
    if found is None:
        return None
    m, evidence = found
    nvcc = m.group("nvcc") is not None
    text = group_text(m, "nvcc" if nvcc else "cc")
    fixes, who = _fixes(log, nvcc)
    tool = "the CUDA compiler nvcc (CUDA toolkit)" if nvcc else "a C compiler or Python's headers"
    install = (
        "install the CUDA toolkit (or set CUDA_HOME to it), or FlashInfer's prebuilt "
        "flashinfer-cubin/flashinfer-jit-cache"
        if nvcc
        else "install build-essential and python3-dev (or set CC to a compiler)"
    )
    remedy = (
        f"the fix avoids the compile; else {install}"
        if fixes
        else f"no flag avoids this compile: {install}"
    )
    facts: dict[str, Any] = {"missing": "nvcc" if nvcc else "c_compiler", "compiled_by": who}
    return make(
        log,
        "toolchain_missing",
        f"{who} compiles on first use and {tool} is missing ({text}); {remedy}",
        evidence,
        facts,
        fixes,
    )
