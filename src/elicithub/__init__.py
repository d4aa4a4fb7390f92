"""elicithub: pause an agent mid tool call, ask a person, resume where it stopped."""

from elicithub.core.broker import Broker
from elicithub.core.elicitation import Answer, Elicitation, Outcome, State

__all__ = ["Answer", "Broker", "Elicitation", "Outcome", "State"]
