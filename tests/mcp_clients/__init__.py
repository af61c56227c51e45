"""Independent MCP clients (Node tools from npm) for the MCP server's tests."""
