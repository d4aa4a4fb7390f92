"""The credential tests' OAuth server and browser, for agents that want a person's own token."""

from tests.auth.conftest import browser, tracker

__all__ = ["browser", "tracker"]
