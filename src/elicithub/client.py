"""The Python client's first import path, kept so that code written against it runs on: it is `elicithub.clients`."""

from elicithub.clients import *  # noqa: F403
from elicithub.clients import __all__ as __all__
