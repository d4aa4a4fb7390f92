"""The A2A surface: the hub serving its agents to A2A clients, with their agent cards and tasks."""

PATH = "/a2a"
CARD_PATH = "/.well-known/agent-card.json"
"""Where the agent card is: the SDK's `AGENT_CARD_WELL_KNOWN_PATH` (its module imports protobuf, which a hub's start
does without)."""
