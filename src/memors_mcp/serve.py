"""Running the server: which transport, on which store, until when.

A frontend builds :class:`ServeSettings` from its own options (the CLI from
``memors-mcp serve``'s flags) and calls :func:`serve`; the server and its
transports know nothing of how those were spelled.
"""

from __future__ import annotations

import os

import attrs

from memors_core import BadInput, Memory
from memors_core.domain.inputs import check_namespace
from memors_core.log import get_logger

from .server import build_server, stdout_to_stderr

log = get_logger("memors.mcp")


@attrs.frozen(kw_only=True)
class ServeSettings:
    """How ``serve`` runs: the store, the namespace, the transport.

    A frontend builds one from its own options (the CLI from ``memors-mcp
    serve``'s flags); the server knows nothing of how they were spelled.
    """

    #: The store's file (None: ``$MEMORS_DB`` or the data dir, SPEC §3).
    db: str | os.PathLike[str] | None = None
    namespace: str = "default"
    log_level: str = "warning"
    #: Streamable HTTP at ``/mcp`` instead of stdio.
    http: bool = False
    host: str = "127.0.0.1"
    port: int = 8765
    #: Serve HTTP on a non-loopback host (then a bearer token is required).
    allow_remote: bool = False
    #: Browsers reach the server over TLS, through a proxy in front: cookies are Secure.
    behind_tls_proxy: bool = False


def serve(settings: ServeSettings) -> int:
    """Run the server until the client hangs up (stdio) or a signal (HTTP)."""
    check_namespace(settings.namespace)
    level = settings.log_level or "warning"
    if settings.http:
        from .http import serve_http  # (its web stack only when asked for)

        return serve_http(
            db=settings.db,
            namespace=settings.namespace,
            host=settings.host,
            port=settings.port,
            allow_remote=settings.allow_remote,
            level=level,
            behind_tls_proxy=settings.behind_tls_proxy,
        )
    if settings.allow_remote:
        raise BadInput("--allow-remote goes with --http")
    if settings.behind_tls_proxy:
        raise BadInput("--behind-tls-proxy goes with --http")
    with stdout_to_stderr():
        memory = Memory.open(settings.db)
        server = build_server(memory, settings.namespace, log_level=level)
        memory.resume_vectors()  # what an earlier run left without vectors, in the background
    log.info("serving_stdio", namespace=settings.namespace, db=str(memory.path))
    try:
        server.run()  # the SDK diverts fd 1 to stderr itself while it serves
    except KeyboardInterrupt:
        pass
    finally:
        memory.close()
    return 0
