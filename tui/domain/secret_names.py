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
#: user information (``https://u:p@host``, a DSN ``postgresql://u:p@db/x``, a token as the
#: user ``https://tok@host``), or a ``password=...`` / ``token: ...`` pair (a libpq
#: connection string, a query string).
SECRET_VALUE = re.compile(
    r"[a-z][a-z0-9+.-]*://(?P<userinfo>[^/?#@\s]+)@"
    r"|(?:pass(?:word|wd)?|pwd|secret|token|api[_-]?key|auth)\s*[=:]\s*(?P<pair>[^\s&;,]+)",
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
        userinfo, pair = match.group("userinfo"), match.group("pair")
        if userinfo:
            user, _, password = userinfo.partition(":")
            parts += [p for p in (password or user, userinfo) if p]
        elif pair:
            parts.append(pair)
    return [p for p in dict.fromkeys(parts) if len(p) >= 3]
