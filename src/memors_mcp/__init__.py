"""memors' MCP server (official ``mcp`` SDK): ``memors-mcp serve``.

:func:`memors_mcp.server.build_server` builds the server over a
:class:`memors_core.Memory` (thirteen tools, a resource template per address
type, the compaction prompt); :func:`memors_mcp.serve.serve` runs it over
stdio or streamable HTTP (:mod:`memors_mcp.http`) as a
:class:`memors_mcp.serve.ServeSettings` says. Nothing here imports the CLI
or the executor.
"""
