"""Whether a server's URL is on this machine (so this machine's GPU is the server's to read).

Used by attach mode and ``vtc top`` alike: a server on this machine may be read through
local NVML; one elsewhere only through its own page's gauges or a DCGM exporter's URL.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse


def _own_addresses() -> set[str]:
    try:
        return {str(info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return set()


def is_local_url(url: str) -> bool:
    """Whether ``url``'s host is this machine: a loopback address or name (``localhost``,
    ``*.localhost``), this host's own name, or a name or address of one of its interfaces.

    A name is resolved (one lookup); a name that does not resolve is not local.
    """
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    if host in (socket.gethostname().lower(), socket.getfqdn().lower()):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        try:  # a name: local when it resolves to an address of this machine
            address = ipaddress.ip_address(socket.gethostbyname(host))
        except (OSError, ValueError):
            return False
    return address.is_loopback or str(address) in _own_addresses()
