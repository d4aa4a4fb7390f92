"""The hub's HTTP server: the composition root (`Hub`, one builder per area), the ASGI app, its routes, identity,
probes, metrics and logs.

"Server" names two things in this package tree and no more: this HTTP server, and an MCP server, the protocol's own
word for the side that has tools (a downstream one is a trigger, `triggers/mcp/server.py`; the hub as one is a
surface, `surfaces/mcp/server.py`). A2A's word is "agent" on both sides (`triggers/a2a/agent.py`,
`surfaces/a2a/agent.py`)."""
