"""The executor's endpoint (``MEMORS_OLLAMA_URL``, ``MEMORS_EXECUTOR_URL``),
checked before any connection: it must resolve to loopback addresses only, unless
``--allow-remote``."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from .errors import usage_error

DEFAULT_URL = "http://127.0.0.1:11434"
OLLAMA_PORT = 11434


@dataclass(frozen=True)
class Endpoint:
    url: str  # as shown in messages: scheme://host:port/base
    scheme: str
    host: str
    port: int
    base_path: str
    host_header: str
    #: The loopback addresses the host was checked to resolve to; the
    #: connection goes to exactly these (no second lookup). Empty with
    #: --allow-remote or https: connect by name.
    addresses: tuple[str, ...] = ()


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def resolve_endpoint(
    url: str,
    allow_remote: bool,
    var: str = "MEMORS_OLLAMA_URL",
    default_port: int | None = OLLAMA_PORT,
) -> Endpoint:
    """Parse the URL set in ``var`` and apply the loopback rule — before any
    connection: the host must resolve, and only to loopback addresses,
    unless ``allow_remote``. A name that does not resolve is not known to be
    loopback, so it is refused too."""
    raw = url.strip()
    if "://" not in raw:
        raw = "http://" + raw  # OLLAMA_HOST style: host[:port]
        scheme_given = False
    else:
        scheme_given = True
    parts = urlsplit(raw)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        usage_error(f"{var} must be an http:// or https:// URL, got {url!r}")
    try:
        port = parts.port
    except ValueError:
        usage_error(f"{var} has a bad port: {url!r}")
    host = parts.hostname
    if not host:
        usage_error(f"{var} has no host: {url!r}")
    if port is None and not scheme_given and default_port:
        port = default_port
    elif port is None:
        port = 443 if scheme == "https" else 80
    shown_host = f"[{host}]" if ":" in host else host
    base_path = parts.path.rstrip("/")
    shown = f"{scheme}://{shown_host}:{port}{base_path}"
    endpoint = Endpoint(
        url=shown,
        scheme=scheme,
        host=host,
        port=port,
        base_path=base_path,
        host_header=f"{shown_host}:{port}",
    )
    if allow_remote:
        return endpoint
    hint = (
        "the executor sends your passages and facts to this endpoint; "
        "pass --allow-remote to use a remote one"
    )
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        usage_error(
            f"{var} {shown}: host {host} does not resolve, so it is not known "
            f"to be loopback; {hint}",
            code="remote-endpoint",
        )
    addresses = tuple(dict.fromkeys(str(info[4][0]) for info in infos))
    remote = [a for a in addresses if not _is_loopback(a)]
    if not addresses or remote:
        usage_error(
            f"{var} {shown}: host {host} resolves to "
            f"{', '.join(remote or addresses) or 'nothing'}, not only to loopback "
            f"addresses; {hint}",
            code="remote-endpoint",
        )
    if scheme == "https":
        return endpoint  # the certificate names the host, not the address
    return Endpoint(**{**endpoint.__dict__, "addresses": addresses})
