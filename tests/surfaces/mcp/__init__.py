"""Tests of the mcp surface."""
