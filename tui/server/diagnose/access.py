"""The model could not be had: gated, missing, custom code, tokenizer, architecture, disk.

These fail in the API server while it reads the model's config and tokenizer, before any
engine starts. The texts are Hugging Face's (``huggingface_hub`` errors, ``transformers``
``utils/hub.py`` and ``dynamic_module_utils.py``) and vLLM's own wrappers:
``transformers_utils/config.py`` (``Failed to load the model config. If the model is a custom
model ... `--trust-remote-code` ...``; 0.32: ``Invalid repository ID or local directory
specified``), ``tokenizers/hf.py`` (``Failed to load the tokenizer.``, 0.4-0.11 in
``transformers_utils/tokenizer.py``) and ``model_executor/models/registry.py`` (``Model
architectures [...] are not supported for now.``).
"""

from __future__ import annotations

from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import make
from tui.server.diagnose.reading import LogView, contains, group_text, tolerant

_GATED: Final = tolerant(
    r"(?P<text>GatedRepoError|You are trying to access a gated repo|Cannot access gated repo for "
    r"url|Access to model (?P<model>[\w./-]{1,120}?) is restricted|"
    r"403 Client Error: Forbidden for url: https://huggingface\.co|"
    r"401 Client Error: Unauthorized for url: https://huggingface\.co)",
    "GatedRepo",
    "gated repo",
    "is restricted",
    "Client Error",
)
_MISSING: Final = tolerant(
    r"(?P<text>(?P<model>[\w./~-]{1,200}) is not a local folder and is not a valid model "
    r"identifier|"
    r"RepositoryNotFoundError|Repository Not Found for url|Invalid repository ID or local "
    r"directory "
    r"specified: '(?P<model2>[^']{1,200})'|does not appear to have a file named config\.json|"
    r"Can't load the configuration of '(?P<model3>[^']{1,200})'|"
    r"Repo id must be in the (?:form|from) 'repo_name' or 'namespace/repo_name': "
    r"'(?P<model4>[^']{1,200})')",
    "is not a local folder",
    "RepositoryNotFound",
    "Repository Not Found",
    "Invalid repository ID",
    "file named config.json",
    "load the configuration of",
    "Repo id must be",
)
_REMOTE_CODE: Final = tolerant(
    r"(?P<text>requires you to execute the (?:configuration|modeling) file in that repo|"
    r"contains custom code which must be executed|Failed to load the model config\. If the model "
    r"is a custom model|Please pass the argument `trust_remote_code=True`|set the option "
    r"`trust_remote_code=True` to remove this error)",
    "trust_remote_code",
    "custom code which must be executed",
)
_TOKENIZER: Final = tolerant(
    r"(?P<text>Failed to load the tokenizer|Tokenizer class (?P<cls>\w{1,80}) does not exist or "
    r"is not currently imported|Couldn't instantiate the backend tokenizer|requires the "
    r"SentencePiece library but it was not found|data did not match any variant of untagged enum "
    r"(?:ModelWrapper|PyPreTokenizerTypeWrapper|PyNormalizerTypeWrapper|PyDecoderWrapper)|"
    r"requires you to execute the tokenizer file)",
    "tokenizer",
    "Tokenizer",
    "SentencePiece",
    "untagged enum",
)
_ARCH: Final = tolerant(
    r"(?P<text>Model architectures? (?P<arch>\[[^\]]{1,200}\]) (?:are|is) not supported for now|"
    r"has model type `(?P<type>[\w-]{1,60})` but Transformers does not recognize this "
    r"architecture)",
    "are not supported for now",
    "is not supported for now",
    "does not recognize this architecture",
)
_DISK: Final = tolerant(
    r"(?P<text>\[Errno 28\] No space left on device|code: 28, kind: StorageFull|"
    r"No space left on device|Not enough free disk space to download the "
    r"file)(?:.{0,200}?The target location (?P<where>\S{1,200}) only has (?P<free>[\d.]+) MB "
    r"free)?",
    "No space left on device",
    "StorageFull",
    "Not enough free disk space",
)


# A Hub repository named in the error, matched per logical line (a name ends with its line).
_HUB_MODEL: Final = tolerant(
    r"(?:Access to model|Repo model) (?P<a>[\w.-]{1,96}/[\w.-]{1,96}) is|"
    r"(?:have access to it|request access) at https://huggingface\.co/"
    r"(?P<b>[\w-]{1,96}/[\w.-]{1,96})|"
    r"huggingface\.co/(?:api/models/)?(?P<c>[\w-]{1,96}/[\w.-]{1,96}?)/resolve/",
    "huggingface.co",
    "is restricted",
    "is gated",
)


