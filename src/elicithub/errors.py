"""One error tree for the whole package: what went wrong, in words a caller can act on (no HTTP in here).

Every error elicithub raises is a `HubError`; where a class is defined beside the one piece of code that raises
it, its module is named. Two are also `ValueError`s, as their docstrings say why. The test runner's errors have a
root of their own, `elicithub.testing.errors.TestRunnerError`.

* HubError
  + BadRequest
    - PayloadTooLarge
    - BadLink (auth.links)
    - StateRefused (surfaces.mcp.state)
    - BadCursor (runtime.audit)
  + NotFound
    - ElicitationNotFound
    - ConversationNotFound
    - ToolCallNotFound
  + AlreadyResolved
  + SelfApprovalRefused
  + Expired
  + InvalidContent
  + QuestionRefused
  + Limited
    - RateLimited
    - Overloaded
  + CredentialRefused (triggers.credentials)
  + OAuthProblem (auth.oauth)
  + SchemaError (core.schema)
  + BadNumber (core.jsoncodec)
  + RunTransitionError (core.runs)
  + RoundsExceeded (protocol.mcp_rounds)
  + EmptyRound (protocol.mcp_rounds)
  + BadPayload (surfaces.chat.agui_interrupts)
  + Unreadable (runtime.models.seam)
  + ModelFailed (runtime.models.streamed)
  + MissingKey (runtime.models.providers)
  + ConfigError (config)
  + KeyUnusable
  + SlackUnusable
  + TeamsUnusable
  + EmailUnusable
  + Undeliverable (surfaces.outbox)
  + StoreUnsupported
  + StoreUnusable
  + Unauthorized
  + IdentityUnavailable
  + HubUnreachable
  + LoginFailed (clients.login)

A module's private signals (`_Invalid`, `_Failed`, ...) are `HubError`s too and never leave their module.
"""

from __future__ import annotations

from typing import Any


class HubError(Exception):
    """Anything elicithub refuses or cannot do; `code` is a stable machine-readable name."""

    code = "error"


class BadRequest(HubError):
    """The input cannot be used as given (a malformed id, a non-finite number, a body that is not JSON)."""

    code = "bad_request"


class PayloadTooLarge(BadRequest):
    code = "payload_too_large"


class NotFound(HubError):
    code = "not_found"


class ElicitationNotFound(NotFound):
    def __init__(self, elicitation_id: str) -> None:
        super().__init__(f"No elicitation {elicitation_id!r} for this user.")


class ConversationNotFound(NotFound):
    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"No conversation {conversation_id!r} for this user.")


class ToolCallNotFound(NotFound):
    """A result for a call that does not wait for one in the conversation (its client makes only the calls a run
    handed over to it, each once)."""

    def __init__(self, call_id: str) -> None:
        super().__init__(f"No call {call_id!r} waits for its result in this conversation.")


class AlreadyResolved(HubError):
    code = "already_resolved"

    def __init__(self, elicitation_id: str, outcome: str, *, differently: bool = True) -> None:
        """`differently`: the refused request was an answer other than the one that ended it."""
        how = " with a different answer" if differently else ""
        super().__init__(f"Elicitation {elicitation_id!r} was already {outcome}{how}.")


class SelfApprovalRefused(HubError):
    """The requester of a tool call is one of its approvers, and its policy does not let them approve their own call."""

    code = "self_approval"

    def __init__(self, elicitation_id: str) -> None:
        super().__init__(
            f"Elicitation {elicitation_id!r} asks approval of your own call; another approver must answer it."
        )


class Expired(HubError):
    code = "expired"

    def __init__(self, elicitation_id: str) -> None:
        super().__init__(f"Elicitation {elicitation_id!r} has expired; the tool call was not completed.")
        self.elicitation_id = elicitation_id


class InvalidContent(HubError):
    """An answer's content does not fit the question's schema; the question stays open."""

    code = "invalid_content"

    def __init__(self, elicitation_id: str, errors: list[Any]) -> None:
        super().__init__(f"The content does not match the requested schema of {elicitation_id!r}.")
        self.errors = errors


class QuestionRefused(HubError):
    """A question the hub will not ask (the message is the tool error the model sees), or a person's press or
    submit in Slack that changes nothing (the message tells them why)."""

    code = "question_refused"


class Limited(HubError):
    """The hub starts no new run for this caller now (answers to open questions always go through); try again after
    `retry_after_s` seconds."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(f"{message} Try again in {retry_after_s} s.")
        self.retry_after_s = retry_after_s


class RateLimited(Limited):
    """The caller is over one of its own limits (`limits.per_user`); `limit` names which."""

    code = "rate_limited"

    def __init__(self, limit: str, message: str, retry_after_s: int) -> None:
        super().__init__(message, retry_after_s)
        self.limit = limit


class Overloaded(Limited):
    """The hub holds as many runs as it may (`limits.max_active_runs`): another hub, or this one a moment later, takes
    the request."""

    code = "overloaded"


class KeyUnusable(HubError):
    """The configured master key cannot be used."""

    code = "key_unusable"


class SlackUnusable(HubError):
    """The Slack surface cannot start: a secret its config names is not in the environment."""

    code = "slack_unusable"


class TeamsUnusable(HubError):
    """The Microsoft Teams surface cannot start: a secret its config names is not in the environment."""

    code = "teams_unusable"


class EmailUnusable(HubError):
    """Mail cannot be sent: a variable its config names is not in the environment, or its CA file cannot be read."""

    code = "email_unusable"


class StoreUnsupported(HubError):
    """A store URL names no backend this hub has."""

    code = "store_unsupported"


class StoreUnusable(HubError):
    """The store is there but this hub must not use it (a newer schema, a Redis that may evict keys)."""

    code = "store_unusable"


class Unauthorized(HubError):
    """The hub does not know the bearer token (what a client of the hub sees; the hub itself answers 401)."""

    code = "unauthorized"


class IdentityUnavailable(HubError):
    """The identity provider's discovery document or keys cannot be fetched, so a JWT cannot be checked yet."""

    code = "identity_unavailable"


class HubUnreachable(HubError):
    """A client could not reach the hub, or the hub's answer could not be read."""

    code = "hub_unreachable"
