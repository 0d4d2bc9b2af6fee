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
- Inductor: ``InvalidCxxCompiler: No working C++ compiler found``; torch's C++ extension
  builder: ``RuntimeError: Ninja is required to load C++ extensions``, ``error: command 'gcc'
  failed: No such file or directory``, ``FileNotFoundError: ... 'gcc'``;
- the linker under Triton: ``/usr/bin/ld: cannot find -lcuda`` (Triton 2.x before linking:
  ``AssertionError: libcuda.so cannot found!``, vLLM 0.4 issue 3808) (WSL2 keeps the driver's
  ``libcuda.so`` in ``/usr/lib/wsl/lib``; ``TRITON_LIBCUDA_PATH`` points Triton there).

What helps depends on who compiled: the FlashInfer sampler is optional
(``VLLM_USE_FLASHINFER_SAMPLER=0``, ``envs.py`` 0.6.4+), FlashInfer attention can give way to
FlashAttention (``VLLM_ATTENTION_BACKEND=FLASH_ATTN`` to 0.12; later vLLMs deprecate it for
``--attention-backend``, which 0.32's option table has), torch.compile is skipped in eager
mode (``--enforce-eager``); Triton's own stub and FlashInfer elsewhere need the toolchain itself
(no flag helps: install the CUDA toolkit / ``build-essential``, or point ``CUDA_HOME``/``CC``
at them), and the diagnosis says so.
"""

from __future__ import annotations

from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import before, extra_with, make, run_was_eager
from tui.server.diagnose.reading import LogView, group_text, loose, tolerant

_MISSING: Final = tolerant(
    loose(
        r"(?P<nvcc>Could not find nvcc|nvcc:? (?:was |is )?not found|"
        r"No such file or directory: \W{0,2}[\w/.-]{0,80}nvcc\b|"
        r"CUDA_HOME environment variable is not set)|"
        r"(?P<cc>Failed to find C compiler|No working C\+?\+? compiler found|InvalidCxxCompiler|"
        r"Python\.h: No such file or directory|(?:gcc|cc|g\+\+): not found|"
        r"No such file or directory: \W{0,2}[\w/.-]{0,80}?\b(?:gcc|g\+\+|cc|c\+\+|clang)(?![\w+])|"
        r"command \W?[\w/.-]{0,40}?\b(?:gcc|g\+\+|cc)\W? failed: No such file|"
        r"Ninja is required to load C\+\+ extensions)|"
        r"(?P<libcuda>cannot find -lcuda\b|libcuda\.so cannot found)"
    ),
    "nvcc",
    "CUDA_HOME environment variable is not set",
    "Failed to find C compiler",
    "compiler found",
    "InvalidCxxCompiler",
    "Python.h",
    "cc: not found",
    "g++: not found",
    "cannot find -lcuda",
    "libcuda.so cannot found",
    "gcc",
    "Ninja is required",
)
_WSL: Final = tolerant(r"microsoft-standard-WSL|/usr/lib/wsl/|\bWSL2?\b", "WSL", "wsl")
WSL_LIBCUDA: Final = "/usr/lib/wsl/lib"
LIBCUDA_ENV: Final = "TRITON_LIBCUDA_PATH"
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
# Case kept: "flashinfer" alone is also the path of its MoE and all-reduce kernels.
_FI_ATTENTION: Final = tolerant(
    r"flashinfer[/\\.](?:prefill|decode)\b|backends[/\\.]flashinfer\b|FlashInferImpl|"
    r"FlashInferMetadataBuilder|Using FlashInfer (?:attention )?backend|"
    r"ATTENTION_BACKEND=FLASHINFER",
    "flashinfer",
    "FlashInfer",
    "FLASHINFER",
    ignore_case=False,
)
_INDUCTOR: Final = tolerant(
    r"torch[/\\.]_inductor|InvalidCxxCompiler|torch\._dynamo",
    "_inductor",
    "InvalidCxxCompiler",
    "_dynamo",
)
SAMPLER_ENV: Final = "VLLM_USE_FLASHINFER_SAMPLER"
BACKEND_ENV: Final = "VLLM_ATTENTION_BACKEND"


def _attention_fix(log: LogView) -> Fix:
    """FlashAttention instead of FlashInfer: the variable before 0.13, the flag after."""
    title = "Use FlashAttention, not FlashInfer"
    if before(log.version, (0, 13)) or log.version is None:
        return Fix(title=f"{title}: set {BACKEND_ENV}=FLASH_ATTN", env={BACKEND_ENV: "FLASH_ATTN"})
    return Fix(
        title=f"{title} (--attention-backend FLASH_ATTN)",
        set=extra_with(log, {"--attention-backend"}, "--attention-backend", "FLASH_ATTN"),
    )


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
        return [_attention_fix(log)], "FlashInfer's attention kernels"
    if log.find(_INDUCTOR) is not None and not run_was_eager(log):
        return [
            Fix(
                title="Run eagerly (--enforce-eager): torch.compile needs no compiler then",
                set={"enforce_eager": True},
            )
        ], "torch.compile (Inductor)"
    return [], ("a JIT kernel build" if nvcc else "Triton's launcher stub")


def _libcuda(log: LogView, evidence: str) -> Diagnosis:
    """Triton links its stub against libcuda.so and the linker finds none (WSL keeps the
    driver's copy in /usr/lib/wsl/lib, off the linker's path)."""
    wsl = log.find(_WSL) is not None
    fixes = (
        [
            Fix(
                title=f"Point Triton at WSL's driver library: set {LIBCUDA_ENV}={WSL_LIBCUDA}",
                env={LIBCUDA_ENV: WSL_LIBCUDA},
            )
        ]
        if wsl
        else []
    )
    where = (
        "WSL keeps it in /usr/lib/wsl/lib"
        if wsl
        else "no flag helps: install the driver's libcuda.so (or set TRITON_LIBCUDA_PATH to it)"
    )
    return make(
        log,
        "toolchain_missing",
        f"Triton links its launcher stub against libcuda.so on first use and the linker finds "
        f"none (cannot find -lcuda); {where}",
        evidence,
        {"missing": "libcuda", "compiled_by": "Triton's launcher stub"},
        fixes,
    )


def toolchain_missing(log: LogView) -> Diagnosis | None:
    """nvcc / a C compiler / Python headers missing when a kernel is compiled on first use."""
    found = log.find(_MISSING)
    if found is None:
        return None
    m, evidence = found
    if m.group("libcuda"):
        return _libcuda(log, evidence)
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
        f"{who}: built on first use (JIT), and {tool} is missing ({text}); {remedy}",
        evidence,
        facts,
        fixes,
    )
