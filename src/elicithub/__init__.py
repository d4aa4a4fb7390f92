"""elicithub: pause an agent mid tool call, ask a person, resume where it stopped."""

from importlib.metadata import version

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer, Elicitation, Outcome, State

__version__ = version("elicithub")
"""The installed package's version, as the hub reports it (/openapi.json, the MCP server's serverInfo)."""

__all__ = ["Answer", "Broker", "Elicitation", "Outcome", "State", "__version__"]
