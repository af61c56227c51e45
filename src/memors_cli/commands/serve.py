"""``serve``: the MCP server over stdio or HTTP (the SDK is imported only here,
when it runs)."""

from __future__ import annotations

import argparse


def cmd_serve(args: argparse.Namespace) -> int:
    from memors_mcp.serve import ServeSettings, serve

    return serve(
        ServeSettings(
            db=args.db,
            namespace=args.ns,
            log_level=getattr(args, "log_level", "warning"),
            http=args.http,
            host=args.host,
            port=args.port,
            allow_remote=args.allow_remote,
            behind_tls_proxy=args.behind_tls_proxy,
        )
    )
