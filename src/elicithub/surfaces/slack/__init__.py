"""The Slack surface: people answer the agent's questions in the Slack thread where they talk to it."""

from elicithub.surfaces.slack.app import SlackSurface

__all__ = ["SlackSurface"]
