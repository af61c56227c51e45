"""What a raw JSON-RPC client sends first, for the tests that talk to the stdio server by hand."""

from __future__ import annotations

from typing import Any

PROTOCOL_VERSION = "2025-11-25"


def initialize(client: str = "test", ident: int = 0) -> dict[str, Any]:
    """The ``initialize`` request of a client named ``client``."""
    return {
        "jsonrpc": "2.0",
        "id": ident,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": client, "version": "0"},
        },
    }
