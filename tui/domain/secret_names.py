"""Which environment variables hold secrets: the one rule, with no imports.

Kept apart from :mod:`tui.domain.flags.secrets` (which needs the run record) because the server's
log relay must start in milliseconds and imports only the standard library and this.
"""

from __future__ import annotations

import re

#: An environment variable whose name matches holds a secret (``VLLM_API_KEY``,
#: ``HF_TOKEN``, ``AWS_SECRET_ACCESS_KEY``...). Deliberately broad: treating a harmless
#: variable as a secret costs a reference in an export; the reverse leaks a key.
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.I)
#: Shorter values ("1", "true") would redact ordinary text from logs.
MIN_SECRET_LEN = 6

#: A value that carries a secret by its shape, whatever its variable is called: a URL with
#: a password in its user information (``https://u:p@host``, a DSN ``postgresql://u:p@db/x``)
#: or a token as its user (``https://ghp_...@host``), or a ``password=...`` / ``token: ...``
#: pair (a libpq connection string, a query string).
#: A credential by its own well-known shape (the issuers document these prefixes so that
#: scanners can find them): an ``Authorization`` scheme's token, a Hugging Face token, an
#: OpenAI/Anthropic-style ``sk-`` key, an AWS access key id, GitHub, GitLab, Slack and
#: Google API tokens, a JWT, a PEM private key. Anchored on a non-word character so an
#: ordinary word holding the prefix ("task-list", "ask-...") is not one.
_TOKENS = (
    r"bearer\s+[A-Za-z0-9._~+/=-]{8,}",
    r"basic\s+[A-Za-z0-9+/=]{12,}",
    r"hf_[A-Za-z0-9]{20,}",
    r"sk-[A-Za-z0-9_-]{16,}",
    r"(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}",
    r"(?:AKIA|ASIA)[A-Z0-9]{16}",
    r"gh[pousr]_[A-Za-z0-9]{30,}",
    r"github_pat_[A-Za-z0-9_]{30,}",
    r"glpat-[A-Za-z0-9_-]{20,}",
    r"xox[abprs]-[A-Za-z0-9-]{10,}",
    r"AIza[A-Za-z0-9_-]{35}",
    r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
)
#: The start of a token issued with a known prefix (the shapes above, any length): a URL's
#: user alone is a secret only when it looks like a token (``https://ghp_x@host``), by such
#: a prefix or by length (20+ characters mixing letters and digits).
_TOKEN_PREFIX = (
    r"(?:hf_|sk-|(?:sk|rk|pk)_|gh[pousr]_|github_pat_|glpat-|xox[abprs]-|AKIA|ASIA|AIza|eyJ)"
)
_USER = r"[^/?#@\s:]"
#: A URL's user information that carries a secret: a password (``user:pass``, ``:token``), or
#: a user that is a token. A user alone (``postgresql://app@db/x``, ``ssh://git@host``) is
#: an account name, not a secret (issue 39: such a preset was skipped as holding a password).
_USERINFO = (
    rf"{_USER}*:[^/?#@\s]+"
    rf"|{_TOKEN_PREFIX}{_USER}*"
    rf"|(?={_USER}*\d)(?={_USER}*[A-Za-z]){_USER}{{20,}}"
)
SECRET_VALUE = re.compile(
    rf"[a-z][a-z0-9+.-]*://(?P<userinfo>{_USERINFO})@"
    r"|(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|auth)\s*[=:]\s*(?P<pair>[^\s&;,]+)"
    rf"|(?<![A-Za-z0-9_-])(?P<token>{'|'.join(_TOKENS)})",
    re.I,
)


def holds_secret(name: str, value: str) -> bool:
    """Whether the variable ``name=value`` holds a secret, by its name or its value's shape."""
    return bool(SECRET_NAME.search(name) or SECRET_VALUE.search(value))


def secret_parts(value: str) -> list[str]:
    """The secret pieces of ``value`` (a URL's password or user info, a pair's value), for
    redaction from text where the whole value may not appear (a log line)."""
    parts: list[str] = []
    for match in SECRET_VALUE.finditer(value):
        userinfo, pair, token = match.group("userinfo"), match.group("pair"), match.group("token")
        if userinfo:
            user, _, password = userinfo.partition(":")
            parts += [p for p in (password or user, userinfo) if p]
        elif pair:
            parts.append(pair)
        elif token:
            parts.append(token.split()[-1])  # "Bearer abc...": the token, not the scheme
    return [p for p in dict.fromkeys(parts) if len(p) >= 3]
