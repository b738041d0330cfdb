"""MCP (Model Context Protocol) on both sides: ``botpsy mcp`` serves the device world's tools
(``server``), and ``botpsy chat`` / ``botpsy serve`` take tools from any MCP server with
``--mcp CMD`` (``client``), under the world's validation and confirmation rules (``host``)."""
