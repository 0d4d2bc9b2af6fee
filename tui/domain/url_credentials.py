"""Credentials in a URL the operator gives, taken out before the URL goes anywhere.

``vtc top http://user:pass@host:8000`` used to print the password in its down message, and
``vtc --attach`` with such a URL showed it on screen and stored it in the history. Every URL
the operator gives (``--attach``, ``vtc top``, ``vtc bench --base-url``,
``--gpu-metrics-url``) goes through :func:`split_url` first: the clean URL (no user, no
password) is what is shown, logged, stored and requested; the user and password become an
``Authorization: Basic`` header (RFC 7617) sent with the requests to that URL. Where an API
key is also set, the URL's credentials win for that URL: one ``Authorization`` header can
carry one of them, and a URL with a password names a proxy that wants it.
:func:`redact_urls` hides any ``user:password@`` left in free text (an error body, an
exception's message). Pure: no I/O.
"""

from __future__ import annotations

import base64
import re
import urllib.parse
from dataclasses import dataclass, field
from typing import Final

_USERINFO: Final = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*@")


@dataclass(frozen=True)
class UrlCredential:
    """The user and password a URL carried (never in ``repr``)."""

    user: str = field(repr=False)
    password: str = field(default="", repr=False)

    def authorization(self) -> str:
        """The ``Authorization`` header's value: ``Basic base64(user:password)``."""
        token = base64.b64encode(f"{self.user}:{self.password}".encode()).decode("ascii")
        return f"Basic {token}"

    def secret_values(self) -> list[str]:
        """The values to redact wherever text is written (the password, its encodings)."""
        values = [self.password, urllib.parse.quote(self.password, safe="")]
        return [v for v in dict.fromkeys(values) if len(v) >= 3]


def split_url(url: str) -> tuple[str, UrlCredential | None]:
    """``(url without user/password, the credential or None)``; other URLs pass unchanged.

    The user and password are percent-decoded (``p%40ss`` is ``p@ss``), as a browser or curl
    sends them.
    """
    text = url.strip()
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:
        return _USERINFO.sub(r"\1", text), None
    if "@" not in parts.netloc:
        return text, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    clean = urllib.parse.urlunsplit(parts._replace(netloc=hostport))
    credential = UrlCredential(urllib.parse.unquote(user), urllib.parse.unquote(password))
    return clean, credential if (credential.user or credential.password) else None


def redact_urls(text: str) -> str:
    """``text`` with every ``scheme://user:password@`` reduced to ``scheme://``."""
    return _USERINFO.sub(r"\1", text) if "@" in text else text


def authorization_header(
    credential: UrlCredential | None, api_key: str | None = None
) -> dict[str, str]:
    """The one ``Authorization`` header for a request: the URL's credential, else the key."""
    if credential is not None:
        return {"Authorization": credential.authorization()}
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}
