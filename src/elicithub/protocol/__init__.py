"""Wire shapes that both sides of a protocol share (MCP tasks, MRTR rounds): one home, one name each."""
