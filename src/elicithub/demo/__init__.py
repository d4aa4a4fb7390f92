"""Built-in demo MCP servers and the development OAuth provider that `elicithub serve` starts with no config.

Start them with `elicithub.demo.launcher.start_demo`; the package itself imports nothing, so
`python -m elicithub.demo.tracker` runs without loading the other servers.
"""
