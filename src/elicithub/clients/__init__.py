"""Clients of the hub: the Python client (`HubClient`, in hub.py), the terminal prompt and chat (the web widget's
static files live in web/)."""

from elicithub.clients.hub import *  # noqa: F403  (the Python client's public names, as hub.py lists them)
from elicithub.clients.hub import __all__ as __all__
