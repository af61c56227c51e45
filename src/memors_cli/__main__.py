"""``python -m memors_cli``: the same as ``memors-mcp``."""

from .main import entrypoint

entrypoint()
