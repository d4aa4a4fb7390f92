"""The Microsoft Teams surface: people talk to the agent, answer its questions and approve its calls in Teams."""

import os
import warnings

_before = set(os.environ)
try:
    with warnings.catch_warnings():
        # Importing the SDK warns of a preview feature of its own (HTML widgets) that the hub does not use.
        warnings.simplefilter("ignore", FutureWarning)
        from elicithub.surfaces.teams.app import TeamsSurface
finally:
    # The SDK loads a `.env` file of the working directory into the environment when first imported: the hub's
    # config alone says where its secrets come from, so whatever that added is taken out again.
    for _added in set(os.environ) - _before:
        del os.environ[_added]

__all__ = ["TeamsSurface"]
