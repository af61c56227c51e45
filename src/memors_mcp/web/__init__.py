"""The web view served at ``/`` by ``memors-mcp serve --http`` (docs/web.md)."""

from .app import build_web_app

__all__ = ["build_web_app"]