def _model(log: LogView, m: Any, *names: str) -> str | None:
    for name in names:
        value = m.groupdict().get(name)
        if value:
            return str(value)
    for hub, _, _ in log.find_line(_HUB_MODEL):
        return next(v for v in hub.groups() if v).rstrip(".")
    found = log.find(_HUB_MODEL)  # a name wrapped over lines the reader did not rejoin
    if found is not None:
        return next(v for v in found[0].groups() if v).rstrip(".")
    model = log.value("model")
    return str(model) if model else None


_HTTP_AUTH: Final = tolerant(r"(?P<text>(?:401|403) Client Error)", "Client Error")


def model_access(log: LogView) -> Diagnosis | None:
    """The Hub refused the model (gated, no token) or has no such model (name or path)."""
    found = log.find(_GATED)
    if found is None and log.has("huggingface") and not log.has("RepositoryNotFound"):
        found = log.find(_HTTP_AUTH, "Client Error")  # a paste cut after the status line
    if found:
        m, evidence = found
        model = _model(log, m, "model")
        facts: dict[str, Any] = {"error": group_text(m)}
        if model:
            facts["model"] = model
        return make(
            log,
            "model_access_denied",
            f"the Hugging Face Hub refused {model or 'the model'}: it is gated or private; accept "
            "its licence on the Hub and pass a token with access (HF_TOKEN)",
            evidence,
            facts,
        )
    found = log.find(_MISSING)
    if found:
        m, evidence = found
        model = _model(log, m, "model", "model2", "model3", "model4")
        facts = {"error": group_text(m)}
        if model:
            facts["model"] = model
        return make(
            log,
            "model_not_found",
            f"no model {model or ''} on the Hub or on disk: check the name or path (a private "
            "repository also needs a token)".replace("  ", " "),
            evidence,
            facts,
        )
    return None


def _trust_fix(log: LogView) -> list[Fix]:
    extra = tuple(log.flags.extra_args) if log.flags is not None else ()
    if "--trust-remote-code" in extra or log.value("trust_remote_code") is True:
        return []  # already on: never offer what just failed
    return [
        Fix(title="Add --trust-remote-code", set={"extra_args": (*extra, "--trust-remote-code")})
    ]


def remote_code(log: LogView) -> Diagnosis | None:
    """The model ships its own code, which runs only with --trust-remote-code."""
    found = log.find(_REMOTE_CODE)
    if not found:
        return None
    m, evidence = found
    return make(
        log,
        "trust_remote_code_required",
        "the model's config or code is custom (not in transformers): it loads only with "
        "--trust-remote-code (read the repository's code first)",
        evidence,
        {"error": group_text(m)},
        _trust_fix(log),
    )


def tokenizer_error(log: LogView) -> Diagnosis | None:
    """The tokenizer would not load."""
    found = log.find(_TOKENIZER)
    if not found:
        return None
    m, evidence = found
    text = group_text(m)
    facts: dict[str, Any] = {"error": text}
    fixes: list[Fix] = []
    if contains(text, "untagged enum"):
        advice = "the tokenizer was saved by a newer `tokenizers`: upgrade transformers/tokenizers"
    elif contains(text, "SentencePiece") or contains(text, "backend tokenizer"):
        advice = (
            "no tokenizer.json to read and no way to convert the slow one: install sentencepiece "
            "(or tiktoken) in vLLM's environment, or restore the model's tokenizer.json"
        )
    else:
        advice = "a custom tokenizer needs --trust-remote-code, or a newer transformers"
        fixes = _trust_fix(log)
    if m.group("cls"):
        facts["tokenizer_class"] = m.group("cls")
    return make(
        log,
        "tokenizer_error",
        f"the tokenizer failed to load ({text}): {advice}",
        evidence,
        facts,
        fixes,
    )


def unsupported_model(log: LogView) -> Diagnosis | None:
    """The model's architecture is not in this vLLM (or this transformers)."""
    found = log.find(_ARCH)
    if not found:
        return None
    m, evidence = found
    what = m.group("arch") or m.group("type") or "?"
    return make(
        log,
        "unsupported_model",
        f"this vLLM/transformers does not support the model's architecture {what}: upgrade vLLM "
        "(and transformers), or serve a supported model",
        evidence,
        {"architecture": what},
    )


def disk_full(log: LogView) -> Diagnosis | None:
    """The disk filled up (usually while downloading the weights)."""
    found = log.find(_DISK)
    if not found:
        return None
    m, evidence = found
    facts: dict[str, Any] = {"error": group_text(m)}
    where = ""
    if m.group("where"):
        facts["location"] = m.group("where")
        facts["free_mb"] = float(m.group("free"))
        where = f" ({m.group('where')} has {m.group('free')} MB free)"
    return make(
        log,
        "disk_full",
        f"the disk is full{where}: free space or point HF_HOME/--download-dir at a larger disk",
        evidence,
        facts,
    )
