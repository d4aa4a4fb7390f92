"""The MCP surface: the hub serving its agents to MCP clients at /mcp, asking them with elicitation, as tasks."""

PATH = "/mcp"
